"""Puzzle kernels are judged in a sandbox of their own, from their source text alone.

A puzzle answer is a simulator kernel.  The probe sends back its source and the plain numbers
it names (:func:`gpu_lessons.grading.probe.kernel_answer`); it is never run in the learner's
kernel for grading (the learner could have patched the simulator there) nor in the grader's
process (it is the learner's code).  :func:`evaluate_kernels` starts a fresh sandbox that
receives only those sources, and in it :func:`main`

1. runs ``gpu_lessons.puzzles.evaluate(puzzle_id, source, constants=..., **choices)``, which
   checks the source with the kernel language (``gpu_lessons.kernels.lang``: no imports, no
   ``_`` attributes, only the documented ``t.`` API, a whitelist of ``np.`` names and
   builtins), defines it in a namespace holding only NumPy, the named numbers and the
   language's builtins, and judges it on the puzzle's cases and budgets;
2. reports ``passed``, ``correct`` and the puzzle checker's ``message``, one JSON line each.

The grader reads those lines back like any sandbox output: bounded, and checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import textwrap

from .._format import duration
from .plan import Plan

#: Seconds one kernel may take to evaluate (a reference kernel takes under 2 s).
PER_KERNEL_S = 20


def evaluate_kernels(plan: Plan, report, *, sandbox: bool, limits, uid, timeout=None,
                     cgroup: bool = True, seed: int | None = None) -> None:
    """Evaluate the kernels in ``report.answers`` for ``plan``'s puzzles; fill
    ``report.puzzles`` (one ``{"passed", "correct", "message"}`` per puzzle column).
    ``seed``: the puzzles' input seed (default: :func:`puzzle_seed` of the plan's)."""
    from . import untrusted
    from .sandbox import Process, python_module

    todo = []
    for p in plan.puzzles:
        answer = report.answers.get(p.column) or {}
        if answer.get("kind") != "kernel":
            continue
        if not answer.get("source"):
            report.puzzles[p.column] = _failed(p.id, f"the source of `{p.name}` could not be "
                                                     "read (define it in a cell of its own)")
        elif answer.get("truncated"):
            report.puzzles[p.column] = _failed(p.id, f"`{p.name}` is too long to grade")
        else:
            chosen = answer.get("choices") or {}
            todo.append({"id": p.column, "puzzle": p.id, "name": answer["name"],
                         "source": answer["source"], "globals": answer.get("globals") or {},
                         "choices": {c: chosen[c.upper()] for c in p.choices
                                     if c.upper() in chosen}})
    if not todo:
        return
    proc = Process(python_module(__name__), sandbox=sandbox, limits=limits,
                   uid=uid, max_total=4 * 2**20, max_line=64 * 1024, cgroup=cgroup)
    seed = puzzle_seed(plan.seed) if seed is None else seed
    outcome = proc.run(json.dumps({"answers": todo, "seed": seed}).encode(),
                       timeout or 30 + PER_KERNEL_S * len(todo))
    wanted = {item["id"] for item in todo}
    seen = {}
    for _, line in outcome.lines:
        try:
            ev = untrusted.event(untrusted.parse_line(line), n_cells=0, wanted=wanted)
            if ev["event"] != "puzzle" or ev["id"] in seen:
                raise untrusted.Invalid("an unexpected line from the puzzle sandbox")
        except untrusted.Invalid as exc:
            report.invalid = f"puzzle evaluation: {exc}"
            return
        seen[ev["id"]] = ev
    for item in todo:
        if item["id"] in seen:
            report.puzzles[item["id"]] = seen[item["id"]]
        else:
            why = ("it ran out of time" if outcome.timed_out
                   else f"the evaluation stopped ({untrusted.clean(outcome.log_tail, 200)})")
            report.puzzles[item["id"]] = _failed(item["puzzle"], f"not evaluated: {why}")


def puzzle_seed(seed, chapter=None, student: str = "") -> int:
    """The puzzles' input seed, 64 bits, from the run's ``--seed`` (any text), the chapter
    and the student: the grader tries kernels on inputs a learner's own check never drew
    (their check uses seed 0), different for every chapter, student and regrade (a regrade
    draws a fresh run seed unless it is told the old one)."""
    text = f"gpu-lessons puzzle inputs v2\0{seed}\0{chapter}\0{student}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8],
                          "big")


def _failed(puzzle_id: str, why: str) -> dict:
    return {"event": "puzzle", "passed": False, "correct": False,
            "message": f"✗ puzzle {puzzle_id}: {why}"}


# -- inside the sandbox ----------------------------------------------------------------------

def _evaluate_one(item: dict, seed: int) -> dict:
    """Let the puzzle judge one kernel's source (inside the sandbox).  ``evaluate`` turns the
    text into a function with ``kernel_lang.compile_kernel``, which validates it first."""
    try:
        from gpu_lessons import puzzles
    except ImportError as exc:
        return {"passed": False, "correct": False,
                "message": f"✗ puzzle {item['puzzle']}: puzzle grading is not available in this "
                           f"install ({exc})"}
    result = puzzles.evaluate(item["puzzle"], textwrap.dedent(item["source"]),
                              constants=dict(item["globals"]), seed=seed, **item["choices"])
    return {"passed": bool(result.passed), "correct": bool(result.correct),
            "message": redact(str(result.message))[:4000]}


#: "out[7] is 3, expected 12": the value at the grader's inputs, which a learner could collect
#: over regrades; graded feedback names the element and the learner's own value only.
_EXPECTED = re.compile(r", expected [-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf)", re.IGNORECASE)


def redact(message: str) -> str:
    """A puzzle verdict without the expected values it quotes at the grader's inputs."""
    return _EXPECTED.sub(" (the expected value is not shown in graded feedback)", message)


def _alarm(signum, frame):
    raise TimeoutError(f"the kernel took more than {duration(PER_KERNEL_S)} to evaluate")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m gpu_lessons.grading.puzzle_eval RESULT_FD  (kernels as JSON "
              "on stdin; started by the grader)", file=sys.stderr)
        return 2
    out = os.fdopen(int(argv[0]), "w", encoding="utf-8")
    signal.signal(signal.SIGALRM, _alarm)
    task = json.loads(sys.stdin.buffer.read())
    for item in task["answers"]:
        signal.alarm(PER_KERNEL_S)
        try:
            result = _evaluate_one(item, task["seed"])
        except Exception as exc:  # the kernel raised outside the puzzle's own checks
            result = {"passed": False, "correct": False,
                      "message": f"✗ puzzle {item['puzzle']}: {type(exc).__name__}: {exc}"[:2000]}
        finally:
            signal.alarm(0)
        out.write(json.dumps({"event": "puzzle", "id": item["id"], **result}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
