"""One control group per sandbox: a memory cap that memfd and tmpfs pages cannot dodge.

Per-process limits (``RLIMIT_AS``) do not bind memory held by file descriptors: pages of a
``memfd`` or of a tmpfs file use no address space and show in no process's RSS.  A notebook
that fills 48 memfds of 64 MiB can make the kernel's OOM killer pick the *grader* in a
memory-capped container.  A control group charges every page its processes allocate, those
included, and on overflow the kernel kills inside the group, not outside it.

For each sandbox the grader makes a group of its own under the grader's own group:

* **cgroup v2** (containers, current distributions): ``memory.max``, ``memory.swap.max`` (0:
  no swapping around the cap), ``memory.oom.group`` (an OOM kills the whole group as a unit),
  ``pids.max``; killed with ``cgroup.kill``.  The grader moves itself into a leaf group of its
  own first (``gpu-lessons-<pid>/grader``), because v2 lets controllers be handed to child
  groups only by a group that holds no processes itself;
* **cgroup v1** (older hosts, hybrid layouts): a group in the ``memory`` hierarchy
  (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` set to the same value where
  swap is accounted) and one in ``pids`` (``pids.max``); killed by signalling every process
  the kernel lists in the group's ``cgroup.procs``.

The sandbox's first process writes its own pid into the groups' ``cgroup.procs`` before it
starts bubblewrap (:func:`enter_argv`), so everything of the sandbox is inside from its first
instruction.  Process ids are only ever read from the kernel's cgroup files, never from what
runs inside.  When the sandbox is over, the group is emptied and removed: nothing outlives it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MOUNT = Path("/sys/fs/cgroup")
_MIB = 2**20
_counter = itertools.count()
_lock = threading.Lock()


@dataclass
class Group:
    """One sandbox's control group (one folder in v2, one per hierarchy in v1)."""

    version: int
    folders: tuple[Path, ...]
    memory_bytes: int
    pids: int

    @property
    def procs_files(self) -> list[str]:
        return [str(f / "cgroup.procs") for f in self.folders]

    def pids_inside(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(x) for x in (folder / "cgroup.procs").read_text().split()}
        return found

    def kill(self) -> None:
        """SIGKILL everything in the group (and keep at it until it is empty, for a moment)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.folders[0] / "cgroup.kill").write_text("1")
        for _ in range(50):
            pids = self.pids_inside()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def oom_kills(self) -> int:
        """Processes the kernel killed in this group for going over its memory cap."""
        try:
            if self.version == 2:
                text = (self.folders[0] / "memory.events").read_text()
            else:
                text = (self.folders[0] / "memory.oom_control").read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def peak_bytes(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.folders[0] / name).read_text())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Kill what is left and remove the group's folders."""
        self.kill()
        for folder in self.folders:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.02)


class Hierarchy:
    """Where this grader makes its sandboxes' groups."""

    def __init__(self, version: int, bases: dict[str, Path]):
        self.version, self.bases = version, bases

    def create(self, memory_mib: int, pids: int) -> Group:
        with _lock:
            name = f"sandbox-{next(_counter)}"
        memory = int(memory_mib) * _MIB
        if self.version == 2:
            folder = self.bases["unified"] / name
            folder.mkdir()
            group = Group(2, (folder,), memory, pids)
            try:
                _write(folder / "memory.max", str(memory))
                _write(folder / "memory.swap.max", "0", optional=True)
                _write(folder / "memory.oom.group", "1", optional=True)
                _write(folder / "pids.max", str(pids))
            except OSError:
                group.remove()
                raise
            return group
        mem, pid_folder = self.bases["memory"] / name, self.bases["pids"] / name
        mem.mkdir()
        try:
            pid_folder.mkdir()
        except OSError:
            mem.rmdir()
            raise
        group = Group(1, (mem, pid_folder), memory, pids)
        try:
            _write(mem / "memory.limit_in_bytes", str(memory))
            _write(mem / "memory.memsw.limit_in_bytes", str(memory), optional=True)
            _write(mem / "memory.swappiness", "0", optional=True)
            _write(pid_folder / "pids.max", str(pids))
        except OSError:
            group.remove()
            raise
        return group

    def limit_bytes(self) -> int | None:
        """The memory cap of the group the grader runs in (a container's ``--memory``), or
        None when it has none."""
        folder = self.bases.get("unified") or self.bases.get("memory")
        best = None
        for f in [folder.parent, *folder.parent.parents] if folder else []:
            for name in ("memory.max", "memory.limit_in_bytes"):
                with contextlib.suppress(OSError, ValueError):
                    text = (f / name).read_text().strip()
                    if text != "max" and int(text) < 2**62:
                        best = int(text) if best is None else min(best, int(text))
            if f == MOUNT or MOUNT not in f.parents:
                break
        return best

    def close(self) -> None:
        """Remove the grader's own folders (after every sandbox's group is gone)."""
        for key, base in self.bases.items():
            if self.version == 2 and key == "unified":
                grader = base / "grader"
                own = base.parent / "cgroup.procs"
                with contextlib.suppress(OSError):  # move back to where the grader started
                    own.write_text(str(os.getpid()))
                with contextlib.suppress(OSError):
                    grader.rmdir()
            with contextlib.suppress(OSError):
                base.rmdir()


