"""One bubblewrap sandbox per submission: what it sees, what it may use, how it is stopped.

A sandbox (``bwrap``, Debian package ``bubblewrap``) gets:

* **its own namespaces**: PID (it sees only its own processes, not the grader or other
  submissions, and everything in it dies when its first process dies), IPC, network (only
  a loopback interface, for the Jupyter kernel's sockets) and UTS;
* **a read-only view of what Python needs and nothing else**: the system directories
  (``/usr`` and its ``/bin``, ``/lib`` links), a few files of ``/etc``, the Python installation
  (``sys.base_prefix``), the environment (``sys.prefix``) and the ``gpu_lessons`` package at
  its own path.  Not the repository the package may be installed from (it holds
  ``solutions/``), not the submissions folder, not the grader's output;
* **two private tmpfs folders of bounded size**: ``/sandbox`` (the work folder, holding its
  own copy of the one notebook, and ``HOME``) and ``/tmp``;
* **an unprivileged identity** when the grader runs as root: ``setpriv`` switches to a user id
  of its own (``UID_BASE`` + a slot number), with no groups and no capabilities, before any
  Python starts; ``bwrap`` always sets ``no_new_privs``.  A grader that is not root runs
  ``bwrap`` in a user namespace as itself;
* **resource limits** (``prlimit``, per process): address space, file size, CPU seconds,
  open files, no core dumps, and a process count (``RLIMIT_NPROC``, which counts threads
  too).  ``RLIMIT_NPROC`` does not bind root, which is why root graders switch user: each
  concurrent sandbox has its own user id, so the count is per sandbox;
* ``--die-with-parent`` and ``--new-session``: it dies with the grader and cannot push
  keystrokes into the grader's terminal.

The grader stops a sandbox by killing the namespace's first process (through a pidfd taken
when bwrap reported its pid, so a reused pid is never hit) and then ``bwrap`` itself: the
kernel then kills everything left inside.  No process id is ever taken from what runs
inside.  ``docs/measured/grading.md`` records what each limit does, measured.

Without bubblewrap (or on macOS/Windows) :class:`Process` can run the same command as a
plain child process in a throw-away folder (``sandbox=False``): that protects nothing, and
the grader only does it when told ``--no-sandbox``.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .._format import binary_bytes
from . import cgroups, seccomp

BWRAP = "/usr/bin/bwrap"
#: The sandbox's work folder (and HOME) inside it.
WORK = "/sandbox"
#: Sandboxed processes of a root grader run as UID_BASE + slot: ids no real account uses.
UID_BASE = 2_000_000_000
#: Set in every sandboxed process's environment, so leftovers can be found (tests do).
MARKER_VARIABLE = "GPU_LESSONS_SANDBOX"
#: Tells the command inside where its work folder is.
WORK_VARIABLE = "GPU_LESSONS_WORK"
#: Files of /etc that Python, Jupyter's sockets and time zones read (bound when present).
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
             "nsswitch.conf", "hosts", "host.conf", "gai.conf", "mime.types", "fonts")
#: Top-level system folders: bound when they are real folders, re-linked when links (/lib ->
#: usr/lib on merged-/usr systems).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox.  Sizes in MiB, times in seconds.

    ``memory_mib`` caps each process's address space (``RLIMIT_AS``; a NumPy + Jupyter kernel
    needs about 1 GiB of it, most never touched); ``processes`` caps the tasks (processes and
    threads) of the sandbox's user; ``file_mib`` the size of any file written; ``cpu_s`` each
    process's CPU time; ``tmp_mib``/``work_mib`` the two tmpfs folders (their pages are RAM).
    ``ram_mib`` caps the memory of the whole sandbox, every process together, in its control
    group (:mod:`~gpu_lessons.grading.cgroups`): anonymous memory, page cache, tmpfs and memfd
    pages, with no swap; ``processes`` is also the group's ``pids.max``.
    """

    def __post_init__(self):
        for name in ("memory_mib", "ram_mib", "processes", "file_mib", "cpu_s", "open_files",
                     "tmp_mib", "work_mib"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"Limits.{name}={value!r}: expected a whole number >= 1")

    memory_mib: int = 4096
    ram_mib: int = 1536
    processes: int = 256
    file_mib: int = 64
    cpu_s: int = 900
    open_files: int = 1024
    tmp_mib: int = 256
    work_mib: int = 256

    def prlimit_args(self) -> list[str]:
        mib = 1024 * 1024
        return [f"--as={self.memory_mib * mib}", f"--nproc={self.processes}",
                f"--fsize={self.file_mib * mib}", f"--cpu={self.cpu_s}",
                f"--nofile={self.open_files}", "--core=0"]


