"""The kinds of exercise question: :class:`Question`, its answer types and its variants.

A question is data: an id, the name the notebook defines, points, a title, a prompt and an
answer specification (:class:`Number`, :class:`Choice`, :class:`Design` or :class:`Function`),
each carrying the :class:`Mistake` entries that name likely wrong answers.  The chapter modules
(``gpu_lessons.questions.lessonNN``) declare questions with these types; :mod:`gpu_lessons.checks`
judges answers against them.  This module imports nothing else from the package, so both can
use it without importing each other.

Variants
--------
A question may say which of its numbers vary between students, with :class:`Vary` entries:
``Question(..., vary=(Vary("gpu", ("h100", "a100", ...), "the GPU"), ...))``.  The first choice
of each is the lesson's own value (the *default*).  Such a question is a template:

* its ``prompt`` (and ``hint`` and mistake messages) are ``str.format`` templates whose
  fields are the parameters' display texts (``{gpu}`` -> ``H100 SXM5``) plus what ``derive``
  computes from them (``{sms}`` -> ``132``); write a literal brace as ``{{``.  A question
  without variants may have ``derive`` too, to quote figures read from data (then its texts
  are templates as well);
* its ``reference`` takes the parameters as keywords, and so do mistake values and predicates
  (``value(ref, **params)``, ``when(answer, ref, **params)``; a :class:`Choice` mistake's
  ``value`` may be ``value(**params) -> option``);  a mistake value of ``None`` means "this
  mistake does not apply to these parameters".

:meth:`Question.bind` fixes the parameters and returns an ordinary question: its reference,
mistakes and prompt are those of that variant, so whatever judges a question (the checks, the
grader) needs nothing else.  The registry hands out questions bound to their defaults.
"""

from __future__ import annotations

import math
import string
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

#: Random inputs a :class:`Function` question tries when it does not say.
DEFAULT_CASES = 100


@dataclass(frozen=True)
class Vary:
    """One parameter of a question that differs between students.

    ``choices`` are the values it may take (the first is the lesson's default); ``doc`` says
    what it is; ``show(value) -> str`` is how the prompt prints a value (default: ``4,096``
    for whole numbers, ``0.85`` for others, strings as they are).
    """

    name: str
    choices: tuple
    doc: str
    show: Callable[[object], str] | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"Vary name {self.name!r} is not a Python identifier")
        if not isinstance(self.choices, tuple) or not self.choices:
            raise ValueError(f"Vary {self.name!r}: choices must be a non-empty tuple")
        if len(set(self.choices)) != len(self.choices):
            raise ValueError(f"Vary {self.name!r}: choices repeat a value: {self.choices!r}")

    @property
    def default(self):
        return self.choices[0]

    def text(self, value) -> str:
        if self.show is not None:
            return self.show(value)
        if isinstance(value, (bool, str)):
            return str(value)
        if isinstance(value, int):
            return f"{value:,}"
        return f"{value:,g}"


