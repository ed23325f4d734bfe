"""Grade a folder of submitted exercise notebooks: ``gpu-lessons grade SUBMISSIONS_DIR``.

How a submission is graded
--------------------------
1. Each notebook runs in its own OS process (``python -m gpu_lessons.grade --worker``), which
   starts a fresh Jupyter kernel through nbclient.  Only the notebook's code cells run, with
   their outputs and metadata dropped.  A cell that runs past ``cell_timeout`` is interrupted
   (SIGINT) and the next cell runs; a cell that raises does not stop the notebook
   (``allow_errors``), so answers further down still count, and the report says which cells
   failed.  If the whole notebook runs past ``timeout`` — a kernel that ignores SIGINT, say —
   the worker's process group and the kernel's are killed (SIGKILL).
2. After the notebook's last cell the worker appends *probe* cells: one reading every value
   answer, then one per function answer.  A probe looks up the variable or function each
   question names (``Question.name``) in the kernel's namespace — the final state, after
   every cell ran, so edits made after a ``check`` count — and turns it into plain data with
   :func:`gpu_lessons.checks.observe`.  A function answer is called *in the kernel* on
   inputs the grader drew with its own seed, and only the results come back
   (:func:`gpu_lessons.checks.probe`): the learner's code never runs in the grader's
   process, and a function that hangs is interrupted like any cell.  Probes run their code
   in a fresh namespace with the real builtins (a notebook that defines ``list`` or ``json``
   is still read) and write each answer to a file as well as printing it, so answers read
   before a hang or a crash are kept, whatever the notebook did to its output.
3. The grader judges those plain values in its own process with
   :func:`gpu_lessons.checks.judge` and the package's own references, computed before any
   submission runs.  Whatever a notebook prints ("all tests passed"), and whatever it
   redefines (``check``, the catalog, the reference functions), changes nothing: the kernel
   only ever reports the learner's answers, never a verdict.

Limits: this is not a sandbox.  A submission is arbitrary code running as the grading user;
run the grader in a container or VM with a read-only install when submissions are untrusted.
A learner's function may call the package's own models (they are course tools) — ask for
working and reasoning where that matters.

Output: one row per notebook — file, student id, points per question, total, max, status
(``ok`` / ``timeout`` / ``crashed`` / ``invalid notebook``) and a short reason — as CSV and as
JSON beside it (the JSON adds each question's feedback).  Both files are rewritten as each
notebook finishes, so an interrupted run keeps the rows it has.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import _validate

OK, TIMEOUT, CRASHED, INVALID = "ok", "timeout", "crashed", "invalid notebook"
STATUSES = (OK, TIMEOUT, CRASHED, INVALID)

#: Student id from a submission's path relative to SUBMISSIONS_DIR: the first folder
#: (nbgrader's ``submitted/<student>/...``), else the file name up to the first "_"
#: (LMS exports such as ``alice_05_roofline.ipynb``), else the whole file name.
DEFAULT_ID_PATTERN = r"^(?:([^/]+)/.*|([^/_]+)(?:_[^/]*)?\.ipynb)$"

_PROBE_MARK = "# gpu-lessons grader probe"
_STATUS_WORDS = {TIMEOUT: "the notebook ran out of time before its answers were read",
                 CRASHED: "the notebook crashed before its answers were read",
                 INVALID: "the file is not a valid notebook"}


# -- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One submission's grade."""

    file: str
    student: str
    points: dict[str, float]
    total: float
    max: float
    status: str
    reason: str
    feedback: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"Row({self.file}: {self.status}, {self.total:g}/{self.max:g} points{why})"


@dataclass(frozen=True)
class Grades:
    """All rows of one grading run, in file order."""

    chapter: int
    question_ids: tuple[str, ...]
    rows: tuple[Row, ...]

    def __repr__(self) -> str:
        lines = [f"Grades(chapter {self.chapter:02d}, {len(self.rows)} submissions)"]
        lines += [f"  {r.student:<16} {r.status:<16} {r.total:g}/{r.max:g} points  {r.reason}"
                  for r in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(f"<th>{escape(h)}</th>" for h in _columns(self.question_ids))
        body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in _cells(r, self))
                       + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(_columns(self.question_ids))
        for row in self.rows:
            writer.writerow(_cells(row, self))
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps({"chapter": self.chapter, "questions": list(self.question_ids),
                           "rows": [asdict(r) for r in self.rows]}, indent=1, ensure_ascii=False)

    def write(self, csv_path) -> tuple[Path, Path]:
        """Write ``csv_path`` and the JSON beside it (same name, ``.json``), atomically."""
        csv_path = Path(csv_path)
        json_path = csv_path.with_suffix(".json")
        _atomic_write(csv_path, self.to_csv())
        _atomic_write(json_path, self.to_json())
        return csv_path, json_path


