"""Is every variant of a question well posed?  The rules the tests and private banks share.

For each variant (every combination of a question's :class:`~.types.Vary` choices, or a large
seeded sample when there are too many):

* the reference exists: it computes, it is finite and non-zero (a :class:`~.types.Number`), a
  whole number when the question asks for a count, one of the options (a
  :class:`~.types.Choice`), a design that meets the goal (a :class:`~.types.Design`);
* every named mistake stays distinguishable from the reference: a mistaken value is not within
  twice the tolerance of it, a mistaken option is another option, a mistaken design breaks the
  rule it names, and a predicate does not accept the reference itself;

and across variants the answer is not the same for all of them (a design right for one
variant is wrong for another), so that two students' answers differ.  A question without
variants has one variant.  :func:`problems` returns what is wrong (nothing when all is well).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator

from .types import Choice, Design, Function, Number, Question

#: Above this many combinations, :func:`variants` samples instead of listing them all.
FULL_PRODUCT_LIMIT = 400


def variants(question: Question, *, limit: int = FULL_PRODUCT_LIMIT,
             seed: int = 0) -> Iterator[dict]:
    """Parameter dicts of ``question``'s variants: the defaults first, then every other
    combination, or ``limit`` of them drawn with ``seed`` when there are more."""
    base = question.template or question
    names = [v.name for v in base.vary]
    sizes = [len(v.choices) for v in base.vary]
    total = math.prod(sizes)
    sample = total > limit
    indices = [0, *random.Random(seed).sample(range(1, total), limit - 1)] if sample \
        else range(total)
    for index in indices:
        values = {}
        for v, size in zip(reversed(base.vary), reversed(sizes), strict=True):
            index, i = divmod(index, size)
            values[v.name] = v.choices[i]
        yield {name: values[name] for name in names}


def problems(question: Question, *, limit: int = FULL_PRODUCT_LIMIT) -> list[str]:
    """Everything that makes some variant of ``question`` ill posed (empty when none does)."""
    base = question.template or question
    found: list[str] = []
    answers = []
    designs = []
    for params in variants(base, limit=limit):
        where = f"{base.id} {params}" if params else base.id
        try:
            q = base.bind(params)
            answer, issues = _one(q)
        except Exception as exc:  # a reference that raises is a problem to report, not a crash
            found.append(f"{where}: {type(exc).__name__}: {exc}")
            continue
        found += [f"{where}: {issue}" for issue in issues]
        answers.append(answer)
        if isinstance(q.answer, Design):
            designs.append(q)
    if base.vary and len(answers) > 1:
        if isinstance(base.answer, Design):
            if not _designs_differ(designs):
                found.append(f"{base.id}: one design is right for every variant")
        elif len({_key(a) for a in answers}) == 1:
            found.append(f"{base.id}: every variant has the same answer ({answers[0]!r})")
    return found


def _key(answer):
    return round(answer, 9) if isinstance(answer, float) else answer


def _one(q: Question) -> tuple[object, list[str]]:
    spec = q.answer
    issues = []
    if isinstance(spec, Number):
        ref = spec.reference()
        if not (isinstance(ref, (int, float)) and math.isfinite(ref) and ref != 0):
            return ref, [f"the reference {ref!r} is not a finite, non-zero number"]
        if spec.integer and not float(ref).is_integer():
            issues.append(f"the reference {ref!r} of a count is not a whole number")
        for m in spec.mistakes:
            if m.value is not None:
                alt = m.value(ref) if callable(m.value) else m.value
                if alt is not None and math.isclose(float(alt), ref,
                                                    rel_tol=max(2 * spec.rtol, 1e-12)):
                    issues.append(f"mistake {m.key!r} gives the right answer ({alt!r})")
            elif m.when(ref, ref):
                issues.append(f"mistake {m.key!r} accepts the right answer")
        return float(ref), issues
    if isinstance(spec, Choice):
        ref = spec.reference()
        if _norm(ref) not in {_norm(o) for o in spec.options}:
            return ref, [f"the reference {ref!r} is not one of the options"]
        for m in spec.mistakes:
            wrong = m.value() if callable(m.value) else m.value
            if wrong is not None and (_norm(wrong) not in {_norm(o) for o in spec.options}
                                      or _norm(wrong) == _norm(ref)):
                issues.append(f"mistake {m.key!r} names {wrong!r}, not a wrong option")
            if m.when is not None and m.when(ref, ref):
                issues.append(f"mistake {m.key!r} accepts the right answer")
        return _norm(ref), issues
    if isinstance(spec, Design):
        ref = tuple(spec.reference())
        if spec.verify(dict(zip(spec.names, ref, strict=True))) is not None:
            issues.append(f"the example design {ref!r} does not meet the goal")
        for m in spec.mistakes:
            wrong = tuple(m.value())
            problem = spec.verify(dict(zip(spec.names, wrong, strict=True)))
            if problem is None or problem[0] != m.key:
                issues.append(f"mistake {m.key!r}: its design {wrong!r} is judged "
                              f"{problem[0] if problem else 'right'!r}")
        return ref, issues
    if isinstance(spec, Function):
        cases = spec.make_cases(q.id)
        outs = [spec.reference(**c) for c in cases]
        if not all(isinstance(o, (int, float)) and math.isfinite(o) for o in outs):
            issues.append("the reference returns something other than a finite number")
        for m in spec.mistakes:
            if m.value is not None and all(_same(m.value(o, **c), o, spec.rtol)
                                           for o, c in zip(outs, cases, strict=True)):
                issues.append(f"mistake {m.key!r} agrees with the reference on every input")
        return None, issues
    return None, [f"unknown answer kind {type(spec).__name__}"]


def _same(a, b, rtol) -> bool:
    try:
        return math.isclose(a, b, rel_tol=rtol)
    except TypeError:
        return a == b


def _designs_differ(qs: list[Question]) -> bool:
    """True when some variant's example design is wrong for another variant (the first 20
    variants' examples are tried against every variant)."""
    for a, b in itertools.product(qs[:20], qs):
        design = dict(zip(a.answer.names, a.answer.reference(), strict=True))
        if b.answer.verify(design) is not None:
            return True
    return False


def _norm(text) -> str:
    return re.sub(r"[\s_\-]+", "", str(text).strip().lower())
