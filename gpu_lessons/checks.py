"""Exercise checks: immediate feedback that explains a wrong answer without giving it away.

In an exercise notebook a learner fills in a stub and runs the check below it::

    ridge_h100 = ...                      # FLOP/byte
    check("05.ridge_h100", ridge_h100)

* the stub left as it is (``...``, or a function that still raises ``NotImplementedError``)
  prints "not attempted" and raises nothing, so an unfinished notebook runs to the end;
* a correct answer prints ``✓ 05.ridge_h100: correct (2 points)``;
* a wrong answer raises :class:`CheckFailed` (an ``AssertionError``) whose one-line message
  says *why* when the answer matches a named likely mistake ("that is the sparse peak"),
  and otherwise says how it is off (too high / too low / wrong units) — never the expected
  value.  In Jupyter the failure shows as that one line, not a traceback.

Questions live in ``gpu_lessons.questions.lessonNN`` (one module per chapter), declared with the
types of :mod:`gpu_lessons.questions.types`.  A question is a :class:`Question` whose
``answer`` is one of three kinds:

* :class:`Number` — a value in stated units, accepted within a relative tolerance;
* :class:`Choice` — one of a few options ("memory-bound", "compute-bound", a letter);
* :class:`Design` — a tuple the learner chooses (a block size, a register count, the limit
  that binds), right when it meets the question's goal: several answers can be right;
* :class:`Function` — a function the learner writes, called on many seeded random inputs
  (plus fixed edge cases) and compared with the package's own model; the first failing
  input is reported, the expected output never is.

Each kind carries :class:`Mistake` entries: a likely wrong answer (an alternative value, or a
predicate) and the message that explains it.  The reference answer always comes from the
package's models.  Questions with variants (:class:`~gpu_lessons.questions.types.Vary`) are
checked here with their default parameters, the lesson's own numbers;
:mod:`gpu_lessons.assignments` binds each student's.

For graders: :func:`evaluate` returns a :class:`CheckResult` without printing or raising;
:func:`passed` returns a bool (otter-grader test cells); ``check(..., strict=True)`` also
raises for an unanswered question (nbgrader autograder cells).  The grader
(:mod:`gpu_lessons.grading`) reads answers out of a submitted notebook's kernel and judges
them with :func:`judge` in its own process, so nothing a notebook redefines can change a grade.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import questions as _questions
from ._format import tolerance
from .grading.probe import observe, probe
from .questions.types import Choice, Design, Function, Mistake, Number, Question, Vary, _points
from .questions.types import plain as _plain

CORRECT = "correct"
WRONG = "wrong"
NOT_ATTEMPTED = "not attempted"

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class CheckFailed(AssertionError):
    """A wrong answer.  An ``AssertionError``, so nbgrader and otter count it as a failed test.

    IPython calls ``_render_traceback_`` instead of printing a traceback, so a learner sees
    one line saying what is wrong rather than thirty lines of this module's internals.
    """

    def __init__(self, message: str, result: CheckResult | None = None):
        super().__init__(message)
        self.result = result

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31m{self}\x1b[0m"]


# -- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer.  ``mistake`` is the key of the named mistake it matched."""

    question_id: str
    status: str
    message: str
    points: float
    max_points: float
    mistake: str | None = None

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return (f"CheckResult({self.question_id}: {self.status}, "
                f"{self.points:g}/{self.max_points:g} points)")

    def __str__(self) -> str:
        return self.message


# -- the learner's entry points -------------------------------------------------------------

def check(question_id: str | Question, answer, *, strict: bool = False) -> None:
    """Check ``answer`` to ``question_id``: print ✓ or "not attempted", raise on a wrong answer.

    With ``strict=True`` an unanswered question also raises :class:`CheckFailed` (use that in
    graded test cells, where "no error" means "full points").  ``question_id`` may also be a
    :class:`Question` (a bound variant, or one from a private bank).
    """
    result = evaluate(question_id, answer)
    if result.status == CORRECT or (result.status == NOT_ATTEMPTED and not strict):
        print(result.message)
    else:
        raise CheckFailed(result.message, result)


def passed(question_id: str | Question, answer) -> bool:
    """True when ``answer`` is correct; prints nothing, never raises for a wrong answer."""
    return evaluate(question_id, answer).status == CORRECT


