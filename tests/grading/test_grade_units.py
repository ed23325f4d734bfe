"""The grader's pieces that need no kernel: parsing untrusted output, writing results, the
probe module, reading submissions, the command line.  Fast; no sandbox needed."""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from gpu_lessons import cli
from gpu_lessons.grading import output, plan, probe, rows, submissions, untrusted
from gpu_lessons.grading.results import Grades, Row
from gpu_lessons.grading.sandbox import Outcome

PACKAGE = Path(probe.__file__).resolve().parents[1]
IDS = ["05.ridge_h100", "05.axpy_bound", "05.kernel_time"]


def chapter5():
    from gpu_lessons.questions import load

    return tuple(q for q in load(5) if q.id in IDS)


# -- the probe module: standard library only ---------------------------------------------------

def test_probe_module_imports_only_the_standard_library():
    tree = ast.parse(Path(probe.__file__).read_text("utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import in the probe module"
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_probe_module_runs_with_the_package_out_of_reach(tmp_path):
    """Import the file by path in a fresh interpreter where importing gpu_lessons fails."""
    code = (
        "import sys, importlib.abc, importlib.util\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('gpu_lessons', 'numpy'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"spec = importlib.util.spec_from_file_location('probe', {str(probe.__file__)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(m.observe(3.5), m.probe(lambda x: x * 2, [{'x': 2}]))\n"
        "assert not any(k.startswith('gpu_lessons') for k in sys.modules)\n")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "{'kind': 'number', 'value': 3.5}" in done.stdout
    assert "[{'ok': {'kind': 'number', 'value': 4}}]" in done.stdout


def test_checks_use_the_probe_module():
    from gpu_lessons import checks

    assert checks.observe is probe.observe and checks.probe is probe.probe


def test_answers_that_lie_are_described_by_what_they_hold():
    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

        def __float__(self):
            return 295.3

    class Array:
        shape = (2,)

        def __array__(self, *a, **k):
            raise RuntimeError("no")

        def tolist(self):
            return [1, 2]

    assert probe.observe(Liar(1.0)) == {"kind": "number", "value": 1.0}
    assert probe.observe(Array()) == {"kind": "seq", "items": [
        {"kind": "number", "value": 1}, {"kind": "number", "value": 2}]}


def test_kernel_answer_sends_source_and_plain_globals():
    namespace = {"TILE": 16, "SCALE": 0.5, "FLAG": True, "big": object(), "name": "x"}
    code = ("def my_kernel(t, a, out, n):\n"
            "    i = t.block_idx.x * TILE + t.thread_idx.x\n"
            "    if FLAG:\n"
            "        out[i] = a[i] * SCALE + len(name) + big\n")
    exec(compile(code, "<cell>", "exec"), namespace)
    import linecache

    linecache.cache["<cell>"] = (len(code), None, code.splitlines(True), "<cell>")
    found = probe.kernel_answer(namespace["my_kernel"], namespace)
    assert found["kind"] == "kernel" and found["name"] == "my_kernel"
    assert found["source"] == code and found["truncated"] is False
    assert found["globals"] == {"FLAG": True, "SCALE": 0.5, "TILE": 16}
    assert untrusted.observation(found) is found
    assert probe.kernel_answer(..., namespace) == {"kind": "ellipsis"}


def test_probe_reads_answers_despite_shadowed_builtins(tmp_path):
    """Run a probe cell in a namespace that shadows builtins, as a careless notebook might."""
    p = plan.Plan.make(chapter5(), 0)
    user = {"__builtins__": __builtins__, "list": [1], "type": "x", "json": None, "float": int,
            "globals": lambda: {}, "print": None, "isinstance": None, "callable": None,
            "ridge_h100": 147.7, "axpy_bound": "memory-bound",
            "kernel_time": lambda flops, bytes_moved, peak_flops, bandwidth:
            max(flops / peak_flops, bytes_moved / bandwidth)}
    for group in p.probe_groups():
        exec(plan.probe_cell(group, p.nonce, str(tmp_path)), user)
    lines = []
    for qid in IDS:
        text = (tmp_path / f"{qid}.json").read_text()
        assert text.startswith(p.nonce)
        lines.append((0.0, json.dumps({"event": "answer", "id": qid,
                                       "observation": json.loads(text[len(p.nonce):])[
                                           "observation"]}).encode()))
    report = rows.Report.read([*lines, (0.0, b'{"event": "end", "status": "ok"}')], p, 0)
    row = rows.make_row(p, "x.ipynb", "x", report, "ok", "")
    assert row.points == {"05.ridge_h100": 2.0, "05.axpy_bound": 1.0, "05.kernel_time": 2.0}


def test_probe_groups_read_values_first_then_one_function_per_cell():
    p = plan.Plan.make(chapter5(), 0, (plan.Puzzle("transpose", "transpose_kernel"),))
    groups = p.probe_groups()
    assert [[item["id"] for item in g] for g in groups] == [
        ["05.ridge_h100", "05.axpy_bound", "puzzle:transpose"], ["05.kernel_time"]]
    assert groups[0][2]["kind"] == "kernel" and len(groups[1][0]["cases"]) >= 100
    work = p.worker_plan(["1 + 1"], cell_timeout=5, kernel="python3")
    for cell in work["probes"]:
        compile(cell["source"], "<probe>", "exec")
        assert cell["source"].startswith(plan.PROBE_MARK)
    assert p.columns == ("05.ridge_h100", "05.axpy_bound", "05.kernel_time", "puzzle:transpose")
    assert p.max_points == 6


# -- untrusted output ---------------------------------------------------------------------------

def test_deep_json_is_invalid_not_a_crash():
    for line in (b"[" * 200_000, b"[" * 200_000 + b"]" * 200_000, b"[" * 40 + b"]" * 40,
                 b'{"a":' * 50 + b"1" + b"}" * 50):
        with pytest.raises(untrusted.Invalid, match="nested deeper"):
            untrusted.parse_line(line)
    assert untrusted.parse_line(b"[" * 20 + b"]" * 20) is not None
    with pytest.raises(untrusted.Invalid, match="not UTF-8"):
        untrusted.parse_line(b"\xff\xfe")
    with pytest.raises(untrusted.Invalid, match="not valid JSON"):
        untrusted.parse_line(b"1" * 5000)  # an int longer than Python converts


@pytest.mark.parametrize("event, why", [
    ({"event": "kernel", "kernel_pgid": 1}, "unknown kind or shape"),
    ({"kernel_pgid": 1, "status": "ok", "finished": True}, "not an event"),
    ({"event": "cell", "index": 99}, "does not exist"),
    ({"event": "cell", "index": True}, "does not exist"),
    ({"event": "answer", "id": "05.other", "observation": {"kind": "none"}}, "not asked"),
    ({"event": "answer", "id": "05.ridge_h100", "observation": {"kind": "number",
                                                                 "value": "295"}}, "malformed"),
    ({"event": "answer", "id": "05.ridge_h100",
      "observation": {"kind": "seq", "items": [{"kind": "bogus"}]}}, "malformed"),
    ({"event": "end", "status": "ok", "pid": 1}, "unknown kind or shape"),
    ({"event": "end", "status": "great"}, "unknown status"),
    ({"event": "exec", "code": "import os"}, "unknown kind"),
])
def test_events_that_the_worker_never_writes_are_invalid(event, why):
    with pytest.raises(untrusted.Invalid, match=why):
        untrusted.event(event, n_cells=5, wanted={"05.ridge_h100"})


def test_a_forged_line_voids_the_whole_result():
    p = plan.Plan.make(chapter5(), 0)
    good = json.dumps({"event": "answer", "id": "05.ridge_h100",
                       "observation": {"kind": "number", "value": 147.7}}).encode()
    lines = [(0.0, good), (0.1, good), (0.2, b'{"event": "end", "status": "ok"}')]
    report = rows.Report.read(lines, p, 3)
    assert "two answers" in report.invalid
    outcome = Outcome(0, False, tuple(lines), "", "", 1.0)
    status, reason = rows.status_and_reason(report, outcome, 5, 30)
    row = rows.make_row(p, "x.ipynb", "x", report, status, reason)
    assert (row.status, row.total) == ("invalid result", 0)
    assert "nothing from it was graded" in row.reason


def test_malformed_observation_scores_zero_without_losing_the_row():
    p = plan.Plan.make(chapter5(), 0)
    report = rows.Report(3, [])
    report.answers = {"05.ridge_h100": {"kind": "number"},
                      "05.kernel_time": {"kind": "function", "outputs": [7]}}
    row = rows.make_row(p, "x.ipynb", "x", report, "ok", "")
    assert row.total == 0 and "malformed" in row.feedback["05.ridge_h100"]
    assert "malformed" in row.feedback["05.kernel_time"]


def test_clean_removes_control_and_direction_characters():
    assert untrusted.clean("a\nb\rc\td\x07e\u202eevil\u2066") == "a b c d e evil "
    assert untrusted.clean("x" * 500, 10) == "x" * 9 + "…"


# -- writing results ------------------------------------------------------------------------------

def test_csv_cells_cannot_start_a_formula():
    row = Row("=HYPERLINK(\"http://x\")_05.ipynb", "=HYPERLINK(\"http://x\")", {"05.x": 2.0},
              2.0, 3.0, "ok", "@SUM(A1) and more")
    others = [Row(f"{c}x.ipynb", f"{c}x", {"05.x": 0.0}, 0.0, 3.0, "ok", f"{c}1+1")
              for c in ("+", "-", "\t", "\r")]
    grades = Grades(5, ("05.x",), (row, *others))
    table = list(csv.reader(grades.to_csv().splitlines()))
    assert table[1][:2] == ["'=HYPERLINK(\"http://x\")_05.ipynb", "'=HYPERLINK(\"http://x\")"]
    assert table[1][-1] == "'@SUM(A1) and more"
    for line in table:
        for cell in line:
            assert not cell.startswith(output.FORMULA_START), cell


def test_grades_round_trip_through_csv_and_json():
    row = Row("a_05.ipynb", "a", {"05.x": 2.0, "05.y": 0.5}, 2.5, 3.0, "ok", "note, with comma")
    grades = Grades(5, ("05.x", "05.y"), (row,))
    (line,) = list(csv.DictReader(grades.to_csv().splitlines()))
    assert line == {"file": "a_05.ipynb", "student": "a", "05.x": "2", "05.y": "0.5",
                    "total": "2.5", "max": "3", "status": "ok", "reason": "note, with comma"}
    assert json.loads(grades.to_json())["rows"][0]["points"] == {"05.x": 2.0, "05.y": 0.5}
    assert "<table>" in grades._repr_html_() and "2.5/3" in repr(grades)


def test_feedback_files_one_per_student(tmp_path):
    rows_ = (Row("ann_05.ipynb", "ann", {"05.x": 2.0, "puzzle:reduce": 0.0}, 2.0, 3.0, "ok", "",
                 {"05.x": "✓ 05.x: correct (2 points)",
                  "puzzle:reduce": "✗ puzzle reduce: <b>race</b> on line 4"}),
             Row("ann/b.ipynb", "ann", {"05.x": 0.0}, 0.0, 3.0, "timeout", "cell 3 looped",
                 {"05.x": "… 05.x: not attempted yet"}),
             Row("x.ipynb", "../../etc/passwd", {}, 0.0, 3.0, "invalid notebook", "no", {}))
    written = output.write_all(Grades(5, ("05.x", "puzzle:reduce"), rows_), tmp_path / "g.csv",
                               feedback=tmp_path / "fb")
    names = sorted(p.name for p in (tmp_path / "fb").iterdir())
    assert names == ["ann-2.md", "ann.md", "etc_passwd-3754d6cb.md"] and len(written) == 5
    text = (tmp_path / "fb" / "ann.md").read_text("utf-8")
    assert "**2 / 3 points**" in text and "## Question 05\\.x — correct (2 points)" in text
    assert "## Puzzle reduce — not correct (0 points)" in text
    assert "&lt;b&gt;race&lt;/b&gt;" in text
    assert "not attempted" in (tmp_path / "fb" / "ann-2.md").read_text("utf-8")


def test_a_classmate_cannot_take_another_student_s_feedback_file_name():
    """ "alice." (from alice._05.ipynb, which sorts before alice_05.ipynb) and "ALICE" made the
    same file name as "alice"; coming first, they took alice.md and alice got alice-2.md."""
    def row(file, student):
        return Row(file, student, {}, 0.0, 1.0, "ok", "")

    def tag(student):
        return hashlib.sha256(student.encode()).hexdigest()[:8]

    names = output.feedback_names([row("alice._05.ipynb", "alice."), row("ALICE_05.ipynb", "ALICE"),
                                   row("alice_05.ipynb", "alice"), row("bob_05.ipynb", "bob"),
                                   row("bob/again.ipynb", "bob")])
    assert names == [f"alice-{tag('alice.')}.md", f"ALICE-{tag('ALICE')}.md",
                     f"alice-{tag('alice')}.md", "bob.md", "bob-2.md"]
    assert "alice.md" not in names  # nobody gets the name everybody else could claim


def test_output_targets_are_checked_before_grading(tmp_path):
    (tmp_path / "grades.csv").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        output.check_targets(tmp_path / "grades.csv")
    (tmp_path / "g.json").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        output.check_targets(tmp_path / "g.csv")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="cannot write"):
        output.check_targets(tmp_path / "afile" / "grades.csv")
    with pytest.raises(ValueError, match="is a file"):
        output.check_targets(tmp_path / "ok.csv", tmp_path / "afile")
    assert output.check_targets(tmp_path / "new" / "g.csv")[0].parent.is_dir()


def test_cli_refuses_a_folder_as_output_before_grading(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "subs" / "a_05.ipynb")
    (tmp_path / "grades.csv").mkdir()
    assert cli.main(["grade", str(tmp_path / "subs"), "--chapter", "5",
                     "--out", str(tmp_path / "grades.csv")]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_outputs_inside_what_sandboxes_see_are_refused(tmp_path):
    from gpu_lessons.grading import grade

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "a_05.ipynb")
    with pytest.raises(ValueError, match="which every sandbox can read"):
        grade(tmp_path, chapter=5, out=PACKAGE / "grades.csv")


@pytest.mark.parametrize("option, place", [
    ("--secret-file", PACKAGE / "key"), ("--bank", Path(sys.prefix) / "bank"),
    ("--roster", Path("/usr/local/share/roster.csv"))])
def test_the_key_roster_and_bank_must_be_out_of_every_sandbox_s_sight(tmp_path, capsys,
                                                                       option, place):
    """A key kept in the course's environment (or the package, or /usr) is readable by every
    notebook's kernel: with it a learner computes any student's numbers; a private bank there
    hands out its references.  The grader refuses to start (it used to read and use them)."""
    (tmp_path / "subs").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "subs" / "a_05.ipynb")
    extra = [] if option == "--secret-file" else ["--secret-file", str(tmp_path / "key")]
    (tmp_path / "key").write_text("k" * 32)
    assert cli.main(["grade", str(tmp_path / "subs"), "--chapter", "5", option, str(place),
                     *extra, "--out", str(tmp_path / "grades.csv")]) == 2
    err = capsys.readouterr().err
    assert f"{option}={str(place)!r}" in err and "which every sandbox can read" in err
    assert not (tmp_path / "grades.csv").exists()


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    output.atomic_write(tmp_path / "a.csv", "x")
    output.atomic_write(tmp_path / "a.csv", "y")
    assert [p.name for p in tmp_path.iterdir()] == ["a.csv"]
    assert (tmp_path / "a.csv").read_text() == "y"


# -- reading submissions ---------------------------------------------------------------------------

@pytest.mark.parametrize("rel, student", [
    ("alice_05_roofline.ipynb", "alice"), ("bob.ipynb", "bob"),
    ("carol/05_roofline.ipynb", "carol"), ("dave/sub/x.ipynb", "dave"),
    ("_odd.ipynb", "_odd"), ("bell\x07_05.ipynb", "bell "),
])
def test_student_id_from_the_path(rel, student):
    pattern = re.compile(submissions.DEFAULT_ID_PATTERN)
    assert submissions.student_id(rel, pattern) == student


def test_custom_id_pattern():
    assert submissions.student_id("05-s1234567-final.ipynb",
                                  re.compile(r"^\d+-(s\d+)-")) == "s1234567"


def test_notebook_problems(tmp_path):
    good = tmp_path / "good.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1"),
                                                   nbformat.v4.new_markdown_cell("m")]), good)
    assert submissions.read_notebook(good) == (["1"], "")
    for text, why in [("", "not valid JSON"), ("{", "not valid JSON"),
                      ("[]", "no list of cells"), ('{"cells": 3}', "no list of cells"),
                      ("[" * 200_000, "nested deeper"), ("[" * 100 + "]" * 100, "nested deeper")]:
        bad = tmp_path / "bad.ipynb"
        bad.write_text(text)
        assert why in submissions.read_notebook(bad)[1]
    binary = tmp_path / "binary.ipynb"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in submissions.read_notebook(binary)[1]
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as f:
        f.truncate(2 * 2**30)  # sparse: read at most 32 MiB of it
    assert "larger than 32 MiB" in submissions.read_notebook(huge)[1]
    link = tmp_path / "link.ipynb"
    link.symlink_to(good)
    assert "symbolic link" in submissions.read_notebook(link)[1]


