"""What a puzzle is, and how a learner's kernel is judged against it.

A :class:`Puzzle` carries everything except the answer: the spec (a NumPy statement the grader
executes to get the expected output), the kernel's signature and stub, the launch, an input
maker that works at any allowed size, the budgets, and the lesson sections that explain them.

:func:`judge` runs a kernel on every case and returns a :class:`PuzzleResult`:

1. the kernel must be in the kernel language (``gpu_lessons.kernels.lang``);
2. on every case it must run without error, race or read of unwritten shared memory, and
   match the spec element for element (the first wrong element is reported with the value
   it should hold);
3. on the measured cases, every budget must hold.  The first property that fails is the
   message; all measured values are kept in ``result.measures``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .._format import Readout, Row, html_table
from ..kernels import queries, simt
from ..kernels.lang import KernelLanguageError
from . import _kernel, _metrics, _races
from ._section import Section

PASSED = "passed"
FAILED = "failed"
NOT_ATTEMPTED = "not attempted"

#: Warp instructions one case may issue before the run is stopped (an endless ``t.while_``).
MAX_INSTRUCTIONS = 60_000

@dataclass(frozen=True)
class Budget:
    """One efficiency property a passing kernel must have.

    ``metric``: a key of :data:`gpu_lessons.puzzles._metrics.METRICS`; ``limit``: a number, or
    a function of the case's size (and the learner's launch choices) for limits that grow
    with the problem; ``array``: the array the metric looks at, where it looks at one;
    ``why``: the one-line derivation of the limit (the best a sound kernel reaches);
    ``section``: where the lesson explains it (default: the metric's own section).
    """

    metric: str
    limit: float | Callable[..., float]
    why: str
    array: str | None = None
    section: Section | None = None
    params: Mapping = field(default_factory=dict, hash=False)
    limit_text: str = ""  # the limit in words, for a limit that is a function of the size

    def __post_init__(self):
        if self.metric not in _metrics.METRICS:
            raise ValueError(f"Budget.metric must be one of {sorted(_metrics.METRICS)}, "
                             f"got {self.metric!r}")
        if callable(self.limit) and not self.limit_text:
            raise ValueError("a Budget whose limit is a function needs limit_text")

    @property
    def name(self) -> str:
        return _metrics.METRICS[self.metric].label(self.array)

    def limit_for(self, size: Mapping, choices: Mapping) -> float:
        if callable(self.limit):
            return float(self.limit(**size, **choices))
        return float(self.limit)

    def where(self) -> Section:
        return self.section or _metrics.METRICS[self.metric].section

    def describe(self) -> str:
        m = _metrics.METRICS[self.metric]
        limit = self.limit_text if callable(self.limit) else m.show(self.limit)
        return f"{self.name} {m.relation(self.limit)} {limit}"


#: Why every coalescing budget of 32-bit data is 4 sectors per request.  An exercise set says
#: it once, above its puzzles; a statement then shows :data:`COALESCED_SHORT` in its place.
COALESCED_WHY = ("memory moves in 32-byte sectors: 32 consecutive 4-byte values (float32 or int32) "
                 "are 128 B = 4 sectors, while lanes far apart need a sector each")
COALESCED_SHORT = "32 consecutive 4-byte values: 4 sectors (see *sectors* above)"


@dataclass(frozen=True)
class Puzzle:
    """One kernel puzzle.  The fields are the whole statement; no answer is kept here.

    ``params``: the kernel's parameters after ``t``; ``outputs``: which of them it writes;
    ``spec``: NumPy statement(s) that compute the outputs from the inputs (the grader runs
    it); ``inputs(size, rng)``: every kernel argument for a size; ``launch(**size,
    **choices)``: ``(grid, block)``; ``sizes``: simulated cases on which budgets are measured;
    ``more``: further cases checked for correctness only (sizes that leave partial warps or
    blocks, smaller problems);
    ``gpu_size``: a realistic size for timing on a real GPU; ``choices``: launch parameters
    the learner chooses (``{"block": "threads per block"}``); ``valid(**size)``: raises a
    ``ValueError`` for a size the launch cannot handle.
    """

    id: str
    title: str
    lesson: int
    goal: str
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    spec: str
    launch_text: str
    lines: int
    inputs: Callable
    launch: Callable
    sizes: tuple[dict, ...]
    gpu_size: dict
    budgets: tuple[Budget, ...] = ()
    sections: tuple[Section, ...] = ()
    more: tuple[dict, ...] = ()
    choices: Mapping[str, str] = field(default_factory=dict)
    valid: Callable | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    #: The array whose accesses show() maps; ``"shared"``: the shared array of the warp's
    #: most conflicted access (the puzzles about bank conflicts, whose arrays the learner names).
    picture: str | None = None
    picture_row: str | None = None  # the size whose value is that array's row length
    #: ``gpu_launch(sms, **size, **choices)``: the launch on a real GPU with ``sms`` SMs, where
    #: the puzzle's own launch would not fill one (a grid-stride loop's fixed grid); ``None``:
    #: the puzzle's launch at ``gpu_size``.
    gpu_launch: Callable | None = None
    #: ``flops(**size)``: the arithmetic the spec needs (a multiply-add is 2 FLOPs), for the
    #: GPU cell's roofline time; ``None`` where memory alone sets it.
    flops: Callable | None = None
    #: Warp instructions one case may issue before it is stopped (an endless ``t.while_``):
    #: the worked kernel's count with room to spare.
    max_instructions: int = MAX_INSTRUCTIONS

    @property
    def kernel_name(self) -> str:
        """The name the exercise notebook gives the learner's kernel."""
        return f"{self.id}_kernel"

    @property
    def signature(self) -> str:
        return f"{self.kernel_name}(t, {', '.join(self.params)})"

    def stub(self) -> str:
        """The exercise cell: the signature and a body that raises NotImplementedError."""
        lines = "1 line" if self.lines == 1 else f"{self.lines} lines"
        choice = "".join(f"{name.upper()} = ...  # {what}: your choice\n\n\n"
                         for name, what in self.choices.items())
        return (f"{choice}def {self.signature}:\n"
                f"    raise NotImplementedError  # your kernel here (roughly {lines})\n")

    def make_inputs(self, size: Mapping | None = None, *, seed: int = 0) -> dict:
        """All kernel arguments (by name, in order) for ``size`` (default: ``gpu_size``)."""
        size = dict(self.gpu_size if size is None else size)
        if self.valid is not None:
            self.valid(**size)
        rng = np.random.default_rng([zlib.crc32(self.id.encode()), int(seed)])
        args = self.inputs(size, rng)
        if tuple(args) != self.params:
            raise RuntimeError(f"{self.id}: inputs() gives {tuple(args)}, the kernel takes "
                               f"{self.params}")
        return args

    def expected(self, args: Mapping) -> dict[str, np.ndarray]:
        """The outputs the spec gives for these arguments."""
        namespace = {"np": np, **{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                   for k, v in args.items()}}
        exec(self.spec, namespace)  # the package's own spec text, never the learner's
        return {name: np.asarray(namespace[name]).astype(args[name].dtype, copy=False)
                .reshape(args[name].shape) for name in self.outputs}

    def cases(self, seed: int = 0, choices: Mapping | None = None) -> list[Case]:
        choices = dict(choices or {})
        out = []
        for k, (size, measured) in enumerate([(s, True) for s in self.sizes]
                                             + [(s, False) for s in self.more]):
            args = self.make_inputs(size, seed=seed * 1000 + k)
            grid, block = self.launch(**size, **choices)
            out.append(Case(dict(size), args, grid, block, measured))
        return out

    def describe(self) -> str:
        """The statement shown above the stub (markdown)."""
        budgets = "".join(f"\n  - {b.describe()} — "
                          f"{COALESCED_SHORT if b.why == COALESCED_WHY else b.why}"
                          for b in self.budgets)
        reading = "; ".join(f"{s}" for s in self.sections)
        return (f"**Goal.** {self.goal}\n\n"
                f"- Spec (NumPy): `{self.spec}`\n"
                f"- Kernel: `{self.signature}`\n"
                f"- Launch: {self.launch_text}\n"
                + (f"- Budgets:{budgets}\n" if self.budgets else "")
                + (f"- Read first: {reading}\n" if reading else ""))

    def __repr__(self) -> str:
        return f"Puzzle({self.id!r}: {self.title}, lesson {self.lesson:02d})"

    def _repr_html_(self) -> str:
        rows = [("kernel", self.signature), ("spec", self.spec), ("launch", self.launch_text),
                *[("budget", f"{b.describe()} — {b.why}") for b in self.budgets],
                *[("read", str(s)) for s in self.sections]]
        return html_table(f"Puzzle {self.id}: {self.title}", None, rows)


@dataclass(frozen=True)
class Case:
    """One simulated run: the size, the arguments, the launch and whether budgets count."""

    size: dict
    args: dict
    grid: tuple
    block: tuple
    measured: bool

    def label(self) -> str:
        return ", ".join(f"{k} = {v}" for k, v in self.size.items())


@dataclass(frozen=True)
class Measure:
    """One budget as the kernel met it (or not)."""

    name: str
    value: float
    limit: float
    ok: bool
    text: str


@dataclass(frozen=True, repr=False)
class PuzzleResult(Readout):
    """The verdict on one kernel.

    ``passed``: correct and within every budget; ``correct``: the spec's output on every
    case with no hazard (error, race, unwritten shared memory); ``status``: ``"passed"``,
    ``"failed"`` or ``"not attempted"``; ``failure``: what failed first (``"language"``,
    ``"signature"``, ``"choice"``, ``"error"``, ``"wrong"``, ``"race"``,
    ``"uninitialised"``, ``"partial_warp"`` (a shuffle or ``t.syncwarp()`` that some running
    lanes skipped), ``"fp64"`` (float64 arithmetic on float32 data), or a budget's metric
    name), ``None`` when it passed; ``line``: the learner's source line it points at, where
    known; ``measures``: every budget measured.
    ``score``: 1 when passed, 0.5 when correct but over a budget, else 0.
    """

    puzzle: str
    status: str
    correct: bool
    message: str
    failure: str | None = None
    line: int | None = None
    measures: tuple[Measure, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def score(self) -> float:
        return 1.0 if self.passed else 0.5 if self.correct else 0.0

    def __str__(self) -> str:
        return self.message

    def readout_title(self) -> str:
        return f"{self.puzzle}: {self.status}"

    def readout_rows(self) -> tuple[Row, ...]:
        """The message, what failed first and the line it points at, then each budget as
        measured, ✓ within it, ✗ over it."""
        return (Row("verdict", self.message),
                *((Row("first failure", self.failure),) if self.failure else ()),
                *((Row("line", self.line),) if self.line is not None else ()),
                *(Row(m.name, f"{m.text} {'✓' if m.ok else '✗'}") for m in self.measures))


# -- judging ------------------------------------------------------------------------------------

#: A race between warps, a barrier reached from different lines, a read of shared memory no
#: thread wrote: the section that stages a tile and says what a barrier guarantees (no thread
#: passes it until all the block's threads reach it, so every store before it precedes every
#: load after it).
RACE_SECTION = Section(3, "7. When may a block read its scratchpad? A stencil, its halo and "
                          "its barrier")
BARRIER_SECTION = RACE_SECTION
SHARED_SECTION = RACE_SECTION
#: A race between the lanes of one warp (a missing ``t.syncwarp()``): the section on a warp's
#: last steps of a tree.
WARP_RACE_SECTION = Section(7, "5.4 Reductions and scans: trees in shared memory")
#: Where an index past an array's end (guard it with ``t.return_if``) and a per-lane value in a
#: Python ``if`` (write ``t.if_``) are explained: the lesson's first simulator kernel does both.
ERROR_SECTION = Section(2, "2. SIMT: one instruction, 32 lanes, an active mask")

#: Checked on every puzzle whose kernel shuffles: every lane a shuffle's mask names (all 32)
#: must execute it, so none may be switched off by a branch or a return.
SHUFFLES_READ_ACTIVE_LANES = Budget(
    "shuffle_inactive_reads", 0, "every lane named in a shuffle's mask (all 32 here) must "
    "execute it (CUDA leaves the result undefined otherwise): shuffle outside the branch")
#: Checked on every puzzle whose kernel uses atomics but whose budgets do not measure them:
#: there a contended atomic (``t.atomic_add(out, b, v)`` from every lane) would stand in for
#: the tree, the tiles or the shuffles the puzzle is about.
UNCONTENDED_ATOMICS = Budget(
    "atomic_contention", 1, "updates of one address take turns: combine a warp's values "
    "first (a tree or shuffles, without waiting), then let one lane update memory")
#: Warp instructions issued by the busiest warp of each puzzle's worked kernel, on the measured
#: cases (``solutions/puzzle_kernels.py``, seed 0, its own launch choices; a test measures them
#: again).  Every other budget is an upper bound that one thread doing all of a block's work
#: meets (its loads touch one sector each, it needs no barrier and no shared memory), so this
#: one keeps the work spread over the threads: see :func:`spread_budget`.
WORKED_BUSIEST_WARP = {
    "map": 3, "zip": 4, "guard": 5, "map_2d": 11, "broadcast": 10, "blocks": 6,
    "blocks_2d": 13, "split_work": 7, "stencil": 38, "dot": 64, "histogram_global": 5,
    "histogram_shared": 14, "aos_to_soa": 36, "transpose_naive": 8, "transpose_tiled": 13,
    "transpose": 13, "matmul_naive": 121, "matmul_tiled": 157, "ilp": 23, "occupancy": 48,
    "reduce_tree": 79, "reduce_warp_uniform": 79, "reduce": 71, "reduce_shuffle": 30,
    "scan_hillis_steele": 65, "scan_blelloch": 317, "matmul_register": 614, "grid_stride": 32,
    "segmented_sum": 79, "softmax": 166, "sgemm_1d_blocktile": 1187,
    "sgemm_2d_blocktile": 5962, "sgemm_vectorized": 4592, "sgemm_double_buffered": 4594,
    "sgemm_warptile": 4610, "mma_tile": 75, "hgemm_mma": 559,
    "flash_attention": 2149, "decode_attention": 1316,
}


#: Room for one thread's loop that a sound kernel may have and the worked kernel has not, in
#: instructions.  ``histogram_shared``: one thread zeroing or merging the 16 bins, about 4
#: instructions a bin (load, test, branch, atomic) — the merge's 16 global atomics are what
#: the puzzle counts, not which lanes issue them; one thread counting the block's 128 values
#: instead issues about 400.
SERIAL_ROOM = {"histogram_shared": 16 * 4}


def spread_budget(p: Puzzle) -> Budget | None:
    """The busiest warp may issue at most twice the worked kernel's instructions, plus 16
    (plus the puzzle's :data:`SERIAL_ROOM`): room for a kernel written differently (more index
    arithmetic, other guards), none for one thread looping over the elements its block's
    threads should share."""
    worked = WORKED_BUSIEST_WARP.get(p.id)
    if worked is None:
        return None
    room = SERIAL_ROOM.get(p.id, 0)
    return Budget("busiest_warp", 2 * worked + 16 + room,
                  f"the worked kernel's busiest warp issues {worked}"
                  + (f" (and one thread may loop over the 16 bins: {room} more)" if room else "")
                  + "; the threads share the work, so no warp has to loop over the elements "
                  "of the others")


def output_loads_budget(p: Puzzle, unread_atomics: frozenset = frozenset()) -> Budget:
    """No kernel needs to read back what it writes: the spec never reads an output.  An atomic
    on an output reads it too when the kernel uses the old value it returns; one written as a
    statement (``t.atomic_add(out, 0, v)``, the old value dropped) only writes, as CUDA's
    ``red`` instruction does, so per-warp totals added to an output are not reads
    (``unread_atomics``: those lines).  In the puzzles about atomics, whose outputs are
    counters updated that way, only plain loads count (their own budgets count the atomics)."""
    about_atomics = any(b.metric in ATOMIC_METRICS for b in p.budgets)
    kinds = ("ld.global",) if about_atomics else _metrics.LOADS["global"]
    return Budget("output_loads", 0, "the spec reads only the inputs: keep running values in "
                  "registers or shared memory and store each output once (a load of an "
                  "output, or an atomic on it whose old value you use, reads it back)",
                  params={"arrays": tuple(p.outputs), "kinds": kinds,
                          "unread_atomics": frozenset(unread_atomics)})


def input_stores_budget(p: Puzzle) -> Budget:
    """No kernel needs to write an input (the spec writes only the outputs)."""
    return Budget("input_stores", 0, "the spec writes only the outputs; writing an input to "
                  "read it back uses global memory where shared memory belongs",
                  params={"outputs": tuple(p.outputs)})


#: The metrics of the puzzles that are about atomics (the histograms).
ATOMIC_METRICS = frozenset({"atomics_per_element", "global_atomics_per_block",
                            "atomic_serialisation", "atomic_contention"})


class _Failed(Exception):
    """Carries a finished verdict out of the steps of :func:`judge`."""

    def __init__(self, result: PuzzleResult):
        super().__init__(result.message)
        self.result = result


def judge(p: Puzzle, kernel, *, seed: int = 0, choices: Mapping | None = None,
          constants: Mapping | None = None) -> PuzzleResult:
    """Run ``kernel`` (a function, or its source text with ``constants``) on every case of
    ``p`` and return the verdict (see the module docstring)."""
    try:
        kernel, k, choices = _prepare(p, kernel, dict(choices or {}), dict(constants or {}))
        runs = [_run_case(p, kernel, case) for case in _cases(p, seed, choices)]
    except _Failed as stop:
        return stop.result
    budgets = (*p.budgets, *_implicit(p, runs, queries.unread_atomic_lines(k)))
    measured = [(b, m) for b in budgets
                if (m := _measure(b, runs, choices, kernel)) is not None]
    measures = tuple(m for _, (m, _, _) in measured)
    for b, (m, case, line) in measured:
        if not m.ok:
            metric = _metrics.METRICS[b.metric]
            context = case.label() + (f"; line {line}" if line is not None else "")
            text = (f"correct, but {b.name}: {metric.show(m.value)}, the budget is "
                    f"{metric.bound_word}{metric.show(m.limit, unit=False)} ({context})")
            if b not in p.budgets:  # a budget the statement does not list: say why it holds
                text += f"; {b.why}"
            elif b.metric in ("load_sectors", "store_sectors") and m.value == m.limit + 1:
                text += ("; one sector more than the budget: that warp's 128 B most likely "
                         "start off a 32-byte boundary (start each warp's run at a multiple "
                         "of 8 elements)")
            elif b.metric in ("load_sectors", "store_sectors") and p.lesson < 4:
                # lesson 04 teaches sectors; before it, say what the number means
                text += ("; a sector is the 32 B piece memory moves, so a warp whose 32 lanes "
                         "touch 32 consecutive 4-byte values needs 4, and lanes far apart need "
                         "one each: let neighbouring lanes take neighbouring elements")
            elif b.metric == "loads_per_element":
                text += (f"; every {b.array}[...] the kernel evaluates is a load: keep a value "
                         f"needed again in a local, or the block's values in a shared tile")
            return PuzzleResult(p.id, FAILED, True, f"✗ {p.id}: {text} — see {b.where()}",
                                b.metric, line, measures)
    # the ✓ line lists the statement's budgets; the checks every puzzle gets (no read-back
    # of outputs, no stores to inputs, ...) would only add "0 lane loads" to it
    summary = "; ".join(f"{m.name} {_metrics.METRICS[b.metric].show(m.value)}"
                        for b, (m, _, _) in measured if b in p.budgets)
    inputs = f"{len(runs)} input{'s' if len(runs) > 1 else ''}"
    return PuzzleResult(p.id, PASSED, True, f"✓ {p.id}: correct on {inputs}"
                        + (f", within every budget: {summary}" if summary else ""),
                        None, None, measures)


def _fail(p: Puzzle, failure: str, text: str, *, case=None, line=None, section=None):
    context = [case.label()] if case is not None else []
    if line is not None and f"line {line}" not in text:
        context.append(f"line {line}")
    text += f" ({'; '.join(context)})" if context else ""
    text += f" — see {section}" if section is not None else ""
    return _Failed(PuzzleResult(p.id, FAILED, False, f"✗ {p.id}: {text}", failure, line))


def _prepare(p: Puzzle, kernel, choices: dict, constants: dict):
    """The kernel as a function in the kernel language, and the launch choices; raises
    :class:`_Failed` for a stub, a kernel outside the language, a wrong signature or a
    missing choice."""
    if isinstance(kernel, str):  # a notebook cell: BLOCK = 256 and the like, then the def
        kernel, numbers = _kernel.split_cell(kernel)
        for name in p.choices:
            if name not in choices and name.upper() in numbers:
                choices[name] = numbers[name.upper()]
        constants = {**{k: v for k, v in numbers.items() if v is not Ellipsis}, **constants}
    stub = _kernel.is_stub(kernel)
    unchosen = [k.upper() for k, v in choices.items() if v is Ellipsis]
    if stub or unchosen:
        why = (f"`{p.kernel_name}` still raises NotImplementedError" if stub
               else f"choose {', '.join(unchosen)}")
        raise _Failed(PuzzleResult(p.id, NOT_ATTEMPTED, False,
                                   f"… {p.id}: not attempted yet — {why}"))
    if isinstance(kernel, str):
        try:
            kernel = _kernel.kernel_from_source(kernel, constants)
        except KernelLanguageError as exc:
            raise _fail(p, "language", str(exc), line=exc.lineno) from None
        except (SyntaxError, TypeError, ValueError) as exc:
            raise _fail(p, "language", f"the kernel's source cannot be compiled: {exc}") from None
    k = _kernel.language_problem(kernel)
    if isinstance(k, tuple):
        raise _fail(p, "language", k[0], line=k[1])
    problem = queries.signature_problem(k, p.params)
    if problem is not None:
        raise _fail(p, "signature", problem)
    for name, what in p.choices.items():
        if name not in choices:
            raise _fail(p, "choice", f"this puzzle needs your launch choice: pass {name}=... "
                                     f"({what})")
    return kernel, k, choices


def _cases(p: Puzzle, seed: int, choices: dict) -> list[Case]:
    try:
        return p.cases(seed, choices)
    except (TypeError, ValueError) as exc:  # a launch choice the puzzle cannot take
        raise _fail(p, "choice", str(exc)) from None


def _run_case(p: Puzzle, kernel, case: Case):
    """``(case, SimResult)`` for a correct, hazard-free run; raises :class:`_Failed`."""
    args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.args.items()}
    try:
        result = simt.run(kernel, case.grid, case.block, *args.values(),
                          max_instructions=p.max_instructions, record_indices=True)
    except Exception as exc:  # the learner's kernel: any error is feedback, not a crash
        text, line = _kernel.explain_error(exc)
        section = (ERROR_SECTION if text.startswith(("IndexError", "TypeError"))
                   else BARRIER_SECTION if "t.sync()" in text else None)
        raise _fail(p, "error", text, case=case, line=line, section=section) from None
    hazard = _hazard(result)
    if hazard is None and (race := _races.global_race(result)) is not None:
        hazard = ("race", race[0], race[1], RACE_SECTION)   # blocks run at once on a GPU
    if hazard is not None:
        failure, text, line, section = hazard
        raise _fail(p, failure, text, case=case, line=line, section=section)
    double = _fp64(p, case, result)
    if double is not None:
        raise _fail(p, "fp64", double[0], case=case, line=double[1], section=ERROR_SECTION)
    wrong = _first_wrong(p, case, args, result)
    if wrong is not None:
        raise _fail(p, "wrong", wrong, case=case, section=p.sections[0] if p.sections else None)
    return case, result


def _measure(b: Budget, runs, choices, kernel=None) -> tuple[Measure, Case, int | None] | None:
    """The budget on the measured cases: the first case that breaks it, else the last.  A
    metric that returns a third value sets the limit itself (one that depends on the kernel, as
    occupancy's does on its registers); a budget whose ``params`` ask for the kernel's compiled
    registers gets the kernel in its params."""
    metric = _metrics.METRICS[b.metric]
    params = ({**b.params, "kernel": kernel} if b.params.get("registers") == "compiled"
              else b.params)
    shown = None
    for case, result in runs:
        if not case.measured:
            continue
        limit = b.limit_for(case.size, choices)
        value, line, *own = metric.measure(result, case, b.array, params)
        if own:
            limit = float(own[0])
        ok = metric.within(value, limit)
        shown = (Measure(b.name, value, limit, ok,
                         f"{metric.show(value)}, budget {metric.relation(limit)} {metric.show(limit)}"),
                 case, line)
        if not ok:
            break
    return shown


def _implicit(p: Puzzle, runs, unread_atomics: frozenset = frozenset()) -> tuple[Budget, ...]:
    """Budgets that apply to every puzzle: no output read back, no input written, the work
    spread over the
    threads; and to every
    puzzle whose kernel uses a feature: shuffles, and atomics where the puzzle's own budgets
    do not measure them."""
    shuffled = any(r.totals.shuffle_instructions for _, r in runs)
    atomics = (any(r.totals.atomic_instructions for _, r in runs)
               and not any(b.metric in ATOMIC_METRICS for b in p.budgets))
    spread = spread_budget(p)
    return ((SHUFFLES_READ_ACTIVE_LANES,) if shuffled else ()) + \
        ((UNCONTENDED_ATOMICS,) if atomics else ()) + \
        (output_loads_budget(p, unread_atomics), input_stores_budget(p)) + \
        ((spread,) if spread else ())


def _hazard(result: simt.SimResult):
    """(failure, text, line, section) for the first race, read of unwritten shared memory or
    barrier reached from different lines."""
    if result.races:
        # a race between warps first: the t.sync() it needs orders a warp's lanes too, while
        # the t.syncwarp() a race inside one warp asks for would leave the other one standing
        r = next((r for r in result.races if not r.within_warp), result.races[0])
        section = WARP_RACE_SECTION if r.within_warp else RACE_SECTION
        return "race", f"{r}: a {r.missing} is missing", r.other_line, section
    for u in result.uninitialised_reads:
        return "uninitialised", str(u), u.line, SHARED_SECTION
    for note in result.notes:
        if "different lines" in note and "t.sync()" in note:
            return "error", note, None, BARRIER_SECTION
    for w in result.partial_warps:
        return "partial_warp", str(w), w.line, ERROR_SECTION
    return None


def _fp64(p: Puzzle, case: Case, result) -> tuple[str, int | None] | None:
    """A kernel whose arrays hold no float64 but whose arithmetic runs in FP64: a Python float
    in ``t.local(0.0)``, ``np.float64`` or a float64 scalar made the work double precision."""
    if not result.fp64:
        return None
    if any(isinstance(v, np.ndarray) and v.dtype == np.float64 for v in case.args.values()):
        return None
    first = result.fp64[0]
    return (f"{first}; on a GPU that is the FP64 pipe (1/2 of FP32's rate on an H200, 1/64 on "
            f"consumer GPUs) for float32 data", first.line)


def _first_wrong(p: Puzzle, case: Case, args: dict, result=None) -> str | None:
    expected = p.expected(case.args)
    # Outputs start as NaN so an element nobody wrote shows; an output only ever updated by
    # atomics stays NaN too (NaN + v is NaN): CUDA does not zero it either.
    atomics_only = set()
    if result is not None:
        kinds = {(e.array, e.kind[:3]) for e in result.events if e.array is not None}
        atomics_only = {a for a, k in kinds if k == "ato" and (a, "st.") not in kinds}
    for name in p.outputs:
        got, want = args[name], expected[name]
        if np.issubdtype(want.dtype, np.floating):
            ok = np.isclose(got, want, rtol=p.rtol, atol=p.atol)
        else:
            ok = got == want
        if ok.all():
            continue
        bad = np.flatnonzero(~ok.ravel())
        i = int(bad[0])
        g, w = got.ravel()[i], want.ravel()[i]
        note = ""
        if not (np.issubdtype(got.dtype, np.floating) and np.isnan(g)):
            shown = f"{name}[{i}] is {_num(g)}"
        elif name in atomics_only:
            shown = f"{name}[{i}] is NaN"
            note = (f": {name} starts as NaN, not 0, and an atomic only adds to what is there "
                    f"(store a first value)")
        else:
            shown = f"{name}[{i}] was never written (it still holds the NaN it started with)"
        more = f"; {bad.size} of {got.size} elements are wrong" if bad.size > 1 else ""
        return f"{shown}, expected {_num(w)}{more}{note}"
    return None


def _num(x) -> str:
    x = x.item() if hasattr(x, "item") else x
    if isinstance(x, float):
        return f"{x:.7g}"
    return str(x)
