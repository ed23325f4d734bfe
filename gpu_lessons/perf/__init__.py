"""The performance model: a kernel's GPU time and profile without a GPU.

* :func:`predict_time` -- the time ``run_on_gpu`` would measure, the limiter and the evidence;
* :func:`profile` -- the simulated run laid out as Nsight Compute's report, with ncu's metric
  names;
* :mod:`.calibration` -- the measured constants per GPU; :mod:`.sample` -- the sampled
  simulation of a full-size launch.

See docs/performance_model.md.
"""

from .model import LIMITERS, TimePrediction, predict_time
from .profile import Profile, profile

__all__ = ["LIMITERS", "Profile", "TimePrediction", "predict_time", "profile"]
