"""The bubblewrap sandbox itself, measured with small commands (no kernel): what it sees, what
each limit does, and that nothing outlives it.

Needs bubblewrap; skipped where it is missing, except when GPU_LESSONS_REQUIRE_SANDBOX=1 (CI).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from gpu_lessons.grading import sandbox

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(sandbox.__file__).resolve().parents[1]
WHY = sandbox.unavailable()
if WHY and os.environ.get("GPU_LESSONS_REQUIRE_SANDBOX") == "1":
    raise RuntimeError(f"GPU_LESSONS_REQUIRE_SANDBOX=1 but {WHY}")
pytestmark = pytest.mark.skipif(bool(WHY), reason=WHY or "sandbox available")

AS_ROOT = os.geteuid() == 0
UID = sandbox.uid_range()[-1] if AS_ROOT else None  # a slot a grading run never reaches
SMALL = replace(sandbox.Limits(), memory_mib=1024, processes=64, file_mib=8, cpu_s=3,
                tmp_mib=16, work_mib=16)


def run(code: str, *, limits=SMALL, timeout=30, files=None):
    """Run ``code`` in a sandbox; return (outcome, what it printed)."""
    proc = sandbox.Process([sys.executable, "-I", "-c", code], limits=limits, uid=UID,
                           files=files)
    outcome = proc.run(b"", timeout)
    return outcome, outcome.log_tail


def test_sees_only_what_it_needs(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    nb = tmp_path / "n.ipynb"
    nb.write_text('{"cells": []}')
    code = f"""
import os, socket
print('own copy', open('/sandbox/n.ipynb').read())
for path in [{str(secret)!r}, {str(ROOT / 'solutions')!r}, {str(ROOT / 'tests')!r},
             {str(ROOT / 'pyproject.toml')!r}, '/root/.ssh', '/etc/shadow', '/home']:
    print('visible' if os.path.exists(path) else 'hidden', path)
print('package', os.path.isdir({str(PACKAGE)!r}), os.access({str(PACKAGE)!r}, os.W_OK))
try:
    open({str(PACKAGE / 'checks.py')!r}, 'a')
except OSError as e:
    print('write package:', type(e).__name__)
print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
try:
    socket.create_connection(('10.255.255.1', 80), timeout=2)
except OSError as e:
    print('network:', e.errno)
print('uid', os.getuid(), 'hostname', socket.gethostname())
print([l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'NoNewPrivs'))])
"""
    outcome, log = run(code, files={"n.ipynb": nb})
    assert outcome.returncode == 0, log
    assert 'own copy {"cells": []}' in log
    assert "visible" not in log, log
    assert "package True False" in log
    assert "write package: PermissionError" in log or "write package: OSError" in log
    assert "pids [1, 2]" in log  # bwrap's init and this process: nothing of the host
    assert "network: 101" in log  # ENETUNREACH: only a loopback interface
    assert "hostname sandbox" in log
    if AS_ROOT:
        assert f"uid {UID}" in log and "['0000000000000000', '1']" in log


def test_memory_limit_raises_memory_error():
    _outcome, log = run("b = bytearray(2 * 2**30)")
    assert "MemoryError" in log


def test_process_limit_stops_a_fork_bomb():
    code = """
import os, time
n = 0
try:
    while n < 10_000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print('stopped after', n, 'forks:', e.strerror)
"""
    _outcome, log = run(code)
    assert "Resource temporarily unavailable" in log, log
    assert int(log.split("stopped after")[1].split()[0]) < SMALL.processes


def test_file_size_and_tmpfs_limits():
    code = """
import os
try:
    with open('/tmp/big', 'wb') as f:
        f.write(b'x' * 12 * 2**20)
except OSError as e:
    print('big file:', e.strerror)
try:
    with open('/sandbox/sparse', 'wb') as f:
        f.truncate(2 * 2**30)
except OSError as e:
    print('sparse file:', e.strerror)
os.remove('/tmp/big')
n = 0
try:
    while n < 100:
        with open(f'/tmp/f{n}', 'wb') as f:
            f.write(b'x' * 2**20)
        n += 1
except OSError as e:
    print('tmp full after', n, 'MiB:', e.strerror)
