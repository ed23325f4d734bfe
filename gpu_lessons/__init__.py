"""gpu-lessons: the models, explorers and checks behind the GPU performance course.

Three layers, each importable on its own:

* models (``hardware``, ``occupancy``, ``memory``, ``cache``, ``roofline``, ``simt``,
  ``latency``, ``mfu``, ``system``, ``allocator``): pure Python/NumPy, no widgets;
* views (``gpu_lessons.views``): ipywidgets + bokeh explorers built on the models;
* course support (``setup``, ``env``, ``checks``, ``grade``, ``measure``).

In a notebook, start with::

    import gpu_lessons
    gpu_lessons.setup()

A notebook that prints a number itself formats it with the package's helpers
(``from gpu_lessons import percent``: ``46.2 %``), so every number in the course reads alike.
"""

__version__ = "0.1.0"

# The course's one number formatter, for notebooks that print a number themselves.
from ._format import bandwidth, binary_bytes, duration, flop_rate, percent, si

__all__ = ["bandwidth", "binary_bytes", "duration", "flop_rate", "percent", "predict_time",
           "profile", "setup", "si"]


def predict_time(kernel, grid, block, *args, gpu="H200", exact=True, **options):
    """The time ``run_on_gpu`` would measure for ``kernel<<<grid, block>>>(*args)`` on
    ``gpu``, without a GPU: :func:`gpu_lessons.perf.predict_time`."""
    from .perf import predict_time as _predict_time

    return _predict_time(kernel, grid, block, *args, gpu=gpu, exact=exact, **options)


def profile(kernel, grid, block, *args, gpu="H200", exact=True, **options):
    """The simulated run as an Nsight Compute report: :func:`gpu_lessons.perf.profile`."""
    from .perf import profile as _profile

    return _profile(kernel, grid, block, *args, gpu=gpu, exact=exact, **options)


def setup(*, report: bool = True):
    """Prepare a notebook: offline bokeh, and (by default) show the environment report."""
    from .notebook import setup as _setup

    return _setup(report=report)
