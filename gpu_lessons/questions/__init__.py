"""The exercise questions, one module per chapter (``ch01`` … ``ch10``).

Each chapter module defines ``QUESTIONS``: a tuple of :class:`~gpu_lessons.questions.types.Question`
in the order its exercise notebook asks them.  Modules are imported on first use, and a
question computes its reference answer only when it is checked, so importing the checks in
a notebook stays cheap.

To add a question: append it to the chapter's ``QUESTIONS``, give the exercise notebook the
stub from ``question.stub()`` (it defines the variable or function named ``question.name``
and calls ``check``), put the worked answer in ``solutions/``, and run
``pytest tests/test_checks.py``, which checks every registered question is well formed.
"""

from __future__ import annotations

import difflib
import importlib
import keyword
import re
from functools import cache

from .types import Choice, Function, Number, Question

#: Chapters that have an exercise notebook.
CHAPTERS = tuple(range(1, 11))

_ID = re.compile(r"^(\d\d)\.[a-z0-9_]+$")


def chapter_number(chapter) -> int:
    """Normalise 5, "5", "05", "ch05" or "05_roofline" to the chapter number 5."""
    number = None
    if isinstance(chapter, int) and not isinstance(chapter, bool):
        number = chapter
    elif isinstance(chapter, str):
        match = re.match(r"^(?:ch)?(\d{1,2})(?:_\w*)?$", chapter.strip().lower())
        number = int(match.group(1)) if match else None
    if number not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS[0]}..{CHAPTERS[-1]} "
                         f"(e.g. 5, '05' or 'ch05'); got {chapter!r}")
    return number


def load(chapter) -> tuple:
    """The questions of one chapter, checked for the rules every question must follow."""
    return _load(chapter_number(chapter))


@cache
def _load(number: int) -> tuple:
    module = importlib.import_module(f"{__name__}.ch{number:02d}")
    found = tuple(getattr(module, "QUESTIONS", ()))
    _validate(number, found)
    return found


def all_questions() -> dict:
    """Every registered question, keyed by id, in chapter order."""
    return {q.id: q for n in CHAPTERS for q in load(n)}


def find(question_id):
    """The question with this id; an unknown id raises ``ValueError`` naming close ones."""
    if not isinstance(question_id, str):
        raise TypeError(f"question_id must be a string like '05.ridge_h100', "
                        f"got {question_id!r} ({type(question_id).__name__})")
    match = _ID.match(question_id)
    if match and int(match.group(1)) in CHAPTERS:
        for q in load(int(match.group(1))):
            if q.id == question_id:
                return q
    known = list(all_questions())
    close = difflib.get_close_matches(question_id, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"question_id={question_id!r} is not a known question.{hint}")


def _validate(number: int, found: tuple) -> None:
    ids, names = set(), set()
    for q in found:
        if not isinstance(q, Question):
            raise TypeError(f"ch{number:02d}.QUESTIONS holds {q!r}, not a Question")
        match = _ID.match(q.id)
        if not match or int(match.group(1)) != number:
            raise ValueError(f"question id {q.id!r} must look like '{number:02d}.some_name'")
        if not q.name.isidentifier() or keyword.iskeyword(q.name):
            raise ValueError(f"{q.id}: name={q.name!r} is not a Python identifier")
        if q.id in ids or q.name in names:
            raise ValueError(f"{q.id}: duplicate id or name {q.name!r} in chapter {number}")
        if not isinstance(q.answer, (Number, Choice, Function)):
            raise TypeError(f"{q.id}: answer must be a Number, Choice or Function")
        if isinstance(q.answer, Function) and not q.answer.signature.startswith(f"{q.name}("):
            raise ValueError(f"{q.id}: signature {q.answer.signature!r} must call {q.name}(...)")
        if not (isinstance(q.points, (int, float)) and q.points > 0):
            raise ValueError(f"{q.id}: points must be > 0, got {q.points!r}")
        ids.add(q.id)
        names.add(q.name)
