"""Grades that survive and containment checked without a sandbox: the journal a killed run
resumes from, the bounded reading of what a sandbox reports, the seccomp program (checked
instruction by instruction), the cgroup v2 files (on a stand-in hierarchy), and the refusal
to grade without control groups."""

from __future__ import annotations

import errno
import json
import sys
import tracemalloc

import nbformat
import pytest

from gpu_lessons.grading import grade, journal, rows, sandbox, seccomp
from gpu_lessons.grading.plan import Plan
from gpu_lessons.grading.sandbox import Outcome
from gpu_lessons.questions.types import Number, Question

Q = Question("05.x", "x", 2, "?", Number(lambda: 1.0, "units"))


@pytest.fixture
def fake_sandbox(monkeypatch):
    """Process.run answers ``x`` with the number the notebook's one cell assigns."""
    ran = []

    def fake_run(self, stdin, timeout):
        plan = json.loads(stdin)
        value = float(plan["cells"][0].split("=")[1])
        ran.append(value)
        answer = {"event": "answer", "id": "05.x",
                  "observation": {"kind": "number", "value": value}}
        lines = [{"event": "kernel"}, {"event": "cell", "index": 1}, answer,
                 {"event": "end", "status": "ok"}]
        return Outcome(0, False, tuple((0.0, json.dumps(e).encode()) for e in lines), "", "",
                       0.1)

    monkeypatch.setattr(sandbox.Process, "run", fake_run)
    return ran


def _class(folder, n=4):
    folder.mkdir()
    for i in range(n):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {1.0 + (i % 2)}")])
        nbformat.write(nb, folder / f"s{i}_05.ipynb")
    return folder


def _run(folder, out, **kw):
    return grade(folder, questions_for=lambda s: (Q,), puzzles=(), sandbox=False, jobs=1,
                 out=out, **kw)


def test_an_interrupted_run_resumes_from_its_journal_and_writes_the_same_grades(
        tmp_path, fake_sandbox):
    folder = _class(tmp_path / "subs")
    full = _run(folder, tmp_path / "full" / "g.csv", seed="s")
    fake_sandbox.clear()
    out = tmp_path / "run" / "g.csv"
    seen = []

    def stop_after_two(row):
        seen.append(row)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(folder, out, progress=stop_after_two)
    book = journal.path_for(out)
    assert book.exists()
    kept = [json.loads(line) for line in book.read_text().splitlines()]
    done = {e["file"] for e in kept if "row" in e}
    # two rows were reported; the pool's worker may have journaled a third before the
    # interrupt reached it (a finished row is kept, never lost)
    assert 2 <= len(done) <= 3
    first_seed = kept[0]["seed"]
    torn = next(f"s{i}_05.ipynb" for i in range(4) if f"s{i}_05.ipynb" not in done)
    with open(book, "a") as f:  # the grader was killed while writing the next row
        f.write(f'{{"file": "{torn}", "sha256": "')
    fake_sandbox.clear()
    again = _run(folder, out)
    assert len(fake_sandbox) == 4 - len(done)  # only the rows the journal did not hold
    assert again.seed == first_seed
    assert [(r.file, r.points, r.status) for r in again.rows] == \
        [(r.file, r.points, r.status) for r in full.rows]
    assert not book.exists()  # done: the next run is a fresh regrade