def _columns(ids) -> list[str]:
    return ["file", "student", *ids, "total", "max", "status", "reason"]


def _cells(row: Row, grades: Grades) -> list:
    return [row.file, row.student, *(f"{row.points.get(i, 0):g}" for i in grades.question_ids),
            f"{row.total:g}", f"{row.max:g}", row.status, row.reason]


# -- the grading run -------------------------------------------------------------------------

def grade(submissions, *, chapter=None, out=None, jobs: int | None = None,
          cell_timeout: float = 60, timeout: float = 600, seed: int | str = 0,
          kernel: str = "python3", id_pattern: str = DEFAULT_ID_PATTERN,
          progress=None) -> Grades:
    """Grade every ``*.ipynb`` under ``submissions`` (a folder, or a list of notebook paths).

    ``chapter`` defaults to the one every notebook's metadata names (``gpu_lessons.chapter``).
    ``out``: CSV path to write (and the JSON beside it) as rows arrive.  ``jobs``: notebooks
    run at once (default: CPU cores).  ``cell_timeout``/``timeout``: seconds per cell (then
    SIGINT) and per notebook (then SIGKILL).  ``seed`` picks the inputs function answers are
    tried on.  ``progress(row)`` is called as each row is done.
    """
    from .questions import chapter_number, load

    root, paths = _collect(submissions)
    if not paths:
        raise ValueError(f"submissions={str(submissions)!r}: no .ipynb files found")
    cell_timeout = _validate.positive("cell_timeout", cell_timeout)
    timeout = _validate.positive("timeout", timeout)
    jobs = _validate.integer("jobs", jobs if jobs is not None else (os.cpu_count() or 1), low=1)
    try:
        pattern = re.compile(id_pattern)
    except re.error as exc:
        raise ValueError(f"id_pattern={id_pattern!r} is not a valid regular expression: "
                         f"{exc}") from None
    number = chapter_number(chapter if chapter is not None else _chapter_from(paths))
    qs = load(number)
    if not qs:
        raise ValueError(f"chapter {number:02d} has no questions to grade yet")
    plan = _Plan.make(qs, seed)
    ids = tuple(q.id for q in qs)
    rows: dict[str, Row] = {}
    lock = threading.Lock()
    running = _Running()
    if out is not None:  # fail now, not after an hour of grading, if `out` is not writable
        _ordered(number, ids, rows).write(out)

    def finished(row: Row):
        with lock:
            rows[row.file] = row
            if out is not None:
                _ordered(number, ids, rows).write(out)
        if progress is not None:
            progress(row)

    def one(path: Path) -> Row:
        rel = path.relative_to(root).as_posix()
        try:
            return grade_notebook(path, plan, cell_timeout=cell_timeout, timeout=timeout,
                                  kernel=kernel, file=rel, student=_student(rel, pattern),
                                  running=running)
        except Exception as exc:  # never lose a row to a grader bug
            return _row(plan, rel, _student(rel, pattern), {}, CRASHED,
                        f"grader error: {type(exc).__name__}: {exc}")

    pool = ThreadPoolExecutor(max_workers=min(jobs, len(paths)))
    try:
        futures = [pool.submit(one, p) for p in paths]
        for fut in as_completed(futures):
            finished(fut.result())
    except BaseException:  # Ctrl-C: start nothing new, kill what runs, then re-raise
        running.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return _ordered(number, ids, rows)


