"""Finding submitted notebooks, naming their students, and reading them with bounds.

A submitted file is untrusted: it is read at most :data:`MAX_NOTEBOOK` bytes, its JSON
nesting is capped, symbolic links are not followed, and only the source of its code cells is
kept (outputs and metadata are dropped before anything runs).  Hard links are refused like
symbolic links: a hard link in a submission archive names a file of someone else's.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from .._format import binary_bytes
from .untrusted import clean, depth

#: Student id from a submission's path relative to SUBMISSIONS_DIR: the first folder
#: (nbgrader's ``submitted/<student>/...``), else the file name up to the first "_"
#: (LMS exports such as ``alice_05_roofline.ipynb``), else the whole file name.
DEFAULT_ID_PATTERN = r"^(?:([^/]+)/.*|([^/_]+)(?:_[^/]*)?\.ipynb)$"
#: Largest notebook graded (an exercise notebook is well under 1 MiB).
MAX_NOTEBOOK = 32 * 2**20
#: Deepest JSON nesting a notebook may have (a notebook's own structure is about 8 deep).
MAX_NOTEBOOK_DEPTH = 64
#: Most cells a notebook may have (an exercise notebook has about 60).
MAX_CELLS = 2000


def find_submissions(folder) -> list[Path]:
    """Every ``*.ipynb`` under ``folder``, sorted, skipping ``.ipynb_checkpoints`` and not
    following links to folders."""
    found = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
        found += [Path(here) / f for f in files if f.endswith(".ipynb")]
    return sorted(found)


def collect(submissions) -> tuple[Path | None, list[Path]]:
    """The folder rows are named relative to, and the notebooks to grade."""
    if isinstance(submissions, (str, os.PathLike)):
        folder = Path(submissions)
        if folder.is_file():
            return folder.parent, [folder]
        if not folder.is_dir():
            raise ValueError(f"submissions={str(submissions)!r} is not a folder or a notebook")
        return folder, find_submissions(folder)
    paths = sorted({Path(p).absolute() for p in submissions})
    if not paths:
        return None, []
    # Rows are keyed by the path under a common folder, so equal file names stay apart.
    return Path(os.path.commonpath([p.parent for p in paths])), paths


def student_id(rel: str, pattern: re.Pattern) -> str:
    """The student id for the path ``rel`` (see :data:`DEFAULT_ID_PATTERN`), made printable."""
    match = pattern.match(rel)
    found = (next((g for g in match.groups() if g), None) or match.group(0)) if match else None
    return clean(found or Path(rel).stem, 200)


def clean_path(rel: str) -> str:
    """A submission's path as shown in the grades (control characters removed)."""
    return clean(rel, 300)


def read_notebook(path: Path) -> tuple[list[str], str]:
    """The notebook's code cells (source text), and "" — or ``[]`` and why it cannot be graded.

    Bounded before anything costly: the bytes (:data:`MAX_NOTEBOOK`), the cells
    (:data:`MAX_CELLS`, counted in the raw bytes before parsing: 336k empty cells would cost
    the grader 870 MiB and 20 s to parse), the nesting (:data:`MAX_NOTEBOOK_DEPTH`)."""
    try:
        if path.is_symlink():
            return [], "the file is a symbolic link (not followed)"
        with _open_regular(path) as f:
            raw = f.read(MAX_NOTEBOOK + 1)
    except HardLink:
        return [], "the file has other hard links (not followed, like a symbolic link)"
    except NotRegular:
        return [], "not a regular file (a pipe, a device or a socket named .ipynb)"
    except OSError as exc:
        return [], f"cannot read the file: {type(exc).__name__}"
    if len(raw) > MAX_NOTEBOOK:
        return [], f"the file is larger than {binary_bytes(MAX_NOTEBOOK)}"
    if raw.count(b'"cell_type"') > MAX_CELLS:
        return [], f"the notebook has more than {MAX_CELLS} cells"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [], "cannot read the file: it is not UTF-8 text"
    try:
        data = json.loads(text)
    except RecursionError:
        return [], f"not a notebook: JSON nested deeper than {MAX_NOTEBOOK_DEPTH} levels"
    except ValueError as exc:
        return [], clean(f"not valid JSON ({exc})", 200)
    if depth(data, MAX_NOTEBOOK_DEPTH) > MAX_NOTEBOOK_DEPTH:
        return [], f"not a notebook: JSON nested deeper than {MAX_NOTEBOOK_DEPTH} levels"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return [], "not a Jupyter notebook (no list of cells)"
    if len(data["cells"]) > MAX_CELLS:
        return [], f"the notebook has more than {MAX_CELLS} cells"
    cells = data["cells"]
    if data.get("nbformat") != 4:  # an older format: let nbformat convert it
        try:
            import nbformat

            cells = nbformat.reads(text, as_version=4).cells
        except Exception as exc:
            return [], clean(f"not a readable notebook: {type(exc).__name__}: {exc}", 200)
    if not all(isinstance(c, dict) and "source" in c for c in cells):
        return [], "not a Jupyter notebook (a cell has no source)"
    code = [_text(c.get("source", "")) for c in cells if c.get("cell_type") == "code"]
    return code, ""


