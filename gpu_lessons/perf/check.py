"""The performance model's line in a puzzle check (``gpu_lessons.puzzles.check``).

Takes the puzzle object itself, so the puzzles package can call it without importing this
package's lesson helpers (which look puzzles up by name).

* :func:`prediction` -- a puzzle kernel's predicted time at the puzzle's GPU size, on the inputs
  ``run_on_gpu`` would use, with no GPU;
* :func:`check_line` -- the learner's kernel predicted on an H200 beside the worked kernel's
  recorded H200 time;
* :func:`recorded` -- the worked kernels' H200 times (``data/perf_calibration.toml``,
  ``[worked_puzzles.H200]``, from ``tests/data/h200_perf_validation.json``).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from .._format import duration
from .model import TimePrediction, predict_time

#: The SM count the puzzles' GPU launches are sized for when no GPU is present (the H200's).
SMS = 132


def prediction(p, kernel, *, gpu: str = "H200", seed: int = 0, **choices) -> TimePrediction:
    """``kernel`` on puzzle ``p`` (a ``Puzzle``) at its ``gpu_size`` and GPU launch."""
    if isinstance(kernel, str):
        from ..puzzles._kernel import kernel_from_source

        kernel = kernel_from_source(kernel)
    size = dict(p.gpu_size)
    args = p.make_inputs(size, seed=seed)
    grid, block = p.launch(**size, **choices)
    if p.gpu_launch is not None:
        grid, block = p.gpu_launch(SMS, **size, **choices)
    return predict_time(kernel, grid, block, *args.values(), gpu=gpu)


@cache
def _worked() -> dict:
    text = resources.files("gpu_lessons").joinpath("data/perf_calibration.toml").read_text(
        "utf-8")
    return tomllib.loads(text).get("worked_puzzles", {})


def recorded(puzzle_id: str, gpu: str = "H200") -> dict | None:
    """The worked kernel's record on ``gpu`` (``measured_us``, ``predicted_us``,
    ``limiter``), or ``None``."""
    return _worked().get(gpu, {}).get(puzzle_id)


def check_line(p, kernel, **choices) -> str | None:
    """``  model, H200 SXM at n = ...: your kernel 81.3 µs, limited by ...; the worked kernel
    measured 83 µs there (model: 81.3 µs)`` -- or ``None`` if the model cannot follow this
    kernel."""
    try:
        pred = prediction(p, kernel, **choices)
    except Exception:  # a check never fails because the model could not follow a kernel
        return None
    size = ", ".join(f"{k} = {v:,}" for k, v in p.gpu_size.items())
    text = (f"  model, {pred.gpu} at {size}: your kernel {duration(pred.seconds)}, limited by "
            f"{pred.limiter}")
    rec = recorded(p.id)
    if rec is not None:
        text += (f"; the worked kernel measured {duration(rec['measured_us'] * 1e-6)} there "
                 f"(model: {duration(rec['predicted_us'] * 1e-6)})")
    return text
