"""The exercise questions, one module per lesson (``lesson01`` … ``lesson10``,
named as ``gpu_lessons.puzzles`` names its modules).

Each chapter module defines ``QUESTIONS``: a tuple of :class:`~gpu_lessons.questions.types.Question`
in the order its exercise notebook asks them.  Modules are imported on first use, and a
question computes its reference answer only when it is checked, so importing the checks in
a notebook stays cheap.

:func:`load` and :func:`find` hand out questions bound to their default parameters (the
numbers the lessons and ``solutions/`` use); :func:`templates` gives the unbound ones, whose
``bind(params)`` makes any variant (:mod:`gpu_lessons.assignments` draws one per student).

To add a question: append it to the chapter's ``QUESTIONS``, run
``python tools/sync_exercises.py`` (it writes the question's cell into the exercise and
solution notebooks from its title and prompt, and adds the answer and check cells), put the
worked answer in ``solutions/``, and run ``pytest tests/test_checks.py``, which checks every
registered question and every one of its variants is well formed.
"""

from __future__ import annotations

import difflib
import importlib
import keyword
import re
from functools import cache

from .types import Choice, Design, Function, Number, Question

#: Chapters that have an exercise notebook.
CHAPTERS = tuple(range(1, 11))

_ID = re.compile(r"^(\d\d)\.[a-z0-9_]+$")


def chapter_number(chapter) -> int:
    """Normalise 5, "5", "05", "lesson05", "ch05" or "05_roofline" to the chapter number 5."""
    number = None
    if isinstance(chapter, int) and not isinstance(chapter, bool):
        number = chapter
    elif isinstance(chapter, str):
        match = re.match(r"^(?:lesson|ch)?(\d{1,2})(?:_\w*)?$", chapter.strip().lower())
        number = int(match.group(1)) if match else None
    if number not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS[0]}..{CHAPTERS[-1]} "
                         f"(e.g. 5, '05' or 'lesson05'); got {chapter!r}")
    return number


def load(chapter) -> tuple:
    """The questions of one chapter, bound to their default parameters, checked for the rules
    every question must follow."""
    return _load(chapter_number(chapter))


def templates(chapter) -> tuple:
    """The questions of one chapter as declared: variant questions unbound."""
    return _templates(chapter_number(chapter))


@cache
def _templates(number: int) -> tuple:
    module = importlib.import_module(f"{__name__}.lesson{number:02d}")
    found = tuple(getattr(module, "QUESTIONS", ()))
    validate(found, f"lesson{number:02d}.QUESTIONS", chapter=number)
    return found


@cache
def _load(number: int) -> tuple:
    return tuple(q.bind() for q in _templates(number))


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


def validate(found: tuple, where: str, *, chapter: int | None = None,
             taken: tuple = ()) -> None:
    """Check the rules every question follows (built-in or from a private bank).

    ``where`` names the source in messages; ``chapter``, when given, is the chapter every id
    must belong to; ``taken`` are questions already registered, whose ids and names (within a
    chapter) a new question may not reuse.
    """
    ids = {q.id for q in taken}
    names = {(q.chapter, q.name) for q in taken}
    for q in found:
        if not isinstance(q, Question):
            raise TypeError(f"{where} holds {q!r}, not a Question")
        match = _ID.match(q.id)
        if not match or int(match.group(1)) not in CHAPTERS or (
                chapter is not None and int(match.group(1)) != chapter):
            want = f"{chapter:02d}" if chapter is not None else "NN"
            raise ValueError(f"{where}: question id {q.id!r} must look like "
                             f"'{want}.some_name' with a chapter of 01..10")
        if not q.name.isidentifier() or keyword.iskeyword(q.name):
            raise ValueError(f"{q.id}: name={q.name!r} is not a Python identifier")
        if q.id in ids or (q.chapter, q.name) in names:
            raise ValueError(f"{q.id}: duplicate id or name {q.name!r} in chapter {q.chapter}")
        if not isinstance(q.answer, (Number, Choice, Design, Function)):
            raise TypeError(f"{q.id}: answer must be a Number, Choice, Design or Function")
        if isinstance(q.answer, Function) and not q.answer.signature.startswith(f"{q.name}("):
            raise ValueError(f"{q.id}: signature {q.answer.signature!r} must call {q.name}(...)")
        if isinstance(q.answer, Function) and q.vary:
            raise ValueError(f"{q.id}: a Function question does not vary (its inputs are "
                             f"random already)")
        if isinstance(q.answer, Design) and not all(
                isinstance(name, str) and (kind == "int" or isinstance(kind, tuple))
                for name, kind in q.answer.fields):
            raise ValueError(f"{q.id}: Design fields must be (name, 'int' or a tuple of "
                             f"options) pairs")
        if not (isinstance(q.points, (int, float)) and not isinstance(q.points, bool)
                and q.points > 0):
            raise ValueError(f"{q.id}: points must be > 0, got {q.points!r}")
        if len({v.name for v in q.vary}) != len(q.vary):
            raise ValueError(f"{q.id}: two parameters share a name")
        try:
            q.bind()
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"{q.id}: its prompt, hint or a mistake message does not render "
                             f"with the default parameters ({type(exc).__name__}: {exc}); "
                             f"write a literal brace as {{{{ or }}}}") from exc
        ids.add(q.id)
        names.add((q.chapter, q.name))