def notebook_chapter(path: Path) -> int | None:
    """The chapter a notebook's metadata names (``gpu_lessons.chapter``), normalised: ``5``,
    ``"05"`` and ``" 5 "`` are all 5.  None when it names none, or nothing readable."""
    from ..questions import chapter_number

    try:
        value = _course_metadata(path)["chapter"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return None
        return chapter_number(value.strip() if isinstance(value, str) else value)
    except Exception:  # unreadable, not JSON, no such key, not a chapter: no chapter
        return None


def chapter_from(paths) -> int:
    """The chapter most notebooks' metadata names (``metadata.gpu_lessons.chapter``, normalised
    by :func:`notebook_chapter`).  A notebook naming another chapter, or none, does not stop
    the run: the grader reports that notebook alone.  Without a clear majority, ValueError."""
    from collections import Counter

    votes = Counter(c for c in map(notebook_chapter, paths) if c is not None)
    ranked = votes.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        shown = ", ".join(f"{c:02d} ({n})" for c, n in sorted(votes.items())) or "none"
        raise ValueError(f"chapter: pass --chapter N; the notebooks' metadata "
                         f"(gpu_lessons.chapter) names no single chapter most often: {shown}")
    return ranked[0][0]


class NotRegular(OSError):
    """A submission path that is not a regular file."""


class HardLink(NotRegular):
    """A submission file with more than one name: a link to a file it does not own."""


def _open_regular(path: Path):
    """``path`` opened for reading only if it is a regular file.  Opening does not block and
    does not follow a link: a FIFO named ``x.ipynb`` (which an archive can hold) would block a
    plain ``open`` for ever, and with it the whole grading run."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{path} is not a regular file")
        if info.st_nlink > 1:
            raise HardLink(f"{path} has {info.st_nlink} names")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def released_count(paths) -> int:
    """How many of ``paths`` say in their metadata that they come from a release with
    per-student numbers (``metadata.gpu_lessons.released``).  Read like :func:`chapter_from`;
    a notebook can claim anything, so this only warns or refuses a run where most agree."""
    n = 0
    for p in paths:
        try:
            n += _course_metadata(p).get("released") is True
        except Exception:  # unreadable, not JSON, no such key: not a released notebook
            continue
    return n


def _course_metadata(path: Path):
    """The notebook's ``metadata.gpu_lessons``, read within the bounds :func:`read_notebook`
    checks before parsing (no link, a regular file, :data:`MAX_NOTEBOOK` bytes,
    :data:`MAX_CELLS` cells).  Raises (OSError, ValueError, KeyError, ...) on anything else:
    the callers take any failure to mean the notebook says nothing."""
    if path.is_symlink():
        raise NotRegular(f"{path} is a symbolic link")
    with _open_regular(path) as f:
        raw = f.read(MAX_NOTEBOOK + 1)
    if len(raw) > MAX_NOTEBOOK:
        raise ValueError(f"{path} is larger than {MAX_NOTEBOOK} bytes")
    if raw.count(b'"cell_type"') > MAX_CELLS:
        raise ValueError(f"{path} has more than {MAX_CELLS} cells")
    return json.loads(raw.decode("utf-8"))["metadata"]["gpu_lessons"]


def _text(source) -> str:
    return "".join(map(str, source)) if isinstance(source, list) else str(source)
