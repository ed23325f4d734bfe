#!/usr/bin/env python3
"""Set up and run the course with nothing but python3.

    python3 course.py start    # create .venv if needed, install, open JupyterLab on notebook 00
    python3 course.py test     # create .venv if needed, install with test extras, run every test
    python3 course.py book     # create .venv if needed, build the course as a website in build/book

The commands are idempotent: the virtual environment in ``.venv`` is (re)installed only when
``pyproject.toml`` changed since the last install.  Extra arguments after ``start`` go to
``jupyter lab`` (e.g. ``--no-browser --port 8899``); after ``test`` they go to pytest; after
``book`` to sphinx-build (e.g. ``-E`` to re-read every page).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
FIRST_NOTEBOOK = "notebooks/00_start_here.ipynb"
BOOK_OUT = ROOT / "build" / "book"
#: Sphinx's parsed pages and jupyter-cache's executed notebooks: outside the site, kept between
#: builds so that a rebuild re-runs only the notebooks whose code changed.
BOOK_CACHE = ROOT / "build" / "book-cache"

# pytest's arguments for the full suite: unit/property tests, then nbval over the exercise and
# solution notebooks.  --nbval-lax checks that cells run (outputs are not stored); bokeh's
# per-run ids make strict output comparison meaningless.  The lessons (notebooks/) run once, in
# tests/test_book.py's build: it executes every lesson from an empty cache of its own, with
# nbval's 300 s per cell and a failing cell failing the build, so nbval does not run them again
# (``pytest --nbval-lax --nbval-current-env notebooks/NN_name.ipynb`` still runs one alone).
# pytest-xdist runs one worker per core and hands each a whole file at a time (--dist
# loadfile): a notebook's cells share one kernel, so they stay on one worker, in order, as do a
# test module's module-scoped fixtures (the book's build).
# ``-n 0`` after ``test`` runs everything in one process again.
TEST_DIRS = ["tests", "exercises", "solutions"]
PYTEST_ARGS = [
    "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=300",
    "-p", "no:cacheprovider",
    "--numprocesses=auto", "--dist=loadfile",
]


def say(msg: str) -> None:
    print(f"[course] {msg}", flush=True)


#: Each install's extras and the installs that include it: the test extra pulls in the book's
#: (``gpu-lessons[book]``), and every extra the package itself.
INCLUDED_IN = {"": ("", "book", "test"), "book": ("book", "test"), "test": ("test",)}


def _stamp(extras: str) -> Path:
    return VENV / f".installed-{extras or 'base'}"


def ensure_env(extras: str) -> None:
    """Create .venv and install the package (editable) with ``extras`` unless already current:
    an install of ``pyproject.toml`` as it is now, with these extras or more, is."""
    stamp = _stamp(extras)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    current = [_stamp(e) for e in INCLUDED_IN.get(extras, (extras,))]
    if PY.exists() and any(s.exists() and s.read_text() == digest for s in current):
        return
    if not PY.exists():
        say(f"creating a virtual environment in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    target = f".[{extras}]" if extras else "."
    say(f"installing gpu-lessons{'[' + extras + ']' if extras else ''} and its dependencies "
        "(the first time takes a few minutes)")
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-q", "-e", target], check=True, cwd=ROOT)
    stamp.write_text(digest)


def start(args: list[str]) -> int:
    ensure_env("")
    say(f"starting JupyterLab on {FIRST_NOTEBOOK} (stop it with Ctrl-C)")
    # Serve the whole repository and open notebook 00 in it.  (solutions/ is there too, for
    # self-study after trying; the lessons and exercises do not send learners to it.)
    cmd = [str(BIN / "jupyter"), "lab", f"--ServerApp.root_dir={ROOT}",
           f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}", *args]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args:
        cmd.append("--allow-root")  # containers and CI often run as root
    try:
        return subprocess.call(cmd, cwd=ROOT)
    except KeyboardInterrupt:
        return 0


def test(args: list[str]) -> int:
    began = time.monotonic()
    ensure_env("test")
    env = dict(os.environ, BOKEH_RESOURCES="inline", PYDEVD_DISABLE_FILE_VALIDATION="1")
    say("ruff check")
    lint = subprocess.call([str(BIN / "ruff"), "check", "."], cwd=ROOT)
    say("pytest: unit and property tests, the book (every lesson run), then the exercises and "
        "solutions under nbval")
    dirs = [d for d in TEST_DIRS if (ROOT / d).is_dir()]
    code = subprocess.call([str(PY), "-m", "pytest", *dirs, *PYTEST_ARGS, *args], cwd=ROOT, env=env)
    say(f"test suite wall time: {time.monotonic() - began:.0f} s")
    return code or lint


def book_command(python: str | Path, out: Path = BOOK_OUT, args: list[str] = (),
                 cache: Path = BOOK_CACHE) -> list[str]:
    """sphinx-build's command line for the book (``tests/test_book.py`` builds with this one).

    ``-W --keep-going``: every page is still written, but a warning (a link to a missing page
    or heading, a notebook that fails to run) makes the build fail, so CI catches it."""
    return [str(python), "-m", "sphinx", "-b", "html", "-c", "book",
            "-d", str(cache / "doctrees"), "-W", "--keep-going", *args, ".", str(out)]


def book_env(cache: Path = BOOK_CACHE) -> dict[str, str]:
    return dict(os.environ, BOKEH_RESOURCES="inline", PYDEVD_DISABLE_FILE_VALIDATION="1",
                GPU_LESSONS_BOOK_CACHE=str(cache / "jupyter"))


def book(args: list[str]) -> int:
    began = time.monotonic()
    ensure_env("book")
    say("building the book: lessons run once and are cached in build/book-cache "
        "(the first build takes a few minutes)")
    code = subprocess.call(book_command(PY, BOOK_OUT, args), cwd=ROOT, env=book_env())
    say(f"book build wall time: {time.monotonic() - began:.0f} s")
    if code == 0:
        say(f"open {BOOK_OUT / 'index.html'} in a browser, or serve it: "
            f"python3 -m http.server -d {BOOK_OUT.relative_to(ROOT)}")
    return code


COMMANDS = {"start": start, "test": test, "book": book}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip())
        return 2
    if sys.version_info < (3, 11):  # noqa: UP036 - course.py runs under any python3
        print("gpu-lessons needs Python 3.11 or newer", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
