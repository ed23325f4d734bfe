"""The second red-team review's breaches, retried as it ran them: the documented command, as
root with bubblewrap, with the grader in a 2.5 GiB memory-capped control group (what the
container recipe of docs/instructors.md sets up), honest notebooks beside the attackers.

The attackers (tests/submissions/breaches/, and files made at test time by
``make_submissions.write_breach_files``): a memfd hog of 3 GiB, a user namespace mounting its
own tmpfs, a key planted in the user keyring and looked for by the next notebook, 56 MiB of
forged events through ``pidfd_getfd``, 336k empty cells in 32 MiB, a hard link to a
classmate's notebook, Markdown in an exception name and in a file name, and one notebook whose
metadata spells the chapter "05".  Each ends with the three chapter-05 sample answers, the
last of them wrong if its attack worked.

Needs root, bubblewrap and cgroup memory+pids controllers; skipped where they are missing,
except when GPU_LESSONS_REQUIRE_SANDBOX=1 (CI).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_lessons.grading import cgroups, grade, sandbox

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = Path(__file__).resolve().parents[1] / "submissions"
HONEST = ["good_05.ipynb", "edited_05.ipynb", "stub_05.ipynb"]
#: The container's memory cap in the red team's run.
CAP_MIB = 2560


def _why() -> str:
    if os.geteuid() != 0:
        return "the breaches are retried as root, as CI runs the grader"
    return sandbox.unavailable() or sandbox.containment_unavailable()


WHY = _why()
if WHY and os.environ.get("GPU_LESSONS_REQUIRE_SANDBOX") == "1":
    raise RuntimeError(f"GPU_LESSONS_REQUIRE_SANDBOX=1 but {WHY}")
pytestmark = pytest.mark.skipif(bool(WHY), reason=WHY or "sandbox available")


def _make_submissions():
    spec = importlib.util.spec_from_file_location("make_submissions",
                                                  SUBMISSIONS / "make_submissions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _capped_group(mib: int) -> list[Path]:
    """Folders of a new group capped at ``mib`` (memory, no swap) the grader is started in:
    v1 memory + pids groups, or a v2 group where the grader's own group hands out memory."""
    own = cgroups._own_groups()
    tag = f"gpu-lessons-test-cap-{uuid.uuid4().hex[:8]}"
    found, _ = cgroups.hierarchy()
    if found.version == 2:
        parent = found.bases["unified"].parent
        folder = parent / tag
        folder.mkdir()
        (folder / "memory.max").write_text(str(mib * 2**20))
        (folder / "memory.swap.max").write_text("0")
        return [folder]
    mem = cgroups.MOUNT / "memory" / own["memory"].lstrip("/") / tag
    pids = cgroups.MOUNT / "pids" / own["pids"].lstrip("/") / tag
    mem.mkdir()
    pids.mkdir()
    (mem / "memory.limit_in_bytes").write_text(str(mib * 2**20))
    if (mem / "memory.memsw.limit_in_bytes").exists():
        (mem / "memory.memsw.limit_in_bytes").write_text(str(mib * 2**20))
    return [mem, pids]


def _sub_folders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir())