"""
    _outcome, log = run(code)
    assert "big file: File too large" in log and "sparse file: File too large" in log
    assert "tmp full after 1" in log and "No space left on device" in log  # 16 MiB tmpfs


def test_cpu_limit_kills_a_busy_process():
    outcome, _log = run("while True: pass", timeout=60)
    assert not outcome.timed_out and outcome.returncode != 0


def test_nothing_outlives_the_sandbox(monkeypatch):
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    monkeypatch.setenv(sandbox.MARKER_VARIABLE, marker)
    code = f"""
import subprocess, sys, time
daemon = "import os, time\\nif os.fork(): os._exit(0)\\nos.setsid()\\ntime.sleep(600)"
subprocess.Popen([sys.executable, '-c', daemon, {marker!r}], start_new_session=True)
print('started', flush=True)
time.sleep(600)
"""
    outcome, log = run(code, timeout=4)
    assert outcome.timed_out and "started" in log
    assert leftovers(marker) == []


def test_output_is_bounded(monkeypatch):
    code = """
import os, sys
out = os.fdopen(int(sys.argv[-1]), 'wb')
out.write(b'{"a": 1}\\n' + b'x' * (3 * 2**20) + b'\\n{"b": 2}\\n')
out.flush()
sys.stdout.write('y' * (5 * 2**20))
"""
    proc = sandbox.Process([sys.executable, "-I", "-c", code], limits=SMALL, uid=UID,
                           max_line=2**20, max_total=8 * 2**20, log_bytes=100)
    outcome = proc.run(b"", 30)
    assert [line for _, line in outcome.lines] == [b'{"a": 1}', b'{"b": 2}']
    assert outcome.overflow == "a result line over 1 MiB"
    assert outcome.log_tail == "y" * 100


def leftovers(marker: str) -> list[str]:
    """Processes whose environment or command line carries ``marker`` (zombies excepted)."""
    time.sleep(0.2)
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            blob = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob and int(proc.name) != os.getpid():
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
    return found


CONTAINED = "" if WHY else sandbox.containment_unavailable()


@pytest.mark.skipif(bool(CONTAINED), reason=CONTAINED or "control groups available")
def test_memfd_pages_are_capped_by_the_sandbox_s_control_group():
    """Pages held by memfds use no address space: RLIMIT_AS does not see them; the group does."""
    code = """
import os
for i in range(32):
    fd = os.memfd_create(f"m{i}")
    os.write(fd, b"x" * (32 * 2**20))
    print("memfd", i, flush=True)
"""
    outcome, log = run(code, limits=replace(SMALL, ram_mib=192))
    assert outcome.oom_kills >= 1 and outcome.returncode != 0, log
    assert "memfd 31" not in log
    assert outcome.memory_peak is not None and outcome.memory_peak <= 192 * 2**20
    found, _ = sandbox.cgroups.hierarchy()
    for base in found.bases.values():  # the sandbox's group is gone with it
        assert not [p for p in base.iterdir() if p.name.startswith("sandbox-")]


def test_the_seccomp_filter_refuses_keyrings_pidfd_getfd_and_namespaces():
    code = """
import ctypes, errno, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    result = libc.syscall(nr, *args)
    return errno.errorcode.get(ctypes.get_errno()) if result < 0 else "allowed"
nr = dict(x86_64={"add_key": 248, "keyctl": 250, "pidfd_getfd": 438, "unshare": 272},
          aarch64={"add_key": 217, "keyctl": 219, "pidfd_getfd": 438, "unshare": 97})
import platform
n = nr[platform.machine()]
print("add_key", call(n["add_key"], b"user", b"k", b"v", 1, -4))
print("keyctl", call(n["keyctl"], 0, -4, 0))
print("pidfd_getfd", call(n["pidfd_getfd"], 0, 0, 0))
print("unshare", call(n["unshare"], 0x10000000 | 0x00020000))
print("unshare -Urm", subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode)
t = threading.Thread(target=lambda: print("thread ran", flush=True)); t.start(); t.join()
print(subprocess.run(["echo", "child ran"], capture_output=True, text=True).stdout.strip())
"""
    outcome, log = run(code)
    assert outcome.returncode == 0, log
    for name in ("add_key", "keyctl", "pidfd_getfd", "unshare"):
        assert f"{name} EPERM" in log, log
    assert "unshare -Urm 1" in log and "thread ran" in log and "child ran" in log