def test_chapter_comes_from_the_notebooks_metadata(tmp_path):
    for name, chapter in (("a.ipynb", 5), ("b.ipynb", 5)):
        nb = nbformat.v4.new_notebook()
        nb.metadata["gpu_lessons"] = {"chapter": chapter}
        nbformat.write(nb, tmp_path / name)
    (tmp_path / "deep.ipynb").write_text("[" * 200_000)
    assert submissions.chapter_from(sorted(tmp_path.glob("*.ipynb"))) == 5
    # One notebook naming another chapter, or the same one spelt "05", stops nothing: the
    # chapter most notebooks name is the run's.
    for name, chapter in (("c.ipynb", 1), ("d.ipynb", "05"), ("e.ipynb", " 5 "),
                          ("f.ipynb", "banana"), ("g.ipynb", [5])):
        nb = nbformat.v4.new_notebook()
        nb.metadata["gpu_lessons"] = {"chapter": chapter}
        nbformat.write(nb, tmp_path / name)
    assert submissions.notebook_chapter(tmp_path / "d.ipynb") == 5
    assert submissions.notebook_chapter(tmp_path / "f.ipynb") is None
    assert submissions.chapter_from(sorted(tmp_path.glob("*.ipynb"))) == 5
    # Only a tie (or no vote at all) asks for --chapter.
    tie = sorted(tmp_path.glob("[ac].ipynb"))
    with pytest.raises(ValueError, match="pass --chapter"):
        submissions.chapter_from(tie)
    with pytest.raises(ValueError, match="pass --chapter"):
        submissions.chapter_from([tmp_path / "deep.ipynb"])


