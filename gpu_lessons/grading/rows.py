"""Turning what a sandbox reported into a row: status, reason, points and feedback.

The events are checked line by line (:mod:`gpu_lessons.grading.untrusted`).  One line that is
not what the honest worker writes (bad JSON, too deep, too long, an unknown event, an answer
to a question this student was not asked) makes the whole result ``invalid result`` with 0
points: only tampering produces such a line, and it can only ever touch this one row.  The
verdicts are computed here, in the grader's process, by :func:`gpu_lessons.checks.judge`
with the package's own references.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._format import binary_bytes, duration
from . import untrusted
from .plan import Plan
from .results import CRASHED, INVALID_RESULT, OK, TIMEOUT, Row

_STATUS_WORDS = {TIMEOUT: "the notebook ran out of time before its answers were read",
                 CRASHED: "the notebook crashed before its answers were read"}


@dataclass
class Report:
    """What one sandbox said, after checking: the grader's view of the run."""

    n_code_cells: int
    probe_ids: list[list[str]]
    kernel_started: bool = False
    cell: int | None = None            # the last cell that started (1-based)
    cell_at: float | None = None       # when its start was read (s after the sandbox started)
    errors: list[tuple[int, str]] = field(default_factory=list)
    answers: dict[str, dict] = field(default_factory=dict)
    probe_errors: dict[str, str] = field(default_factory=dict)
    puzzles: dict[str, dict] = field(default_factory=dict)
    end: dict | None = None
    invalid: str = ""

    #: Events a notebook's sandbox may send beyond three per cell (start, error, and slack)
    #: and one per question: an honest worker sends far fewer.
    SPARE_EVENTS = 64
    #: Bytes of answer lines kept per notebook (the reader already caps a line at 1 MiB and
    #: a sandbox's output at 16 MiB): with the event budget, what bounds a job's memory.
    MAX_ANSWER_BYTES = 4 * 2**20

    @classmethod
    def start(cls, plan: Plan, n_code_cells: int) -> Report:
        """An empty report, to :meth:`feed` the sandbox's lines into as they arrive."""
        groups = [[item["id"] for item in g] for g in plan.probe_groups()]
        report = cls(n_code_cells, groups)
        report._wanted = set(plan.columns)
        report._n_cells = n_code_cells + len(groups)
        report._budget = 3 * report._n_cells + len(report._wanted) + cls.SPARE_EVENTS
        return report

    def feed(self, at: float, line: bytes) -> str | None:
        """Check and apply one line; return why reading should stop (the report is invalid),
        or None.  Nothing of the line is kept but what the report holds, so a forged stream
        of well-formed events grows the grader by at most the event budget."""
        if self.invalid:
            return self.invalid
        self._budget -= 1
        try:
            if self._budget < 0:
                raise untrusted.Invalid("more events than a notebook of this many cells sends")
            if b'"answer"' in line:
                self._answer_bytes = getattr(self, "_answer_bytes", 0) + len(line)
                if self._answer_bytes > self.MAX_ANSWER_BYTES:
                    raise untrusted.Invalid("more answer data than the grader reads from one "
                                            "notebook")
            self._apply(untrusted.event(untrusted.parse_line(line), n_cells=self._n_cells,
                                        wanted=self._wanted), at)
        except untrusted.Invalid as exc:
            self.invalid = str(exc)
        return self.invalid or None

    @classmethod
    def read(cls, lines, plan: Plan, n_code_cells: int) -> Report:
        """Check and apply each ``(seconds, line)``; stop at the first invalid one."""
        report = cls.start(plan, n_code_cells)
        for at, line in lines:
            if report.feed(at, line):
                break
        return report

    def _apply(self, ev: dict, at: float) -> None:
        kind = ev["event"]
        if self.end is not None:
            raise untrusted.Invalid("events after the end of the run")
        if kind == "kernel":
            self.kernel_started = True
        elif kind == "cell":
            self.cell, self.cell_at = ev["index"], at
        elif kind == "error":
            n = ev["index"]
            if n <= self.n_code_cells:
                self.errors.append((n, untrusted.clean(ev["ename"], 80)))
            else:
                for qid in self.probe_ids[n - self.n_code_cells - 1]:
                    if qid not in self.answers:
                        self.probe_errors[qid] = untrusted.clean(ev["ename"], 80)
        elif kind == "answer":
            if ev["id"] in self.answers:
                raise untrusted.Invalid("two answers to one question")
            self.answers[ev["id"]] = ev["observation"]
            self.probe_errors.pop(ev["id"], None)
        elif kind == "end":
            self.end = ev
        else:
            raise untrusted.Invalid("a puzzle result from the notebook's sandbox")

    def cell_name(self, cell) -> str:
        if cell is None:
            return "kernel start-up"
        if cell > self.n_code_cells:
            k = cell - self.n_code_cells - 1
            return (f"the grader's probe for {', '.join(self.probe_ids[k])}"
                    if k < len(self.probe_ids) else "a grader probe")
        return f"code cell {cell}"