def _write(path: Path, value: str, *, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not optional:
            raise


def _own_groups() -> dict[str, str]:
    """This process's group per hierarchy, from /proc/self/cgroup ('unified' for v2)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                found["unified"] = path
            for c in controllers.split(","):
                if c in ("memory", "pids"):
                    found[c] = path
    return found


_hierarchy: Hierarchy | None = None
_why = ""


def hierarchy() -> tuple[Hierarchy | None, str]:
    """This grader's :class:`Hierarchy`, or None and why cgroups cannot be used here.
    Made once per process (the grader's own folders are made on first use)."""
    global _hierarchy, _why
    with _lock:
        if _hierarchy is None and not _why:
            try:
                _hierarchy = _setup()
                import atexit

                atexit.register(_hierarchy.close)
            except _Unavailable as exc:
                _why = str(exc)
            except OSError as exc:
                _why = f"cannot make control groups ({exc.strerror or exc})"
        return _hierarchy, _why


class _Unavailable(Exception):
    pass


def _setup() -> Hierarchy:
    import sys

    if not sys.platform.startswith("linux"):
        raise _Unavailable(f"control groups need Linux (this is {sys.platform})")
    own = _own_groups()
    tag = f"gpu-lessons-{os.getpid()}"
    # v2: the unified hierarchy, when it holds the memory and pids controllers.
    v2_mount = MOUNT if (MOUNT / "cgroup.controllers").exists() else MOUNT / "unified"
    if "unified" in own and (v2_mount / "cgroup.controllers").exists():
        here = v2_mount / own["unified"].lstrip("/")
        available = set((here / "cgroup.controllers").read_text().split())
        if {"memory", "pids"} <= available:
            return _setup_v2(here, tag)
    why_v2 = "the cgroup v2 hierarchy does not offer the memory and pids controllers here"
    if "memory" in own and "pids" in own and (MOUNT / "memory").is_dir() \
            and (MOUNT / "pids").is_dir():
        bases = {c: MOUNT / c / own[c].lstrip("/") / tag for c in ("memory", "pids")}
        made = []
        try:
            for base in bases.values():
                base.mkdir()
                made.append(base)
        except OSError as exc:
            for base in made:
                base.rmdir()
            raise _Unavailable(f"{why_v2}, and cgroup v1 groups cannot be made in "
                               f"{base.parent} ({exc.strerror or exc})") from None
        return Hierarchy(1, bases)
    raise _Unavailable(why_v2 + ", and there are no cgroup v1 memory and pids hierarchies")


def _setup_v2(here: Path, tag: str) -> Hierarchy:
    base = here / tag
    try:
        base.mkdir()
        grader = base / "grader"
        grader.mkdir()
        (grader / "cgroup.procs").write_text(str(os.getpid()))
        (base / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        with contextlib.suppress(OSError):
            (here / "cgroup.procs").write_text(str(os.getpid()))
        for f in (base / "grader", base):
            with contextlib.suppress(OSError):
                f.rmdir()
        raise _Unavailable(f"cannot hand the memory and pids controllers to a group in {here} "
                           f"({exc.strerror or exc}); in a container, give it its own cgroup "
                           f"namespace, writable (see docs/instructors.md)") from None
    h = Hierarchy(2, {"unified": base})
    # The sandboxes' groups sit beside the grader's leaf, not inside it.
    return h


def enter_argv(group: Group | None, argv: list[str]) -> list[str]:
    """``argv`` behind a tiny shell that moves itself into ``group`` (and marks itself first
    for the OOM killer) before it becomes ``argv``: nothing of the sandbox runs outside."""
    if group is None:
        return argv
    script = ('p=$$; while [ "$1" != -- ]; do echo "$p" > "$1" || exit 125; shift; done; '
              'shift; echo 1000 > /proc/self/oom_score_adj; exec "$@"')
    return ["/bin/sh", "-c", script, "sh", *group.procs_files, "--", *argv]


def protect_grader() -> None:
    """Make the OOM killer pass over the grader (root only; a no-op otherwise)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("-900")