def test_chapter_and_release_metadata_are_read_within_the_same_bounds(tmp_path):
    """A notebook the grader would refuse to parse (too many cells, a link) names no chapter
    and does not count as released; a plain one does both."""
    plain = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    plain.metadata["gpu_lessons"] = {"chapter": 5, "released": True}
    nbformat.write(plain, tmp_path / "plain.ipynb")
    crowded = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("") for _ in range(submissions.MAX_CELLS + 1)])
    crowded.metadata["gpu_lessons"] = {"chapter": 5, "released": True}
    nbformat.write(crowded, tmp_path / "crowded.ipynb")
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "plain.ipynb")
    assert submissions.notebook_chapter(tmp_path / "plain.ipynb") == 5
    assert submissions.released_count([tmp_path / "plain.ipynb"]) == 1
    for name in ("crowded.ipynb", "link.ipynb"):
        assert submissions.notebook_chapter(tmp_path / name) is None
        assert submissions.released_count([tmp_path / name]) == 0


def test_hard_links_and_huge_cell_counts_are_refused_before_parsing(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, tmp_path / "own.ipynb")
    assert submissions.read_notebook(tmp_path / "own.ipynb") == (["x = 1"], "")
    os.link(tmp_path / "own.ipynb", tmp_path / "link.ipynb")
    for name in ("own.ipynb", "link.ipynb"):  # both names of the file are refused
        cells, why = submissions.read_notebook(tmp_path / name)
        assert cells == [] and "hard links" in why
    cells = ",".join(['{"cell_type": "code", "source": "", "metadata": {}, "outputs": []}']
                     * (submissions.MAX_CELLS + 1))
    (tmp_path / "many.ipynb").write_text('{"nbformat": 4, "metadata": {}, "cells": ['
                                         + cells + "]}")
    assert submissions.read_notebook(tmp_path / "many.ipynb")[1].startswith(
        "the notebook has more than")


