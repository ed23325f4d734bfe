"""The README's open-the-course command really serves JupyterLab (then we stop it)."""

import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_course_start_serves_jupyterlab(tmp_path, jupyterlab):
    argv = [sys.executable, str(ROOT / "course.py"), "start", "--no-browser"]
    with jupyterlab(argv, tmp_path / "lab.log", cwd=ROOT) as url:
        with urllib.request.urlopen(f"{url}/", timeout=10) as r:
            assert r.url.endswith("/lab/tree/notebooks/00_start_here.ipynb"), r.url  # notebook 00
        with urllib.request.urlopen(f"{url}/api/contents/notebooks/00_start_here.ipynb",
                                    timeout=10) as r:
            assert r.status == 200
