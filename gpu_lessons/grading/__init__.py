"""The instructor's grader: ``gpu-lessons grade SUBMISSIONS_DIR --out grades.csv``.

Each submitted notebook runs in its own bubblewrap sandbox (a worker process and a Jupyter
kernel, in a control group of their own, under a seccomp filter); the grader reads the
answers out of the kernel by name and judges them in its own process with the package's
references.  One module per job:

==============  ====================================================================
``runner``      the grading run: a pool of sandboxes, one row per submission
``options``     the run's options, declared once for ``grade()`` and the command line
``journal``     every finished row on disk (fsync'd); a killed run resumes from it
``submissions`` finding notebooks, student ids, reading a notebook with bounds
``plan``        what to ask one student's kernel; references computed up front
``sandbox``     bubblewrap: what a sandbox sees, its limits, how it is killed
``cgroups``     one control group per sandbox: memory (memfd, tmpfs) and tasks capped
``seccomp``     the system-call filter every sandbox runs under
``worker``      runs one notebook in a kernel, inside the sandbox
``probe``       the standard-library-only code sent into the kernel to read answers
``untrusted``   bounded, checked parsing of everything that comes out of a sandbox
``rows``        from a sandbox's report to a row: status, reason, points, feedback
``puzzle_eval`` puzzle kernels judged from their source in a sandbox of their own
``output``      CSV (formula-safe), JSON and per-student feedback files, atomically
``results``     the ``Row`` and ``Grades`` records
==============  ====================================================================

Importing this package is cheap: the names below load their module on first use (and
``gpu_lessons.checks`` imports only ``probe``, which imports nothing of the package).
"""

from __future__ import annotations

import importlib

_NAMES = {
    "grade": "runner", "SandboxUnavailable": "runner", "NO_SANDBOX_RISKS": "runner",
    "Plan": "plan", "Puzzle": "plan", "Limits": "sandbox", "GradeOptions": "options",
    "NO_CGROUP_RISKS": "runner",
    "Row": "results", "Grades": "results", "STATUSES": "results", "OK": "results",
    "TIMEOUT": "results", "CRASHED": "results", "INVALID": "results",
    "INVALID_RESULT": "results", "NOT_GRADED": "results",
    "DEFAULT_ID_PATTERN": "submissions", "find_submissions": "submissions",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