def test_find_submissions_skips_checkpoints_and_linked_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "a" / "x.ipynb").write_text("{}")
    (tmp_path / "a" / ".ipynb_checkpoints" / "x-checkpoint.ipynb").write_text("{}")
    (tmp_path / "elsewhere").symlink_to(PACKAGE)
    assert submissions.find_submissions(tmp_path) == [tmp_path / "a" / "x.ipynb"]


# -- the run's arguments and hooks -------------------------------------------------------------------

def test_bad_arguments_are_refused_before_running_anything(tmp_path, monkeypatch):
    from gpu_lessons.grading import grade

    with pytest.raises(ValueError, match=r"no \.ipynb files"):
        grade(tmp_path)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "a.ipynb")
    with pytest.raises(ValueError, match="cell_timeout must be > 0"):
        grade(tmp_path, chapter=5, cell_timeout=0)
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        grade(tmp_path, chapter=5, jobs=0)
    with pytest.raises(ValueError, match="chapter must be one of"):
        grade(tmp_path, chapter=12)
    with pytest.raises(ValueError, match="pass --chapter"):
        grade(tmp_path)  # no chapter in the metadata
    with pytest.raises(ValueError, match="not a valid regular expression"):
        grade(tmp_path, chapter=5, id_pattern="(")
    with pytest.raises(TypeError, match="Puzzle entries"):
        grade(tmp_path, chapter=5, puzzles=["transpose"])
    monkeypatch.setattr("gpu_lessons.questions.load", lambda number: ())
    with pytest.raises(ValueError, match="no questions to grade"):
        grade(tmp_path, chapter=7, puzzles=())
    assert cli.main(["grade", str(tmp_path / "missing")]) == 2


