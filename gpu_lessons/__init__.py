"""gpu-lessons: the models, explorers and checks behind the GPU performance course.

Three layers, each importable on its own:

* models (``hardware``, ``occupancy``, ``memory``, ``cache``, ``roofline``, ``simt``,
  ``latency``, ``mfu``, ``system``, ``allocator``): pure Python/NumPy, no widgets;
* views (``gpu_lessons.views``): ipywidgets + bokeh explorers built on the models;
* course support (``setup``, ``env``, ``checks``, ``grade``, ``measure``).

In a notebook, start with::

    import gpu_lessons
    gpu_lessons.setup()
"""

__version__ = "0.1.0"


def setup(*, report: bool = True):
    """Prepare a notebook: offline bokeh, and (by default) show the environment report."""
    from .notebook import setup as _setup

    return _setup(report=report)