def test_a_changed_notebook_is_regraded_and_other_settings_are_refused(tmp_path, fake_sandbox):
    folder = _class(tmp_path / "subs", 2)
    out = tmp_path / "g.csv"
    with pytest.raises(KeyboardInterrupt):
        _run(folder, out, progress=lambda row: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(ValueError, match=r"other settings .*timeout"):
        _run(folder, out, timeout=5)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 7.0")])
    nbformat.write(nb, folder / "s0_05.ipynb")  # resubmitted after the interruption
    fake_sandbox.clear()
    grades = _run(folder, out)
    assert 7.0 in fake_sandbox
    assert {r.file: r.points["05.x"] for r in grades.rows}["s0_05.ipynb"] == 0.0


def test_a_forged_event_stream_is_cut_off_in_bounded_memory():
    """56 MiB of well-formed events: reading stops at the event budget, the sandbox is
    killed, and the grader holds a few MiB, not the 1 GiB it once grew by."""
    code = ("import os, sys\nout = os.fdopen(int(sys.argv[-1]), 'wb')\n"
            "line = b'{\"event\": \"cell\", \"index\": 1}\\n'\n"
            "for _ in range(56 * 2**20 // len(line)):\n    out.write(line)\n")
    plan = Plan((Q,), {}, (), "nonce")
    report = rows.Report.start(plan, n_code_cells=3)
    proc = sandbox.Process([sys.executable, "-I", "-c", code], sandbox=False,
                           on_line=report.feed)
    tracemalloc.start()
    outcome = proc.run(b"", 120)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "more events" in report.invalid
    assert not outcome.timed_out and outcome.lines == ()
    assert peak < 8 * 2**20, peak


def test_answer_data_per_notebook_is_bounded():
    qs = tuple(Question(f"05.q{i}", f"q{i}", 1, "?", Number(lambda: 1.0, "units"))
               for i in range(8))
    report = rows.Report.start(Plan(qs, {}, (), "nonce"), n_code_cells=1)
    pad = 2**20 - 4096
    stops = [report.feed(0.0, json.dumps({"event": "answer", "id": q.id, "observation": {
        "kind": "str", "value": "x"}}).encode() + b" " * pad) for q in qs]
    assert stops[:3] == [None, None, None]
    assert "more answer data" in report.invalid and len(report.answers) == 4


ARCH = {m: arch for m, (arch, _) in seccomp.TABLES.items()}


@pytest.mark.parametrize("machine", sorted(seccomp.TABLES))
def test_the_seccomp_program_refuses_what_it_lists_and_allows_the_rest(machine):
    arch, nr = seccomp.TABLES[machine]
    eperm = 0x00050000 | errno.EPERM
    for name in seccomp.REFUSED:
        assert seccomp.verdict(nr[name], arch, machine=machine) == eperm, name
    assert seccomp.verdict(nr["clone3"], arch, machine=machine) == 0x00050000 | errno.ENOSYS
    clone_thread = 0x00010000 | 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800
    assert seccomp.verdict(nr["clone"], arch, clone_thread, machine=machine) == seccomp.RET_ALLOW
    for flag in (0x10000000, 0x00020000, 0x20000000, 0x40000000):  # NEWUSER, NS, PID, NET
        assert seccomp.verdict(nr["clone"], arch, 0x11 | flag, machine=machine) == eperm
    for allowed in (0, 1, 2, 3, 9, 60, 231) if machine == "x86_64" else (63, 64, 56, 57, 222):
        assert seccomp.verdict(allowed, arch, machine=machine) == seccomp.RET_ALLOW
    assert seccomp.verdict(0, 0x40000003, machine=machine) == seccomp.RET_KILL_PROCESS
    if machine == "x86_64":  # the x32 ABI's calls
        assert seccomp.verdict(0x40000000 | 1, arch, machine=machine) == eperm
    assert len(seccomp.program(machine)) == 8 * len(seccomp.instructions(machine))


def test_graded_puzzle_feedback_hides_the_expected_value_at_the_grader_s_inputs():
    from gpu_lessons.grading.puzzle_eval import redact

    text = redact("✗ transpose: out[7] is 3.5, expected -1.25e+03; 4 of 9 elements are wrong")
    assert "1.25" not in text and "out[7] is 3.5" in text and "4 of 9" in text
    assert redact("✗ x: out[0] is nan, expected nan") == \
        "✗ x: out[0] is nan (the expected value is not shown in graded feedback)"


def test_cgroup_v2_groups_are_made_as_the_kernel_s_interface_asks(tmp_path, monkeypatch):
    """The v2 path on a stand-in hierarchy (CI machines here have v1 memory controllers): the
    grader moves itself into a leaf of its own, hands memory and pids to its subtree, and
    gives each sandbox memory.max, memory.swap.max = 0, memory.oom.group = 1 and pids.max;
    the container's cap is read from the groups above."""
    from gpu_lessons.grading import cgroups

    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "memory.max").write_text(f"{2560 * 2**20}\n")
    monkeypatch.setattr(cgroups, "MOUNT", tmp_path)
    monkeypatch.setattr(cgroups, "_own_groups", lambda: {"unified": "/"})
    found = cgroups._setup()
    base = found.bases["unified"]
    assert found.version == 2 and base.parent == tmp_path
    assert (base / "grader" / "cgroup.procs").read_text() == str(__import__("os").getpid())
    assert (base / "cgroup.subtree_control").read_text() == "+memory +pids"
    group = found.create(960, 256)
    folder = group.folders[0]
    assert folder.parent == base and folder.name.startswith("sandbox-")
    assert {f: (folder / f).read_text() for f in ("memory.max", "memory.swap.max",
                                                  "memory.oom.group", "pids.max")} == \
        {"memory.max": str(960 * 2**20), "memory.swap.max": "0", "memory.oom.group": "1",
         "pids.max": "256"}
    assert group.procs_files == [str(folder / "cgroup.procs")]
    argv = cgroups.enter_argv(group, ["bwrap", "--", "python"])
    assert argv[:2] == ["/bin/sh", "-c"] and str(folder / "cgroup.procs") in argv
    assert argv[argv.index("--") + 1:] == ["bwrap", "--", "python"]
    assert found.limit_bytes() == 2560 * 2**20
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert group.oom_kills() == 2
    group.kill()
    assert (folder / "cgroup.kill").read_text() == "1"


def test_where_no_control_group_can_be_made_the_grader_refuses_and_says_what_is_lost(
        tmp_path, monkeypatch):
    from gpu_lessons.grading import SandboxUnavailable, runner
    from gpu_lessons.grading import sandbox as sb

    monkeypatch.setattr(sb, "unavailable", lambda: "")
    monkeypatch.setattr(sb, "containment_unavailable", lambda: "no memory controller here")
    folder = _class(tmp_path / "subs", 1)
    with pytest.raises(SandboxUnavailable, match=r"no memory controller here.*--no-cgroups.*"
                                                 "memfd and tmpfs pages"):
        grade(folder, questions_for=lambda s: (Q,), puzzles=())
    assert "memfd" in runner.NO_CGROUP_RISKS


def test_a_sandbox_that_filled_its_memory_allowance_says_so():
    plan = Plan((Q,), {}, (), "nonce")
    report = rows.Report.start(plan, n_code_cells=1)
    report.feed(0.0, b'{"event": "kernel"}')
    report.feed(0.1, b'{"event": "cell", "index": 1}')
    full = Outcome(None, True, (), "", "", 40.0, None, 0, 512 * 2**20)
    _, reason = rows.status_and_reason(report, full, 4, 30, 256, 512)
    assert "all of their memory allowance of 512 MiB" in reason
    killed = Outcome(-9, False, (), "", "", 3.0, None, 2, 512 * 2**20)
    _, reason = rows.status_and_reason(report, killed, 4, 30, 256, 512)
    assert "the kernel killed 2 of its processes" in reason
    light = Outcome(None, True, (), "", "", 40.0, None, 0, 100 * 2**20)
    assert "allowance" not in rows.status_and_reason(report, light, 4, 30, 256, 512)[1]
