"""Writing a run's results: the CSV, the JSON beside it, and one feedback file per student.

Every text in a row passed through the grader's hands from an untrusted place (file names,
student ids, reasons quoting a notebook's error), so:

* a CSV cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
  leading ``'`` (OWASP, "CSV Injection"), so a spreadsheet shows it as text instead of
  running it as a formula;
* feedback Markdown has HTML's special characters escaped, and Markdown's own (backticks,
  brackets, emphasis, headings, lists, tables) backslash-escaped, so an exception name, an
  answer or a file name shows as text: no link, no image, no way out of a code span (none is
  used around untrusted text);
* each file is written to a temporary name in its folder and renamed over the target, so a
  reader sees the old file or the new one, never half of one.

:func:`check_targets` runs before any grading: a folder where the CSV should go, or a place
the grader cannot write, is refused at once rather than after an hour of grading.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from .results import FORMULA_START, Grades, Row, csv_cell  # noqa: F401 (re-exported)


def csv_text(grades: Grades) -> str:
    return grades.to_csv()


def json_text(grades: Grades) -> str:
    return grades.to_json()


def feedback_text(row: Row, chapter: int | None) -> str:
    """One student's feedback as Markdown: their total, then each question's verdict and the
    message it got (the named mistake, or how the answer is off; never the answer)."""
    title = f"Chapter {chapter:02d} feedback" if chapter is not None else "Feedback"
    lines = [f"# {title}: {_md(row.student)}", "",
             f"Submission {_md(row.file)}: **{row.total:g} / {row.max:g} points** "
             f"(status: {_md(row.status)}).", ""]
    if row.reason:
        lines += [f"Note: {_md(row.reason)}", ""]
    for column, message in row.feedback.items():
        got = row.points.get(column, 0.0)
        name = f"Puzzle {_md(column.split(':', 1)[1])}" if column.startswith("puzzle:") \
            else f"Question {_md(column)}"
        points = f"{got:g} point" + ("" if got == 1 else "s")
        lines += [f"## {name} — {_verdict(message)} ({points})", "", _md(message), ""]
    return "\n".join(lines)


def _verdict(message: str) -> str:
    if message.startswith("✓"):
        return "correct"
    if message.startswith("…"):
        return "not attempted"
    return "not correct"


#: Markdown's punctuation (CommonMark's backslash escapes), less what HTML escaping covers.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~=:\"'])")


def _md(text: str) -> str:
    """``text`` as literal Markdown text: punctuation backslash-escaped, ``<>&`` as entities,
    and each line break a plain space (no new block can start)."""
    flat = " ".join(str(text).splitlines())
    return html.escape(_MD_SPECIAL.sub(r"\\\1", flat), quote=False)


# -- files -----------------------------------------------------------------------------------

def check_targets(csv_path, feedback=None) -> tuple[Path, Path | None]:
    """Refuse, before grading, output paths that cannot work; return them as Paths."""
    csv_path = Path(csv_path)
    for path in (csv_path, csv_path.with_suffix(".json")):
        if path.is_dir():
            raise ValueError(f"out={str(csv_path)!r}: {path} is a folder; give the grades a "
                             "file name, e.g. grades.csv")
    _writable_folder(csv_path.parent, f"out={str(csv_path)!r}")
    if feedback is not None:
        feedback = Path(feedback)
        if feedback.exists() and not feedback.is_dir():
            raise ValueError(f"feedback={str(feedback)!r} is a file; give a folder")
        _writable_folder(feedback, f"feedback={str(feedback)!r}")
    return csv_path, feedback


def _writable_folder(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpu-lessons-check-"):
            pass
    except OSError as exc:
        raise ValueError(f"{what}: cannot write in {folder} ({exc.strerror or exc})") from None


def write_all(grades: Grades, csv_path, feedback=None) -> tuple[Path, ...]:
    """Write the CSV, the JSON and the feedback files; return their paths."""
    csv_path, feedback = check_targets(csv_path, feedback)
    json_path = csv_path.with_suffix(".json")
    atomic_write(csv_path, csv_text(grades))
    atomic_write(json_path, json_text(grades))
    written = [csv_path, json_path]
    if feedback is not None:
        for row, name in zip(grades.rows, feedback_names(grades.rows), strict=True):
            path = feedback / name
            atomic_write(path, feedback_text(row, grades.chapter))
            written.append(path)
    return tuple(written)


def feedback_names(rows) -> list[str]:
    """A file name per row: the student id made safe for a file system, unique in the run.

    Only an id that is a safe name already, and that no other id shares but for case, gets
    ``<id>.md``; any other id gets a short hash of itself added (``alice._05.ipynb``'s id
    ``alice.`` -> ``alice-1b2c3d4e.md``).  Otherwise a classmate could name a file so that
    their id made the same file name as someone else's, come first, and take ``alice.md``
    (and with it the feedback an instructor sends to alice).  A second file of the same
    student gets ``-2``."""
    stems = {}
    for student in dict.fromkeys(row.student for row in rows):
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._")[:80] or "student"
        stems[student] = stem
    clash = Counter(stem.lower() for stem in stems.values())
    for student, stem in stems.items():
        if stem != student or clash[stem.lower()] > 1:
            digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            stems[student] = f"{stem}-{digest}"
    used: set[str] = set()
    names = []
    for row in rows:
        stem = stems[row.student]
        name, n = f"{stem}.md", 1
        while name.lower() in used:  # lower: case-insensitive file systems
            n += 1
            name = f"{stem}-{n}.md"
        used.add(name.lower())
        names.append(name)
    return names


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.
    A character UTF-8 cannot encode (a lone surrogate from a submission's JSON) is written as
    its escape rather than stopping the whole class's grades from being written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
