"""The puzzles in course order, and finding one by id (a per-student variant too)."""

from __future__ import annotations

from .. import _validate
from . import (
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson07_attention,
    lesson07_mma,
    lesson07_sgemm,
    lesson08,
)
from ._core import Puzzle

_ALL: tuple[Puzzle, ...] = tuple(p for m in (lesson02, lesson03, lesson04, lesson05, lesson06,
                                              lesson07, lesson07_sgemm, lesson07_mma, lesson07_attention,
                                              lesson08)
                               for p in m.PUZZLES)
_BY_ID = {p.id: p for p in _ALL}


def puzzles(lesson: int | None = None) -> tuple[Puzzle, ...]:
    """Every puzzle in course order, or those of one lesson (2–8)."""
    if lesson is None:
        return _ALL
    lesson = _validate.integer("lesson", lesson, low=2, high=8)
    return tuple(p for p in _ALL if p.lesson == lesson)


def find(puzzle_id: str) -> Puzzle:
    """The puzzle with this id; a ``ValueError`` lists the ids when there is none."""
    if not isinstance(puzzle_id, str):
        raise TypeError(f"puzzle_id must be a str, got {type(puzzle_id).__name__}")
    if "@" in puzzle_id:  # a per-student variant: "transpose@turn_right" (see .variants)
        from .variants import variant_puzzle

        base, _, key = puzzle_id.partition("@")
        return variant_puzzle(find(base), key)
    try:
        return _BY_ID[puzzle_id]
    except KeyError:
        raise ValueError(f"no puzzle {puzzle_id!r}; the puzzles are: "
                         f"{', '.join(_BY_ID)}") from None