@dataclass(frozen=True)
class Mistake:
    """A named likely mistake and the feedback that explains it.

    ``key`` names the mistake (tests and the grader's report refer to it).  Give either
    ``value`` — the answer that mistake produces — or ``when``, a predicate:

    * :class:`Number`: ``value`` is a number or ``value(reference) -> number``, matched with
      the question's tolerance; ``when(answer, reference) -> bool``.
    * :class:`Choice`: ``value`` is the wrong option, or a function returning it (``None``
      when the mistake does not apply).
    * :class:`Design`: ``value(**params)`` is a design that breaks the rule ``key`` names (the
      design's ``verify`` reports which rule an answer breaks).
    * :class:`Function`: ``value(expected, **inputs) -> output`` gives what the mistaken
      function returns for those inputs; ``when(got, expected, inputs) -> bool``.

    In a question with variants, values and predicates also take the parameters as keywords
    (see the module docstring).
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
    """A number in ``units``, correct when within ``rtol`` (relative) of ``reference()``.

    ``integer=True``: a count (threads, warps, blocks, registers, sectors); an answer that is
    not a whole number is refused with a message saying so, and ``rtol=0`` asks for the exact
    count.
    """

    reference: Callable[[], float]
    units: str
    rtol: float = 0.01
    mistakes: tuple[Mistake, ...] = ()
    integer: bool = False


@dataclass(frozen=True)
class Choice:
    """One of ``options``; case, spaces, hyphens and underscores are ignored when matching."""

    reference: Callable[[], str]
    options: tuple[str, ...]
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Design:
    """A design the learner chooses: a tuple with one item per field, right when it meets
    the question's goal.  Several designs can be right.

    ``fields`` are ``(name, kind)`` pairs: kind ``"int"`` for a whole number, or a tuple of
    option strings.  ``verify(design) -> (key, detail) | None`` takes the design as a dict
    (field name -> value) and returns ``None`` when it meets the goal, else the key of the
    first rule it breaks (one of the mistakes' keys) and a sentence about *this* design (its
    occupancy, say).  ``reference()`` returns one design that meets the goal — an example, not
    the only answer; the tests check it passes.  Each mistake's ``value()`` is a design that
    breaks that mistake's rule.
    """

    fields: tuple[tuple[str, object], ...]
    verify: Callable[..., tuple[str, str] | None]
    reference: Callable[[], tuple]
    mistakes: tuple[Mistake, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)


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
        import numpy as np  # here, so that importing the checks does not import NumPy

        salt = question_id if seed is None else f"{question_id}:{seed}"
        rng = np.random.default_rng(zlib.crc32(salt.encode("utf-8")))
        fixed = list(self.edge_cases()) if self.edge_cases else []
        drawn = [self.inputs(rng) for _ in range(self.cases)]
        return [{k: plain(v) for k, v in case.items()} for case in fixed + drawn]


Answer = Number | Choice | Design | Function


@dataclass(frozen=True)
class Question:
    """One exercise question.

    ``id`` is ``"CC.slug"`` with CC the two-digit chapter; ``name`` is the variable or function
    the exercise notebook defines (the grader reads it by that name); ``title`` heads the
    question in the notebook and ``prompt`` is its text (markdown); ``hint`` is added to
    feedback that no named mistake explains.  ``vary`` and ``derive`` make the question a
    template (see the module docstring); ``params`` are the values a bound question uses.
    """

    id: str
    name: str
    points: int | float
    prompt: str
    answer: Answer
    hint: str = ""
    title: str = ""
    vary: tuple[Vary, ...] = ()
    derive: Callable[..., Mapping[str, object]] | None = None
    bound: tuple[tuple[str, object], ...] = ()
    template: Question | None = field(default=None, repr=False, compare=False)

    @property
    def chapter(self) -> int:
        return int(self.id.split(".", 1)[0])

    @property
    def kind(self) -> str:
        return type(self.answer).__name__.lower()

    @property
    def params(self) -> dict:
        """The parameters this question is bound to (empty for one without variants)."""
        return dict(self.bound)

    @property
    def variants(self) -> int:
        """How many parameter combinations the question has (1 without variants)."""
        return math.prod(len(v.choices) for v in (self.template or self).vary)

    def defaults(self) -> dict:
        return {v.name: v.default for v in (self.template or self).vary}

    def resolve(self, params: Mapping | None = None) -> dict:
        """``params`` checked against the question's variants, with defaults filled in."""
        base = self.template or self
        params = dict(params or {})
        known = {v.name: v for v in base.vary}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(f"{base.id}: no parameter named {unknown[0]!r}; the question "
                             f"varies {sorted(known) or 'nothing'}")
        values = {}
        for name, v in known.items():
            value = params.get(name, v.default)
            if value not in v.choices:
                raise ValueError(f"{base.id}: {name}={value!r} is not one of its choices "
                                 f"{v.choices!r}")
            values[name] = value
        return values

    def fields(self, params: Mapping | None = None) -> dict:
        """The prompt's template fields for ``params``: display texts, each parameter's
        indefinite article (``{a_gpu} **{gpu}**`` -> ``a V100 SXM2``, ``an H100 SXM5``), then
        derived ones."""
        base = self.template or self
        values = base.resolve(params)
        texts = {v.name: v.text(values[v.name]) for v in base.vary}
        if base.derive is not None:
            texts.update({k: str(x) for k, x in base.derive(**values).items()})
        texts.update({f"a_{name}": article(text) for name, text in list(texts.items())})
        return texts

    def bind(self, params: Mapping | None = None) -> Question:
        """This question with its parameters fixed (missing ones take their defaults).

        The result has a plain reference, mistakes and prompt, like a question without
        variants; binding a bound question starts again from the template.
        """
        base = self.template or self
        values = base.resolve(params)
        if not base.vary and base.derive is None:
            return replace(base, template=base)
        texts = base.fields(values)
        return replace(base, prompt=_render(base.prompt, texts), hint=_render(base.hint, texts),
                       answer=_bind_answer(base.answer, values, texts),
                       bound=tuple(values.items()), template=base)

    def markdown(self, number: int) -> str:
        """The question's cell in an exercise notebook: heading, id and points, prompt."""
        return (f"### {number}. {self.title or self.id}  \n*`{self.id}` · {_points(self.points)}*"
                f"\n\n{self.prompt}")

    def stub(self) -> str:
        """The code an exercise notebook gives the learner for this question."""
        a = self.answer
        if isinstance(a, Function):
            body = f"def {a.signature}:\n    raise NotImplementedError  # your code here\n"
        elif isinstance(a, Choice):
            shown = ", ".join(repr(o) for o in a.options)
            body = f"{self.name} = ...  # one of {shown}\n"
        elif isinstance(a, Design):
            body = f"{self.name} = ...  # ({', '.join(a.names)})\n"
        else:
            body = f"{self.name} = ...  # {a.units}\n"
        return f"{body}\ncheck(\"{self.id}\", {self.name})"

    def __repr__(self) -> str:
        params = f", params={self.params}" if self.bound else ""
        return (f"Question({self.id}, {self.kind}, {_points(self.points)}, name={self.name!r}"
                f"{params})")


