"""Where a learner meets the performance model: puzzle checks and the lessons' tables.

* :func:`puzzle_prediction` -- a puzzle kernel's predicted time at the puzzle's GPU size, on
  the inputs ``run_on_gpu`` would use, with no GPU;
* :func:`check_line` -- the line a passed puzzle check prints: the learner's kernel predicted
  on an H200 beside the worked kernel's recorded H200 time;
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


def puzzle_prediction(puzzle_id: str, kernel, *, gpu: str = "H200", seed: int = 0,
                      **choices) -> TimePrediction:
    """``kernel`` on puzzle ``puzzle_id`` at its ``gpu_size`` and GPU launch, predicted."""
    from .. import puzzles
    from ..puzzles import _kernel

    p = puzzles.find(puzzle_id)
    if isinstance(kernel, str):
        kernel = _kernel.kernel_from_source(kernel)
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


def check_line(puzzle_id: str, kernel, **choices) -> str | None:
    """``  on an H200 at n = ...: predicted 81.3 µs (launch overhead); the worked kernel
    measured 83.0 µs there`` -- or ``None`` if the model cannot run this kernel."""
    from .. import puzzles

    try:
        pred = puzzle_prediction(puzzle_id, kernel, **choices)
    except Exception:  # a check never fails because the model could not follow a kernel
        return None
    p = puzzles.find(puzzle_id)
    size = ", ".join(f"{k} = {v:,}" for k, v in p.gpu_size.items())
    text = (f"  model, {pred.gpu} at {size}: your kernel {duration(pred.seconds)}, limited by "
            f"{pred.limiter}")
    rec = recorded(puzzle_id)
    if rec is not None:
        text += (f"; the worked kernel measured {duration(rec['measured_us'] * 1e-6)} there "
                 f"(model: {duration(rec['predicted_us'] * 1e-6)})")
    return text


def worked_table(puzzle_ids=None, gpu: str = "H200"):
    """The worked puzzle kernels' recorded times beside the model's predictions, as a table
    (``puzzle_ids``: which, default all recorded)."""
    from .._format import html_table, ratio

    table = _worked().get(gpu, {})
    ids = list(table) if puzzle_ids is None else list(puzzle_ids)
    rows = []
    for pid in ids:
        rec = table.get(pid)
        if rec is None:
            raise ValueError(f"puzzle_ids: {pid!r} has no recorded {gpu} run; recorded: "
                             f"{', '.join(table)}")
        rows.append((pid, duration(rec["measured_us"] * 1e-6),
                     duration(rec["predicted_us"] * 1e-6),
                     ratio(rec["predicted_us"] / rec["measured_us"]), rec["limiter"]))
    return _Table(f"worked puzzle kernels on the {gpu}: measured (run_on_gpu) and predicted",
                  ("puzzle", "measured", "predicted", "predicted / measured", "limiter"), rows,
                  html_table)


@cache
def _ncu() -> dict:
    import json

    text = resources.files("gpu_lessons").joinpath("data/h200_ncu_puzzles.json").read_text(
        "utf-8")
    return json.loads(text)


def ncu_beside(puzzle_id: str, kernel, **choices):
    """``profile`` of ``kernel`` at the puzzle's GPU size beside Nsight Compute's report of
    the worked kernel on an H200 (metric, simulated, ncu, difference)."""
    from .. import puzzles
    from .profile import beside, profile

    p = puzzles.find(puzzle_id)
    real = _ncu()["kernels"].get(puzzle_id)
    if real is None:
        raise ValueError(f"puzzle_id: {puzzle_id!r} has no recorded ncu report")
    size = dict(p.gpu_size)
    args = p.make_inputs(size, seed=0)
    grid, block = p.launch(**size, **choices)
    if p.gpu_launch is not None:
        grid, block = p.gpu_launch(SMS, **size, **choices)
    prof = profile(kernel, grid, block, *args.values())
    rows = [(name, f"{sim:,.4g}", f"{got:,.4g}", diff)
            for name, sim, got, diff in beside(prof.metrics, real)]
    from .._format import html_table

    return prof, _Table(f"{puzzle_id}: the simulated report beside ncu's (H200, "
                        f"{_ncu()['when']})", ("metric", "simulated", "ncu", "difference"),
                        rows, html_table)


class _Table:
    """Rows with a caption: text in a terminal, a table in a notebook."""

    def __init__(self, caption, header, rows, html):
        self.caption, self.header, self.rows, self._html = caption, header, rows, html

    def __repr__(self) -> str:
        widths = [max(len(str(r[i])) for r in [self.header, *self.rows])
                  for i in range(len(self.header))]
        lines = [self.caption, "  ".join(str(h).ljust(w) for h, w in zip(self.header, widths,
                                                                          strict=True))]
        lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True))
                  for r in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self._html(self.caption, self.header, self.rows)