# -- is a sandbox available? ------------------------------------------------------------------

def unavailable() -> str:
    """Why submissions cannot be sandboxed here ("" when they can)."""
    return _unavailable()


@cache
def _unavailable() -> str:
    if not sys.platform.startswith("linux"):
        return f"bubblewrap sandboxes need Linux (this is {sys.platform})"
    if not os.access(BWRAP, os.X_OK):
        return (f"{BWRAP} is missing: install bubblewrap (Debian/Ubuntu: apt-get install "
                "bubblewrap)")
    for tool in ("prlimit", *(("setpriv",) if os.geteuid() == 0 else ())):
        if _tool(tool) is None:
            return f"{tool} (util-linux) is missing"
    why = seccomp.unavailable()
    if why:
        return f"no system-call filter can be made: {why}"
    # The very command a submission gets (an old bwrap without --size fails here, not later).
    info_r, info_w = os.pipe()
    filter_fd = seccomp_fd()
    try:
        cmd = bwrap_command([sys.executable, "-I", "-c", "pass"], limits=Limits(),
                            uid=uid_range()[-1] if os.geteuid() == 0 else None, env={},
                            files={}, info_fd=info_w, seccomp_fd=filter_fd)
        probe = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                               pass_fds=(info_w, filter_fd))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start: {exc}"
    finally:
        for fd in (info_w, info_r, filter_fd):
            os.close(fd)
    if probe.returncode != 0:
        why = probe.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        return f"bubblewrap cannot make a sandbox here ({why[0][:200]})"
    return ""


def seccomp_fd() -> int:
    """A descriptor, at offset 0, holding the seccomp program (``bwrap --seccomp`` reads it)."""
    r, w = os.pipe()
    data = seccomp.program()
    try:
        os.write(w, data)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(w)
    return r


def containment_unavailable() -> str:
    """Why a sandbox cannot get a control group of its own here ("" when it can)."""
    return cgroups.hierarchy()[1]


def _tool(name: str) -> str | None:
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return os.path.realpath(path)
    return None


# -- what the sandbox sees -------------------------------------------------------------------

def readonly_paths() -> list[str]:
    """The host paths bound read-only at their own path: Python, the environment, the package."""
    import gpu_lessons

    wanted = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable)),
              os.path.dirname(os.path.realpath(gpu_lessons.__file__))]
    paths: list[str] = []
    for p in sorted({os.path.realpath(p) for p in wanted}, key=len):
        if p in ("/", "") or any(p == q or p.startswith(q.rstrip("/") + "/")
                                 for q in (*paths, "/usr")):
            continue  # already visible through a parent
        paths.append(p)
    return paths


def _namespace_args() -> list[str]:
    return ["--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--hostname", "sandbox", "--die-with-parent", "--new-session"]