# -- binding ---------------------------------------------------------------------------------

def article(text: str) -> str:
    """"a" or "an" before ``text`` as it is read aloud: a vowel sound, or a letter name that
    starts with one (an H100, an RTX 4090, an L4, an 8-byte load), takes "an"."""
    word = text.lstrip("*`_ ").split(" ", 1)[0]
    if not word:
        return "a"
    head = word[0]
    if head.isdigit():
        return "an" if word.startswith(("8", "11", "18")) and not word.startswith("1,") else "a"
    letters = word.isupper() or any(ch.isdigit() for ch in word)   # an initialism or a model
    vowel_letters = "AEFHILMNORSX" if letters else "AEIOU"
    return "an" if head.upper() in vowel_letters else "a"


def _render(text: str, fields: Mapping[str, str]) -> str:
    return string.Formatter().vformat(text, (), fields) if text else text


def _with(fn, params, *args):
    return fn(*args, **params)


def _bind_answer(spec: Answer, params: dict, texts: Mapping[str, str]) -> Answer:
    """``spec`` with ``params`` passed to every callable and its messages rendered."""
    if isinstance(spec, Function):
        raise TypeError("Function questions do not vary: their inputs are random already")
    mistakes = []
    for m in spec.mistakes:
        message = _render(m.message, texts)
        if isinstance(spec, Choice):
            # a callable value is resolved when an answer is judged, not here: binding stays
            # cheap (listing questions must not run simulations)
            value = partial(_with, m.value, params) if callable(m.value) else m.value
            when = partial(_with, m.when, params) if m.when else None
        elif isinstance(spec, Design):
            value, when = partial(m.value, **params), None
        else:
            value = partial(_with, m.value, params) if callable(m.value) else m.value
            when = partial(_with, m.when, params) if m.when else None
        mistakes.append(Mistake(m.key, message, value=value, when=when))
    reference = partial(spec.reference, **params)
    if isinstance(spec, Design):
        return replace(spec, reference=reference, verify=partial(_verify, spec.verify, params),
                       mistakes=tuple(mistakes))
    return replace(spec, reference=reference, mistakes=tuple(mistakes))


def _verify(verify, params, design):
    return verify(design, **params)


# -- helpers ---------------------------------------------------------------------------------

def plain(value):
    """NumPy scalars to Python numbers, and arrays and tuples to lists: what JSON carries."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def _points(points) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")
