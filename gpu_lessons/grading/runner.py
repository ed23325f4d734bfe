"""The grading run: every submission in its own sandbox, in parallel, then one write.

For each notebook, in a thread of a pool of ``jobs``:

1. read it with bounds (:mod:`~gpu_lessons.grading.submissions`) and keep its code cells;
2. build the student's :class:`~gpu_lessons.grading.plan.Plan` from ``questions_for(student)``
   and compute its references, in this process, before anything of the student's runs;
3. run the worker in a fresh sandbox (:mod:`~gpu_lessons.grading.sandbox`) that sees the
   package read-only and its own copy of the one notebook, with a hard wall-clock limit;
4. check what came out (:mod:`~gpu_lessons.grading.rows`), evaluate puzzle kernels in a
   sandbox of their own, and judge the answers here.

Each row is journaled (fsync'd) as it finishes (:mod:`~gpu_lessons.grading.journal`); when
every sandbox is gone the grades are written, once, atomically, and the journal removed.  Ctrl-C
kills every running sandbox, marks the rest ``not graded``, still writes what was graded and
keeps the journal: the same command resumes.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .._format import binary_bytes
from . import cgroups as _cgroups
from . import output
from . import sandbox as _sandbox
from . import submissions as _subs
from .plan import Plan, Puzzle, chapter_puzzles
from .puzzle_eval import puzzle_seed
from .results import CRASHED, INVALID, NOT_GRADED, Grades, Row
from .rows import Report, make_row, status_and_reason

INTERRUPTED = "the grading run was interrupted before this notebook was graded"


class SandboxUnavailable(RuntimeError):
    """Untrusted notebooks cannot be sandboxed here and ``--no-sandbox`` was not given."""


NO_SANDBOX_RISKS = (
    "without a sandbox each notebook runs as you, with your files, network and processes in "
    "reach: it can read or change other submissions, the grades file, the installed package "
    "and anything else you can, and leave processes running after the grader exits. Use "
    "--no-sandbox only for notebooks you trust (your own solutions), or inside a container "
    "or VM that holds nothing else")


NO_CGROUP_RISKS = (
    "without a control group per sandbox, memory a notebook holds outside its address space "
    "(memfd and tmpfs pages) is not capped: one notebook can fill the machine's memory, and "
    "in a memory-capped container make the kernel kill the grader, so that nobody's grades "
    "are written (the journal keeps finished rows); the per-process limits and everything "
    "else of the sandbox still hold")
#: Memory the grader keeps for itself when it sizes the sandboxes to a container's cap:
#: its own base, plus a bound per job (see Report.MAX_ANSWER_BYTES and the reader's caps).
GRADER_BASE_MIB, GRADER_PER_JOB_MIB = 384, 128
#: The least memory a sandbox may get (a NumPy + Jupyter kernel needs about 300 MiB).
MIN_RAM_MIB = 640


def grade(submissions, *, questions_for: Callable[[str], tuple] | None = None, puzzles=None,
          puzzles_for: Callable[[str], tuple] | None = None,
          limits: _sandbox.Limits | None = None,
          progress: Callable[[Row], None] | None = None, **options) -> Grades:
    """Grade every ``*.ipynb`` under ``submissions`` (a folder, or a list of notebook paths).

    ``chapter`` defaults to the one most notebooks' metadata names (``gpu_lessons.chapter``);
    a notebook naming another chapter gets an ``invalid notebook`` row of its own.
    ``out``: CSV to write (the JSON goes beside it) once every notebook is graded; ``feedback``:
    a folder for one Markdown feedback file per student.  Both are checked before grading.
    With ``out`` (and ``journal``), each row is journaled as it finishes
    (:mod:`~gpu_lessons.grading.journal`): a killed or interrupted run resumes when run again.
    ``jobs``: notebooks run at once (default: CPU cores).  ``cell_timeout``/``timeout``:
    seconds per cell (then SIGINT) and per notebook (then the sandbox is killed).  ``seed``
    picks the inputs function answers and puzzle kernels are tried on; by default a fresh one
    is drawn for each run (a fixed default would let a learner compute the grader's inputs
    and hard-code the outputs) and recorded as ``Grades.seed``: pass it again to regrade on
    the same inputs.  ``questions_for(student_id)`` returns
    that student's questions (default: the chapter's); ``puzzles``: :class:`Puzzle` entries
    whose kernels to collect and judge (default: the chapter's puzzles, 1 point each; ``()``
    for none); ``puzzles_for(student_id)``: that student's puzzles instead (a release's
    per-student variants).  ``sandbox=False`` runs notebooks without a sandbox
    (see ``NO_SANDBOX_RISKS``); ``cgroups=False`` sandboxes them without a control group each
    (see ``NO_CGROUP_RISKS``).  ``progress(row)`` is called as each row is done.

    The options (``chapter`` ... ``journal``, ``memory_mib``, ``ram_mib``) are the fields of
    :class:`~gpu_lessons.grading.options.GradeOptions`, the same the command line offers.
    """
    from ..questions import chapter_number, load
    from .journal import Journal, digest, path_for
    from .options import GradeOptions

    opts = GradeOptions(**options)
    chapter, out, feedback, jobs = opts.chapter, opts.out, opts.feedback, opts.jobs
    cell_timeout, timeout, seed, kernel = opts.cell_timeout, opts.timeout, opts.seed, opts.kernel
    id_pattern, sandbox, cgroups, journal = (opts.id_pattern, opts.sandbox, opts.cgroups,
                                             opts.journal)
    if limits is None:
        limits = opts.limits()

    root, paths = _subs.collect(submissions)
    if not paths:
        raise ValueError(f"submissions={str(submissions)!r}: no .ipynb files found")
    # GradeOptions has checked every option; only the defaults that depend on the machine
    # are left to fill in.
    cell_timeout, timeout = float(cell_timeout), float(timeout)
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if limits is not None and not isinstance(limits, _sandbox.Limits):
        raise TypeError(f"limits must be a grading.Limits, got {type(limits).__name__}")
    pattern = re.compile(id_pattern)
    if chapter is not None or questions_for is None:
        chapter = chapter_number(chapter if chapter is not None
                                 else _subs.chapter_from(paths))
    puzzles = chapter_puzzles(chapter) if puzzles is None else tuple(puzzles)
    if not all(isinstance(p, Puzzle) for p in puzzles):
        raise TypeError(f"puzzles must be Puzzle entries, got {puzzles!r}")
    if puzzles_for is not None and not callable(puzzles_for):
        raise TypeError(f"puzzles_for must be a function of the student id, got "
                        f"{type(puzzles_for).__name__}")
    if puzzles_for is not None:
        puzzles = ()  # each student's own, from puzzles_for
    if questions_for is None:
        if not load(chapter) and not puzzles and puzzles_for is None:
            raise ValueError(f"chapter {chapter:02d} has no questions to grade yet")
        questions_for = _fixed(load(chapter))
    if out is not None:  # fail now, not after an hour of grading
        output.check_targets(out, feedback)
    _check_outside_sandbox(root, out, feedback)
    limits = limits or _sandbox.Limits()
    if sandbox:
        why = _sandbox.unavailable()
        if why:
            raise SandboxUnavailable(f"cannot sandbox the notebooks: {why}. Install bubblewrap "
                                     f"or pass --no-sandbox, knowing that {NO_SANDBOX_RISKS}.")
        if cgroups:
            why = _sandbox.containment_unavailable()
            if why:
                raise SandboxUnavailable(
                    f"cannot give each sandbox a control group: {why}. Run the grader as root "
                    f"(or in a container with a cgroup of its own, docs/instructors.md), or "
                    f"pass --no-cgroups, knowing that {NO_CGROUP_RISKS}.")
            limits = _fit_memory(limits, jobs)
            _cgroups.protect_grader()
    settings = {"chapter": chapter, "seed": None if seed is None else str(seed),
                "cell_timeout": cell_timeout, "timeout": timeout, "kernel": kernel,
                "puzzles": [[p.id, p.name, p.points] for p in puzzles],
                "per_student_puzzles": puzzles_for is not None, "sandbox": sandbox}
    fresh = secrets.token_hex(16)
    book = (Journal.open(path_for(out), settings, fresh_seed=fresh)
            if out is not None and journal else None)
    seed = book.settings["seed"] if book is not None else (settings["seed"] or fresh)
    run = _Run(cell_timeout=cell_timeout, timeout=timeout, seed=seed, kernel=kernel,
               puzzles=puzzles, sandbox=sandbox, limits=limits, questions_for=questions_for,
               jobs=jobs, chapter=chapter, cgroups=cgroups, puzzles_for=puzzles_for)
    rows: dict[str, Row] = {}

    def one(path: Path) -> Row:
        rel = path.relative_to(root).as_posix()
        student = _subs.student_id(rel, pattern)
        sha = digest(path) if book is not None else ""
        kept = book.reuse(rel, sha) if book is not None else None
        if kept is not None:
            return kept
        try:
            row = run.grade_one(path, _subs.clean_path(rel), student)
        except Exception as exc:  # never lose a row to a grader bug
            if run.stopped:
                return _plain_row(run, rel, student, NOT_GRADED, INTERRUPTED)
            row = _plain_row(run, rel, student, CRASHED,
                             f"grader error: {type(exc).__name__}: {exc}")
        if book is not None and not run.stopped:
            book.record(rel, sha, row)
        return row

    pool = ThreadPoolExecutor(max_workers=min(jobs, len(paths)))
    futures = {pool.submit(one, p): p for p in paths}
    try:
        for fut in as_completed(futures):
            row = fut.result()
            rows[str(futures[fut])] = row
            if progress is not None:
                progress(row)
    except BaseException:  # Ctrl-C: start nothing new, kill what runs, keep what is done
        run.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        for fut, path in futures.items():
            if str(path) not in rows:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    rows[str(path)] = fut.result()
                else:
                    rel = path.relative_to(root).as_posix()
                    rows[str(path)] = _plain_row(run, rel, _subs.student_id(rel, pattern),
                                                 NOT_GRADED, INTERRUPTED)
        grades = _collect(chapter, paths, rows, seed)
        if book is not None:
            book.close(remove=False)  # the next run resumes from it
        if out is not None:
            output.write_all(grades, out, feedback)
        raise
    pool.shutdown()
    grades = _collect(chapter, paths, rows, seed)
    if out is not None:
        output.write_all(grades, out, feedback)
    if book is not None:
        book.close(remove=True)
    return grades


def _fit_memory(limits: _sandbox.Limits, jobs: int) -> _sandbox.Limits:
    """``limits`` with each sandbox's memory cut to what the grader's own cap (a container's
    ``--memory``) leaves for ``jobs`` sandboxes; ValueError when that is too little."""
    from dataclasses import replace

    found, _ = _cgroups.hierarchy()
    cap = found.limit_bytes() if found is not None else None
    if cap is None:
        return limits
    spare = cap // 2**20 - GRADER_BASE_MIB - GRADER_PER_JOB_MIB * jobs
    each = spare // jobs
    if each < MIN_RAM_MIB:
        raise ValueError(f"jobs={jobs}: the grader's memory cap ({binary_bytes(cap)}) leaves "
                         f"{binary_bytes(max(each, 0) * 2**20)} for each of {jobs} sandboxes, "
                         f"below the {binary_bytes(MIN_RAM_MIB * 2**20)} a notebook needs; "
                         f"pass fewer --jobs")
    return replace(limits, ram_mib=min(limits.ram_mib, int(each)))


class _Run:
    """The settings of one grading run and the sandboxes it has in flight."""

    def __init__(self, *, cell_timeout, timeout, seed, kernel, puzzles, sandbox, limits,
                 questions_for, jobs, chapter=None, cgroups=True, puzzles_for=None):
        self.cell_timeout, self.timeout, self.seed, self.kernel = cell_timeout, timeout, seed, kernel
        self.puzzles, self.sandbox, self.limits = puzzles, sandbox, limits
        self.chapter, self.cgroups, self.puzzles_for = chapter, cgroups, puzzles_for
        self.questions_for = questions_for
        self.slots = _slots(jobs)
        self._lock = threading.Lock()
        self._running: set = set()
        self._stopped = False
        self._plans: dict = {}

    def plan(self, student: str) -> Plan:
        """The student's plan; questions a previous student also had reuse its references."""
        questions = tuple(self.questions_for(student))
        puzzles = (tuple(self.puzzles_for(student)) if self.puzzles_for is not None
                   else self.puzzles)
        key = (tuple(map(id, questions)), puzzles)
        with self._lock:
            if key in self._plans:
                return self._plans[key][0]
        plan = Plan.make(questions, self.seed, puzzles)
        with self._lock:  # keep the questions alive with the plan, so their ids stay theirs
            self._plans.setdefault(key, (plan, questions))
        return plan

    def grade_one(self, path: Path, file: str, student: str) -> Row:
        try:
            plan = self.plan(student)
        except (ValueError, LookupError) as exc:  # questions_for refused this student
            return make_row(Plan((), {}, (), ""), file, student, None, NOT_GRADED,
                            f"no questions for this student: {exc}")
        cells, problem = _subs.read_notebook(path)
        if problem:
            return make_row(plan, file, student, None, INVALID, problem)
        named = _subs.notebook_chapter(path)
        if self.chapter is not None and named is not None and named != self.chapter:
            return make_row(plan, file, student, None, INVALID,
                            f"its metadata says chapter {named:02d}; this run grades chapter "
                            f"{self.chapter:02d} (grade it with that chapter's run)")
        work_plan = plan.worker_plan(cells, cell_timeout=self.cell_timeout, kernel=self.kernel)
        report = Report.start(plan, len(cells))
        with self.slots() as uid:
            proc = _sandbox.Process(_sandbox.python_module("gpu_lessons.grading.worker"),
                                   sandbox=self.sandbox, limits=self._limits(), uid=uid,
                                   files={"submission.ipynb": path}, cgroup=self.cgroups,
                                   on_line=report.feed)
            outcome = self._run(proc, work_plan)
            if self._stopped:  # killed by Ctrl-C, not by its own doing
                raise RuntimeError("grading was interrupted")
            for at, line in outcome.lines:  # a Process without on_line kept them
                if report.feed(at, line):
                    break
            status, reason = status_and_reason(report, outcome, self.cell_timeout, self.timeout,
                                               self.limits.processes, self.limits.ram_mib)
            if plan.puzzles and not report.invalid and not outcome.overflow:
                from .puzzle_eval import evaluate_kernels

                evaluate_kernels(plan, report, sandbox=self.sandbox, limits=self._limits(),
                                 uid=uid, cgroup=self.cgroups,
                                 seed=puzzle_seed(self.seed, self.chapter, student))
                if report.invalid:
                    status, reason = status_and_reason(report, outcome, self.cell_timeout,
                                                       self.timeout, self.limits.processes,
                                                       self.limits.ram_mib)
        return make_row(plan, file, student, report, status, reason)

    def _limits(self) -> _sandbox.Limits:
        from dataclasses import replace

        # Every process's CPU seconds within the wall-clock limit (plus start-up slack).
        return replace(self.limits, cpu_s=min(self.limits.cpu_s, int(self.timeout) + 30))

    def _run(self, proc, work_plan):
        import json

        with self._lock:
            if self._stopped:
                raise RuntimeError("grading was interrupted")
            self._running.add(proc)
        try:
            return proc.run(json.dumps(work_plan).encode(), self.timeout)
        finally:
            with self._lock:
                self._running.discard(proc)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            proc.kill()