def grade_notebook(path, plan: _Plan, *, cell_timeout: float = 60, timeout: float = 600,
                   kernel: str = "python3", file: str | None = None,
                   student: str | None = None, running: _Running | None = None) -> Row:
    """Run one notebook in a worker process and grade what its kernel reports."""
    path = Path(path)
    file = file or path.name
    student = student or _student(file, re.compile(DEFAULT_ID_PATTERN))
    problem = _notebook_problem(path)
    if problem:
        return _row(plan, file, student, {}, INVALID, problem)
    work = Path(tempfile.mkdtemp(prefix="gpu-lessons-grade-"))
    try:
        timed_out, state, code, log_tail = _run_worker(path, work, plan, cell_timeout, timeout,
                                                       kernel, running)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if timed_out:
        status, reason = TIMEOUT, _timeout_reason(state, cell_timeout, timeout)
    elif not state.get("finished"):
        status = state.get("status") or CRASHED
        reason = state.get("reason") or f"grader worker exited with code {code}: {log_tail}"
    else:
        status, reason = state.get("status", CRASHED), state.get("reason", "")
    if status == OK:
        reason = _errors_reason(state, cell_timeout)
    elif status == CRASHED and state.get("cell_errors"):
        reason = f"{reason}; {_errors_reason(state, cell_timeout)}"
    return _row(plan, file, student, state, status, reason)


def _run_worker(path: Path, work: Path, plan: _Plan, cell_timeout, timeout, kernel, running):
    """Start the worker in its own session, wait at most ``timeout`` s, then kill its process
    group and the kernel's.  Returns (timed out?, worker state, exit code, end of its log)."""
    plan_path, result_path = work / "plan.json", work / "result.json"
    plan_path.write_text(json.dumps(plan.for_worker(cell_timeout, kernel)), "utf-8")
    (work / "kernel").mkdir()
    with open(work / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpu_lessons.grade", "--worker", str(path.resolve()),
             str(plan_path), str(result_path)],
            cwd=work, env=_worker_env(work), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            if running is not None and not running.add(proc, result_path):
                raise RuntimeError("grading was interrupted")
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            if proc.poll() is None:  # no process groups (Windows): the worker alone
                proc.kill()
            state = _read_state(result_path)
            _kill_group(state.get("kernel_pgid"))
            proc.wait()
            if running is not None:
                running.remove(proc)
    _read_probe_files(work / "probes", plan.nonce, state)
    tail = (work / "worker.log").read_bytes()[-300:].decode("utf-8", "replace").strip()
    return timed_out, state, proc.returncode, tail[-200:]


# -- what to ask each kernel -----------------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    """The questions, the inputs for function answers, and a nonce marking the probes' output."""

    questions: tuple
    cases: dict
    nonce: str

    @classmethod
    def make(cls, qs, seed) -> _Plan:
        from .checks import Function

        cases = {q.id: q.answer.make_cases(q.id, seed=f"grade:{seed}")
                 for q in qs if isinstance(q.answer, Function)}
        plan = cls(tuple(qs), cases, secrets.token_hex(16))
        plan.warm_up()
        return plan

    def warm_up(self) -> None:
        """Compute every reference and mistake value once, before any submission runs.

        The references import the package's models lazily; importing them here, in the
        grader's process and before any student code has run, pins them in memory, so a
        submission that rewrites the package's files on disk cannot change this run's grades.
        """
        from .checks import Function, Number

        for q in self.questions:
            spec = q.answer
            if isinstance(spec, Function):
                for case in self.cases[q.id]:
                    expected = spec.reference(**case)
                    for m in spec.mistakes:
                        _quietly(m.value, expected, **case)
            else:
                ref = spec.reference()
                if isinstance(spec, Number):
                    for m in spec.mistakes:
                        _quietly(m.value, ref)
                        _quietly(m.when, 0.12345, ref)

    def for_worker(self, cell_timeout: float, kernel: str) -> dict:
        """What the worker needs.  ``cells`` groups the questions into probe cells: all value
        answers in the first (reading a value is quick), then one cell per function answer,
        so a function that never returns costs only its own question."""
        def entry(q):
            return {"id": q.id, "name": q.name, "cases": self.cases.get(q.id)}

        values = [entry(q) for q in self.questions if q.id not in self.cases]
        functions = [[entry(q)] for q in self.questions if q.id in self.cases]
        return {"nonce": self.nonce, "cell_timeout": cell_timeout, "kernel": kernel,
                "cells": ([values] if values else []) + functions}


