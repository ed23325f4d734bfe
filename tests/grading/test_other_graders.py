"""The checks from nbgrader and otter-grader, run end to end as docs/instructors.md section 6
tells instructors to: one source notebook with the documented test cells, two submissions
(one right, one with a wrong number), graded by each tool; the scores are asserted.

nbgrader: ``generate_assignment`` -> ``autograde``; otter-grader: ``otter assign`` -> ``otter
run``.  Both tools come with the test extra.  Each run takes tens of seconds (kernels, the
tools' own start-up), so the tests carry the ``other_graders`` marker: the suite runs them,
and ``-m "not other_graders"`` leaves them out of a quick run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "instructors.md").read_text("utf-8")
pytestmark = pytest.mark.other_graders

RIGHT = "ridge_h100 = 494.7e12 / 3.35e12"
WRONG = "ridge_h100 = 989.4e12 / 3.35e12  # the sparse peak"
KTIME = ("def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
         "    return max(flops / peak_flops, bytes_moved / bandwidth)")


def _documented(tool: str) -> str:
    """The test cell docs/instructors.md section 6 prints for ``tool``."""
    section = DOC[DOC.index("## 6. Using the checks from nbgrader or otter-grader"):]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    found = [b for b in blocks if ("BEGIN HIDDEN TESTS" in b) == (tool == "nbgrader")]
    return found[0].strip()


def _env() -> dict:
    # the kernels the tools start import this checkout's gpu_lessons; the tools call their
    # own commands (nbgrader runs `alembic`) from the environment's bin folder
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path}


def _run(args, cwd, timeout=600):
    done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done


# -- nbgrader -----------------------------------------------------------------------------------

def _nbgrader_cell(kind: str, source: str, grade_id: str, points: float = 0):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": kind == "test", "solution": kind == "solution",
                                 "locked": kind == "test", "grade_id": grade_id,
                                 "schema_version": 3, **({"points": points}
                                                         if kind == "test" else {})}
    return cell


def test_nbgrader_generate_assignment_then_autograde(tmp_path):
    pytest.importorskip("nbgrader")
    test = _documented("nbgrader")
    assert "strict=True" in test
    course = tmp_path / "course"
    (course / "source" / "ps1").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n"
        "c.CourseDirectory.course_id = 'gpu'\nc.ExecutePreprocessor.timeout = 120\n")
    nb = nbformat.v4.new_notebook(cells=[
        _nbgrader_cell("solution", f"### BEGIN SOLUTION\n{RIGHT}\n### END SOLUTION",
                       "ridge"),
        _nbgrader_cell("test", test, "test_ridge", 2),
        _nbgrader_cell("solution", f"### BEGIN SOLUTION\n{KTIME}\n### END SOLUTION",
                       "ktime"),
        _nbgrader_cell("test", test.replace('"05.ridge_h100", ridge_h100',
                                            '"05.kernel_time", kernel_time'),
                       "test_ktime", 2),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, course / "source" / "ps1" / "ps1.ipynb")
    nbgrader = [sys.executable, "-m", "nbgrader"]
    _run([*nbgrader, "generate_assignment", "ps1", "--force"], course)
    released = nbformat.read(course / "release" / "ps1" / "ps1.ipynb", as_version=4)
    text = "\n".join(c.source for c in released.cells)
    assert "494.7e12" not in text and "check(" not in text  # solution and hidden tests gone
    for student, ridge in (("alice", RIGHT), ("bob", WRONG)):
        mine = nbformat.read(course / "release" / "ps1" / "ps1.ipynb", as_version=4)
        answers = iter([ridge, KTIME])
        for cell in mine.cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = next(answers)
        folder = course / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        nbformat.write(mine, folder / "ps1.ipynb")
    _run([*nbgrader, "autograde", "ps1", "--create", "--force"], course)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission("ps1", s).score for s in ("alice", "bob")}
    assert scores == {"alice": 4.0, "bob": 2.0}


# -- otter-grader -------------------------------------------------------------------------------

def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def test_otter_assign_then_otter_run(tmp_path):
    pytest.importorskip("otter")
    test = _documented("otter")
    assert test.startswith("# HIDDEN TEST") and "passed(" in test
    nb = nbformat.v4.new_notebook(cells=[
        _raw("# ASSIGNMENT CONFIG\nname: ps1\ninit_cell: false\nexport_cell: false\n"
             "check_all_cell: false\nrun_tests: false\ngenerate: true"),
        _raw("# BEGIN QUESTION\nname: q1\npoints: 2"),
        nbformat.v4.new_markdown_cell("The dense FP16 ridge point of an H100, in FLOP/byte."),
        _raw("# BEGIN SOLUTION"),
        nbformat.v4.new_code_cell(f"# BEGIN SOLUTION\n{RIGHT}\n# END SOLUTION"),
        _raw("# END SOLUTION"),
        _raw("# BEGIN TESTS"),
        nbformat.v4.new_code_cell(test),
        _raw("# END TESTS"),
        _raw("# END QUESTION"),
        _raw("# BEGIN QUESTION\nname: q2\npoints: 2"),
        nbformat.v4.new_markdown_cell("`kernel_time` on the roofline."),
        _raw("# BEGIN SOLUTION"),
        nbformat.v4.new_code_cell(f"# BEGIN SOLUTION\n{KTIME}\n# END SOLUTION"),
        _raw("# END SOLUTION"),
        _raw("# BEGIN TESTS"),
        nbformat.v4.new_code_cell(test.replace('"05.ridge_h100", ridge_h100',
                                               '"05.kernel_time", kernel_time')),
        _raw("# END TESTS"),
        _raw("# END QUESTION"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    master = tmp_path / "master" / "ps1.ipynb"
    master.parent.mkdir()
    # Otter takes a test's expected output from the master notebook's outputs: run it first.
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(master.parent)}}).execute(env=_env())
    nbformat.write(nb, master)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "otter", "assign", str(master), str(dist)], tmp_path)
    student = nbformat.read(dist / "student" / "ps1.ipynb", as_version=4)
    text = "\n".join(c.source for c in student.cells)
    assert "494.7e12" not in text and "passed(" not in text
    zips = list((dist / "autograder").glob("*.zip"))
    assert len(zips) == 1, list((dist / "autograder").iterdir())
    scores = {}
    for name, ridge in (("alice", RIGHT), ("bob", WRONG)):
        mine = nbformat.read(dist / "student" / "ps1.ipynb", as_version=4)
        answers = iter([ridge, KTIME])
        for cell in mine.cells:
            if cell.cell_type == "code" and "..." in cell.source:
                cell.source = next(answers)
        sub = tmp_path / name
        sub.mkdir()
        nbformat.write(mine, sub / "ps1.ipynb")
        _run([sys.executable, "-m", "otter", "run", "-a", str(zips[0]), "-o", str(sub),
              str(sub / "ps1.ipynb")], sub)
        results = json.loads((sub / "results.json").read_text())
        # Gradescope's results format: a score per question, beside a "Public Tests" summary
        scores[name] = sum(t["score"] for t in results["tests"] if "score" in t)
    assert scores == {"alice": 4.0, "bob": 2.0}
    shutil.rmtree(dist)
