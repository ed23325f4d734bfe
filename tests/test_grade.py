"""Tests for gpu_lessons.grade: the instructor's grader on adversarial submissions.

The notebooks in tests/submissions/ (written by make_submissions.py there) answer the three
chapter-05 sample questions: 05.ridge_h100 (2 points), 05.axpy_bound (1), 05.kernel_time (2),
so a full score is 5.  One grading run over the folder (two jobs, 4 s per cell, 30 s per
notebook) is shared by the tests below; it takes about 40 s on two cores.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from gpu_lessons import cli
from gpu_lessons import grade as G

SUBMISSIONS = Path(__file__).parent / "submissions"


def write_invalid(folder: Path):
    """make_submissions.write_invalid, loaded by path (tests/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_submissions",
                                                  SUBMISSIONS / "make_submissions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_invalid(folder)

# Generous enough for a loaded 2-core CI machine (kernel start-up alone can take seconds).
CELL_TIMEOUT, NOTEBOOK_TIMEOUT = 4, 30
IDS = ["05.ridge_h100", "05.axpy_bound", "05.kernel_time"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submitted")
    for p in SUBMISSIONS.glob("*.ipynb"):
        shutil.copy(p, folder / p.name)
    write_invalid(folder)
    pids = tmp_path_factory.mktemp("pids")
    out = tmp_path_factory.mktemp("grades") / "grades.csv"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPU_LESSONS_TEST_PIDS", str(pids))
        # The submissions answer chapter 05's three sample questions; grade those alone so the
        # chapter can grow without changing these fixtures.
        from gpu_lessons import questions as Q

        real_load = Q.load
        mp.setattr(Q, "load", lambda number: tuple(
            q for q in real_load(number) if int(number) != 5 or q.id in IDS))
        start = time.monotonic()
        rc = cli.main(["grade", str(folder), "--chapter", "5", "--out", str(out),
                       "--jobs", "2", "--cell-timeout", str(CELL_TIMEOUT),
                       "--timeout", str(NOTEBOOK_TIMEOUT)])
        elapsed = time.monotonic() - start
    data = json.loads(out.with_suffix(".json").read_text("utf-8"))
    with open(out, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    return SimpleNamespace(rc=rc, elapsed=elapsed, data=data, table=table, pids=pids,
                           files=sorted(p.name for p in folder.glob("*.ipynb")),
                           rows={r["file"]: r for r in data["rows"]})


def _points(row):
    return [row["points"][i] for i in IDS]


def test_one_row_per_submission_in_csv_and_json(run):
    files = run.files
    assert len(files) == 10 and run.rc == 0
    assert sorted(run.rows) == files
    assert [r["file"] for r in run.table] == files
    assert list(run.table[0]) == ["file", "student", *IDS, "total", "max", "status", "reason"]
    for line in run.table:
        row = run.rows[line["file"]]
        assert float(line["total"]) == row["total"] == sum(row["points"].values())
        assert float(line["max"]) == row["max"] == 5
        assert line["status"] == row["status"] and row["status"] in G.STATUSES
        assert line["student"] == line["file"].split("_")[0]


def test_whole_run_stays_bounded(run):
    # 10 notebooks on 2 jobs; the slowest (SIGINT ignored) is killed at NOTEBOOK_TIMEOUT.
    assert run.elapsed < 3 * NOTEBOOK_TIMEOUT + 30


def test_correct_submission_gets_full_marks(run):
    row = run.rows["good_05.ipynb"]
    assert (row["status"], _points(row), row["reason"]) == ("ok", [2, 1, 2], "")
    assert all(m.startswith("✓") for m in row["feedback"].values())


def test_untouched_exercise_is_not_attempted(run):
    row = run.rows["stub_05.ipynb"]
    assert (row["status"], row["total"]) == ("ok", 0)
    assert "not attempted: 05.ridge_h100, 05.axpy_bound, 05.kernel_time" in row["reason"]


def test_cells_that_raise_exit_or_flood_output_do_not_stop_grading(run):
    row = run.rows["errors_05.ipynb"]
    assert (row["status"], _points(row)) == ("ok", [2, 1, 2])
    assert "1 (ZeroDivisionError)" in row["reason"] and "2 (SystemExit)" in row["reason"]
    assert "later answers were graded" in row["reason"]


def test_endless_loop_is_interrupted_and_later_answers_count(run):
    row = run.rows["loop_05.ipynb"]
    assert row["status"] == "ok"
    assert f"interrupted after the {CELL_TIMEOUT} s cell limit" in row["reason"]
    # kernel_time hangs on compute-bound inputs: its probe is interrupted too.
    assert _points(row) == [2, 1, 0]
    assert "did not finish" in row["feedback"]["05.kernel_time"]


def test_kernel_ignoring_sigint_is_killed(run):
    row = run.rows["sigint_05.ipynb"]
    assert (row["status"], row["total"]) == ("timeout", 0)
    assert f"code cell 6 ran past the {CELL_TIMEOUT} s cell limit and ignored the interrupt" in row["reason"]
    pid = int((run.pids / "sigint_ignored.pid").read_text())
    for _ in range(50):  # the kill is synchronous; allow the kernel's exit to be reaped
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid), f"kernel {pid} survived the grader"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_dead_kernel_is_recorded_as_crashed(run):
    row = run.rows["osexit_05.ipynb"]
    assert (row["status"], row["total"]) == ("crashed", 0)
    assert "kernel died in code cell 3" in row["reason"]


def test_tampering_changes_nothing(run):
    """check redefined, package functions and references monkeypatched, an always-equal
    answer, a fake "all passed" banner: the grader still sees three wrong answers."""
    row = run.rows["tamper_05.ipynb"]
    assert (row["status"], _points(row)) == ("ok", [0, 0, 0])
    assert row["feedback"]["05.axpy_bound"].startswith("✗")


def test_final_state_counts_not_the_state_at_check_time(run):
    row = run.rows["edited_05.ipynb"]
    # ridge doubled after its check passed -> the sparse-peak mistake; kernel_time replaced
    # by a sum after its check; axpy fixed after its check failed.
    assert _points(row) == [0, 1, 0]
    assert "sparse" in row["feedback"]["05.ridge_h100"]
    assert "adds the compute time and the memory time" in row["feedback"]["05.kernel_time"]
    assert "code cell 7 (CheckFailed)" in row["reason"]


@pytest.mark.parametrize("name, why", [("truncated_05.ipynb", "not valid JSON"),
                                        ("notanotebook_05.ipynb", "not a Jupyter notebook")])
def test_invalid_notebooks_get_a_row(run, name, why):
    row = run.rows[name]
    assert (row["status"], row["total"]) == ("invalid notebook", 0)
    assert why in row["reason"]


# -- pieces that need no kernel ---------------------------------------------------------------

@pytest.mark.parametrize("rel, student", [
    ("alice_05_roofline.ipynb", "alice"), ("bob.ipynb", "bob"),
    ("carol/05_roofline.ipynb", "carol"), ("dave/sub/x.ipynb", "dave"),
    ("_odd.ipynb", "_odd"),
])
def test_student_id_from_the_path(rel, student):
    import re

    assert G._student(rel, re.compile(G.DEFAULT_ID_PATTERN)) == student


def test_custom_id_pattern():
    import re

    assert G._student("05-s1234567-final.ipynb", re.compile(r"^\d+-(s\d+)-")) == "s1234567"


def test_notebook_problems(tmp_path):
    good = tmp_path / "good.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), good)
    assert G._notebook_problem(good) == ""
    for text, why in [("", "not valid JSON"), ("{", "not valid JSON"),
                      ("[]", "no list of cells"), ('{"cells": 3}', "no list of cells")]:
        bad = tmp_path / "bad.ipynb"
        bad.write_text(text)
        assert why in G._notebook_problem(bad)
    binary = tmp_path / "binary.ipynb"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "cannot read" in G._notebook_problem(binary)


def test_fake_payloads_without_the_nonce_are_ignored():
    state = {"observations": {}, "probe_errors": {}}
    fake = json.dumps({"id": "05.ridge_h100",
                       "observation": {"kind": "number", "value": 295.3}})
    G._take_payload("deadbeef" + fake, "0123456789abcdef", {"05.ridge_h100"}, state)
    G._take_payload("0123456789abcdef" + fake, "0123456789abcdef", {"05.axpy_bound"}, state)
    assert state["observations"] == {}
    G._take_payload("noise\n0123456789abcdef" + fake, "0123456789abcdef", {"05.ridge_h100"},
                    state)
    assert state["observations"]["05.ridge_h100"]["value"] == 295.3


def test_malformed_observation_scores_zero_without_losing_the_row():
    from gpu_lessons.questions import load

    plan = G._Plan(tuple(load(5)), {"05.kernel_time": [{"flops": 1.0, "bytes_moved": 1.0,
                                                        "peak_flops": 1.0, "bandwidth": 1.0}]},
                   "n")
    state = {"observations": {"05.ridge_h100": {"kind": "number"},  # no value
                              "05.kernel_time": {"kind": "function", "outputs": [7]}}}
    row = G._row(plan, "x.ipynb", "x", state, "ok", "")
    assert row.total == 0 and "malformed" in row.feedback["05.ridge_h100"]


def test_grades_to_csv_round_trips():
    row = G.Row("a_05.ipynb", "a", {"05.x": 2.0, "05.y": 0.5}, 2.5, 3.0, "ok", "note, with comma")
    grades = G.Grades(5, ("05.x", "05.y"), (row,))
    (line,) = list(csv.DictReader(grades.to_csv().splitlines()))
    assert line == {"file": "a_05.ipynb", "student": "a", "05.x": "2", "05.y": "0.5",
                    "total": "2.5", "max": "3", "status": "ok", "reason": "note, with comma"}
    assert json.loads(grades.to_json())["rows"][0]["points"] == {"05.x": 2.0, "05.y": 0.5}
    assert "<table>" in grades._repr_html_() and "2.5/3" in repr(grades)


def test_bad_arguments_are_refused_before_running_anything(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"no \.ipynb files"):
        G.grade(tmp_path)
    nb = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), nb)
    with pytest.raises(ValueError, match="cell_timeout must be > 0"):
        G.grade(tmp_path, chapter=5, cell_timeout=0)
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        G.grade(tmp_path, chapter=5, jobs=0)
    with pytest.raises(ValueError, match="chapter must be one of"):
        G.grade(tmp_path, chapter=12)
    with pytest.raises(ValueError, match="pass --chapter"):
        G.grade(tmp_path)  # no chapter in the metadata
    monkeypatch.setattr("gpu_lessons.questions.load", lambda number: ())  # a chapter with none
    with pytest.raises(ValueError, match="no questions to grade"):
        G.grade(tmp_path, chapter=7)
    assert cli.main(["grade", str(tmp_path / "missing")]) == 2


