"""The performance model: a kernel's GPU time and profile without a GPU.

* :func:`predict_time` -- the time ``run_on_gpu`` would measure, the limiter and the evidence;
* :func:`profile` -- the simulated run laid out as Nsight Compute's report, with ncu's metric
  names;
* ``kernels.beside_simulator`` sets this model's prediction beside the GPU's measurement
  once this package is imported (``import gpu_lessons`` does);
* :mod:`.calibration` -- the measured constants per GPU; :mod:`.sample` -- the sampled
  simulation of a full-size launch.

See docs/performance_model.md.
"""

from ..kernels import gpu as _gpu
from .model import LIMITERS, TimePrediction, predict_time
from .profile import Profile, profile


def _beside(kernel, grid, block, args):
    """``kernels.beside_simulator``'s prediction: the H200's (where the GPU is another, the
    model's figure still says how the H200 would do)."""
    return predict_time(kernel, grid, block, *args)


_gpu.TIME_MODEL = _beside

__all__ = ["LIMITERS", "Profile", "TimePrediction", "predict_time", "profile"]
