"""Kernel puzzles: write kernels in the SIMT simulator, graded on correctness and efficiency.

Each lesson's exercise notebook (02–08) ends with puzzles.  A puzzle states a spec (a NumPy
statement), the kernel's signature and its launch; the learner writes the kernel from one
thread's point of view (see :mod:`gpu_lessons.kernels.simt`) and checks it::

    from gpu_lessons import puzzles

    def map_kernel(t, a, out):
        ...

    puzzles.check("map", map_kernel)     # ✓, "not attempted", or one red line saying why
    puzzles.show("map", map_kernel)      # lanes × time of one warp, and its memory accesses

A kernel passes when it is *correct* — it matches the spec on several random inputs
(including sizes that leave partial warps or blocks), with no error, no race and no read of
shared memory nothing wrote — and *efficient*: it stays within the puzzle's budgets, each
the best a sound kernel reaches and measured by the simulator (sectors per request, bank
conflicts, SIMT efficiency, global loads per element, barriers, ...).  Feedback names the
first property that fails, the learner's line, and the lesson section that explains it; it
never shows a solution (the worked kernels are not part of this package).

For graders and tools: :func:`evaluate` returns a :class:`PuzzleResult` without printing;
:func:`kernel_from_source` compiles a kernel given as text; each :class:`Puzzle` has
``make_inputs(size, seed=)``, ``launch(**size)``, ``expected(args)`` and ``gpu_size`` to run
it at any allowed size.
"""

from __future__ import annotations

from .. import _validate
from ..checks import CheckFailed
from . import _kernel
from ._core import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Budget,
    Case,
    Measure,
    Puzzle,
    PuzzleResult,
    Section,
    judge,
)
from ._kernel import kernel_from_source
from ._registry import find, puzzles
from .on_gpu import run_on_gpu


class PuzzleFailed(CheckFailed):
    """A kernel that is wrong or over a budget; shows as one red line in a notebook."""


def evaluate(puzzle_id: str, kernel, *, seed: int = 0, constants=None,
             **choices) -> PuzzleResult:
    """Judge ``kernel`` on puzzle ``puzzle_id`` without printing or raising for a failure.

    ``kernel``: the learner's function, or its source text (then ``constants`` may give the
    plain-number globals it reads).  ``seed``: which random inputs (the same seed, the same
    inputs).  ``choices``: the launch parameters a puzzle lets the learner choose
    (``block=256`` for ``"occupancy"``).
    """
    p = find(puzzle_id)
    seed = _validate.integer("seed", seed, low=0)
    unknown = set(choices) - set(p.choices)
    if unknown:
        raise TypeError(f"{p.id} has no launch choice {', '.join(sorted(unknown))}"
                        + (f" (it has: {', '.join(p.choices)})" if p.choices else ""))
    return judge(p, kernel, seed=seed, choices=choices, constants=constants)


def check(puzzle_id: str, kernel, *, strict: bool = False, **choices) -> None:
    """Print ✓ (or "not attempted"); raise :class:`PuzzleFailed` with one line otherwise."""
    result = evaluate(puzzle_id, kernel, **choices)
    if result.passed or (result.status == NOT_ATTEMPTED and not strict):
        print(result.message)
    else:
        raise PuzzleFailed(result.message, result)


def predict(puzzle_id: str, kernel, **choices) -> None:
    """Print the performance model's line for ``kernel`` at the puzzle's GPU size: its predicted
    H200 time and limiter beside the worked kernel's recorded H200 time (no GPU needed; it
    simulates a sample of the full-size launch, a few seconds)."""
    from ..perf.check import check_line

    line = check_line(find(puzzle_id), kernel, **choices)
    print(line if line else f"the performance model cannot follow this kernel on {puzzle_id}")


def passed(puzzle_id: str, kernel, **choices) -> bool:
    return evaluate(puzzle_id, kernel, **choices).passed


