"""Private question banks: questions an instructor grades with that never ship.

A bank is a folder of Python modules, each defining ``QUESTIONS``, a tuple of
:class:`~gpu_lessons.questions.types.Question` written with the same types as the built-in
chapters (``from gpu_lessons.questions.types import Question, Number, Mistake, Vary, ...``).
An id ``"05.my_question"`` puts a question in chapter 05; a released notebook asks it after
that chapter's built-in questions, and the grader grades it with them.  Files whose name
starts with ``_`` are not loaded (keep shared helpers there).

Bank questions are checked like the built-in ones when the bank is loaded: the structural
rules of :func:`gpu_lessons.questions.validate`, and every variant well posed
(:func:`gpu_lessons.questions.audit.problems`).  A bank module is code the instructor wrote and
runs with the instructor's rights, like any other script.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from . import CHAPTERS, templates, validate
from .audit import problems
from .types import Question


def load_bank(folder) -> dict[int, tuple[Question, ...]]:
    """The questions of the bank in ``folder``, by chapter, in file then declaration order.

    Raises ``ValueError`` naming the file and the question when a rule is broken: a missing
    ``QUESTIONS``, an id or name that collides with a built-in question or another bank
    question, a variant that is ill posed.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"bank={str(folder)!r} is not a folder of question modules")
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ValueError(f"bank folder {str(root)!r} holds no question modules (*.py)")
    taken = tuple(q for n in CHAPTERS for q in templates(n))
    found: list[Question] = []
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    for path in files:
        questions = _questions_of(path, f"_gpu_lessons_bank_{tag}_{path.stem}")
        validate(questions, f"{path.name}: QUESTIONS", taken=taken + tuple(found))
        for q in questions:
            wrong = problems(q)
            if wrong:
                raise ValueError(f"{path.name}: {q.id} is not well posed: {wrong[0]}"
                                 + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))
        found += questions
    return {n: tuple(q for q in found if q.chapter == n)
            for n in CHAPTERS if any(q.chapter == n for q in found)}


def _questions_of(path: Path, module_name: str) -> tuple:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ValueError(f"{path.name}: importing it failed: {type(exc).__name__}: {exc}") from exc
    questions = getattr(module, "QUESTIONS", None)
    if not isinstance(questions, (tuple, list)):
        raise ValueError(f"{path.name}: defines no QUESTIONS tuple")
    return tuple(questions)
