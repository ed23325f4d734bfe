#!/usr/bin/env python3
"""Set up and run the course with nothing but python3.

    python3 course.py start    # create .venv if needed, install, open JupyterLab on notebook 00
    python3 course.py test     # create .venv if needed, install with test extras, run every test

Both commands are idempotent: the virtual environment in ``.venv`` is (re)installed only when
``pyproject.toml`` changed since the last install.  Extra arguments after ``start`` go to
``jupyter lab`` (e.g. ``--no-browser --port 8899``); after ``test`` they go to pytest.
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

# pytest's arguments for the full suite: unit/property tests, then nbval over every notebook
# folder.  --nbval-lax checks that cells run (outputs are not stored); bokeh's per-run ids make
# strict output comparison meaningless.
TEST_DIRS = ["tests", "notebooks", "exercises", "solutions"]
PYTEST_ARGS = [
    "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=300",
    "-p", "no:cacheprovider",
]


def say(msg: str) -> None:
    print(f"[course] {msg}", flush=True)


def ensure_env(extras: str) -> None:
    """Create .venv and install the package (editable) with ``extras`` unless already current."""
    stamp = VENV / f".installed-{extras or 'base'}"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and PY.exists():
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
    say("pytest: unit and property tests, then every notebook under nbval")
    dirs = [d for d in TEST_DIRS if (ROOT / d).is_dir()]
    code = subprocess.call([str(PY), "-m", "pytest", *dirs, *PYTEST_ARGS, *args], cwd=ROOT, env=env)
    say(f"test suite wall time: {time.monotonic() - began:.0f} s")
    return code or lint


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"start", "test"}:
        print(__doc__.strip())
        return 2
    if sys.version_info < (3, 11):  # noqa: UP036 - course.py runs under any python3
        print("gpu-lessons needs Python 3.11 or newer", file=sys.stderr)
        return 2
    return start(argv[1:]) if argv[0] == "start" else test(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
