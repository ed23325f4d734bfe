"""The README's open-the-course command really serves JupyterLab (then we stop it)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_course_start_serves_jupyterlab(tmp_path):
    port = free_port()
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "course.py"), "start", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password="],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, status = time.monotonic() + 240, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=5) as r:
                    status = r.status
                    break
            except OSError:
                time.sleep(1)
        assert status == 200, (tmp_path / "lab.log").read_text()[-3000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert r.url.endswith("/lab/tree/notebooks/00_start_here.ipynb"), r.url  # opens notebook 00
        url = f"http://127.0.0.1:{port}/api/contents/notebooks/00_start_here.ipynb"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()