def evaluate(question_id: str | Question, answer, *,
             seed: int | str | None = None) -> CheckResult:
    """Judge ``answer`` (a value, or the learner's function) without printing or raising."""
    q = question_id if isinstance(question_id, Question) else find(question_id)
    if isinstance(q.answer, Function):
        cases = q.answer.make_cases(q.id, seed)
        if answer is Ellipsis:
            return judge(q, {"kind": "ellipsis"}, cases)
        if not callable(answer):
            return judge(q, observe(answer), cases)
        return judge(q, {"kind": "function", "outputs": probe(answer, cases)}, cases)
    return judge(q, observe(answer))


def questions(chapter) -> tuple[Question, ...]:
    """The questions of ``chapter`` (1–10, or "05", "lesson05"), in the order the exercise asks."""
    return _questions.load(chapter)


def expected_ids(chapter) -> list[str]:
    """The question ids a chapter's exercise notebook must answer, in order."""
    return [q.id for q in questions(chapter)]


def find(question_id: str) -> Question:
    """The :class:`Question` with this id; a ``ValueError`` lists close ids when there is none."""
    return _questions.find(question_id)


# -- turning answers into plain data ---------------------------------------------------------
# ``observe`` and ``probe`` live in gpu_lessons.grading.probe, a standard-library-only module
# that the grader also sends into a submission's kernel as source text, so the grader sees an
# answer exactly as ``check`` does.


# -- judging ---------------------------------------------------------------------------------

def judge(q: Question, observation: Mapping, cases: Sequence[dict] | None = None) -> CheckResult:
    """The verdict on an observed answer (see :func:`observe`).

    ``observation["kind"]`` may also be ``"missing"`` (the grader found no variable of that
    name) or ``"function"`` with ``"outputs"`` from :func:`probe` over ``cases``.
    """
    kind = observation.get("kind")
    if kind in ("ellipsis", "missing"):
        return _not_attempted(q, kind)
    if isinstance(q.answer, Number):
        return _judge_number(q, observation)
    if isinstance(q.answer, Choice):
        return _judge_choice(q, observation)
    if isinstance(q.answer, Design):
        return _judge_design(q, observation)
    if cases is None:
        raise ValueError(f"judge({q.id!r}): a function question needs the cases it was run on")
    return _judge_function(q, observation, cases)


def _not_attempted(q: Question, kind: str) -> CheckResult:
    if kind == "missing":
        why = f"the notebook defines no `{q.name}`"
    elif isinstance(q.answer, Function):
        why = f"`{q.name}` still raises NotImplementedError"
    else:
        why = f"replace the `...` in `{q.name} = ...` with your answer"
    return CheckResult(q.id, NOT_ATTEMPTED, f"… {q.id}: not attempted yet — {why} "
                       f"({_points(q.points)})", 0.0, float(q.points))


def _correct(q: Question, extra: str = "") -> CheckResult:
    return CheckResult(q.id, CORRECT, f"✓ {q.id}: correct{extra} ({_points(q.points)})",
                       float(q.points), float(q.points))


def _wrong(q: Question, text: str, mistake: str | None = None, *, hint: bool = True) -> CheckResult:
    if hint and mistake is None and q.hint:
        text = f"{text} {q.hint}"
    return CheckResult(q.id, WRONG, f"✗ {q.id}: {text}", 0.0, float(q.points), mistake)


def _judge_number(q: Question, obs: Mapping) -> CheckResult:
    spec: Number = q.answer
    if obs.get("kind") != "number":
        return _wrong(q, f"expected a number in {spec.units}, got {_describe(obs)}.", hint=False)
    x = obs["value"]
    if not math.isfinite(x):
        return _wrong(q, f"expected a finite number in {spec.units}, got {x!r}.", hint=False)
    if spec.integer and not float(x).is_integer():
        return _wrong(q, f"expected a whole number of {spec.units}, got {x!r}.",
                      "not_integer", hint=False)
    ref = float(spec.reference())
    if _close(x, ref, spec.rtol):
        return _correct(q)
    for m in spec.mistakes:
        if m.value is not None:
            alt = m.value(ref) if callable(m.value) else m.value
            hit = alt is not None and _close(x, float(alt), spec.rtol)
        else:
            hit = bool(m.when(x, ref))
        if hit:
            return _wrong(q, m.message, m.key)
    if ref != 0 and _close(x, -ref, spec.rtol):
        return _wrong(q, "the size is right but the sign is not.", "sign")
    for p in (3, 6, 9, 12, 15, -3, -6, -9, -12, -15):
        if ref != 0 and _close(x, ref * 10.0**p, spec.rtol):
            return _wrong(q, f"the digits look right but the units do not: the answer is wanted "
                          f"in {spec.units} (you are a factor of 10{_sup(abs(p))} "
                          f"{'too high' if p > 0 else 'too low'}).", "units")
    side = "too high" if x > ref else "too low"
    return _wrong(q, f"{_off_by(spec)} ({spec.units}): your answer is {side}.")