def test_puzzle_options():
    from types import SimpleNamespace as Args

    assert cli._puzzles(Args(puzzle=[], no_puzzles=False)) is None  # the chapter's own
    assert cli._puzzles(Args(puzzle=[], no_puzzles=True)) == ()
    assert cli._puzzles(Args(puzzle=["transpose=my_kernel", "reduce:3", "occupancy"],
                             no_puzzles=False)) == (
        plan.Puzzle("transpose", "my_kernel", 1.0), plan.Puzzle("reduce", "reduce_kernel", 3.0),
        plan.Puzzle("occupancy", "occupancy_kernel", 1.0, ("block",)))
    for bad in ("=k", "t=not a name", "t=k:many"):
        with pytest.raises(ValueError, match="--puzzle"):
            cli._puzzles(Args(puzzle=[bad], no_puzzles=False))


def test_each_chapter_grades_its_own_puzzles():
    from gpu_lessons import puzzles

    assert plan.chapter_puzzles(1) == () and plan.chapter_puzzles(9) == ()
    five = plan.chapter_puzzles(5)
    assert [p.id for p in five] == [p.id for p in puzzles.puzzles(5)] and five
    assert all(p.name == f"{p.id}_kernel" and p.points == 1 for p in five)
    assert [p.choices for p in plan.chapter_puzzles(6) if p.id == "occupancy"] == [("block",)]


