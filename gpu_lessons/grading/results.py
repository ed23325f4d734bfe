"""A grading run's results: one :class:`Row` per submission, collected in :class:`Grades`, and
their CSV and JSON text (the files are written by :mod:`~gpu_lessons.grading.output`)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field

from .. import _format

OK, TIMEOUT, CRASHED = "ok", "timeout", "crashed"
INVALID, INVALID_RESULT, NOT_GRADED = "invalid notebook", "invalid result", "not graded"
#: Every status a row can have (see docs/instructors.md for what each means).
STATUSES = (OK, TIMEOUT, CRASHED, INVALID, INVALID_RESULT, NOT_GRADED)


@dataclass(frozen=True, repr=False)
class Row(_format.Readout):
    """One submission's grade.  ``points`` and ``feedback`` are keyed by question id (and
    ``puzzle:<id>`` for puzzles); ``reason`` says what happened when it was not plain."""

    file: str
    student: str
    points: dict[str, float]
    total: float
    max: float
    status: str
    reason: str
    feedback: dict[str, str] = field(default_factory=dict)

    def readout_title(self) -> str:
        return f"Grade of {self.file}"

    def readout_rows(self) -> tuple[_format.Row, ...]:
        line = _format.Row
        return (line("student", self.student), line("status", self.status),
                line("points", f"{self.total:g} of {self.max:g}"),
                *((line("reason", self.reason),) if self.reason else ()),
                *(line(q, f"{p:g}") for q, p in self.points.items()))


@dataclass(frozen=True)
class Grades:
    """All rows of one grading run, in file order.  ``columns``: every question (and puzzle)
    id any row was graded on, in the order the chapter asks them; ``seed``: what the
    run's inputs were drawn with (``--seed`` regrades on the same inputs)."""

    chapter: int | None
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    seed: str | None = None

    def __repr__(self) -> str:
        title = f"chapter {self.chapter:02d}, " if self.chapter is not None else ""
        lines = [f"Grades({title}{len(self.rows)} submissions)"]
        lines += [f"  {r.student:<16} {r.status:<16} {r.total:g}/{r.max:g} points  {r.reason}"
                  for r in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        title = f"chapter {self.chapter:02d}: " if self.chapter is not None else ""
        return _format.html_table(f"{title}{len(self.rows)} submissions graded", header(self.columns),
                          [cells(r, self.columns) for r in self.rows])

    def to_csv(self) -> str:
        """The CSV text (formula-safe cells: :func:`csv_cell`)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([csv_cell(h) for h in header(self.columns)])
        for row in self.rows:
            writer.writerow([csv_cell(c) for c in cells(row, self.columns)])
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, ensure_ascii=False)

    def as_dict(self) -> dict:
        return {"chapter": self.chapter, "questions": list(self.columns), "seed": self.seed,
                "rows": [asdict(r) for r in self.rows]}


#: A CSV cell starting with one of these gets a leading ``'`` (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """``text`` with a leading ``'`` when a spreadsheet would read it as a formula."""
    return "'" + text if text.startswith(FORMULA_START) else text


def header(columns) -> list[str]:
    return ["file", "student", *columns, "total", "max", "status", "reason"]


def cells(row: Row, columns) -> list[str]:
    return [row.file, row.student, *(f"{row.points[c]:g}" if c in row.points else ""
                                     for c in columns),
            f"{row.total:g}", f"{row.max:g}", row.status, row.reason]
