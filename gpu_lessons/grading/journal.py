"""The grading journal: every row on disk (fsync'd) the moment it is graded.

A grading run that is killed (the OOM killer, a reboot, ``kill -9``) or interrupted loses no
finished row: ``<out>.journal`` beside the CSV (``grades.csv`` -> ``grades.journal``) holds one
JSON line per graded notebook, each written and ``fsync``'d as that row finishes.  Running the
same command again resumes: the journal's seed is reused, every notebook whose bytes are
unchanged keeps its journaled row, and only the rest are graded, so the grades written at the
end are the ones an uninterrupted run would have written.  Once the CSV, the JSON and the
feedback files are written the journal is removed; a later run is a new regrade, with inputs
drawn afresh.

The first line records what the rows depend on (chapter, seed, time limits, kernel, puzzles);
a journal of a run with other settings is refused rather than mixed in.  A row that was not
graded (the run was interrupted before it) is not journaled.  A torn last line (the grader
died while writing it) is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from dataclasses import asdict
from pathlib import Path

from .results import NOT_GRADED, Row

VERSION = 1


def path_for(csv_path) -> Path:
    return Path(csv_path).with_suffix(".journal")


def digest(path: Path) -> str:
    """sha256 of a submission's bytes ("" when it cannot be read as a regular file)."""
    from .submissions import NotRegular, _open_regular

    h = hashlib.sha256()
    try:
        with _open_regular(path) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except (OSError, NotRegular):
        return ""
    return h.hexdigest()


class Journal:
    """Appends rows to the journal file; :meth:`open` reads back what a previous run left."""

    def __init__(self, path: Path, settings: dict, rows: dict[str, tuple[str, Row]]):
        self.path, self.settings, self.previous = path, settings, rows
        self._lock = threading.Lock()
        self._file = None

    @classmethod
    def open(cls, path, settings: dict, *, fresh_seed: str) -> Journal:
        """The journal at ``path``: a previous run's rows when its settings are ``settings``
        (``settings["seed"]`` None takes the journal's seed, or ``fresh_seed`` when there is
        no journal), else a new, empty journal.  A journal whose settings differ raises
        ValueError naming them."""
        path = Path(path)
        rows: dict[str, tuple[str, Row]] = {}
        head = None
        if path.exists():
            head, found = _read(path)
            if head is not None:
                if settings.get("seed") is None:
                    settings = {**settings, "seed": head.get("seed")}
                differ = sorted(k for k in set(head) | set(settings)
                                if k != "journal" and head.get(k) != settings.get(k))
                if differ:
                    raise ValueError(
                        f"{path} holds the rows of an unfinished grading run with other "
                        f"settings ({', '.join(differ)}): rerun that command to finish it, "
                        f"or delete the journal to start again")
                rows = found
        if settings.get("seed") is None:
            settings = {**settings, "seed": fresh_seed}
        journal = cls(path, settings, rows)
        journal._start()
        return journal

    def _start(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._file = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace")
        self._append({"journal": VERSION, **self.settings})
        for file, (sha, row) in self.previous.items():  # what is kept is written again
            self._append({"file": file, "sha256": sha, "row": asdict(row)})

    def reuse(self, file: str, sha: str) -> Row | None:
        """The journaled row of ``file`` when its bytes are still ``sha``."""
        found = self.previous.get(file)
        return found[1] if found and sha and found[0] == sha else None

    def record(self, file: str, sha: str, row: Row) -> None:
        if row.status == NOT_GRADED or not sha:
            return
        self._append({"file": file, "sha256": sha, "row": asdict(row)})

    def _append(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=True) + "\n"
        with self._lock:
            if self._file is None:
                return
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self, *, remove: bool) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if remove:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _read(path: Path) -> tuple[dict | None, dict[str, tuple[str, Row]]]:
    """The header and the rows (by file) of a journal; a line that does not parse ends it."""
    rows: dict[str, tuple[str, Row]] = {}
    head = None
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f):
                try:
                    entry = json.loads(line)
                    if n == 0:
                        if entry.get("journal") != VERSION:
                            return None, {}
                        head = entry
                        continue
                    row = Row(**entry["row"])
                    rows[entry["file"]] = (str(entry["sha256"]), row)
                except (ValueError, TypeError, KeyError, AttributeError):
                    break  # torn by a crash while writing: everything before it stands
    except OSError:
        return None, {}
    return head, rows
