"""Finding submitted notebooks, naming their students, and reading them with bounds.

A submitted file is untrusted: it is read at most :data:`MAX_NOTEBOOK` bytes, its JSON
nesting is capped, symbolic links are not followed, and only the source of its code cells is
kept (outputs and metadata are dropped before anything runs).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from .untrusted import clean, depth

#: Student id from a submission's path relative to SUBMISSIONS_DIR: the first folder
#: (nbgrader's ``submitted/<student>/...``), else the file name up to the first "_"
#: (LMS exports such as ``alice_05_roofline.ipynb``), else the whole file name.
DEFAULT_ID_PATTERN = r"^(?:([^/]+)/.*|([^/_]+)(?:_[^/]*)?\.ipynb)$"
#: Largest notebook graded (an exercise notebook is well under 1 MiB).
MAX_NOTEBOOK = 32 * 2**20
#: Deepest JSON nesting a notebook may have (a notebook's own structure is about 8 deep).
MAX_NOTEBOOK_DEPTH = 64


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
    """The notebook's code cells (source text), and "" — or ``[]`` and why it cannot be graded."""
    try:
        if path.is_symlink():
            return [], "the file is a symbolic link (not followed)"
        with _open_regular(path) as f:
            raw = f.read(MAX_NOTEBOOK + 1)
    except NotRegular:
        return [], "not a regular file (a pipe, a device or a socket named .ipynb)"
    except OSError as exc:
        return [], f"cannot read the file: {type(exc).__name__}"
    if len(raw) > MAX_NOTEBOOK:
        return [], f"the file is larger than {MAX_NOTEBOOK // 2**20} MiB"
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
    try:
        import nbformat

        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:
        return [], clean(f"not a readable notebook: {type(exc).__name__}: {exc}", 200)
    if not all(isinstance(c, dict) and "source" in c for c in nb.cells):
        return [], "not a Jupyter notebook (a cell has no source)"
    code = [_text(c.get("source", "")) for c in nb.cells if c.get("cell_type") == "code"]
    return code, ""


def chapter_from(paths) -> int:
    """The chapter all notebooks' metadata agree on (``metadata.gpu_lessons.chapter``)."""
    seen = set()
    for p in paths:
        try:
            if p.is_symlink():
                continue
            with _open_regular(p) as f:
                data = json.loads(f.read(MAX_NOTEBOOK).decode("utf-8"))
            seen.add(data["metadata"]["gpu_lessons"]["chapter"])
        except Exception:  # unreadable, not JSON, no such key: it does not vote
            continue
    seen = {c for c in seen if isinstance(c, (int, str)) and not isinstance(c, bool)}
    if len(seen) != 1:
        shown = sorted(clean(c, 20) for c in seen)[:5] or "none"
        raise ValueError(f"chapter: pass --chapter N; the notebooks' metadata "
                         f"(gpu_lessons.chapter) name {shown}")
    return seen.pop()


class NotRegular(OSError):
    """A submission path that is not a regular file."""


def _open_regular(path: Path):
    """``path`` opened for reading only if it is a regular file.  Opening does not block and
    does not follow a link: a FIFO named ``x.ipynb`` (which an archive can hold) would block a
    plain ``open`` for ever, and with it the whole grading run."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(f"{path} is not a regular file")
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
            if p.is_symlink():
                continue
            with _open_regular(p) as f:
                data = json.loads(f.read(MAX_NOTEBOOK).decode("utf-8"))
            n += data["metadata"]["gpu_lessons"].get("released") is True
        except Exception:  # unreadable, not JSON, no such key: not a released notebook
            continue
    return n


def _text(source) -> str:
    return "".join(map(str, source)) if isinstance(source, list) else str(source)