def _system_args() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _readonly_args() -> list[str]:
    """Python, the environment and the package, bound after the tmpfs folders are mounted
    (an environment under /tmp stays visible)."""
    args: list[str] = []
    made: set[str] = {"/tmp", WORK}  # already there, with their own permissions
    for p in readonly_paths():
        # bwrap would make the folders above a bound path 0700 (root's only); make them
        # traversable, so the unprivileged user inside can reach what is bound there.
        for parent in reversed(Path(p).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", p, p]
    return args


def package_parent() -> str:
    """The folder holding the ``gpu_lessons`` the grader runs (bound read-only in every
    sandbox: only the package itself is visible there)."""
    import gpu_lessons

    return os.path.dirname(os.path.dirname(os.path.realpath(gpu_lessons.__file__)))


def python_module(module: str) -> list[str]:
    """``python -I -m module``, importing the grader's own ``gpu_lessons`` (not whichever an
    editable install's finder would name): isolated mode ignores ``PYTHONPATH``."""
    boot = (f"import runpy, sys; sys.path.insert(0, {package_parent()!r}); "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", boot]


def _sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The whole environment inside: nothing of the grader's own (tokens, paths) leaks in.
    ``PYTHONPATH`` names the grader's package, so a notebook's kernel imports the same
    ``gpu_lessons`` the grader judges it with."""
    bin_dir = os.path.dirname(sys.executable)
    base = {
        "PYTHONPATH": package_parent(),
        "HOME": WORK, "USER": "student", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "TMPDIR": "/tmp", "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
        "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": f"{WORK}/.ipython",
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib",
        "NUMBA_CACHE_DIR": "/tmp/numba", "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONUNBUFFERED": "1",
        # One thread per numeric library: threads count against the process limit, and a
        # grading run already uses every core through --jobs.
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
    }
    return {**base, **env}


def bwrap_command(argv: list[str], *, limits: Limits, uid: int | None, env: dict[str, str],
                  files: dict[str, int], info_fd: int, seccomp_fd: int | None = None
                  ) -> list[str]:
    """The full ``bwrap ... -- prlimit ... -- setpriv ... -- argv`` command line.

    ``files`` maps a path under :data:`WORK` to an open file descriptor whose contents are
    copied there; ``uid`` is the user to switch to (None: stay, for a grader that is not root);
    ``seccomp_fd`` holds the system-call filter (:mod:`~gpu_lessons.grading.seccomp`).
    """
    mib = 1024 * 1024
    filtering = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    cmd = [BWRAP, *_namespace_args(), "--info-fd", str(info_fd), *filtering, *_system_args(),
           "--proc", "/proc", "--dev", "/dev",
           "--perms", "1777", "--size", str(limits.tmp_mib * mib), "--tmpfs", "/tmp",
           "--perms", "0777", "--size", str(limits.work_mib * mib), "--tmpfs", WORK,
           *_readonly_args()]
    for dest, fd in files.items():
        cmd += ["--perms", "0666", "--file", str(fd), dest]
    cmd += ["--chdir", "/", "--clearenv"]
    for key, value in _sandbox_env(env).items():
        cmd += ["--setenv", key, value]
    cmd += ["--", _tool("prlimit") or "prlimit", *limits.prlimit_args(), "--"]
    if uid is not None:
        cmd += [_tool("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    return cmd + argv


# -- running one ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """How a sandboxed command ended.  ``lines`` are what it wrote to its result channel,
    each ``(seconds after the start when it was read, line)`` with the line at most
    ``max_line`` bytes; everything here came out of the sandbox, so the caller must treat it
    as untrusted."""

    returncode: int | None
    timed_out: bool
    lines: tuple[tuple[float, bytes], ...]
    log_tail: str
    overflow: str  # "" or why some output was dropped
    seconds: float
    tasks: int | None = None  # processes + threads its user had when it ended (root only)
    oom_kills: int = 0        # processes the kernel killed for going over ``ram_mib``
    memory_peak: int | None = None  # bytes its control group held at most


def uid_range(pid: int | None = None) -> range:
    """The user ids the sandboxes of the grader process ``pid`` (default: this one) run as:
    1,024 ids of their own, so two grading runs on one machine never share a user."""
    base = UID_BASE + ((os.getpid() if pid is None else pid) % 65536) * 1024
    return range(base, base + 1024)


class Slots:
    """Hands out the slot numbers that give concurrent sandboxes their own user ids."""

    def __init__(self, n: int):
        self._free = list(range(n))
        self._lock = threading.Lock()
        self._base = uid_range().start

    @contextlib.contextmanager
    def take(self):
        with self._lock:
            slot = self._free.pop(0) if self._free else 1023
        try:
            yield self._base + slot % 1024
        finally:
            with self._lock:
                if slot != 1023:
                    self._free.append(slot)


class Process:
    """One sandboxed (or, with ``sandbox=False``, merely separate) run of a command.

    The command gets one more argument, the number of a file descriptor on which it writes its
    results, one line each; it reads ``stdin`` (bytes), and its stdout and stderr are its log.
    ``files`` (name -> path) are copied into its work folder.  :meth:`run` waits at most
    ``timeout`` seconds, then kills everything the command started.
    """

    def __init__(self, argv: list[str], *, sandbox: bool = True, limits: Limits = Limits(),
                 uid: int | None = None, env: dict[str, str] | None = None,
                 files: dict[str, Path] | None = None, max_line: int = 1 * 2**20,
                 max_total: int = 16 * 2**20, log_bytes: int = 2000, cgroup: bool = True,
                 on_line=None):
        self.argv, self.sandbox, self.limits, self.uid = argv, sandbox, limits, uid
        self.cgroup = cgroup and sandbox
        self.on_line = on_line
        self._group: cgroups.Group | None = None
        self.env, self.files = dict(env or {}), dict(files or {})
        self.max_line, self.max_total, self.log_bytes = max_line, max_total, log_bytes
        self._proc: subprocess.Popen | None = None
        self._pidfd: int | None = None
        self._lock = threading.Lock()
        self._killed = False
        self._scratch: str | None = None

    # The run -------------------------------------------------------------------------------

    def run(self, stdin: bytes, timeout: float) -> Outcome:
        start = time.monotonic()
        result_r, result_w = os.pipe()
        info_r, info_w = os.pipe()
        opened: list[int] = []
        try:
            with self._lock:
                if self._killed:
                    raise RuntimeError("grading was interrupted")
                self._proc = self._start(result_w, info_w, opened)
        finally:
            for fd in (result_w, info_w, *opened):
                os.close(fd)
        writer = threading.Thread(target=_feed, args=(self._proc.stdin, stdin), daemon=True)
        writer.start()
        reader = _Reader(self.max_line, self.max_total, self.log_bytes, start, self.on_line)
        timed_out, tasks = False, None
        try:
            timed_out = reader.pump(self._proc, {result_r: "result", info_r: "info",
                                                 self._proc.stdout.fileno(): "log"},
                                    start + timeout, self._on_info)
            if self.sandbox and self.uid is not None:
                tasks = count_tasks(self.uid)
        finally:
            self.kill()
            self._proc.wait()
            reader.drain()
            for fd in (result_r, info_r):
                os.close(fd)
            self._proc.stdout.close()
            writer.join(timeout=5)
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
            oom, peak = 0, None
            if self._group is not None:
                oom, peak = self._group.oom_kills(), self._group.peak_bytes()
                self._group.remove()
        return Outcome(self._proc.returncode, timed_out, tuple(reader.lines), reader.log_tail(),
                       reader.overflow, time.monotonic() - start, tasks, oom,
                       peak)

    def _start(self, result_w: int, info_w: int, opened: list[int]) -> subprocess.Popen:
        """Start the command; its last argument is the number of its result descriptor."""
        marker = {MARKER_VARIABLE: os.environ.get(MARKER_VARIABLE, "1")}
        argv = [*self.argv, str(result_w)]
        work = {WORK_VARIABLE: WORK}
        if self.sandbox:
            fds = {}
            for dest, src in self.files.items():
                fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                opened.append(fd)
                fds[f"{WORK}/{dest}"] = fd
            filter_fd = seccomp_fd()
            opened.append(filter_fd)
            cmd = bwrap_command(argv, limits=self.limits, uid=self.uid,
                                env={**self.env, **marker, **work}, files=fds, info_fd=info_w,
                                seccomp_fd=filter_fd)
            if self.cgroup:
                found, why = cgroups.hierarchy()
                if found is None:
                    raise RuntimeError(f"no control group for the sandbox: {why}")
                self._group = found.create(self.limits.ram_mib, self.limits.processes)
                cmd = cgroups.enter_argv(self._group, cmd)
            env, cwd = {"PATH": "/usr/bin:/bin"}, "/"
            keep = (result_w, info_w, filter_fd, *fds.values())
        else:  # --no-sandbox: a plain child process in a throw-away folder
            self._scratch = tempfile.mkdtemp(prefix="gpu-lessons-grade-")
            for dest, src in self.files.items():
                shutil.copyfile(src, os.path.join(self._scratch, dest))
            env = {**os.environ, "PYTHONPATH": package_parent(), **self.env, **marker,
                   "HOME": self._scratch,
                   WORK_VARIABLE: self._scratch}
            cmd, cwd, keep = argv, self._scratch, (result_w,)
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=keep, start_new_session=True)

    def _on_info(self, data: bytes) -> None:
        """bwrap's own report (written outside the sandbox): the namespace's first pid."""
        match = re.search(rb'"child-pid"\s*:\s*(\d+)', data)
        if match and self._pidfd is None and hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(int(match.group(1)))

    # Stopping -------------------------------------------------------------------------------

    def kill(self) -> None:
        """Kill everything this run started.  Safe to call from another thread, and twice."""
        with self._lock:
            self._killed = True
            proc, pidfd = self._proc, self._pidfd
            self._pidfd = None
        if proc is None:
            return
        if self._group is not None:  # the whole group at once, whatever it holds
            self._group.kill()
        if self.sandbox:
            if pidfd is not None:  # the PID namespace's init: its death ends the namespace
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.close(pidfd)
            with contextlib.suppress(OSError):
                proc.kill()  # bwrap itself; --die-with-parent takes the namespace with it
        else:
            _kill_tree(proc)


def count_tasks(uid: int) -> int:
    """Processes and threads running as ``uid`` (read from the kernel's /proc, not from the
    sandbox), to tell a notebook that used up its process limit."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines()
                          if line.startswith(("Uid:", "Threads:")))
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
    return total


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)
    with contextlib.suppress(OSError, ValueError):
        pipe.close()


