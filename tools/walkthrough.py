"""A timed walk-through of every lesson and exercise set: the times the course states.

    .venv/bin/python tools/walkthrough.py                          # run everything, print the table
    .venv/bin/python tools/walkthrough.py --md docs/measured/walkthrough.md --apply

For each notebook the time a learner needs is estimated as

    reading      visible words of prose ÷ READING_WPM (collapsed notes are optional reading)
  + running      the measured execution time of every code cell (nbclient, a fresh kernel)
  + looking      CELL_MIN per code cell, to read the code and what it prints
  + doing        a stated allowance per interaction: PREDICTION_MIN per predict() cell,
                 EXPLORER_MIN per explorer, QUESTION_MIN per graded exercise question

and rounded up to ROUND_MIN minutes.  Reading speed: 238 words per minute, the mean silent reading
rate for non-fiction in English found by M. Brysbaert, "How many words do we read per minute? A
review and meta-analysis of reading rate", Journal of Memory and Language 109 (2019), 104047.
The allowances are this course's own, stated here so they can be argued with; the cell times are
measured on the machine that runs this script (GPU cells skip without a GPU and cost almost
nothing).

``--apply`` writes the lesson times into each lesson's header (the "**Time:**" line), the
exercise sets' times into the headers of their exercise and solution notebooks, and the lesson +
exercise times into the README's notebook table.  ``tools/sync_exercises.py`` writes the exercise
headers from the recorded table too (:func:`stated_minutes`), so the two tools agree;
``tests/test_walkthrough.py`` checks that the headers and the README agree with the recorded
table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "measured" / "walkthrough.md"
sys.path.insert(0, str(ROOT / "tools"))

from word_count import notebook_words  # noqa: E402  (a sibling script, not a package)

READING_WPM = 238
CELL_MIN = 0.5
PREDICTION_MIN = 1.0
EXPLORER_MIN = 3.0
QUESTION_MIN = 4.0
ROUND_MIN = 5

_PREDICT = re.compile(r"\bpredict\(")
_EXPLORER = re.compile(r"\b\w+_explorer\(")
_CHECK = re.compile(r"\bcheck\(\s*[\"']")
TIME_LINE = re.compile(r"\*\*Time:\*\* about \d+ minutes\.")
_ROW = re.compile(r"\| ((?:notebooks|exercises)/\S+) \|.* \| (\d+) min \|$")


def time_line(minutes: int) -> str:
    """The header line that states a notebook's time."""
    return f"**Time:** about {minutes} minutes."


def stated_minutes(record: Path = RECORD) -> dict[str, int]:
    """The "stated" column of a recorded walk-through: ``{"exercises/01_cpu_vs_gpu": 30, …}``."""
    rows = {}
    for line in record.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(1)] = int(m.group(2))
    return rows


@dataclass(frozen=True)
class Walk:
    notebook: str
    words: int
    cells: int
    run_s: float
    predictions: int
    explorers: int
    questions: int

    @property
    def reading_min(self) -> float:
        return self.words / READING_WPM

    @property
    def doing_min(self) -> float:
        return (self.cells * CELL_MIN + self.predictions * PREDICTION_MIN + self.explorers * EXPLORER_MIN
                + self.questions * QUESTION_MIN)

    @property
    def total_min(self) -> float:
        return self.reading_min + self.run_s / 60 + self.doing_min

    @property
    def stated_min(self) -> int:
        return max(ROUND_MIN, ROUND_MIN * math.ceil(self.total_min / ROUND_MIN))