def _slots(jobs: int):
    """A context manager giving each running sandbox its own user id (root graders only)."""
    if os.name == "posix" and os.geteuid() == 0:
        return _sandbox.Slots(jobs).take
    import contextlib

    return lambda: contextlib.nullcontext(None)


def _fixed(questions):
    def questions_for(student: str):
        return questions
    return questions_for


def _plain_row(run: _Run, file: str, student: str, status: str, reason: str) -> Row:
    try:
        plan = run.plan(student)
    except Exception:
        plan = Plan((), {}, run.puzzles, "")
    return make_row(plan, _subs.clean_path(file), student, None, status, reason)


def _collect(chapter, paths, rows: dict, seed=None) -> Grades:
    ordered = [rows[str(p)] for p in paths if str(p) in rows]
    columns: list[str] = []
    for row in ordered:
        columns += [c for c in row.points if c not in columns]
    return Grades(chapter, tuple(columns), tuple(ordered),
                  None if seed is None else str(seed))


def _check_outside_sandbox(root, out, feedback) -> None:
    """Refuse submissions or outputs inside a folder every sandbox sees (read-only)."""
    check_private({"submissions": root, "out": out, "feedback": feedback})


def check_private(paths: dict) -> None:
    """Refuse any of ``paths`` (name -> path or None) that lies where every sandbox can read it:
    the environment, the package, Python, and the system folders and ``/etc`` files bound into
    each sandbox.  For the key, the roster and a private bank this is what keeps them secret:
    a key in the course's environment would give every notebook every student's numbers."""
    shared = [Path(p) for p in _sandbox.readonly_paths()]
    shared += [Path(os.path.realpath(d)) for d in _sandbox.SYSTEM_DIRS
               if os.path.isdir(d) and not os.path.islink(d)]
    shared += [Path("/etc", name) for name in _sandbox.ETC_FILES]
    for what, path in paths.items():
        if path is None:
            continue
        real = Path(os.path.realpath(path))
        for folder in shared:
            if real == folder or folder in real.parents:
                raise ValueError(f"{what}={str(path)!r} is inside {folder}, which every "
                                 f"sandbox can read; put it somewhere else")