def _leftovers(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            blob = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob and int(proc.name) != os.getpid():
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
    return found


@pytest.fixture(scope="module")
def breached(tmp_path_factory):
    make = _make_submissions()
    folder = tmp_path_factory.mktemp("class")
    for name in HONEST:
        shutil.copy(SUBMISSIONS / name, folder / name)
    for path in (SUBMISSIONS / "breaches").glob("*.ipynb"):
        shutil.copy(path, folder / path.name)
    odd = make.write_breach_files(folder)
    out = tmp_path_factory.mktemp("grades")
    marker = f"gpu-lessons-breach-{uuid.uuid4().hex}"
    cap = _capped_group(CAP_MIB)
    # The grader reports its own peak RSS (children excluded) when it is done: VmHWM, the peak
    # of its own address space (getrusage's ru_maxrss would keep the peak of the process that
    # forked it, a pytest worker, across exec).
    wrapper = ("import re, sys\nfrom gpu_lessons.cli import main\nrc = main(sys.argv[1:])\n"
               "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
               "print('grader maxrss KiB', hwm)\n"
               "sys.exit(rc)")
    enter = " ".join(f"echo $$ > {f / 'cgroup.procs'} &&" for f in cap)
    argv = ["grade", str(folder), "--out", str(out / "grades.csv"), "--feedback",
            str(out / "fb"), "--jobs", "2", "--no-puzzles", "--cell-timeout", "30",
            "--timeout", "120"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), sandbox.MARKER_VARIABLE: marker}
    try:
        done = subprocess.run(["/bin/sh", "-c", f'{enter} exec "$@"', "sh", sys.executable,
                               "-c", wrapper, *argv], env=env, capture_output=True,
                              text=True, timeout=1200)
        left_groups = [name for f in cap for name in _sub_folders(f)]
        survivors = _leftovers(marker)
    finally:
        for f in cap:
            f.rmdir()
    alone_dir = tmp_path_factory.mktemp("alone")
    for name in HONEST:
        shutil.copy(SUBMISSIONS / name, alone_dir / name)
    alone = grade(alone_dir, chapter=5, jobs=2, cell_timeout=30, timeout=120, puzzles=())
    data = json.loads((out / "grades.json").read_text()) if (out / "grades.json").exists() \
        else {"rows": []}
    rss = re.search(r"grader maxrss KiB (\d+)", done.stdout)
    return SimpleNamespace(rc=done.returncode, stdout=done.stdout, stderr=done.stderr,
                           rows={r["file"]: r for r in data["rows"]}, odd=odd, out=out,
                           files=sorted(p.name for p in folder.iterdir()),
                           alone={r.file: r for r in alone.rows}, left_groups=left_groups,
                           survivors=survivors, maxrss_mib=int(rss.group(1)) / 1024 if rss
                           else None)


def test_the_grader_survives_and_every_notebook_has_its_row(breached):
    assert breached.rc == 0, breached.stderr[-2000:]
    assert sorted(breached.rows) == breached.files
    assert not (breached.out / "grades.journal").exists()  # removed once the grades are out


def test_the_memfd_hog_is_killed_in_its_own_group_and_is_one_crashed_row(breached):
    row = breached.rows["memfd_05.ipynb"]
    assert row["status"] == "crashed" and "memory allowance" in row["reason"], row


@pytest.mark.parametrize("name", ["userns_05.ipynb", "keyring_05.ipynb", "keyring2_05.ipynb",
                                  "forged_05.ipynb"])
def test_namespace_keyring_and_pidfd_attacks_are_refused(breached, name):
    # The last answer is right only if the attack was stopped; "05" metadata changes nothing.
    row, good = breached.rows[name], breached.rows["good_05.ipynb"]
    assert row["status"] == "ok" and row["points"] == good["points"], row


def test_odd_files_are_one_row_each_and_stop_nothing(breached):
    rows = breached.rows
    assert rows["cells_05.ipynb"]["status"] == "invalid notebook"
    assert "more than 2000 cells" in rows["cells_05.ipynb"]["reason"]
    for name in ("thief_05.ipynb", "victim_05.ipynb"):
        assert rows[name]["status"] == "invalid notebook" and "hard links" in rows[name]["reason"]
    tick = next(n for n in rows if n.startswith("tick"))
    assert rows[tick]["points"] == rows["good_05.ipynb"]["points"]


def test_feedback_shows_markdown_as_text(breached):
    texts = {p.name: p.read_text("utf-8") for p in (breached.out / "fb").iterdir()}
    evil = [t for t in texts.values() if "evil" in t]
    assert len(evil) >= 2  # the exception name, and the file name with backticks
    for text in evil:
        assert not re.search(r"(?<!\\)\]\(", text), text   # no link, no image
        assert not re.search(r"(?<!\\)`", text), text      # no code span to break out of
        assert "<b>" not in text


def test_honest_grades_are_the_same_with_the_attackers_beside_them(breached):
    for name in HONEST:
        assert breached.rows[name]["points"] == breached.alone[name].points, name
        assert breached.rows[name]["status"] == breached.alone[name].status


def test_nothing_outlives_the_run(breached):
    assert breached.survivors == []
    assert breached.left_groups == []  # every sandbox's group and the grader's own removed


def test_the_grader_stays_within_its_stated_memory_bound(breached):
    # runner.GRADER_BASE_MIB + 2 jobs x GRADER_PER_JOB_MIB
    from gpu_lessons.grading.runner import GRADER_BASE_MIB, GRADER_PER_JOB_MIB

    assert breached.maxrss_mib is not None, breached.stdout[-500:]
    assert breached.maxrss_mib < GRADER_BASE_MIB + 2 * GRADER_PER_JOB_MIB, breached.maxrss_mib