def test_refused_without_a_sandbox_unless_told(tmp_path, monkeypatch, capsys):
    from gpu_lessons.grading import SandboxUnavailable, grade, sandbox

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "a_05.ipynb")
    monkeypatch.setattr(sandbox, "unavailable", lambda: "/usr/bin/bwrap is missing")
    with pytest.raises(SandboxUnavailable, match="--no-sandbox"):
        grade(tmp_path, chapter=5)
    assert cli.main(["grade", str(tmp_path), "--chapter", "5",
                     "--out", str(tmp_path / "g.csv")]) == 3
    err = capsys.readouterr().err
    assert "bwrap is missing" in err and "other submissions, the grades file" in err
    assert not (tmp_path / "g.csv").exists()


def test_each_student_gets_the_questions_questions_for_returns(tmp_path):
    """The hook the per-student variants use: rows carry each student's own questions (the
    notebooks are invalid, so this needs no kernel)."""
    from gpu_lessons.grading import grade

    qs = {q.id: q for q in chapter5()}
    asked = []

    def questions_for(student):
        asked.append(student)
        return (qs["05.ridge_h100"],) if student == "ann" else (qs["05.axpy_bound"],
                                                                qs["05.kernel_time"])

    for who in ("ann", "ben"):
        (tmp_path / f"{who}_05.ipynb").write_text("{oops")
    grades = grade(tmp_path, questions_for=questions_for, jobs=1, sandbox=False)
    assert sorted(asked) == ["ann", "ben"] and grades.chapter is None
    assert grades.columns == ("05.ridge_h100", "05.axpy_bound", "05.kernel_time")
    ann, ben = grades.rows
    assert (ann.max, list(ann.points)) == (2, ["05.ridge_h100"])
    assert (ben.max, list(ben.points)) == (3, ["05.axpy_bound", "05.kernel_time"])
    line = next(iter(csv.DictReader(grades.to_csv().splitlines())))
    assert line["05.axpy_bound"] == "" and line["05.ridge_h100"] == "0"


def test_a_student_questions_for_refuses_is_not_graded(tmp_path):
    """A roster check lives in questions_for: it raises for an unknown student, whose row then
    says so (and nothing of theirs runs)."""
    from gpu_lessons.grading import grade

    def questions_for(student):
        if student != "ann":
            raise ValueError(f"student {student!r} is not on the roster")
        return chapter5()

    for who in ("ann", "eve"):
        (tmp_path / f"{who}_05.ipynb").write_text("{oops")
    ann, eve = grade(tmp_path, questions_for=questions_for, sandbox=False).rows
    assert (ann.status, ann.max) == ("invalid notebook", 5)
    assert (eve.status, eve.max, eve.points) == ("not graded", 0, {})
    assert eve.reason == "no questions for this student: student 'eve' is not on the roster"