def _off_by(spec: Number) -> str:
    """How far an unexplained answer is off, without the expected value: "not within 1 % of
    the expected value"; an exact count (``rtol=0``) is "not the expected count"."""
    if spec.rtol == 0:
        return "not the expected count" if spec.integer else "not the expected value"
    return f"not within {tolerance(spec.rtol)} of the expected value"


def _judge_choice(q: Question, obs: Mapping) -> CheckResult:
    spec: Choice = q.answer
    shown = ", ".join(repr(o) for o in spec.options)
    if obs.get("kind") != "str":
        return _wrong(q, f"expected one of {shown} (a string), got {_describe(obs)}.", hint=False)
    picked = _option(spec.options, obs["value"])
    if picked is None:
        return _wrong(q, f"{obs['value'][:60]!r} is not one of the options: {shown}.", hint=False)
    if picked == _option(spec.options, spec.reference()):
        return _correct(q)
    for m in spec.mistakes:
        if m.value is not None:
            wrong = m.value() if callable(m.value) else m.value
            hit = wrong is not None and _option(spec.options, wrong) == picked
        else:
            hit = bool(m.when(picked, spec.reference()))
        if hit:
            return _wrong(q, m.message, m.key)
    return _wrong(q, f"{picked!r} is not the right answer.")


def _judge_design(q: Question, obs: Mapping) -> CheckResult:
    spec: Design = q.answer
    design = read_design(spec, obs)
    if isinstance(design, str):
        return _wrong(q, design, hint=False)
    problem = spec.verify(design)
    if problem is None:
        return _correct(q)
    key, detail = problem
    m = next((m for m in spec.mistakes if m.key == key), None)
    text = " ".join(t for t in ((m.message if m else ""), detail) if t)
    return _wrong(q, text or "this design does not meet the goal.", key)


def read_design(spec: Design, obs: Mapping) -> dict | str:
    """The learner's design as ``{field: value}``, or a message saying what is wrong with its
    form (not a tuple of the right length, a count that is not whole, an unknown option)."""
    shape = f"a tuple ({', '.join(spec.names)})"
    items = obs.get("items") if obs.get("kind") == "seq" else None
    if items is None or len(items) != len(spec.fields):
        return f"expected {shape}, got {_describe(obs)}."
    design = {}
    for (name, kind), item in zip(spec.fields, items, strict=True):
        if kind == "int":
            if item.get("kind") != "number" or not math.isfinite(item["value"]) \
                    or not float(item["value"]).is_integer():
                return f"{name} must be a whole number, got {_describe(item)}."
            design[name] = int(item["value"])
        else:
            picked = _option(kind, item["value"]) if item.get("kind") == "str" else None
            if picked is None:
                shown = ", ".join(repr(o) for o in kind)
                return f"{name} must be one of {shown}, got {_describe(item)}."
            design[name] = picked
    return design


def _judge_function(q: Question, obs: Mapping, cases: Sequence[dict]) -> CheckResult:
    spec: Function = q.answer
    if obs.get("kind") != "function":
        return _wrong(q, f"expected a function `{spec.signature}`, got {_describe(obs)}.",
                      hint=False)
    outputs = obs.get("outputs") or []
    if outputs and outputs[0].get("not_implemented"):
        return _not_attempted(q, "ellipsis")
    if len(outputs) < len(cases):
        return _wrong(q, f"`{q.name}` stopped after {len(outputs)} of {len(cases)} test inputs "
                      f"(it ran out of time or the kernel died).", hint=False)
    outputs = outputs[:len(cases)]
    expected = [spec.reference(**case) for case in cases]
    fails = [i for i, (out, e) in enumerate(zip(outputs, expected, strict=True))
             if "ok" not in out or not _same_output(out["ok"], e, spec.rtol, spec.atol)]
    if not fails:
        return _correct(q, f" on all {len(cases)} test inputs")
    first = fails[0]
    call, out = _call_text(q.name, cases[first]), outputs[first]
    if "ok" not in out:
        message = f": {out['message']}" if out.get("message") else ""
        return _wrong(q, f"{call} raised {out.get('raised', 'an error')}{message}.", hint=False)
    got = out["ok"]
    m = _explain(spec, cases, outputs, expected, fails)
    if m is not None:
        return _wrong(q, f"{call} returned {_shown(got)}: {m.message}", m.key)
    if got.get("kind") == "none":
        return _wrong(q, f"{call} returned None — is a `return` missing?", "no_return",
                      hint=False)
    return _wrong(q, f"{call} returned {_shown(got)}, which is not right"
                  f"{f' ({spec.units})' if spec.units else ''}.")


