"""The seccomp filter every sandbox runs under: system calls a notebook never needs are refused.

bubblewrap loads a classic-BPF program (``bwrap --seccomp FD``) just before it starts the
sandboxed command, so the filter binds everything inside and cannot be removed.  The program
is assembled here, by hand, from the kernel's documented layout (``struct seccomp_data``:
``nr`` at offset 0, ``arch`` at 4, the arguments at 16 + 8 i; ``linux/seccomp.h``,
``linux/filter.h``); no library is needed.  What it refuses, with ``EPERM``:

* **the kernel keyrings** (``add_key``, ``request_key``, ``keyctl``): keyrings belong to a user
  id, not to a namespace, so a key one student planted would be read by the next notebook
  graded as the same user id, and outlive the run;
* **reaching into other processes** (``pidfd_getfd``, ``ptrace``, ``process_vm_readv``/
  ``writev``, ``kcmp``): the worker's result pipe must stay the worker's;
* **new namespaces and mounts** (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*``
  flag, ``mount`` and the new mount API, ``pivot_root``, ``chroot``): a user namespace
  inside the sandbox could mount a tmpfs of its own, outside the sandbox's size limits;
  ``clone3`` is answered ``ENOSYS`` (its flags live in memory a filter cannot read), so the C
  library falls back to ``clone``, whose flags it can;
* **kernel facilities with a history of privilege bugs or a machine-wide effect**: ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring_*``, modules, ``kexec``, swap, reboot,
  clocks, ``syslog``, quotas, ``acct``, file handles (``open_by_handle_at``),
  ``fanotify_init``, ``memfd_secret``;
* on x86-64, every call of the x32 ABI, and any call from another architecture.

The lists are per architecture (x86-64 and aarch64); elsewhere :func:`program` returns
``None`` and :func:`unavailable` says why.
"""

from __future__ import annotations

import errno
import platform
import struct

# linux/filter.h and linux/seccomp.h
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME (0x80)
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080
_X32_BIT = 0x40000000

REFUSED = ("add_key", "request_key", "keyctl", "pidfd_getfd", "ptrace", "process_vm_readv",
           "process_vm_writev", "kcmp", "unshare", "setns", "mount", "umount2", "pivot_root",
           "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
           "mount_setattr", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
           "io_uring_enter", "io_uring_register", "init_module", "finit_module",
           "delete_module", "kexec_load", "kexec_file_load", "swapon", "swapoff", "reboot",
           "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl",
           "acct", "open_by_handle_at", "name_to_handle_at", "fanotify_init", "memfd_secret",
           "vhangup")

#: (AUDIT_ARCH value, system call numbers) per ``platform.machine()``.
TABLES = {
    "x86_64": (0xC000003E, {
        "add_key": 248, "request_key": 249, "keyctl": 250, "pidfd_getfd": 438, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429,
        "open_tree": 428, "mount_setattr": 442, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "swapon": 167,
        "swapoff": 168, "reboot": 169, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "syslog": 103, "quotactl": 179, "acct": 163,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "fanotify_init": 300,
        "memfd_secret": 447, "vhangup": 153, "clone": 56, "clone3": 435}),
    "aarch64": (0xC00000B7, {
        "add_key": 217, "request_key": 218, "keyctl": 219, "pidfd_getfd": 438, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "unshare": 97,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429,
        "open_tree": 428, "mount_setattr": 442, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "swapon": 224,
        "swapoff": 225, "reboot": 142, "settimeofday": 170, "clock_settime": 112,
        "clock_adjtime": 266, "adjtimex": 171, "syslog": 116, "quotactl": 60, "acct": 89,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "fanotify_init": 262,
        "memfd_secret": 447, "vhangup": 58, "clone": 220, "clone3": 435}),
}


def unavailable(machine: str | None = None) -> str:
    """Why no filter can be built for this machine ("" when one can)."""
    machine = machine or platform.machine()
    return "" if machine in TABLES else (f"no seccomp system-call table for {machine!r} "
                                         f"(known: {', '.join(TABLES)})")


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple:
    return (code, jt, jf, k)


def instructions(machine: str | None = None) -> list[tuple[int, int, int, int]] | None:
    """The filter as ``(code, jt, jf, k)`` tuples, or None for an unknown architecture."""
    machine = machine or platform.machine()
    if machine not in TABLES:
        return None
    arch, numbers = TABLES[machine]
    refused = sorted({numbers[name] for name in REFUSED if name in numbers})
    # Layout: arch check, nr load, [x32 check], one jump per refused call, clone, clone3,
    # allow; then the three return blocks at the end.  Offsets are counted from the
    # instruction after the jump.
    body: list = [("ld", _OFF_ARCH), ("jeq", arch, 1, 0), ("ret", RET_KILL_PROCESS),
                  ("ld", _OFF_NR)]
    if machine == "x86_64":
        body.append(("jge", _X32_BIT, "deny", None))
    for nr in refused:
        body.append(("jeq", nr, "deny", None))
    body.append(("jeq", numbers["clone3"], "enosys", None))
    body.append(("jeq", numbers["clone"], None, "allow"))
    body.append(("ld", _OFF_ARG0))               # clone's flags (their low 32 bits)
    body.append(("jset", CLONE_NEW_FLAGS, "deny", None))
    labels_at = len(body)
    body += [("ret", RET_ALLOW), ("ret", _RET_ERRNO | errno.EPERM),
             ("ret", _RET_ERRNO | errno.ENOSYS)]
    target = {"allow": labels_at, "deny": labels_at + 1, "enosys": labels_at + 2}
    out = []
    for i, op in enumerate(body):
        kind = op[0]
        if kind == "ld":
            out.append(_insn(_LD_W_ABS, op[1]))
        elif kind == "ret":
            out.append(_insn(_RET_K, op[1]))
        else:
            code = {"jeq": _JEQ_K, "jge": _JGE_K, "jset": _JSET_K}[kind]
            jt, jf = (target[j] - i - 1 if isinstance(j, str) else (j or 0) for j in op[2:4])
            if not (0 <= jt <= 255 and 0 <= jf <= 255):
                raise AssertionError("seccomp jump out of range")
            out.append(_insn(code, op[1], jt, jf))
    return out


def program(machine: str | None = None) -> bytes | None:
    """The filter as the bytes of a ``struct sock_filter`` array (what ``bwrap --seccomp``
    reads), or None for an unknown architecture."""
    insns = instructions(machine)
    if insns is None:
        return None
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in insns)


def verdict(nr: int, arch: int, arg0: int = 0, machine: str | None = None) -> int:
    """Run the filter on one call, as the kernel would (for tests): the action returned."""
    insns = instructions(machine)
    data = {_OFF_NR: nr, _OFF_ARCH: arch, _OFF_ARG0: arg0 & 0xFFFFFFFF}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == _LD_W_ABS:
            acc = data[k]
        elif code == _RET_K:
            return k
        else:
            taken = {_JEQ_K: acc == k, _JGE_K: acc >= k, _JSET_K: bool(acc & k)}[code]
            pc += jt if taken else jf