def run(puzzle_id: str, kernel, *, case: int = 0, seed: int = 0, **choices):
    """Run ``kernel`` on one case of the puzzle (the first by default) with every memory
    access's element recorded; returns ``(SimResult, arguments after the run)``.

    Raises what the kernel raises (a ``KernelError`` at the learner's line) and
    ``KernelLanguageError`` for a kernel outside the language.
    """
    from ..kernels import lang as kernel_lang
    from ..kernels import simt

    p = find(puzzle_id)
    kernel_lang.validate(kernel)
    if set(choices) != set(p.choices):
        wanted = ", ".join(f"{k}=..." for k in p.choices) or "none"
        raise TypeError(f"{p.id}'s launch choices are: {wanted}; got "
                        f"{', '.join(f'{k}=' for k in choices) or 'none'}")
    cases = p.cases(seed, choices)
    c = cases[_validate.integer("case", case, low=0, high=len(cases) - 1)]
    args = {k: (v.copy() if hasattr(v, "copy") else v) for k, v in c.args.items()}
    result = simt.run(kernel, c.grid, c.block, *args.values(), record_indices=True,
                      max_instructions=p.max_instructions)
    return result, args


def show(puzzle_id: str, kernel, *, block_index: int = 0, warp: int = 0,
         whole_run: bool = False, **choices):
    """The picture of the learner's kernel on the puzzle's first input: one warp's lanes
    over time (which lanes ran each instruction), and the elements of the puzzle's main array
    (else the array the warp touched most) that the warp's costliest access to it touched,
    coloured by lane (``whole_run=True``: every access of the run, coloured by count).  For the
    puzzles about bank conflicts the array is the shared one the warp's most conflicted access
    read or wrote.

    ``block_index``, ``warp``: which warp to draw; ``choices``: the launch parameters the
    puzzle lets the learner choose, as for :func:`check` (``block=256`` for ``"occupancy"``).
    Prints one line instead when there is nothing to draw (the stub, an error).
    """
    from ..views.kernel_picture import KernelPicture, kernel_picture

    p = find(puzzle_id)
    if _kernel.is_stub(kernel) or any(v is Ellipsis for v in choices.values()):
        print(f"… {p.id}: not attempted yet — nothing to show")
        return None
    try:
        result, _ = run(puzzle_id, kernel, **choices)
    except Exception as exc:  # the learner's kernel: show the error as a line, not a trace
        text, line = _kernel.explain_error(exc)
        where = f" (line {line})" if line is not None and f"line {line}" not in text else ""
        print(f"✗ {p.id}: {text}{where}")
        return None
    block_index = _validate.integer("block_index", block_index, low=0)
    warp = _validate.integer("warp", warp, low=0)
    array, step = p.picture, None
    events = result.warp_events(block_index, warp)
    if array == "shared":  # the warp's shared access with the most bank conflicts, if any
        shared = [e for e in events if e.wavefronts is not None]
        array = max(shared, key=lambda e: e.bank_conflicts or 0).array if shared else None
    if not _validate.flag("whole_run", whole_run):
        accesses = [e for e in events
                    if e.array is not None and (array is None or e.array == array)]
        if accesses:  # the first of the most expensive: sectors (global) or wavefronts
            costliest = max(accesses, key=lambda e: (e.sectors or 0) + (e.wavefronts or 0))
            step, array = costliest.step, costliest.array
    row = p.sizes[0][p.picture_row] if p.picture_row and array == p.picture else None
    return KernelPicture(kernel_picture(result, array=array, block=block_index, warp=warp,
                                        step=step, row_elements=row))


__all__ = [
    "FAILED", "NOT_ATTEMPTED", "PASSED",
    "Budget", "Case", "Measure", "Puzzle", "PuzzleFailed", "PuzzleResult", "Section",
    "check", "evaluate", "find", "kernel_from_source", "passed", "predict", "puzzles", "run",
    "run_on_gpu",
    "show",
]