def test_chapter_comes_from_the_notebooks_metadata(tmp_path):
    for name, chapter in (("a.ipynb", 5), ("b.ipynb", 5)):
        nb = nbformat.v4.new_notebook()
        nb.metadata["gpu_lessons"] = {"chapter": chapter}
        nbformat.write(nb, tmp_path / name)
    assert G._chapter_from(sorted(tmp_path.glob("*.ipynb"))) == 5
    nb = nbformat.v4.new_notebook()
    nb.metadata["gpu_lessons"] = {"chapter": 1}
    nbformat.write(nb, tmp_path / "c.ipynb")
    with pytest.raises(ValueError, match="pass --chapter"):
        G._chapter_from(sorted(tmp_path.glob("*.ipynb")))


def test_probe_cells_read_values_first_then_one_function_per_cell(tmp_path):
    from gpu_lessons.questions import load

    plan = G._Plan.make(tuple(q for q in load(5) if q.id in IDS), 0)
    cells = plan.for_worker(5, "python3")["cells"]
    assert [[item["id"] for item in group] for group in cells] == [
        ["05.ridge_h100", "05.axpy_bound"], ["05.kernel_time"]]
    assert cells[0][0]["cases"] is None and len(cells[1][0]["cases"]) >= 100
    for group in cells:
        compile(G._probe_source(group, plan.nonce, str(tmp_path)), "<probe>", "exec")