def _quietly(fn, *args, **kwargs) -> None:
    if callable(fn):
        with contextlib.suppress(Exception):  # a mistake's formula need not fit every input
            fn(*args, **kwargs)


def _row(plan: _Plan, file: str, student: str, state: dict, status: str, reason: str) -> Row:
    from .checks import judge

    observations = state.get("observations") or {}
    probe_errors = state.get("probe_errors") or {}
    points, feedback = {}, {}
    for q in plan.questions:
        if q.id in observations:
            try:
                result = judge(q, observations[q.id], plan.cases.get(q.id))
                points[q.id], feedback[q.id] = result.points, result.message
            except Exception as exc:  # malformed data from a tampered kernel
                points[q.id] = 0.0
                feedback[q.id] = f"✗ {q.id}: the answer read from the notebook was malformed " \
                                 f"({type(exc).__name__})"
        else:
            points[q.id] = 0.0
            err = probe_errors.get(q.id)
            if err == "KeyboardInterrupt":
                why = f"`{q.name}` did not finish within the cell time limit"
            elif err:
                why = f"reading `{q.name}` from the notebook failed ({err})"
            else:
                why = f"not graded: {_STATUS_WORDS.get(status, status)}"
            feedback[q.id] = f"✗ {q.id}: {why}"
    if status == OK:
        missing = [q.id for q in plan.questions if feedback[q.id].startswith("…")]
        if missing:
            note = f"not attempted: {', '.join(missing)}"
            reason = f"{reason}; {note}" if reason else note
    total = sum(points.values())
    top = float(sum(q.points for q in plan.questions))
    return Row(file, student, points, total, top, status, reason[:300], feedback)


def _ordered(chapter: int, ids, rows: dict) -> Grades:
    return Grades(chapter, tuple(ids), tuple(rows[k] for k in sorted(rows)))


# -- reasons ---------------------------------------------------------------------------------

def _timeout_reason(state: dict, cell_timeout: float, timeout: float) -> str:
    cell, started = state.get("cell"), state.get("cell_started")
    if cell is None:
        return f"the kernel did not start within the {timeout:g} s notebook limit"
    where = _cell_name(state, cell)
    if started is not None and time.time() - started > cell_timeout:
        return (f"{where} ran past the {cell_timeout:g} s cell limit and ignored the interrupt "
                f"(or never stopped printing); stopped at the {timeout:g} s notebook limit")
    return f"the notebook ran past the {timeout:g} s limit (in {where})"


def _errors_reason(state: dict, cell_timeout: float) -> str:
    errors = state.get("cell_errors") or []
    if not errors:
        return ""
    parts = [f"{n} (interrupted after the {cell_timeout:g} s cell limit)"
             if ename == "KeyboardInterrupt" else f"{n} ({ename})" for n, ename in errors[:5]]
    more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
    noun = "code cell" if len(errors) == 1 else "code cells"
    return (f"{noun} {', '.join(parts)}{more} raised errors; the cells after them still ran "
            f"and later answers were graded")


def _cell_name(state: dict, cell) -> str:
    if cell is None:
        return "kernel start-up"
    n_code = state.get("n_code_cells", 0)
    if cell > n_code:
        groups = state.get("probe_cells") or []
        k = cell - n_code - 1
        return (f"the grader's probe for {', '.join(groups[k])}" if k < len(groups)
                else "a grader probe")
    return f"code cell {cell}"


# -- processes -------------------------------------------------------------------------------

class _Running:
    """Worker processes in flight, so an interrupted run (Ctrl-C) leaves none behind."""

    def __init__(self):
        self._lock = threading.Lock()
        self._procs: dict = {}
        self._stopped = False

    def add(self, proc, result_path) -> bool:
        """Track ``proc``; False (and ``proc`` killed) when the run is being stopped."""
        with self._lock:
            if not self._stopped:
                self._procs[proc.pid] = (proc, result_path)
                return True
        _kill_group(proc.pid)
        return False

    def stop(self):
        with self._lock:
            self._stopped = True
        self.kill_all()

    def remove(self, proc):
        with self._lock:
            self._procs.pop(proc.pid, None)

    def kill_all(self):
        with self._lock:
            items = list(self._procs.values())
        for proc, result_path in items:
            _kill_group(proc.pid)
            _kill_group(_read_state(result_path).get("kernel_pgid"))


