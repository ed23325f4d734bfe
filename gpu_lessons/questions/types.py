"""The kinds of exercise question: :class:`Question` and its answer types.

A question is data: an id, the name the notebook defines, points, a prompt and an answer
specification (:class:`Number`, :class:`Choice` or :class:`Function`), each carrying the
:class:`Mistake` entries that name likely wrong answers.  The chapter modules
(``gpu_lessons.questions.chNN``) declare questions with these types; :mod:`gpu_lessons.checks`
judges answers against them.  This module imports nothing else from the package, so both can
use it without importing each other.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Random inputs a :class:`Function` question tries when it does not say.
DEFAULT_CASES = 100


@dataclass(frozen=True)
class Mistake:
    """A named likely mistake and the feedback that explains it.

    ``key`` names the mistake (tests and the grader's report refer to it).  Give either
    ``value`` — the answer that mistake produces — or ``when``, a predicate:

    * :class:`Number`: ``value`` is a number or ``value(reference) -> number``, matched with
      the question's tolerance; ``when(answer, reference) -> bool``.
    * :class:`Choice`: ``value`` is the wrong option.
    * :class:`Function`: ``value(expected, **inputs) -> output`` gives what the mistaken
      function returns for those inputs; ``when(got, expected, inputs) -> bool``.
    """

    key: str
    message: str
    value: object = None
    when: Callable | None = None

    def __post_init__(self):
        if (self.value is None) == (self.when is None):
            raise ValueError(f"Mistake {self.key!r}: give exactly one of value= or when=")


@dataclass(frozen=True)
class Number:
    """A number in ``units``, correct when within ``rtol`` (relative) of ``reference()``."""

    reference: Callable[[], float]
    units: str
    rtol: float = 0.01
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Choice:
    """One of ``options``; case, spaces, hyphens and underscores are ignored when matching."""

    reference: Callable[[], str]
    options: tuple[str, ...]
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Function:
    """A function the learner implements, checked against ``reference`` on many inputs.

    ``inputs(rng)`` draws one keyword-argument dict from a ``numpy.random.Generator``;
    ``edge_cases()`` returns fixed dicts tried first (boundaries, catalog GPUs).  Values must
    be plain numbers, strings, booleans, None, or lists, tuples or NumPy arrays of those, so
    the grader can send them into a submission's kernel as JSON; tuples and arrays reach the
    learner's function as lists, in the notebook and in the grader alike.  Outputs compare
    with ``rtol``/``atol``.
    """

    reference: Callable[..., object]
    inputs: Callable[[object], dict]
    signature: str
    units: str = ""
    cases: int = DEFAULT_CASES
    edge_cases: Callable[[], Sequence[dict]] | None = None
    rtol: float = 1e-6
    atol: float = 0.0
    mistakes: tuple[Mistake, ...] = ()

    def make_cases(self, question_id: str, seed: int | str | None = None) -> list[dict]:
        """Edge cases, then ``cases`` random inputs seeded by the question id (and ``seed``).

        The learner's check uses the question id alone, so a failing input is the same on
        every run; the grader passes its own seed, so hard-coded outputs do not help.
        """
        import numpy as np

        salt = question_id if seed is None else f"{question_id}:{seed}"
        rng = np.random.default_rng(zlib.crc32(salt.encode("utf-8")))
        fixed = list(self.edge_cases()) if self.edge_cases else []
        drawn = [self.inputs(rng) for _ in range(self.cases)]
        return [{k: plain(v) for k, v in case.items()} for case in fixed + drawn]


@dataclass(frozen=True)
class Question:
    """One exercise question.

    ``id`` is ``"CC.slug"`` with CC the two-digit chapter; ``name`` is the variable or function
    the exercise notebook defines (the grader reads it by that name); ``hint`` is added to
    feedback that no named mistake explains.
    """

    id: str
    name: str
    points: int | float
    prompt: str
    answer: Number | Choice | Function
    hint: str = ""

    @property
    def chapter(self) -> int:
        return int(self.id.split(".", 1)[0])

    @property
    def kind(self) -> str:
        return type(self.answer).__name__.lower()

    def stub(self) -> str:
        """The code an exercise notebook gives the learner for this question."""
        a = self.answer
        if isinstance(a, Function):
            body = f"def {a.signature}:\n    raise NotImplementedError  # your code here\n"
        elif isinstance(a, Choice):
            shown = ", ".join(repr(o) for o in a.options)
            body = f"{self.name} = ...  # one of {shown}\n"
        else:
            body = f"{self.name} = ...  # {a.units}\n"
        return f"{body}\ncheck({self.id!r}, {self.name})"

    def __repr__(self) -> str:
        return f"Question({self.id}, {self.kind}, {_points(self.points)}, name={self.name!r})"


def plain(value):
    """NumPy scalars to Python numbers, and arrays and tuples to lists: what JSON carries."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def _points(points) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")