def _explain(spec: Function, cases, outputs, expected, fails) -> Mistake | None:
    """The named mistake that explains the learner's function, if one does.

    A mistake whose ``value`` reproduces every output the function returned (right or wrong)
    explains it best; failing that, one that reproduces every wrong output.  Matching only
    the first failing input is not enough: many mistaken formulas agree on a single input.
    """
    returned = [i for i, out in enumerate(outputs) if "ok" in out]
    wrong = [i for i in fails if "ok" in outputs[i]]

    def matches(m: Mistake, i: int) -> bool:
        got = outputs[i]["ok"]
        try:
            if m.value is not None:
                return _same_output(got, m.value(expected[i], **cases[i]), spec.rtol, spec.atol)
            value = _value(got)
            return value is not None and bool(m.when(value, expected[i], cases[i]))
        except Exception:  # a mistake's formula may not apply to every input (x / 0)
            return False

    for tier, predicates in ((returned, False), (wrong, True)):
        for m in spec.mistakes:
            if (m.value is not None or predicates) and tier and all(matches(m, i) for i in tier):
                return m
    return None


# -- helpers ---------------------------------------------------------------------------------

def _close(x: float, ref: float, rtol: float) -> bool:
    return math.isclose(x, ref, rel_tol=rtol, abs_tol=0.0) or (ref == 0 and x == 0)


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(text).strip().lower())


def _option(options: Sequence[str], text) -> str | None:
    wanted = _norm(text)
    return next((o for o in options if _norm(o) == wanted), None)


def _value(obs: Mapping):
    """A plain Python value back from an observation (None when it has none)."""
    kind = obs.get("kind")
    if kind in ("number", "str", "bool"):
        return obs["value"]
    if kind == "seq":
        return [_value(item) for item in obs["items"]]
    return None


def _same_output(got: Mapping, expected, rtol: float, atol: float) -> bool:
    expected = _plain(expected)
    kind = got.get("kind")
    if isinstance(expected, bool) or kind == "bool":
        return kind == "bool" and isinstance(expected, bool) and got["value"] == expected
    if isinstance(expected, numbers.Real):
        if kind != "number":
            return False
        x, e = float(got["value"]), float(expected)
        if math.isnan(e):
            return math.isnan(x)
        return math.isclose(x, e, rel_tol=rtol, abs_tol=atol)
    if isinstance(expected, str):
        return kind == "str" and _norm(got["value"]) == _norm(expected)
    if isinstance(expected, (list, tuple)):
        items = got.get("items") if kind == "seq" else None
        return (items is not None and len(items) == len(expected)
                and all(_same_output(g, e, rtol, atol) for g, e in zip(items, expected, strict=True)))
    if expected is None:
        return kind == "none"
    raise TypeError(f"reference returned {type(expected).__name__}; a Function question's "
                    f"reference must return numbers, strings, booleans or sequences of them")


def _shown(obs: Mapping) -> str:
    value = _value(obs)
    if value is None:
        return _describe(obs)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(obs: Mapping) -> str:
    kind = obs.get("kind")
    if kind in ("number", "str", "bool"):
        return f"{type(obs['value']).__name__} {obs['value']!r:.60}"
    if kind == "seq":
        return f"a sequence of {len(obs['items'])} items"
    if kind == "none":
        return "None"
    if kind == "callable":
        return f"a {obs.get('type', 'function')}"
    if kind == "function":
        return "a function"
    return f"an object of type {obs.get('type', '?')}"


def _call_text(name: str, case: Mapping) -> str:
    args = ", ".join(f"{k}={_arg(v)}" for k, v in case.items())
    return f"{name}({args})"


def _arg(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _sup(n: int) -> str:
    return str(n).translate(_SUPERSCRIPT)


__all__ = [
    "CORRECT", "NOT_ATTEMPTED", "WRONG",
    "CheckFailed", "CheckResult", "Choice", "Design", "Function", "Mistake", "Number",
    "Question", "Vary",
    "check", "evaluate", "expected_ids", "find", "judge", "observe", "passed", "probe",
    "questions", "read_design",
]

