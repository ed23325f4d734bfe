"""What to ask one submission's kernel, decided (and its references computed) before it runs.

A :class:`Plan` holds one student's questions, the inputs each function answer is tried on,
the puzzles whose kernels to collect, and a random nonce that marks the probes' output.
:meth:`Plan.make` computes every reference and named-mistake value once, in the grader's
process, before that student's sandbox starts: the references import the package's models
lazily, and importing them here pins them in memory, so nothing a submission does (it
cannot write the package anyway: the sandbox sees it read-only) changes this run's grades.

:meth:`Plan.worker_plan` is the part the sandbox receives: the notebook's code cells and the
probe cells, which carry :mod:`gpu_lessons.grading.probe` as source text.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

PROBE_MARK = "# gpu-lessons grader probe"


@dataclass(frozen=True)
class Puzzle:
    """A puzzle graded from a notebook: the kernel function named ``name`` answers puzzle ``id``
    (an id of ``gpu_lessons.puzzles``).  ``choices``: the launch parameters the learner picks,
    each read from the notebook's variable of that name in capitals (``block`` from
    ``BLOCK = 256``).  Its column in the grades is ``puzzle:<id>``."""

    id: str
    name: str
    points: float = 1.0
    choices: tuple[str, ...] = ()

    @property
    def column(self) -> str:
        return f"puzzle:{self.id.partition('@')[0]}"


def chapter_puzzles(chapter: int | None, points: float = 1.0) -> tuple[Puzzle, ...]:
    """The kernel puzzles that end ``chapter``'s exercise notebook (none where there are none,
    or where this install has no ``gpu_lessons.puzzles``)."""
    try:
        from .. import puzzles
    except ImportError:
        return ()
    if chapter is None or not 2 <= int(chapter) <= 8:
        return ()
    return tuple(Puzzle(p.id, p.kernel_name, points, tuple(p.choices))
                 for p in puzzles.puzzles(int(chapter)))


@dataclass(frozen=True)
class Plan:
    """One student's questions and puzzles, the function inputs, and the probes' nonce."""

    questions: tuple
    cases: dict
    puzzles: tuple[Puzzle, ...]
    nonce: str
    seed: int | str = 0

    @classmethod
    def make(cls, questions, seed, puzzles=()) -> Plan:
        from ..questions.types import Function

        cases = {q.id: q.answer.make_cases(q.id, seed=f"grade:{seed}")
                 for q in questions if isinstance(q.answer, Function)}
        plan = cls(tuple(questions), cases, tuple(puzzles), secrets.token_hex(16), seed)
        plan.warm_up()
        return plan

    @property
    def columns(self) -> tuple[str, ...]:
        """The grade columns, questions first, then puzzles."""
        return tuple(q.id for q in self.questions) + tuple(p.column for p in self.puzzles)

    @property
    def max_points(self) -> float:
        return float(sum(q.points for q in self.questions) + sum(p.points for p in self.puzzles))

    def warm_up(self) -> None:
        """Compute every reference and mistake value once, before any submission runs."""
        from ..questions.types import Function, Number

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

    def probe_groups(self) -> list[list[dict]]:
        """The questions grouped into probe cells: every value answer and puzzle kernel in the
        first (reading them is quick), then one cell per function answer, so a function that
        never returns costs only its own question."""
        def entry(q):
            return {"id": q.id, "name": q.name, "cases": self.cases.get(q.id)}

        quick = [entry(q) for q in self.questions if q.id not in self.cases]
        quick += [{"id": p.column, "name": p.name, "kind": "kernel",
                   "choices": [c.upper() for c in p.choices]} for p in self.puzzles]
        functions = [[entry(q)] for q in self.questions if q.id in self.cases]
        return ([quick] if quick else []) + functions

    def worker_plan(self, code_cells: list[str], *, cell_timeout: float, kernel: str) -> dict:
        """Everything the worker in the sandbox needs (see gpu_lessons.grading.worker)."""
        folder = f".probes-{self.nonce[:8]}"
        return {"cells": code_cells, "nonce": self.nonce, "probe_folder": folder,
                "cell_timeout": cell_timeout, "kernel": kernel,
                "probes": [{"ids": [item["id"] for item in group],
                            "source": probe_cell(group, self.nonce, folder)}
                           for group in self.probe_groups()]}


def probe_source() -> str:
    """The text of gpu_lessons/grading/probe.py, the code every probe cell carries."""
    return _PROBE_SOURCE


_PROBE_SOURCE = (Path(__file__).with_name("probe.py")).read_text("utf-8")


def probe_cell(group: list[dict], nonce: str, folder: str) -> str:
    """A cell that reads the answers in ``group`` out of the kernel.

    The probe module runs through ``exec`` in a fresh namespace whose builtins are the real
    ones, so a notebook that happens to define ``list``, ``type`` or ``json`` (or shadows
    ``globals``) still has its answers read.  Answers go to files in ``folder`` (relative to
    the kernel's working folder) and are printed after ``nonce``.
    """
    names = ", ".join(f"`{item['name']}`" for item in group)
    return (f"{PROBE_MARK}: reads {names} (added by the grader)\n"
            "import builtins as _gpu_lessons_builtins\n"
            "_gpu_lessons_probe = {'__builtins__': _gpu_lessons_builtins, "
            "'__name__': 'gpu_lessons_probe'}\n"
            f"_gpu_lessons_builtins.exec({_PROBE_SOURCE!r}, _gpu_lessons_probe)\n"
            "_gpu_lessons_probe['main']((lambda: None).__globals__, "
            f"{nonce!r}, {folder!r}, {json.dumps(group)!r})\n")


def _quietly(fn, *args, **kwargs) -> None:
    if callable(fn):
        with contextlib.suppress(Exception):  # a mistake's formula need not fit every input
            fn(*args, **kwargs)
