"""The instructor's grader on adversarial and hostile submissions, in one sandboxed run.

The notebooks in tests/submissions/ (written by make_submissions.py there) answer the three
chapter-05 sample questions: 05.ridge_h100 (2 points), 05.axpy_bound (1), 05.kernel_time (2),
so a full score is 5.  One grading run over all of them (the honest, the broken, the cheating
and the hostile: spies, daemons, plants, package rewrites, killers, floods, fork bombs, and
files whose names or sizes attack the grader), two jobs, 4 s per cell, 30 s per notebook, is
shared by the tests below; it takes one to three minutes on two cores.  Around it the tests
record what must not change: the installed package, the submissions, the processes.

Needs bubblewrap; skipped where it is missing, except when GPU_LESSONS_REQUIRE_SANDBOX=1 (CI).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import os
import shutil
import site
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_lessons import cli
from gpu_lessons.grading import STATUSES, grade, output, sandbox

SUBMISSIONS = Path(__file__).resolve().parents[1] / "submissions"
PACKAGE = Path(sandbox.__file__).resolve().parents[1]
WHY = sandbox.unavailable()
if WHY and os.environ.get("GPU_LESSONS_REQUIRE_SANDBOX") == "1":
    raise RuntimeError(f"GPU_LESSONS_REQUIRE_SANDBOX=1 but {WHY}")
needs_sandbox = pytest.mark.skipif(bool(WHY), reason=WHY or "sandbox available")

# Generous enough for a loaded 2-core CI machine (kernel start-up alone can take seconds).
CELL_TIMEOUT, NOTEBOOK_TIMEOUT = 4, 30
IDS = ["05.ridge_h100", "05.axpy_bound", "05.kernel_time"]
# Graded alone as well: the hostile notebooks must not change their scores.
HONEST = ["good_05.ipynb", "edited_05.ipynb", "stub_05.ipynb", "tamper_05.ipynb"]


def make_submissions():
    """tests/submissions/make_submissions.py, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("make_submissions",
                                                  SUBMISSIONS / "make_submissions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chapter5_samples(monkeypatch):
    """Grade chapter 05's three sample questions alone, so the chapter can grow."""
    from gpu_lessons import questions as Q

    real_load = Q.load
    monkeypatch.setattr(Q, "load", lambda number: tuple(
        q for q in real_load(number) if int(number) != 5 or q.id in IDS))


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (links by their target), by relative path."""
    found = {}
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(here) / name
            if path.is_symlink():
                found[str(path.relative_to(folder))] = "-> " + os.readlink(path)
                continue
            if not path.is_file():  # a named pipe: opening it would wait for a writer
                found[str(path.relative_to(folder))] = "not a regular file"
                continue
            with open(path, "rb") as f:
                found[str(path.relative_to(folder))] = hashlib.file_digest(f, "sha256").hexdigest()
    return found


def installed() -> dict[str, dict[str, str]]:
    return {str(p): digest(Path(p)) for p in {str(PACKAGE), *site.getsitepackages()}}


def leftovers(marker: str) -> list[str]:
    """Live processes carrying ``marker`` in their environment or command line, or (as root)
    running as one of the user ids this process's sandboxes get.  (Other grading runs on the
    machine, with markers and user ids of their own, are not counted.)"""
    ours = sandbox.uid_range()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie is gone, its parent has not read its status yet
            blob = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
            uid = int((proc / "status").read_text().split("Uid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
        if int(proc.name) == os.getpid():
            continue
        if marker.encode() in blob or uid in ours:
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if WHY:
        pytest.skip(WHY)
    make = make_submissions()
    folder = tmp_path_factory.mktemp("submitted")
    for p in SUBMISSIONS.glob("*.ipynb"):
        shutil.copy(p, folder / p.name)
    make.write_invalid(folder)
    odd = make.write_hostile_files(folder)
    before_submissions = digest(folder)
    before_install = installed()
    out_dir = tmp_path_factory.mktemp("grades")
    out, feedback = out_dir / "grades.csv", out_dir / "feedback"
    marker = f"gpu-lessons-test-{uuid.uuid4().hex}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(sandbox.MARKER_VARIABLE, marker)
        chapter5_samples(mp)
        rc = cli.main(["grade", str(folder), "--chapter", "5", "--out", str(out),
                       "--feedback", str(feedback), "--jobs", "2", "--no-puzzles",
                       "--cell-timeout", str(CELL_TIMEOUT), "--timeout", str(NOTEBOOK_TIMEOUT)])
        survivors = leftovers(marker)
        written = {p: p.read_bytes() for p in (out, out.with_suffix(".json"))}
        time.sleep(3)  # a daemon that escaped would rewrite the grades now
        later = {p: p.read_bytes() if p.exists() else None for p in written}
        alone_dir = tmp_path_factory.mktemp("alone")
        for name in HONEST:
            shutil.copy(SUBMISSIONS / name, alone_dir / name)
        alone = grade(alone_dir, chapter=5, jobs=2, cell_timeout=CELL_TIMEOUT,
                      timeout=NOTEBOOK_TIMEOUT, puzzles=())
    data = json.loads(written[out.with_suffix(".json")])
    with open(out, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    return SimpleNamespace(
        rc=rc, data=data, table=table, header=table[0],
        lines=[dict(zip(table[0], line, strict=True)) for line in table[1:]],
        files=sorted(p.name for p in folder.glob("*.ipynb")), odd=odd,
        rows={r["file"]: r for r in data["rows"]}, survivors=survivors, written=written,
        later=later, alone={r.file: r for r in alone.rows}, feedback=feedback,
        submissions_changed=before_submissions != digest(folder),
        install_before=before_install, install_after=installed())


def _points(row):
    return [row["points"][i] for i in IDS]


def _row(run, name):
    return run.rows[name]


# -- the run as a whole ---------------------------------------------------------------------------

@needs_sandbox
def test_every_submission_has_one_row_in_csv_and_json(run):
    from gpu_lessons.grading.untrusted import clean

    assert run.rc == 0
    assert len(run.files) == len(run.rows) >= 25
    assert sorted(run.rows) == sorted(clean(f) for f in run.files)
    assert run.header == ["file", "student", *IDS, "total", "max", "status", "reason"]
    assert len(run.lines) == len(run.files)
    for row in run.data["rows"]:
        assert row["status"] in STATUSES and row["max"] == 5
        assert row["total"] == sum(row["points"].values())
        if row["status"] != "ok":
            assert row["reason"], row


@needs_sandbox
def test_no_process_survives_the_run(run):
    assert run.survivors == []


@needs_sandbox
def test_grades_are_complete_and_unchanged_after_the_run(run):
    assert run.later == run.written
    assert sum(1 for _ in run.lines) == len(run.files)
    leftovers = [p.name for p in run.feedback.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # no temporary files left by the atomic writes


@needs_sandbox
def test_installed_package_and_submissions_are_unchanged(run):
    assert run.install_after == run.install_before
    assert not run.submissions_changed


@needs_sandbox
def test_honest_scores_equal_their_scores_graded_alone(run):
    for name in HONEST:
        row, alone = run.rows[name], run.alone[name]
        assert (row["status"], row["points"], row["reason"]) == (
            alone.status, alone.points, alone.reason), name
        assert row["feedback"] == alone.feedback


@needs_sandbox
def test_csv_has_no_formula_cells(run):
    for line in run.table:
        for cell in line:
            assert not cell.startswith(output.FORMULA_START), cell
    students = {line["student"] for line in run.lines}
    assert {"'=1+2", "'@SUM(A1)", "'+cmd|' calc'!A0", "'-2+3", " Tab", "bell "} <= students


@needs_sandbox
def test_one_feedback_file_per_student(run):
    files = sorted(p.name for p in run.feedback.iterdir())
    assert len(files) == len(run.files) and "good.md" in files
    good = (run.feedback / "good.md").read_text("utf-8")
    assert "**5 / 5 points**" in good and "correct on all" in good
    edited = (run.feedback / "edited.md").read_text("utf-8")
    assert "sparse" in edited
    assert "## Question 05\\.ridge\\_h100 — not correct (0 points)" in edited
    assert "147" not in edited  # the feedback never gives the answer


# -- what each submission gets ---------------------------------------------------------------------

@needs_sandbox
def test_correct_submission_gets_full_marks(run):
    row = _row(run, "good_05.ipynb")
    assert (row["status"], _points(row), row["reason"]) == ("ok", [2, 1, 2], "")
    assert all(m.startswith("✓") for m in row["feedback"].values())


@needs_sandbox
def test_untouched_exercise_is_not_attempted(run):
    row = _row(run, "stub_05.ipynb")
    assert (row["status"], row["total"]) == ("ok", 0)
    assert "not attempted: 05.ridge_h100, 05.axpy_bound, 05.kernel_time" in row["reason"]


@needs_sandbox
def test_cells_that_raise_exit_or_flood_output_do_not_stop_grading(run):
    row = _row(run, "errors_05.ipynb")
    assert (row["status"], _points(row)) == ("ok", [2, 1, 2])
    assert "1 (ZeroDivisionError)" in row["reason"] and "2 (SystemExit)" in row["reason"]
    assert "later answers were graded" in row["reason"]


@needs_sandbox
def test_endless_loop_is_interrupted_and_later_answers_count(run):
    row = _row(run, "loop_05.ipynb")
    assert row["status"] == "ok"
    assert f"interrupted after the {CELL_TIMEOUT} s cell limit" in row["reason"]
    # kernel_time hangs on compute-bound inputs: its probe is interrupted too.
    assert _points(row) == [2, 1, 0]
    assert "did not finish" in row["feedback"]["05.kernel_time"]


@needs_sandbox
def test_kernel_ignoring_sigint_is_killed(run):
    row = _row(run, "sigint_05.ipynb")
    assert (row["status"], row["total"]) == ("timeout", 0)
    assert (f"code cell 6 ran past the {CELL_TIMEOUT} s cell limit and ignored the interrupt"
            in row["reason"])


@needs_sandbox
def test_dead_kernel_is_recorded_as_crashed(run):
    row = _row(run, "osexit_05.ipynb")
    assert (row["status"], row["total"]) == ("crashed", 0)
    assert "kernel died in code cell 3" in row["reason"]


@needs_sandbox
def test_tampering_in_its_own_kernel_changes_nothing(run):
    """check redefined, package functions and references monkeypatched, an always-equal
    answer, a fake "all passed" banner: the grader still sees three wrong answers."""
    row = _row(run, "tamper_05.ipynb")
    assert (row["status"], _points(row)) == ("ok", [0, 0, 0])
    assert row["feedback"]["05.axpy_bound"].startswith("✗")


@needs_sandbox
def test_final_state_counts_not_the_state_at_check_time(run):
    row = _row(run, "edited_05.ipynb")
    # ridge doubled after its check passed -> the sparse-peak mistake; kernel_time replaced
    # by a sum after its check; axpy fixed after its check failed.
    assert _points(row) == [0, 1, 0]
    assert "sparse" in row["feedback"]["05.ridge_h100"]
    assert "adds the compute time and the memory time" in row["feedback"]["05.kernel_time"]
    assert "code cell 7 (CheckFailed)" in row["reason"]


@needs_sandbox
@pytest.mark.parametrize("name, why", [("truncated_05.ipynb", "not valid JSON"),
                                        ("notanotebook_05.ipynb", "not a Jupyter notebook"),
                                        ("huge_05.ipynb", "larger than 32 MiB"),
                                        ("deep_05.ipynb", "nested deeper than 64"),
                                        ("link_05.ipynb", "symbolic link"),
                                        ("pipe_05.ipynb", "not a regular file"),
                                        ("latin _05.ipynb", "not valid JSON"),
                                        ("=1+2_05.ipynb", "not valid JSON")])
def test_invalid_notebooks_get_a_row(run, name, why):
    row = _row(run, name)
    assert (row["status"], row["total"]) == ("invalid notebook", 0)
    assert why in row["reason"]


# -- the hostile ones ------------------------------------------------------------------------------

@needs_sandbox
def test_a_lone_surrogate_in_an_answer_does_not_stop_the_grades_being_written(run):
    """Its error message reaches the grader as JSON's "\\ud800", which no UTF-8 file holds:
    writing grades.json and the feedback once failed for the whole class on it."""
    row = _row(run, "surrogate_05.ipynb")
    assert (row["status"], _points(row)) == ("ok", [2, 1, 0])
    assert "raised ValueError" in row["feedback"]["05.kernel_time"]
    assert "no UTF-8 file can hold this" in row["feedback"]["05.kernel_time"]
    assert (run.feedback / "surrogate.md").exists()


@needs_sandbox
def test_intruder_finds_nothing_to_harm_and_is_graded_normally(run):
    """It searched /proc and the disk for classmates' notebooks and the grades, rewrote the
    package, planted .pth files and forged answers in /tmp and left a daemon: none of it
    reached anything (the tests above check the package, the submissions, the processes and
    the grades), and its own answers count."""
    row = _row(run, "intruder_05.ipynb")
    assert (row["status"], _points(row), row["reason"]) == ("ok", [2, 1, 2], "")


@needs_sandbox
def test_killing_everything_in_reach_only_ends_its_own_sandbox(run):
    row = _row(run, "killer_05.ipynb")
    assert (row["status"], row["total"]) == ("crashed", 0)
    assert "was killed (SIGKILL) in code cell 6" in row["reason"]


@needs_sandbox
def test_filling_disks_and_memory_stays_inside_its_limits(run):
    row = _row(run, "fill_05.ipynb")
    assert (row["status"], _points(row)) == ("ok", [2, 1, 2])


@needs_sandbox
def test_fork_bomb_is_stopped_by_the_process_limit(run):
    row = _row(run, "forkbomb_05.ipynb")
    # The children fill the process limit or the sandbox's memory allowance (250 forked
    # kernels hold a lot of page tables); the kernel still answers (or, if it cannot, the
    # reason says which limit was reached).  Either way nothing survives (test above).
    assert row["status"] in ("ok", "timeout", "crashed")
    if row["status"] != "ok":  # whichever binds first: the task limit or the memory cap
        assert "its limit is" in row["reason"] or "memory allowance" in row["reason"], \
            row["reason"]


@needs_sandbox
@pytest.mark.parametrize("name", ["flood_05.ipynb", "deepjson_05.ipynb", "pgid_05.ipynb"])
def test_the_result_channel_is_out_of_the_kernel_s_reach(run, name):
    """These once reached the worker's result pipe with pidfd_getfd and wrote forged or
    flooded lines (then judged 'invalid result'); the seccomp filter refuses pidfd_getfd,
    so the attack cell fails and the answers before it are graded as usual.  What the
    grader does with such lines is tested in test_grade_units.py and test_grade_journal.py."""
    row = _row(run, name)
    assert (row["status"], row["total"]) == ("ok", 5), row
    assert "OSError" in row["reason"] or "PermissionError" in row["reason"], row["reason"]


@needs_sandbox
def test_interrupted_run_kills_its_sandboxes_and_writes_what_it_has(tmp_path, monkeypatch):
    chapter5_samples(monkeypatch)
    marker = f"gpu-lessons-test-{uuid.uuid4().hex}"
    monkeypatch.setenv(sandbox.MARKER_VARIABLE, marker)
    shutil.copy(SUBMISSIONS / "sigint_05.ipynb", tmp_path / "a_05.ipynb")
    (tmp_path / "b_05.ipynb").write_text("{oops")
    out = tmp_path / "out" / "grades.csv"

    def interrupt(row):  # the invalid notebook's row comes first: Ctrl-C then
        time.sleep(2)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grade(tmp_path, chapter=5, out=out, jobs=2, timeout=NOTEBOOK_TIMEOUT, puzzles=(),
              progress=interrupt)
    assert leftovers(marker) == []
    rows = {r["file"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert rows["b_05.ipynb"]["status"] == "invalid notebook"
    assert rows["a_05.ipynb"]["status"] == "not graded"
    assert "interrupted" in rows["a_05.ipynb"]["reason"]


# -- without a sandbox ---------------------------------------------------------------------------------

def test_no_sandbox_grades_trusted_notebooks(tmp_path, monkeypatch, capsys):
    chapter5_samples(monkeypatch)
    for name in ("good_05.ipynb", "stub_05.ipynb"):
        shutil.copy(SUBMISSIONS / name, tmp_path / name)
    out = tmp_path / "g" / "grades.csv"
    assert cli.main(["grade", str(tmp_path), "--out", str(out), "--no-sandbox", "--jobs", "2",
                     "--no-puzzles",
                     "--cell-timeout", str(CELL_TIMEOUT), "--timeout",
                     str(NOTEBOOK_TIMEOUT)]) == 0
    assert "--no-sandbox: without a sandbox" in capsys.readouterr().err
    rows = {r["file"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert (rows["good_05.ipynb"]["total"], rows["stub_05.ipynb"]["total"]) == ("5", "0")


# -- puzzles ----------------------------------------------------------------------------------------

def worked_kernel(name: str) -> str:
    """A worked kernel's source from solutions/puzzle_kernels.py (with what it sets above it)."""
    import ast

    path = Path(__file__).resolve().parents[2] / "solutions" / "puzzle_kernels.py"
    text = path.read_text("utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(text, node)
    raise LookupError(name)


@needs_sandbox
def test_puzzle_kernels_are_judged_from_their_source_in_a_sandbox_of_their_own(tmp_path):
    """The probe sends each kernel's source, the numbers it names and the launch it chose; a
    second sandbox validates and judges it with gpu_lessons.puzzles."""
    import nbformat

    from gpu_lessons.grading import Puzzle

    def notebook(name, *cells):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nbformat.write(nb, tmp_path / name)

    occupancy = worked_kernel("occupancy_kernel")
    notebook("ann_02.ipynb", "import numpy as np", worked_kernel("map_kernel"),
             "BLOCK = 256", occupancy)
    notebook("ben_02.ipynb", "OFFSET = 1\n\ndef map_kernel(t, a, out):\n"
             "    i = t.thread_idx.x\n    out[i] = a[i] + OFFSET\n",
             "BLOCK = 32", occupancy)
    notebook("cat_02.ipynb", "def map_kernel(t, a, out):\n    import os\n"
             "    out[t.thread_idx.x] = a[t.thread_idx.x] + 10\n",
             "def occupancy_kernel(t, x, out, n):\n    raise NotImplementedError\n")
    # correct, every coalescing budget met, but thread 0 does the block's work alone
    notebook("dan_02.ipynb", "def map_kernel(t, a, out):\n"
             "    with t.if_(t.thread_idx.x == 0):\n"
             "        for i in range(len(a)):\n"
             "            out[i] = a[i] + 10\n")
    grades = grade(tmp_path, questions_for=lambda s: (), jobs=2, cell_timeout=CELL_TIMEOUT,
                   timeout=NOTEBOOK_TIMEOUT,
                   puzzles=(Puzzle("map", "map_kernel", 2),
                            Puzzle("occupancy", "occupancy_kernel", 3, ("block",))))
    ann, ben, cat, dan = grades.rows
    assert grades.columns == ("puzzle:map", "puzzle:occupancy")
    assert (ann.status, ann.points, ann.max) == ("ok", {"puzzle:map": 2, "puzzle:occupancy": 3}, 5)
    assert ann.feedback["puzzle:map"].startswith("✓")
    assert ben.points == {"puzzle:map": 0, "puzzle:occupancy": 0}
    # a wrong element (OFFSET = 1 arrived with the source), a block size the learner chose
    # that keeps too few warps resident, a construct outside the kernel language, a stub
    assert ben.feedback["puzzle:map"].startswith("✗ map: out[0] is")
    assert "occupancy on an H100 (CC 9.0): 50 %" in ben.feedback["puzzle:occupancy"]
    assert "line 2: `import os` is not part of the kernel language" in cat.feedback["puzzle:map"]
    assert cat.feedback["puzzle:occupancy"].startswith("… occupancy: not attempted")
    assert cat.reason == "not attempted: puzzle:occupancy"
    assert dan.points == {"puzzle:map": 0, "puzzle:occupancy": 0}
    assert "correct, but instructions issued by the busiest warp" in dan.feedback["puzzle:map"]


def test_the_submissions_on_disk_are_what_make_submissions_writes(tmp_path):
    make = make_submissions()
    written = make.write_all(tmp_path)
    kept = [*SUBMISSIONS.glob("*.ipynb"), *SUBMISSIONS.glob("breaches/*.ipynb")]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(
        p.relative_to(SUBMISSIONS).as_posix() for p in kept)
    for path in written:
        rel = path.relative_to(tmp_path)
        assert path.read_text("utf-8") == (SUBMISSIONS / rel).read_text("utf-8"), rel


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
