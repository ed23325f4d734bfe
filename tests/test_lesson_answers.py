"""No lesson prints a graded answer: every exercise's default numeric answer is kept out of the
lessons' text and out of what their code works out from the GPU catalog.

The lessons are stored without outputs, so nothing is run.  Two readings of each lesson:

* its text, markdown and code: no written form of a reference answer ("295", "295.3", "1,210")
  may stand there as a number of its own;
* its computations: a code cell that works out a ridge point, a peak or a bandwidth, for the
  catalog GPUs and precisions it names (a loop over several names counts each), prints those
  figures; none may equal a reference within the question's tolerance.  The ridge point of an
  H100 SXM5 at FP16 (989.4 / 3.35 = 295.3 FLOP/byte) is one: lessons 03, 05 and 07 print it,
  so exercise 05's first question asks for another precision.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from gpu_lessons.hardware import catalog, gpu
from gpu_lessons.questions import CHAPTERS, load
from gpu_lessons.questions.types import Number

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NUMBERS = [q for n in CHAPTERS for q in load(n) if isinstance(q.answer, Number)]

#: What a cell computes from the catalog when its code names the call: a function of a catalog
#: GPU and a precision, each value in the units a lesson prints it in.
COMPUTED = {
    r"\bridge_point\b|\bRoofline\.from_gpu\(|\broofline_explorer\(":
        lambda g, p: [g.ridge_point(p)],                              # FLOP/byte
    r"\bpeak_flops\(": lambda g, p: [g.peak_flops(p) / 1e12, g.peak_flops(p)],   # TFLOP/s, FLOP/s
    r"\.bandwidth\b": lambda g, p: [g.bandwidth / 1e12, g.bandwidth / 1e9, g.bandwidth],
}


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"]))
            for c in json.loads(path.read_text("utf-8"))["cells"]]


def _literals(source: str) -> set[str]:
    """The string constants of a code cell (a cell that does not parse: none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


@cache
def _gpu(name: str):
    try:
        return gpu(name)
    except (KeyError, ValueError):
        return None


PRECISIONS = {p for g in catalog().values() for p in g.peak_tflops}


def computed(source: str) -> list[tuple[str, float]]:
    """(what, value) for every catalog figure the cell works out, as ``COMPUTED`` reads it."""
    names = _literals(source)
    gpus = {g.name: g for g in map(_gpu, names) if g is not None}
    precisions = sorted(names & PRECISIONS)
    found = []
    for pattern, values in COMPUTED.items():
        if not re.search(pattern, source):
            continue
        for g in gpus.values():
            for p in precisions or ["fp32"]:
                if p in g.peak_tflops:
                    found += [(f"{g.name} {p}", v) for v in values(g, p)]
    return found


def _forms(x: float) -> set[str]:
    """Ways a reference could be written (whole numbers below 100 left out: "32 lanes" is
    prose), each with at least three significant digits."""
    if float(x).is_integer() and abs(x) < 100:
        return set()
    forms = {f"{x:.4g}", f"{x:.5g}", f"{x:g}", f"{x:,.0f}", f"{x:.1f}", f"{x:.2f}",
             f"{x:,.1f}", f"{x:,.2f}"}
    if abs(x) >= 100:
        forms |= {f"{x:.3g}", f"{x:.0f}"}
    return {f for f in forms if "e" not in f
            and len(f.replace(".", "").replace(",", "").strip("0")) >= 3}


def test_the_readings_see_the_ridge_point_lessons_03_05_and_07_print():
    """Not vacuous: the H100 SXM5's FP16 ridge, 989.4 / 3.35 = 295.3 FLOP/byte, is found in
    the three lessons that print it, and a 295 written in prose would be read as one."""
    ridge = 989.4 / 3.35
    printing = {p.name[:2] for p in LESSONS for kind, src in _cells(p) if kind == "code"
                and any(v == pytest.approx(ridge, rel=1e-3) for _, v in computed(src))}
    assert {"03", "05", "07"} <= printing
    assert "295" in _forms(ridge) and "295.3" in _forms(ridge)
    assert computed('x = Roofline.from_gpu("h100", "fp16").ridge_point') == [
        ("H100 SXM5 fp16", pytest.approx(ridge))]
    assert computed("print(1 + 1)") == []


def _ridge_variants():
    from gpu_lessons.questions import audit

    q = next(q for q in NUMBERS if q.id == "05.ridge_h100")
    return [q.bind(params) for params in audit.variants(q)]


@pytest.mark.parametrize("q", NUMBERS + _ridge_variants(),
                         ids=lambda q: q.id + "".join(f"-{v}" for v in q.params.values()))
def test_no_lesson_prints_a_default_numeric_answer(q):
    """Every question's default, and every variant of the ridge-point question (a student's
    own answer: the lessons print the H100 SXM5's FP16 and FP32 ridges, so those are not
    among them)."""
    ref = float(q.answer.reference())
    rel = max(q.answer.rtol, 1e-9)
    written, worked_out = [], []
    for path in LESSONS:
        for kind, source in _cells(path):
            for form in _forms(ref):
                if re.search(rf"(?<![\w.,]){re.escape(form)}(?![\w]|[.,]\d)", source):
                    written.append((path.name, form))
            if kind == "code":
                worked_out += [(path.name, what, v) for what, v in computed(source)
                               if v == pytest.approx(ref, rel=rel)]
    assert not written, f"{q.id}: the answer {ref:g} is written in {written}"
    assert not worked_out, f"{q.id}: the answer {ref:g} is worked out in {worked_out}"