def _kill_tree(proc: subprocess.Popen) -> None:
    """Without a sandbox: SIGKILL the child's session and every descendant /proc shows.

    Best effort only: a process that left the tree (a double fork) is not found.  That is one
    of the reasons ``--no-sandbox`` is for trusted notebooks.
    """
    for _ in range(2):
        pids = _descendants(proc.pid)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children") if Path("/proc").is_dir() else []:
            with contextlib.suppress(OSError, ValueError):
                kids = [int(x) for x in task.read_text().split()]
                found += kids
                todo += kids
    return found


class _Reader:
    """Reads a sandbox's pipes without trusting them: bounded lines, a bounded total, and a
    bounded tail of its log.  Never blocks past the deadline."""

    def __init__(self, max_line: int, max_total: int, log_bytes: int, start: float,
                 on_line=None):
        self.max_line, self.max_total, self.log_bytes = max_line, max_total, log_bytes
        self.start = start
        #: ``on_line(seconds, line)`` consumes each line as it arrives (none are kept); it
        #: returns a text to stop reading (the rest is tampering), or None.
        self.on_line = on_line
        self.stopped = ""
        self.lines: list[tuple[float, bytes]] = []
        self.overflow = ""
        self._buf = bytearray()
        self._skipping = False
        self._total = 0
        self._log = bytearray()
        self._sel: selectors.BaseSelector | None = None
        self._names: dict[int, str] = {}
        self._info = bytearray()

    def pump(self, proc, fds: dict[int, str], deadline: float, on_info) -> bool:
        """Read until every pipe is closed and ``proc`` exited; True if the deadline passed."""
        self._sel, self._names, self._on_info = selectors.DefaultSelector(), fds, on_info
        for fd in fds:
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ)
        exited_at = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True
            if self.stopped:
                return False
            if proc.poll() is not None:
                exited_at = exited_at or now
                # Every writer is gone once the sandbox is; a pipe still open a second
                # later is held by an escaped process (no sandbox): stop waiting for it.
                if not self._sel.get_map() or now - exited_at > 1.0:
                    return False
            for key, _ in self._sel.select(timeout=min(0.25, deadline - now)):
                self._read(key.fd)

    def drain(self) -> None:
        """Whatever is still buffered in the pipes (nothing new can arrive)."""
        if self._sel is None:
            return
        for key in list(self._sel.get_map().values()):
            for _ in range(64):  # at most 4 MiB more per pipe
                if not self._read(key.fd):
                    break
        self._sel.close()

    def _read(self, fd: int) -> bool:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)
            return False
        kind = self._names[fd]
        if kind == "log":
            self._log += data
            del self._log[:-self.log_bytes]
        elif kind == "info":
            self._info += data[:4096]
            self._on_info(bytes(self._info))
        else:
            self._take(data)
        return True

    def _take(self, data: bytes) -> None:
        self._total += len(data)
        if self._total > self.max_total:
            self.overflow = self.overflow or f"more than {binary_bytes(self.max_total, 'g')} of results"
            return
        self._buf += data
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > self.max_line:
                    self.overflow = self.overflow or f"a result line over {binary_bytes(self.max_line, 'g')}"
                    self._skipping = True
                    self._buf.clear()
                return
            line = bytes(self._buf[:end])
            del self._buf[:end + 1]
            if self._skipping:  # the end of an over-long line
                self._skipping = False
                continue
            if len(line) > self.max_line:
                self.overflow = self.overflow or f"a result line over {binary_bytes(self.max_line, 'g')}"
                continue
            if self.stopped:
                continue
            at = time.monotonic() - self.start
            if self.on_line is None:
                self.lines.append((at, line))
            else:
                self.stopped = self.on_line(at, line) or ""

    def log_tail(self) -> str:
        return bytes(self._log).decode("utf-8", "replace")

