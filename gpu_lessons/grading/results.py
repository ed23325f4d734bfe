"""A grading run's results: one :class:`Row` per submission, collected in :class:`Grades`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

OK, TIMEOUT, CRASHED = "ok", "timeout", "crashed"
INVALID, INVALID_RESULT, NOT_GRADED = "invalid notebook", "invalid result", "not graded"
#: Every status a row can have (see docs/instructors.md for what each means).
STATUSES = (OK, TIMEOUT, CRASHED, INVALID, INVALID_RESULT, NOT_GRADED)


@dataclass(frozen=True)
class Row:
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

    def __repr__(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"Row({self.file}: {self.status}, {self.total:g}/{self.max:g} points{why})"


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
        from .._format import html_table

        title = f"chapter {self.chapter:02d}: " if self.chapter is not None else ""
        return html_table(f"{title}{len(self.rows)} submissions graded", header(self.columns),
                          [cells(r, self.columns) for r in self.rows])

    def to_csv(self) -> str:
        from .output import csv_text

        return csv_text(self)

    def to_json(self) -> str:
        from .output import json_text

        return json_text(self)

    def write(self, csv_path, *, feedback=None):
        """Write ``csv_path``, the JSON beside it and (with ``feedback``, a folder) one
        Markdown feedback file per student; each file atomically."""
        from .output import write_all

        return write_all(self, csv_path, feedback)

    def as_dict(self) -> dict:
        return {"chapter": self.chapter, "questions": list(self.columns), "seed": self.seed,
                "rows": [asdict(r) for r in self.rows]}


def header(columns) -> list[str]:
    return ["file", "student", *columns, "total", "max", "status", "reason"]


def cells(row: Row, columns) -> list[str]:
    return [row.file, row.student, *(f"{row.points[c]:g}" if c in row.points else ""
                                     for c in columns),
            f"{row.total:g}", f"{row.max:g}", row.status, row.reason]