def _kill_group(pgid) -> None:
    """SIGKILL a process group we started (worker or kernel: each leads its own session)."""
    if not pgid or not hasattr(os, "killpg"):
        return
    with contextlib.suppress(OSError):  # already gone, or never started
        os.killpg(int(pgid), signal.SIGKILL)


def _worker_env(work: Path) -> dict:
    import gpu_lessons

    env = dict(os.environ)
    package_root = str(Path(gpu_lessons.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update({
        "GPU_LESSONS_NO_GPU": "1",       # grading must not depend on the grader's GPU
        "IPYTHONDIR": str(work / "ipython"),  # no profile start-up files, no shared history
        "MPLBACKEND": "Agg",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return env


def _read_state(path) -> dict:
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


# -- finding submissions ---------------------------------------------------------------------

def find_submissions(folder) -> list[Path]:
    """Every ``*.ipynb`` under ``folder``, sorted, skipping ``.ipynb_checkpoints``."""
    folder = Path(folder)
    return sorted(p for p in folder.rglob("*.ipynb")
                  if p.is_file() and ".ipynb_checkpoints" not in p.parts)


def _collect(submissions) -> tuple[Path | None, list[Path]]:
    """The folder rows are named relative to, and the notebooks to grade."""
    if isinstance(submissions, (str, os.PathLike)):
        folder = Path(submissions)
        if folder.is_file():
            return folder.parent, [folder]
        if not folder.is_dir():
            raise ValueError(f"submissions={str(submissions)!r} is not a folder or a notebook")
        return folder, find_submissions(folder)
    paths = sorted({Path(p).resolve() for p in submissions})
    if not paths:
        return None, []
    # Rows are keyed by the path under a common folder, so equal file names stay apart.
    return Path(os.path.commonpath([p.parent for p in paths])), paths


def _student(rel: str, pattern: re.Pattern) -> str:
    match = pattern.match(rel)
    if match:
        found = next((g for g in match.groups() if g), None) or match.group(0)
        return found
    return Path(rel).stem


def _chapter_from(paths) -> int:
    """The chapter all notebooks' metadata agree on (``metadata.gpu_lessons.chapter``)."""
    import nbformat

    seen = set()
    for p in paths:
        try:
            nb = nbformat.read(p, as_version=4)
            seen.add(nb.metadata.get("gpu_lessons", {}).get("chapter"))
        except Exception:
            continue
    seen.discard(None)
    if len(seen) != 1:
        raise ValueError("chapter: pass --chapter N; the notebooks' metadata "
                         f"(gpu_lessons.chapter) name {sorted(map(str, seen)) or 'none'}")
    return seen.pop()


def _notebook_problem(path: Path) -> str:
    """Why ``path`` is not a runnable notebook ("" when it is)."""
    import nbformat

    try:
        raw = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read the file: {type(exc).__name__}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return f"not valid JSON ({exc})"[:200]
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return "not a Jupyter notebook (no list of cells)"
    try:
        nb = nbformat.reads(raw, as_version=4)
    except Exception as exc:
        return f"not a readable notebook: {type(exc).__name__}: {exc}"[:200]
    if not all(isinstance(c, dict) and "source" in c for c in nb.cells):
        return "not a Jupyter notebook (a cell has no source)"
    return ""


# -- the worker: runs in its own process, one notebook ---------------------------------------

_PROBE_MAIN = """
import json
import os


def _read(name, cases):
    if name not in namespace:
        return {"kind": "missing"}
    answer = namespace[name]
    if cases is not None and callable(answer):
        return {"kind": "function", "outputs": probe(answer, cases)}
    return observe(answer)


texts = []
for item in json.loads(questions):
    found = _read(item["name"], item["cases"])
    line = nonce + json.dumps({"id": item["id"], "observation": found})
    partial = os.path.join(folder, item["id"] + ".tmp")
    with open(partial, "w", encoding="utf-8") as f:
        f.write(line)
    os.replace(partial, os.path.join(folder, item["id"] + ".json"))
    texts.append(line)
text = "\\n".join(texts)
try:  # a second channel (the file is the first)
    print(text)
except Exception:
    pass
"""


def _probe_source(group: list[dict], nonce: str, folder: str) -> str:
    """A cell that reads the answers in ``group`` out of the kernel (see the module docstring).

    The reading code runs through ``exec`` in a fresh namespace whose builtins are the real
    ones, so a notebook that happens to define ``list``, ``type`` or ``json`` (or shadows
    ``globals``) still has its answers read.  Each answer is written to a file in ``folder``
    (unaffected by what the notebook did to stdout, the display hook or the output stream)
    and also printed.
    """
    import inspect

    from . import checks

    helpers = "\n\n".join(textwrap.dedent(inspect.getsource(f))
                          for f in (checks.observe, checks.probe))
    names = ", ".join(f"`{item['name']}`" for item in group)
    return (f"{_PROBE_MARK}: reads {names} (added by the grader)\n"
            "import builtins as _gpu_lessons_builtins\n"
            "_gpu_lessons_probe = {'__builtins__': _gpu_lessons_builtins, "
            "'namespace': (lambda: None).__globals__,\n"
            f"    'nonce': {nonce!r}, 'folder': {folder!r},\n"
            f"    'questions': {json.dumps(group)!r}}}\n"
            f"_gpu_lessons_builtins.exec({helpers + _PROBE_MAIN!r}, _gpu_lessons_probe)\n"
            "_gpu_lessons_probe['text']\n")


def _worker(notebook: str, plan_path: str, result_path: str) -> int:
    import asyncio

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    plan = json.loads(Path(plan_path).read_text("utf-8"))
    nonce, cell_timeout, groups = plan["nonce"], plan["cell_timeout"], plan["cells"]
    folder = Path(plan_path).parent / "probes"
    folder.mkdir(exist_ok=True)
    state = {"status": None, "reason": "", "finished": False, "kernel_pgid": None,
             "cell": None, "cell_started": None, "n_code_cells": 0, "cell_errors": [],
             "observations": {}, "probe_errors": {},
             "probe_cells": [[item["id"] for item in g] for g in groups]}

    def save():
        _atomic_write(Path(result_path), json.dumps(state))

    save()
    try:
        source = nbformat.read(notebook, as_version=4)
    except Exception as exc:
        state.update(status=INVALID, reason=f"not a readable notebook: {exc}"[:200],
                     finished=True)
        save()
        return 0
    code = [c for c in source.cells if c.get("cell_type") == "code"]
    cells = [nbformat.v4.new_code_cell(_text(c.get("source", ""))) for c in code]
    first_probe = len(cells)
    state["n_code_cells"] = first_probe
    cells += [nbformat.v4.new_code_cell(_probe_source(g, nonce, str(folder))) for g in groups]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": plan["kernel"], "display_name": plan["kernel"],
                                 "language": "python"}

    class Client(NotebookClient):
        """Keeps no outputs of the submission's cells (MBs of prints cost nothing) and
        picks the probes' answers out of their output as it arrives."""

        def output(self, outs, msg, display_id, cell_index):
            if cell_index < first_probe:
                return None
            content = msg.get("content", {})
            text = content.get("text")
            if text is None:
                plain = (content.get("data") or {}).get("text/plain")
                text = _literal_str(plain) if isinstance(plain, str) else None
            if isinstance(text, str) and nonce in text:
                _take_payload(text, nonce, set(state["probe_cells"][cell_index - first_probe]),
                              state)
            return None

    def on_notebook_start(notebook=None, **_):
        provisioner = getattr(client.km, "provisioner", None)
        state["kernel_pgid"] = getattr(provisioner, "pgid", None) or getattr(
            provisioner, "pid", None)
        save()

    def on_cell_start(cell=None, cell_index=None, **_):
        state["cell"], state["cell_started"] = cell_index + 1, time.time()
        save()

    def on_cell_executed(cell=None, cell_index=None, execute_reply=None, **_):
        content = (execute_reply or {}).get("content", {})
        if content.get("status") == "error":
            ename = str(content.get("ename", "error"))[:80]
            if cell_index < first_probe:
                state["cell_errors"].append([cell_index + 1, ename])
            else:
                for qid in state["probe_cells"][cell_index - first_probe]:
                    if qid not in state["observations"]:
                        state["probe_errors"][qid] = ename
        save()

    # iopub_timeout is short: answers come back through files, and nothing else of a cell's
    # output is kept, so there is no reason to wait for a flood of prints to drain.
    client = Client(nb, timeout=cell_timeout, kernel_name=plan["kernel"], allow_errors=True,
                    interrupt_on_timeout=True, shutdown_kernel="immediate",
                    record_timing=False, startup_timeout=120, iopub_timeout=1,
                    resources={"metadata": {"path": str(Path(plan_path).parent / "kernel")}},
                    on_notebook_start=on_notebook_start, on_cell_start=on_cell_start,
                    on_cell_executed=on_cell_executed)
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state.update(status=OK)
    except DeadKernelError:
        where = _cell_name(state, state["cell"])
        state.update(status=CRASHED, reason=f"the kernel died in {where} (os._exit(), a "
                                            f"crash or out of memory)")
    except (Exception, asyncio.CancelledError) as exc:
        where = _cell_name(state, state["cell"])
        state.update(status=CRASHED, reason=f"{type(exc).__name__} in {where}: {exc}"[:300])
    state["finished"] = True
    save()
    return 0


def _read_probe_files(folder: Path, nonce: str, state: dict) -> None:
    """Merge answers the probes wrote to files (they survive a killed worker)."""
    wanted = {qid for group in state.get("probe_cells") or [] for qid in group}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            _take_payload(path.read_text("utf-8"), nonce, wanted, state)


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _literal_str(text: str) -> str | None:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _take_payload(text: str, nonce: str, wanted: set, state: dict) -> None:
    """Record each ``nonce``-prefixed answer in ``text`` whose id is in ``wanted``."""
    for line in text.splitlines():
        if not line.startswith(nonce):
            continue
        try:
            payload = json.loads(line[len(nonce):])
        except ValueError:
            continue
        if (isinstance(payload, dict) and payload.get("id") in wanted
                and isinstance(payload.get("observation"), dict)):
            state.setdefault("observations", {})[payload["id"]] = payload["observation"]
            state.setdefault("probe_errors", {}).pop(payload["id"], None)


# -- command line ----------------------------------------------------------------------------

def add_arguments(parser) -> None:
    """The ``gpu-lessons grade`` options (used by :mod:`gpu_lessons.cli`)."""
    parser.add_argument("submissions", help="folder of submitted .ipynb files (searched "
                        "recursively), or one notebook")
    parser.add_argument("--chapter", help="chapter whose questions to grade, e.g. 5 or 05 "
                        "(default: from the notebooks' metadata)")
    parser.add_argument("--out", default="grades.csv",
                        help="CSV to write; the JSON goes beside it (default: grades.csv)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks graded at once (default: CPU cores)")
    parser.add_argument("--cell-timeout", type=float, default=60,
                        help="seconds a cell may run before it is interrupted (default: 60)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds a notebook may run before it is killed (default: 600)")
    parser.add_argument("--seed", default="0",
                        help="seed for the inputs function answers are tried on (default: 0)")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3)")
    parser.add_argument("--id-pattern", default=DEFAULT_ID_PATTERN,
                        help="regex on the path under SUBMISSIONS; its first non-empty group "
                             "is the student id")


def run(args) -> int:
    """Run ``gpu-lessons grade`` from parsed arguments; print one line per submission."""
    def show(row: Row):
        print(f"{row.status:<16} {row.total:>5g}/{row.max:<5g} {row.file}"
              + (f"  — {row.reason}" if row.reason else ""), flush=True)

    try:
        grades = grade(args.submissions, chapter=args.chapter, out=args.out, jobs=args.jobs,
                       cell_timeout=args.cell_timeout, timeout=args.timeout, seed=args.seed,
                       kernel=args.kernel, id_pattern=args.id_pattern, progress=show)
    except (ValueError, TypeError, OSError) as exc:
        print(f"gpu-lessons grade: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpu-lessons grade: interrupted; the rows finished so far are in {args.out}",
              file=sys.stderr)
        return 130
    csv_path, json_path = grades.write(args.out)
    n = len(grades.rows)
    print(f"graded {n} notebook{'' if n == 1 else 's'}: wrote {csv_path} and {json_path}")
    return 0


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"] and len(argv) == 4:
        return _worker(*argv[1:])
    from .cli import main

    return main(["grade", *argv])


if __name__ == "__main__":
    sys.exit(_main())
