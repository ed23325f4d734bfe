"""Where a learner meets the performance model: puzzle checks and the lessons' tables.

* :func:`puzzle_prediction` -- a puzzle kernel's predicted time at the puzzle's GPU size, on
  the inputs ``run_on_gpu`` would use, with no GPU;
* :func:`worked_table` -- the worked kernels' recorded H200 times beside the model's;
* :func:`ncu_beside` -- a simulated report beside Nsight Compute's for a worked kernel;
* :mod:`.check` -- the line a passed puzzle check prints.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from .._format import duration
from .check import SMS, recorded
from .model import TimePrediction

__all__ = ["SMS", "ncu_beside", "puzzle_prediction", "recorded", "worked_table"]


def puzzle_prediction(puzzle_id: str, kernel, *, gpu: str = "H200", seed: int = 0,
                      **choices) -> TimePrediction:
    """``kernel`` on puzzle ``puzzle_id`` at its ``gpu_size`` and GPU launch, predicted."""
    from .. import puzzles
    from .check import prediction

    return prediction(puzzles.find(puzzle_id), kernel, gpu=gpu, seed=seed, **choices)


def worked_table(puzzle_ids=None, gpu: str = "H200"):
    """The worked puzzle kernels' recorded times beside the model's predictions, as a table
    (``puzzle_ids``: which, default all recorded)."""
    from .._format import html_table, ratio
    from .check import _worked

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