def _code_sources(nb) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def run_seconds(path: Path) -> float:
    """Sum of the code cells' execution times in a fresh kernel (nbclient's timing records)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    total = 0.0
    for cell in nb.cells:
        ex = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            start = dt.datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))
            end = dt.datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
            total += (end - start).total_seconds()
    return total


def walk(path: Path, *, execute: bool = True) -> Walk:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = _code_sources(nb)
    return Walk(
        notebook=f"{path.parent.name}/{path.stem}",
        words=notebook_words(path).visible,
        cells=len(code),
        run_s=run_seconds(path) if execute else 0.0,
        predictions=sum(len(_PREDICT.findall(c)) for c in code),
        explorers=sum(len(_EXPLORER.findall(c)) for c in code),
        questions=sum(len(_CHECK.findall(c)) for c in code),
    )


def table(walks: list[Walk]) -> str:
    lines = ["| notebook | words | reading (min) | code cells | cells run (s) | predictions "
             "| explorers | questions | looking and doing (min) | total (min) | stated |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w in walks:
        lines.append(f"| {w.notebook} | {w.words:,} | {w.reading_min:.1f} | {w.cells} "
                     f"| {w.run_s:.1f} | {w.predictions} | {w.explorers} | {w.questions} "
                     f"| {w.doing_min:.1f} | {w.total_min:.1f} | {w.stated_min} min |")
    return "\n".join(lines)


def report(walks: list[Walk], seconds: float) -> str:
    return f"""# Timed walk-through: how long each lesson and exercise set takes

Produced by `tools/walkthrough.py` (its docstring gives the method). Time = visible words ÷
{READING_WPM} words per minute (Brysbaert 2019, silent reading of non-fiction) + the measured
execution time of every code cell in a fresh kernel + {CELL_MIN:g} min per code cell (reading the
code and its output) + {PREDICTION_MIN:g} min per prediction, {EXPLORER_MIN:g} min per explorer and
{QUESTION_MIN:g} min per graded question, rounded up to {ROUND_MIN} minutes. The allowances are
the course's own estimates, not measurements. The "stated" column is what each lesson's header,
each exercise set's header and the README's notebook table say.

Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPU cores,
no GPU (GPU cells skip); {dt.date.today().isoformat()}; the whole walk-through ran in
{seconds / 60:.1f} minutes.

{table(walks)}
"""


def apply(walks: list[Walk]) -> None:
    """Write the stated times into the lesson headers, the exercise sets' headers (exercise and
    solution notebooks alike) and the README's notebook table."""
    import nbformat

    by_name = {w.notebook: w for w in walks}
    for w in walks:
        folder, stem = w.notebook.split("/")
        folders = ("solutions", "exercises") if folder == "exercises" else (folder,)
        for f in folders:
            path = ROOT / f / f"{stem}.ipynb"
            nb = nbformat.read(path, as_version=4)
            first = nb.cells[0]
            new = TIME_LINE.sub(time_line(w.stated_min), first.source)
            if new != first.source:
                first.source = new
                path.write_text(nbformat.writes(nb, version=4, indent=1) + "\n", encoding="utf-8")
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        m = re.match(r"\| (\d\d) \| `(\d\d_\w+)` \|", line)
        if m:
            lesson = by_name.get(f"notebooks/{m.group(2)}")
            ex = by_name.get(f"exercises/{m.group(2)}")
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            time_cell = (f"{lesson.stated_min} min" if lesson else "—") + (
                f" + {ex.stated_min} min" if ex else "")
            if len(cells) == 5:                      # the time column is already there
                cells[-1] = time_cell
            else:
                cells.append(time_cell)
            line = "| " + " | ".join(cells) + " |"
        elif line.startswith("| # | notebook |") and "time" not in line:
            line = line.rstrip() + " time (lesson + exercises) |"
        elif line.startswith("|---|---|---|---|") and line.count("|") == 5:
            line = line.rstrip() + "---|"
        out.append(line)
    readme.write_text("\n".join(out) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--md", type=Path, help="write the report to this file")
    ap.add_argument("--apply", action="store_true",
                    help="write the stated times into the lesson headers and the README")
    ap.add_argument("--no-execute", action="store_true",
                    help="skip running the notebooks (cell time counted as 0; for a quick look)")
    args = ap.parse_args(argv)
    began = time.monotonic()
    paths = [*sorted((ROOT / "notebooks").glob("*.ipynb")),
             *sorted((ROOT / "exercises").glob("*.ipynb"))]
    walks = []
    for path in paths:
        walks.append(walk(path, execute=not args.no_execute))
        print(f"{walks[-1].notebook}: {walks[-1].total_min:.1f} min", file=sys.stderr, flush=True)
    text = report(walks, time.monotonic() - began)
    print(text)
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    if args.apply:
        apply(walks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