def test_references_are_computed_before_the_sandbox_starts(tmp_path, monkeypatch):
    from gpu_lessons.grading import grade, sandbox
    from gpu_lessons.questions.types import Number, Question

    events = []

    def reference():
        events.append("reference")
        return 1.0

    q = Question("05.spy", "spy", 1, "?", Number(reference, "units"))

    def fake_run(self, stdin, timeout):
        events.append("sandbox")
        return Outcome(0, False, ((0.0, b'{"event": "end", "status": "ok"}'),), "", "", 0.1)

    monkeypatch.setattr(sandbox.Process, "run", fake_run)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "a_05.ipynb")
    row = grade(tmp_path, questions_for=lambda s: (q,), sandbox=False).rows[0]
    assert events[:2] == ["reference", "sandbox"]
    assert row.feedback["05.spy"].startswith("✗ 05.spy:")


def test_same_file_name_in_two_folders_keeps_two_rows(tmp_path):
    from gpu_lessons.grading import grade

    paths = []
    for who in ("ann", "ben"):
        (tmp_path / who).mkdir()
        paths.append(tmp_path / who / "05_roofline.ipynb")
        paths[-1].write_text("{oops")
    grades = grade(paths, chapter=5, out=tmp_path / "out" / "grades.csv", sandbox=False)
    assert [(r.file, r.student, r.status) for r in grades.rows] == [
        ("ann/05_roofline.ipynb", "ann", "invalid notebook"),
        ("ben/05_roofline.ipynb", "ben", "invalid notebook")]
    assert (tmp_path / "out" / "grades.json").exists()


def test_worker_passes_on_each_answer_once_and_bounds_its_size():
    import os

    from gpu_lessons.grading import worker

    r, w = os.pipe()
    report = worker.Reporter(w)
    report.answer("05.a", {"kind": "number", "value": 1})
    report.answer("05.a", {"kind": "number", "value": 2})  # a second channel: ignored
    report.answer("05.b", {"kind": "seq", "items": [{"kind": "number", "value": 1.5}] * 200_000})
    report.event(event="end", status="ok")
    os.close(w)
    with os.fdopen(r, "rb") as f:
        events = [json.loads(line) for line in f]
    assert [e.get("id") for e in events] == ["05.a", "05.b", None]
    assert events[0]["observation"]["value"] == 1
    assert events[1]["observation"]["type"] == "answer too large to grade"
    assert untrusted.observation(events[1]["observation"])


def test_a_run_without_a_seed_draws_its_own_and_records_it(tmp_path, monkeypatch):
    """The grader's inputs must not be computable by a learner: with a fixed default seed
    (it was 0) a kernel or function could detect the grader's inputs and return hard-coded
    outputs (a one-thread `dot` writing a precomputed number passed).  Each run without a
    seed draws one, uses it for the plan, and records it so a regrade can reuse it."""
    from gpu_lessons.grading import grade, sandbox
    from gpu_lessons.questions.types import Number, Question

    q = Question("05.spy", "spy", 1, "?", Number(lambda: 1.0, "units"))
    seen = []
    make = plan.Plan.make.__func__

    def spy_make(cls, questions, seed, puzzles=()):
        seen.append(seed)
        return make(cls, questions, seed, puzzles)

    def fake_run(self, stdin, timeout):
        return Outcome(0, False, ((0.0, b'{"event": "end", "status": "ok"}'),), "", "", 0.1)

    monkeypatch.setattr(plan.Plan, "make", classmethod(spy_make))
    monkeypatch.setattr(sandbox.Process, "run", fake_run)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "a_05.ipynb")
    first = grade(tmp_path, questions_for=lambda s: (q,), sandbox=False)
    second = grade(tmp_path, questions_for=lambda s: (q,), sandbox=False)
    assert seen == [first.seed, second.seed]
    assert first.seed != second.seed and len(first.seed) == 32
    assert json.loads(first.to_json())["seed"] == first.seed
    again = grade(tmp_path, questions_for=lambda s: (q,), sandbox=False, seed=first.seed)
    assert again.seed == first.seed == seen[-1]
    # the attack: outputs computed for the inputs a known seed draws, stored without any work
    from gpu_lessons import puzzles
    from gpu_lessons.grading.puzzle_eval import puzzle_seed

    dot = puzzles.find("dot")
    known = {c.size["n"]: float(dot.expected(c.args)["out"][0])
             for c in dot.cases(puzzle_seed("0"))}
    src = "def dot_kernel(t, a, b, out):\n    with t.if_(t.thread_idx.x == 0):\n" + "".join(
        f"        if len(a) == {n}:\n            out[0] = {v!r}\n" for n, v in known.items())
    assert puzzles.evaluate("dot", src, seed=puzzle_seed("0")).passed
    assert not puzzles.evaluate("dot", src, seed=puzzle_seed(first.seed)).correct