def status_and_reason(report: Report, outcome, cell_timeout: float, timeout: float,
                      process_limit: int | None = None,
                      ram_mib: int | None = None) -> tuple[str, str]:
    """The row's status and reason from the checked report and how the sandbox ended."""
    if report.invalid:
        return INVALID_RESULT, (f"the sandbox's output was not what the grader writes "
                                f"({report.invalid}); nothing from it was graded")
    if outcome.overflow:
        return INVALID_RESULT, (f"the sandbox wrote {outcome.overflow}; nothing from it "
                                f"was graded")
    limit = _process_limit(outcome, process_limit) + _memory_limit(outcome, ram_mib)
    if outcome.timed_out:
        return TIMEOUT, _timeout_reason(report, outcome.seconds, cell_timeout, timeout) + limit
    end = report.end
    if end is None:
        return CRASHED, (f"the grading process in the sandbox {_exit(outcome.returncode)} in "
                         f"{report.cell_name(report.cell)}{limit}: {_last_line(outcome)}")
    if end["status"] == "ok":
        return OK, errors_reason(report, cell_timeout)
    where = report.cell_name(report.cell)
    if end.get("dead_kernel"):
        reason = f"the kernel died in {where} (os._exit(), a crash or out of memory)"
    else:
        reason = untrusted.clean(f"{end.get('error') or 'an error'} in {where}", 300)
    more = errors_reason(report, cell_timeout)
    return CRASHED, f"{reason}{limit}; {more}" if more else reason + limit


