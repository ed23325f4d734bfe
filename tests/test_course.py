"""``course.py``'s set-up: an install with more extras serves a command that needs fewer, so
``course.py start`` after ``course.py test`` installs nothing; any other state installs."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def course(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("course_under_test", ROOT / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    monkeypatch.setattr(module, "VENV", venv)
    monkeypatch.setattr(module, "PY", venv / "bin" / "python")
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    module.calls = calls
    module.digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return module


@pytest.mark.parametrize(("installed", "wanted", "installs"), [
    ("test", "", False), ("test", "book", False), ("test", "test", False),
    ("book", "", False), ("book", "test", True), ("base", "book", True), ("base", "", False),
])
def test_an_install_with_more_extras_is_current(course, installed, wanted, installs):
    (course.VENV / f".installed-{installed}").write_text(course.digest)
    course.ensure_env(wanted)
    assert bool(course.calls) == installs
    if installs:
        assert course.calls[-1][-1] == f".[{wanted}]"


def test_a_changed_pyproject_installs_again(course):
    (course.VENV / ".installed-test").write_text("an older pyproject.toml")
    course.ensure_env("")
    assert course.calls and course.calls[-1][-1] == "."
    assert (course.VENV / ".installed-base").read_text() == course.digest


def test_the_suite_runs_a_file_per_worker():
    """Notebook cells share one kernel, so a notebook must stay on one worker."""
    spec = importlib.util.spec_from_file_location("course_args", ROOT / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "--dist=loadfile" in module.PYTEST_ARGS
    # the lessons run in tests/test_book.py's build (from an empty cache), not again under nbval
    assert module.TEST_DIRS == ["tests", "exercises", "solutions"]