def test_cli_seed_is_drawn_for_each_regrade_even_with_the_key(tmp_path):
    """A seed derived from the key alone would be the same for every regrade: each run draws
    its own (the journal keeps it for a resumed run; --seed repeats one)."""
    key = tmp_path / "key"
    key.write_text("k" * 32)
    parser = cli.argparse.ArgumentParser()
    cli._grade_arguments(parser)
    seed_of = [cli._seed(parser.parse_args(["subs", *extra]))
               for extra in ([], ["--secret-file", str(key)], ["--seed", "7"])]
    assert seed_of == [None, None, "7"]


def test_puzzle_seeds_are_64_bit_and_differ_per_chapter_student_and_run():
    from gpu_lessons.grading.puzzle_eval import puzzle_seed

    seeds = {puzzle_seed(run, chapter, student) for run in ("a", "b") for chapter in (3, 4)
             for student in ("ann", "bob")}
    assert len(seeds) == 8
    assert all(0 <= s < 2**64 for s in seeds) and max(seeds) > 2**40
    assert puzzle_seed("a", 3, "ann") == puzzle_seed("a", 3, "ann")


def test_a_pipe_named_ipynb_is_a_row_not_a_hang(tmp_path):
    """An archive of submissions can hold a FIFO named like a notebook; a plain open() of it
    blocks for ever, and the grading run with it.  It must get its own row."""
    import os
    import threading

    from gpu_lessons.grading import grade

    os.mkfifo(tmp_path / "bob_05.ipynb")
    (tmp_path / "ann_05.ipynb").write_text("{oops")
    done = {}

    def in_thread(name, fn, seconds):
        def run():
            try:
                done[name] = fn()
            except Exception as exc:
                done[name] = exc
        thread = threading.Thread(target=run, daemon=True)  # a blocked open() cannot be undone
        thread.start()
        thread.join(seconds)
        assert not thread.is_alive(), f"{name} blocked on the pipe"
        return done[name]

    # nothing votes for a chapter: the pipe is not read and "{oops" is not JSON
    found = in_thread("chapter_from", lambda: submissions.chapter_from(
        sorted(tmp_path.iterdir())), 20)
    assert isinstance(found, ValueError)
    assert in_thread("released_count", lambda: submissions.released_count(
        sorted(tmp_path.iterdir())), 20) == 0
    grades = in_thread("grade", lambda: grade(tmp_path, chapter=5, puzzles=(), sandbox=False,
                                              jobs=2), 60)
    rows = {r.student: r for r in grades.rows}
    assert rows["bob"].status == "invalid notebook"
    assert "not a regular file" in rows["bob"].reason
    assert rows["ann"].status == "invalid notebook"


def test_a_lone_surrogate_cannot_stop_the_class_s_grades(tmp_path, monkeypatch):
    """JSON's "\\ud800" (an exception message, an exception class's name) and a file name that
    is not UTF-8 both give Python strings no UTF-8 file or terminal can take: one such string
    in one row made writing grades.json (and printing the row) fail for the whole class."""
    import os

    from gpu_lessons.grading import grade, sandbox
    from gpu_lessons.questions.types import Function, Question

    q = Question("05.fn", "fn", 1, "?", Function(lambda x: x, lambda rng: {"x": 1.0}, "fn(x)",
                                                 cases=1))
    lines = [json.dumps({"event": "answer", "id": "05.fn", "observation": {
                 "kind": "function", "outputs": [{"raised": "Value\ud800Error",
                                                  "message": "\ud800 boom"}]}}),
             json.dumps({"event": "error", "index": 1, "ename": "\udfff"}),
             json.dumps({"event": "end", "status": "ok"})]

    def fake_run(self, stdin, timeout):
        return Outcome(0, False, tuple((0.0, line.encode()) for line in lines), "", "", 0.1)

    monkeypatch.setattr(sandbox.Process, "run", fake_run)
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nbformat.write(nb, subs / "ann_05.ipynb")
    with open(os.path.join(os.fsencode(subs), b"\xff_05.ipynb"), "w") as f:  # not UTF-8
        nbformat.write(nb, f)
    shown = []
    grades = grade(subs, questions_for=lambda s: (q,), sandbox=False, out=tmp_path / "g.csv",
                   feedback=tmp_path / "fb", progress=lambda row: shown.append(
                       f"{row.status} {row.file} {row.reason}".encode()))
    assert len(grades.rows) == len(shown) == 2
    assert "raised" in grades.rows[0].reason
    written = json.loads((tmp_path / "g.json").read_text("utf-8"))
    assert len(written["rows"]) == 2 and len(list((tmp_path / "fb").iterdir())) == 2
    assert "boom" in written["rows"][0]["feedback"]["05.fn"]