def _exit(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        code = 128 - code  # Popen's -N: killed by signal N
    if code is not None and 128 < code < 128 + 65:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"was killed ({name})"
    return f"stopped (exit code {code})"


def _last_line(outcome) -> str:
    text = outcome.log_tail.strip()
    return untrusted.clean(text.splitlines()[-1], 200) if text else "no output"


def _process_limit(outcome, limit: int | None) -> str:
    """A note when the notebook had used up its process limit (a fork bomb, say)."""
    tasks = getattr(outcome, "tasks", None)
    if limit and tasks is not None and tasks >= 0.9 * limit:
        return (f" (the notebook had {tasks} processes and threads running: its limit is "
                f"{limit})")
    return ""


def _memory_limit(outcome, ram_mib: int | None) -> str:
    """A note when the kernel killed a process of the sandbox for its memory cap."""
    kills = getattr(outcome, "oom_kills", 0)
    cap = f" of {binary_bytes(ram_mib * 2**20)}" if ram_mib else ""
    peak = getattr(outcome, "memory_peak", None)
    if not kills:
        if ram_mib and peak and peak >= 0.95 * ram_mib * 2**20:
            return (f" (the notebook's processes held all of their memory allowance{cap}, "
                    f"memfd and tmpfs pages included)")
        return ""
    return (f" (the notebook used up its memory allowance{cap}, memfd and tmpfs pages "
            f"included: the kernel killed {kills} of its processes)")


def _timeout_reason(report: Report, seconds: float, cell_timeout: float, timeout: float) -> str:
    if not report.kernel_started:
        return f"the kernel did not start within the {duration(timeout)} notebook limit"
    where = report.cell_name(report.cell)
    if report.cell_at is not None and seconds - report.cell_at > cell_timeout:
        return (f"{where} ran past the {duration(cell_timeout)} cell limit and ignored the "
                f"interrupt (or never stopped printing); stopped at the {duration(timeout)} "
                f"notebook limit")
    return f"the notebook ran past the {duration(timeout)} limit (in {where})"


def errors_reason(report: Report, cell_timeout: float) -> str:
    errors = report.errors
    if not errors:
        return ""
    parts = [f"{n} (interrupted after the {duration(cell_timeout)} cell limit)"
             if ename == "KeyboardInterrupt" else f"{n} ({ename})" for n, ename in errors[:5]]
    more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
    noun = "code cell" if len(errors) == 1 else "code cells"
    return (f"{noun} {', '.join(parts)}{more} raised errors; the cells after them still ran "
            f"and later answers were graded")


def make_row(plan: Plan, file: str, student: str, report: Report | None, status: str,
             reason: str) -> Row:
    """Judge every answer the report holds (none when ``report`` is None or invalid)."""
    from ..checks import judge

    usable = report is not None and status != INVALID_RESULT
    answers = report.answers if usable else {}
    probe_errors = report.probe_errors if usable else {}
    points, feedback = {}, {}
    for q in plan.questions:
        if q.id in answers:
            try:
                result = judge(q, untrusted.observation(answers[q.id]), plan.cases.get(q.id))
                points[q.id], feedback[q.id] = result.points, result.message
            except Exception as exc:  # malformed data, or a shape judge() does not expect
                points[q.id] = 0.0
                feedback[q.id] = (f"✗ {q.id}: the answer read from the notebook was malformed "
                                  f"({type(exc).__name__})")
        else:
            points[q.id] = 0.0
            feedback[q.id] = f"✗ {q.id}: {_unread(q.name, probe_errors.get(q.id), status)}"
    for p in plan.puzzles:
        points[p.column], feedback[p.column] = _puzzle(p, answers.get(p.column),
                                                       report.puzzles if usable else {},
                                                       probe_errors.get(p.column), status)
    if status == OK:
        missing = [c for c in plan.columns if feedback[c].startswith("…")]
        if missing:
            note = f"not attempted: {', '.join(missing)}"
            reason = f"{reason}; {note}" if reason else note
    total = sum(points.values())
    return Row(file, student, points, total, plan.max_points, status,
               untrusted.clean(reason, 300), feedback)


def _puzzle(p, answer, results, error, status) -> tuple[float, str]:
    """Points and feedback for one puzzle: the puzzle checker's verdict on the kernel."""
    result = results.get(p.column)
    if result is not None:
        message = untrusted.clean(result["message"], 2000)
        return (float(p.points) if result["passed"] else 0.0), message
    kind = (answer or {}).get("kind")
    if answer is None:
        return 0.0, f"✗ puzzle {p.id}: {_unread(p.name, error, status)}"
    if kind == "missing":
        return 0.0, f"… puzzle {p.id}: not attempted yet — the notebook defines no `{p.name}`"
    if kind == "ellipsis":
        return 0.0, f"… puzzle {p.id}: not attempted yet"
    if kind == "kernel":
        return 0.0, f"✗ puzzle {p.id}: the kernel `{p.name}` was not evaluated"
    return 0.0, f"✗ puzzle {p.id}: `{p.name}` is not a kernel function"


def _unread(name: str, error: str | None, status: str) -> str:
    if error == "KeyboardInterrupt":
        return f"`{name}` did not finish within the cell time limit"
    if error:
        return f"reading `{name}` from the notebook failed ({error})"
    return f"not graded: {_STATUS_WORDS.get(status, status)}"