def test_probe_reads_answers_despite_shadowed_builtins(tmp_path, capsys):
    """Run a probe cell's code in a namespace that shadows builtins, as a careless notebook
    might (``list = [...]``, ``type = ...``, ``json = None``, ``globals = ...``)."""
    from gpu_lessons.questions import load

    plan = G._Plan.make(tuple(q for q in load(5) if q.id in IDS), 0)
    user = {"__builtins__": __builtins__, "list": [1], "type": "x", "json": None, "float": int,
            "globals": lambda: {}, "print": None, "isinstance": None, "callable": None,
            "ridge_h100": 295.3, "axpy_bound": "memory-bound",
            "kernel_time": lambda flops, bytes_moved, peak_flops, bandwidth:
            max(flops / peak_flops, bytes_moved / bandwidth)}
    for group in plan.for_worker(5, "python3")["cells"]:
        exec(G._probe_source(group, plan.nonce, str(tmp_path)), user)
    state = {"probe_cells": [["05.ridge_h100", "05.axpy_bound"], ["05.kernel_time"]]}
    G._read_probe_files(tmp_path, plan.nonce, state)
    row = G._row(plan, "x.ipynb", "x", state, "ok", "")
    assert row.points == {"05.ridge_h100": 2.0, "05.axpy_bound": 1.0, "05.kernel_time": 2.0}


def test_same_file_name_in_two_folders_keeps_two_rows(tmp_path):
    # Invalid notebooks are graded without starting a kernel, so this runs in milliseconds.
    paths = []
    for who in ("ann", "ben"):
        (tmp_path / who).mkdir()
        paths.append(tmp_path / who / "05_roofline.ipynb")
        paths[-1].write_text("{oops")
    grades = G.grade(paths, chapter=5, out=tmp_path / "out" / "grades.csv")
    assert [(r.file, r.student, r.status) for r in grades.rows] == [
        ("ann/05_roofline.ipynb", "ann", "invalid notebook"),
        ("ben/05_roofline.ipynb", "ben", "invalid notebook")]
    assert (tmp_path / "out" / "grades.json").exists()


def test_bad_id_pattern_is_refused(tmp_path):
    nb = tmp_path / "a.ipynb"
    nb.write_text("{oops")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        G.grade(tmp_path, chapter=5, id_pattern="(")
