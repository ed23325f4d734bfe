import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests: deterministic in CI, no per-example deadline (2 shared cores are noisy).
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _control_extremes(w):
    """The first and last value an explorer's control offers (a menu, a slider, a checkbox)."""
    if hasattr(w, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in (w.options[0], w.options[-1])]
    if hasattr(w, "min"):
        return [w.min, w.max]
    return [not w.value, w.value]  # a checkbox


@pytest.fixture
def control_extremes():
    """``control_extremes(widget)``: the first and last value a control offers, for tests that
    drive every control of an explorer to its ends."""
    return _control_extremes


@contextmanager
def _running_jupyterlab(argv: list[str], log_path: Path, *, cwd=None, env=None,
                        wait_s: float = 240):
    """Run ``argv`` (``jupyter lab`` or ``course.py start``) on a free local port with no token,
    in a process group of its own; yield its URL once ``/lab`` answers, then stop the group."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [*argv, f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
            "--ServerApp.password="]
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + wait_s
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"{url}/lab", timeout=5):
                        break
                except OSError:
                    time.sleep(0.5)
            else:
                pytest.fail("JupyterLab did not start:\n" + log_path.read_text()[-3000:])
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def jupyterlab():
    """``with jupyterlab(argv, log_path, cwd=..., env=...) as url:`` — JupyterLab served on a
    free port for the browser and start tests, stopped (its whole process group) afterwards."""
    return _running_jupyterlab


#: The suite's longest files, longest first (wall seconds: docs/measured/test_suite.md).
#: pytest-xdist (``--dist loadfile``) hands out whole files in collection order, so a long file
#: collected late is run by one worker alone at the end while the other idles; started first,
#: they leave the short files and the notebooks to even out the two workers' finish.
LONGEST_FIRST = (
    "tests/test_book.py", "tests/grading/test_grade.py", "tests/test_perf_model.py",
    "tests/puzzles/test_puzzles.py", "tests/test_browser.py", "tests/grading/test_grade_breaches.py",
    "tests/grading/test_other_graders.py", "tests/kernels/test_registers_h200.py",
    "tests/test_assignments.py", "tests/kernels/test_equivalence.py",
    "tests/puzzles/test_puzzle_variants.py", "tests/kernels/test_sgemm_ladder.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))  # stable
