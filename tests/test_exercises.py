"""Exercise and solution notebooks: every question asked, answered, checked, and kept in sync.

Generic over every chapter that has a notebook in ``exercises/``:

* each notebook carries ``{"gpu_lessons": {"chapter": N}}`` and its check cells call
  ``check("NN.id", name)`` for exactly ``expected_ids(N)``, in order, with the question's name;
* the solution is the same notebook (same cells, same markdown, same check cells) with only
  the answer cells — the code cell just before each check — filled in;
* run in-process (every code cell except the checks, top to bottom), an exercise leaves every
  question "not attempted" and a solution answers every question correctly (nbval runs the
  notebooks themselves in CI);
* each named mistake, turned into an answer, is judged wrong, and feedback never prints the
  expected value.

The last sections check the reference answers of chapters 01–10 against hand derivations,
published figures and stored measurements (the arithmetic is written next to each), not against
the package.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpu_lessons import checks
from gpu_lessons.checks import (
    Choice,
    Design,
    Function,
    Number,
    evaluate,
    expected_ids,
    find,
    questions,
)
from gpu_lessons.questions import CHAPTERS

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))
NOTEBOOKS = {int(p.name[:2]): p.name for p in EXERCISES}
COVERED = sorted(NOTEBOOKS)
COVERED_QUESTIONS = [q for n in COVERED for q in questions(n)]


# -- reading notebooks ----------------------------------------------------------------------------

def _read(folder: str, chapter: int):
    return nbformat.read(ROOT / folder / NOTEBOOKS[chapter], as_version=4)


def _check_call(source: str) -> tuple[str, str] | None:
    """``(question_id, name)`` when a cell calls ``check("NN.id", name)``, else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "check" and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and isinstance(node.args[1], ast.Name)):
            return node.args[0].value, node.args[1].id
    return None


def _checks(nb) -> list[tuple[int, str, str]]:
    """``(cell index, question id, name)`` of every check cell, in order."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and (call := _check_call(cell.source)):
            out.append((i, *call))
    return out


def _puzzle_role(cell) -> str | None:
    """The role of a kernel-puzzle cell (``tools/puzzle_cells.py`` writes them; their own
    tests are in tests/test_puzzles.py), None for any other cell."""
    meta = cell.get("metadata", {}).get("gpu_lessons", {})
    return meta.get("role") if isinstance(meta, dict) and "puzzle" in meta else None


def _answer_cells(nb) -> set[int]:
    """Indices of answer cells: the cell just before each check cell, and the kernel cells
    of the puzzles."""
    return ({i - 1 for i, _, _ in _checks(nb)}
            | {i for i, c in enumerate(nb.cells) if _puzzle_role(c) == "kernel"})


@cache
def _namespace(folder: str, chapter: int) -> dict:
    """Run a notebook's code cells, except the check cells, in one namespace (as a learner
    would, top to bottom) and return it."""
    nb = _read(folder, chapter)
    namespace: dict = {"__name__": f"{folder}_{chapter:02d}"}
    with contextlib.redirect_stdout(io.StringIO()):
        for i, cell in enumerate(nb.cells):
            if (cell.cell_type == "code" and not _check_call(cell.source)
                    and _puzzle_role(cell) in (None, "setup", "kernel")):
                exec(compile(cell.source, f"<{folder}/{NOTEBOOKS[chapter]} cell {i}>", "exec"),
                     namespace)
    return namespace


chapters = pytest.mark.parametrize("chapter", COVERED, ids=lambda n: f"{n:02d}")
each_question = pytest.mark.parametrize("q", COVERED_QUESTIONS, ids=lambda q: q.id)


# -- every question has an exercise and a solution -------------------------------------------------

def test_exercise_notebooks_exist_and_pair_up():
    assert COVERED, "no exercise notebooks found"
    solutions = {p.name for p in (ROOT / "solutions").glob("*.ipynb")}
    assert {p.name for p in EXERCISES} <= solutions
    assert len(NOTEBOOKS) == len(EXERCISES), "two exercise notebooks for one chapter"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda n: f"{n:02d}")
def test_every_chapter_with_questions_has_an_exercise(chapter):
    if questions(chapter):
        assert chapter in NOTEBOOKS, f"chapter {chapter:02d} has questions but no exercise notebook"
    elif chapter in NOTEBOOKS:
        pytest.fail(f"exercises/{NOTEBOOKS[chapter]} exists but chapter {chapter:02d} has no "
                    f"questions registered")


@chapters
@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_notebook_names_its_chapter(chapter, folder):
    assert _read(folder, chapter).metadata.get("gpu_lessons") == {"chapter": chapter}


@chapters
@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_check_cells_ask_every_question_in_order(chapter, folder):
    found = _checks(_read(folder, chapter))
    assert [qid for _, qid, _ in found] == expected_ids(chapter)
    for _, qid, name in found:
        assert name == find(qid).name, f"{qid} checks `{name}`, the grader reads `{find(qid).name}`"


@chapters
def test_exercise_and_solution_are_the_same_notebook(chapter):
    ex, sol = _read("exercises", chapter), _read("solutions", chapter)
    assert [c.cell_type for c in ex.cells] == [c.cell_type for c in sol.cells]
    answers = _answer_cells(ex)
    assert answers == _answer_cells(sol)
    for i, (a, b) in enumerate(zip(ex.cells, sol.cells, strict=True)):
        if i in answers:
            assert a.cell_type == "code", f"cell {i} before a check is not a code cell"
            assert a.source != b.source, f"cell {i}: the solution does not fill in the answer"
        else:
            assert a.source == b.source, f"cell {i} differs between exercise and solution"


@chapters
@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_every_question_cell_is_the_rendered_default_prompt(chapter, folder):
    """The cell before each answer cell is ``question.markdown(n)``: the title, id, points and
    the prompt rendered with the lesson's own numbers (``gpu-lessons release`` swaps these
    cells for each student's variant, so they must come from the prompt template)."""
    nb = _read(folder, chapter)
    found = _checks(nb)
    for number, (i, qid, _) in enumerate(found, start=1):
        assert nb.cells[i - 2].cell_type == "markdown"
        assert nb.cells[i - 2].source == find(qid).markdown(number), qid


def _sync_tool():
    spec = importlib.util.spec_from_file_location("sync_exercises",
                                                  ROOT / "tools" / "sync_exercises.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@chapters
@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_every_exercise_set_has_the_same_layout(chapter, folder):
    """One layout for every set: the introduction (title, how the checks work, what is
    loaded), the import cell, the question cells, and a Done cell that links to the next set;
    tools/sync_exercises.py writes it, and would change nothing."""
    tool = _sync_tool()
    nb = _read(folder, chapter)
    synced, notes = tool.sync(folder, chapter)
    assert notes == []
    assert [c.source for c in nb.cells] == [c.source for c in synced.cells]
    intro = nb.cells[0].source
    assert intro.startswith(f"# Exercises {chapter:02d} · ") and "**check** cell" in intro
    done = next(c.source for c in nb.cells if c.source.startswith("## Done"))
    if chapter < CHAPTERS[-1]:
        nxt = NOTEBOOKS[chapter + 1]
        assert done.rstrip().endswith(f"]({nxt}).") and (ROOT / folder / nxt).exists()
    else:
        assert done.rstrip().endswith("end of the course's exercises.")


def test_prompts_use_the_multiplication_sign():
    """Products are written with ×, as in the lessons, not with the letter x."""
    for q in COVERED_QUESTIONS:
        assert not re.search(r"\d \s?x \s?\d|\w x \w+ (tile|matrix)| x \d", q.prompt), q.id


@chapters
def test_exercise_runs_with_every_question_unanswered(chapter):
    ns = _namespace("exercises", chapter)
    for q in questions(chapter):
        assert q.name in ns, f"the exercise defines no `{q.name}`"
        assert evaluate(q.id, ns[q.name]).status == checks.NOT_ATTEMPTED, q.id


@chapters
def test_solution_answers_every_question(chapter):
    ns = _namespace("solutions", chapter)
    for q in questions(chapter):
        r = evaluate(q.id, ns[q.name])
        assert r.status == checks.CORRECT, r.message


def _solution_functions():
    return [q for q in COVERED_QUESTIONS if isinstance(q.answer, Function)]


@pytest.mark.skipif(not _solution_functions(), reason="no function questions")
@settings(max_examples=15, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_solution_functions_pass_for_any_grading_seed(data, seed):
    """The grader draws its own random inputs; a solution must be right on all of them."""
    q = data.draw(st.sampled_from(_solution_functions()), label="question")
    learner = _namespace("solutions", q.chapter)[q.name]
    cases = q.answer.make_cases(q.id, seed=seed)
    verdict = checks.judge(q, {"kind": "function", "outputs": checks.probe(learner, cases)}, cases)
    assert verdict.correct, verdict.message


# -- wrong answers are caught, and explained without the answer -------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text.lower())


def _wrong_answers(q):
    """``(mistake key or None, answer)``: every named mistake with a value, as an answer."""
    spec = q.answer
    out = []
    if isinstance(spec, Number):
        ref = spec.reference()
        values = [(m.key, m.value(ref) if callable(m.value) else m.value)
                  for m in spec.mistakes if m.value is not None]
        out = [(key, value) for key, value in values if value is not None]  # None: n/a here
        out.append((None, ref * 3.7 if not spec.integer else round(ref * 3.7) + 1))
    elif isinstance(spec, Choice):
        values = [(m.key, m.value() if callable(m.value) else m.value)
                  for m in spec.mistakes if m.value is not None]
        out = [(key, value) for key, value in values if value is not None]  # None: n/a here
        right = _norm(spec.reference())
        out.append((None, next(o for o in spec.options if _norm(o) != right)))
    elif isinstance(spec, Design):
        out = [(m.key, tuple(m.value())) for m in spec.mistakes]
    else:
        for m in spec.mistakes:
            if m.value is not None:
                out.append((m.key, lambda _m=m, **kw: _m.value(spec.reference(**kw), **kw)))
        out.append((None, lambda **kw: spec.reference(**kw) * 3.7 + 1))
    return out


@each_question
def test_a_wrong_answer_fails_each_check(q):
    assert _wrong_answers(q), f"{q.id} has no wrong answer to try"
    for key, answer in _wrong_answers(q):
        r = evaluate(q.id, answer)
        assert r.status == checks.WRONG, (q.id, key, r.message)
        assert r.points == 0
        if key is not None and not isinstance(q.answer, Function):
            assert r.mistake is not None, (q.id, key, r.message)  # named, not generic


@each_question
def test_named_mistakes_are_reported_by_name(q):
    """Where one mistake alone explains an answer, the feedback names that mistake."""
    for key, answer in _wrong_answers(q):
        if key is None:
            continue
        r = evaluate(q.id, answer)
        if isinstance(q.answer, Function) and r.mistake is None:
            # a mistaken formula may not apply to every input (it raised there); then the
            # learner sees the input and the exception instead
            assert "raised" in r.message, (q.id, key, r.message)
            continue
        spec = q.answer
        earlier = [m.key for m in spec.mistakes][:[m.key for m in spec.mistakes].index(key) + 1]
        assert r.mistake in earlier or r.mistake in ("units", "sign"), (q.id, key, r.mistake)


def _forms(x: float) -> set[str]:
    """Ways an expected number could be printed.  Small whole numbers (below 100) are left
    out: "32 lanes" or "64 warps" in an explanation is prose, not a leak."""
    if float(x).is_integer() and abs(x) < 100:
        return set()
    forms = {repr(x), f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:g}", f"{x:,.0f}", f"{x:.2f}"}
    return {f for f in forms if len(f.replace(".", "").replace(",", "").strip("0")) >= 2}


NUMBERS = [q for q in COVERED_QUESTIONS if isinstance(q.answer, Number)]


@pytest.mark.skipif(not NUMBERS, reason="no number questions")
@settings(max_examples=60, deadline=None)
@given(data=st.data(), u=st.one_of(st.floats(-0.95, -0.03), st.floats(0.03, 30.0)))
def test_wrong_numbers_never_print_the_expected_value(data, u):
    q = data.draw(st.sampled_from(NUMBERS), label="question")
    assume(abs(u) > 1.001 * q.answer.rtol)   # within the tolerance the answer is right
    ref = q.answer.reference()
    answer = ref * (1 + u)
    r = evaluate(q.id, answer)
    assert r.status == checks.WRONG
    # the message may echo the learner's own number, whose digits can contain the reference's
    # (2.00001 x 14336 = 28672.14336): take it out before looking for a leak
    message = r.message
    for echoed in sorted({repr(answer), str(answer), f"{answer:g}", f"{answer:,.0f}"},
                         key=len, reverse=True):
        message = message.replace(echoed, "<answer>")
    assert not any(f in message for f in _forms(ref)), r.message


@each_question
def test_named_mistakes_never_print_the_expected_answer(q):
    spec = q.answer
    if isinstance(spec, Number):
        ref = spec.reference()
        for _, answer in _wrong_answers(q):
            message = evaluate(q.id, answer).message
            assert not any(f in message for f in _forms(ref)), message
    elif isinstance(spec, Design):
        # several designs are right; the example one must not be handed out in feedback
        example = tuple(spec.reference())
        for _, answer in _wrong_answers(q):
            message = evaluate(q.id, answer).message
            assert repr(example) not in message and str(list(example)) not in message, message
    elif isinstance(spec, Choice):
        right = spec.reference()
        # a quoted option is always an answer; a compound one ("memory-bound", "L1 / shared")
        # is one even unquoted, while a plain word ("blocks", "A") also occurs in prose
        compound = len(right) >= 4 and not right.isalpha()
        for _, answer in _wrong_answers(q):
            message = evaluate(q.id, answer).message
            assert repr(right) not in message and f'"{right}"' not in message, message
            assert not (compound and _norm(right) in _norm(message)), message
    else:
        cases = spec.make_cases(q.id)
        for _, answer in _wrong_answers(q):
            r = evaluate(q.id, answer)
            rest = re.sub(rf"{q.name}\([^)]*\)", "", r.message)
            rest = re.sub(r"returned \S+", "", rest)
            shown = [c for c in cases if q.name + "(" in r.message]
            for case in shown[:20]:
                e = spec.reference(**case)
                if isinstance(e, float) and not float(e).is_integer():
                    assert repr(e) not in rest and f"{e:.6g}" not in rest, r.message


@each_question
def test_answers_of_the_wrong_kind_get_a_clear_message(q):
    spec = q.answer
    if isinstance(spec, Number):
        r = evaluate(q.id, "12")
        assert r.status == checks.WRONG and spec.units in r.message
    elif isinstance(spec, Choice):
        r = evaluate(q.id, "no such option")
        assert r.status == checks.WRONG and all(repr(o) in r.message for o in spec.options)
    elif isinstance(spec, Design):
        r = evaluate(q.id, "12")
        assert r.status == checks.WRONG and f"a tuple ({', '.join(spec.names)})" in r.message
        r = evaluate(q.id, (256.5, 40, "warps"))
        assert r.status == checks.WRONG and "whole number" in r.message
    else:
        r = evaluate(q.id, 12.0)
        assert r.status == checks.WRONG and "expected a function" in r.message
        r = evaluate(q.id, lambda **kw: None)
        assert r.status == checks.WRONG and "return" in r.message


# -- chapters 01-05: reference answers against hand derivations and published figures -----------------

def _ref(qid, **params):
    """The reference of ``qid`` for ``params`` (the lesson's defaults for the others)."""
    return find(qid).bind(params).answer.reference()


def _fn(qid):
    return find(qid).answer.reference


def test_ch01_references():
    # H100 SXM5 at 90 % of 1980 MHz = 1782 MHz: 132 SMs x 128 lanes x 1.782 GHz x 2 = 60.2
    assert _ref("01.fp32_peak_capped") == pytest.approx(132 * 128 * 1.782e9 * 2 / 1e12)
    # V100 at 80 % of 1530 MHz = 1224 MHz: 80 x 64 x 1.224 GHz x 2 = 12.53 TFLOP/s
    assert _ref("01.fp32_peak_capped", gpu="v100", clock_pct=80) == pytest.approx(
        80 * 64 * 1.224e9 * 2 / 1e12)
    # H200: 4.8 TB/s x 600 ns / 132 SMs / 4 B = 5,454.5 loads per SM, / 2,048 threads = 2.66
    assert _ref("01.loads_per_thread") == pytest.approx(4.8e12 * 600e-9 / 132 / 4 / 2048)
    # V100 (900 GB/s, 80 SMs), 800 ns, float4 loads: 720 kB / 80 / 16 / 2,048 = 0.27
    assert _ref("01.loads_per_thread", gpu="v100", latency_ns=800, load_bytes=16) == \
        pytest.approx(900e9 * 800e-9 / 80 / 16 / 2048)
    # H100: 3350 GB/s x 600 ns = 2,010,000 B; / 4 B = 502,500 threads; V100 (900 GB/s): 135,000
    assert _fn("01.threads_needed")(3350, 600, 4) == pytest.approx(502_500, rel=1e-9)
    assert _fn("01.threads_needed")(900, 600, 4) == pytest.approx(135_000, rel=1e-9)
    # only c = a + b (10^8 or 3·10^7 independent elements) exceeds the loads in flight needed
    assert _ref("01.gpu_workload") == "B"
    assert _ref("01.gpu_workload", order="sum list add") == "C"


def test_ch01_asks_nothing_in_warps():
    """Lesson 01 teaches threads and SMs; warps come in lesson 02.  So chapter 01's questions ask
    and explain in threads, in every variant; a mistake message may name warps only as lesson
    02's, for a learner who read ahead."""
    from gpu_lessons.questions import audit, load

    for q in load(1):
        for params in audit.variants(q):
            b = q.bind(params)
            assert "warp" not in (b.prompt + (b.hint or "")).lower(), (q.id, params)
            assert "warp" not in getattr(b.answer, "units", "").lower(), q.id
            for m in b.answer.mistakes:
                assert "warp" not in m.message.lower() or "lesson 02's warps" in m.message, m.key
    law = find("01.loads_per_thread")
    assert "threads at a time" in law.prompt and law.answer.units == "loads per thread"
    assert audit.problems(law) == []


def test_ch02_references():
    # H100, 256 threads: 2,048 / 256 = 8 blocks per SM x 132 = 1,056 at once; 1,601 blocks take
    # 2 waves: 1,601 / 2,112
    assert _ref("02.wave_efficiency") == pytest.approx(100 * 1601 / 2112)
    # T4 (CC 7.5: 1,024 threads, 16 blocks per SM; 40 SMs), 64 threads: 16 x 40 = 640 at once
    assert _ref("02.wave_efficiency", gpu="t4", threads=64, blocks=601) == \
        pytest.approx(100 * 601 / 640)
    # RTX 4090 (CC 8.9: 1,536 threads, 24 blocks; 128 SMs), 64 threads: 24 x 128 = 3,072
    assert _ref("02.wave_efficiency", gpu="rtx 4090", threads=64) == pytest.approx(
        100 * 1601 / 3072)
    assert _ref("02.resident_threads") == 64 * 32 * 132     # CC 9.0: 64 warps/SM: 270,336
    assert _ref("02.resident_threads", gpu="t4") == 1024 * 40        # CC 7.5: 32 warps/SM
    assert _ref("02.resident_threads", gpu="rtx 4090") == 1536 * 128  # CC 8.9: 48 warps/SM
    # (7·32 + 2·9·16) / ((7 + 2·9)·32) = 512 / 800; iters = 2: paths of 5, 384 / 544
    assert _ref("02.parity_efficiency") == pytest.approx(0.64)
    assert _ref("02.parity_efficiency", iters=2) == pytest.approx((7 * 32 + 2 * 5 * 16) / (17 * 32))
    eff = _fn("02.simt_efficiency")
    assert eff(7, 9, 9, 16) == pytest.approx(0.64)
    assert eff(5, 10, 20, 32) == eff(5, 10, 20, 0) == 1.0     # uniform warps skip a path
    assert eff(3, 12, 0, 1) == pytest.approx((3 * 32 + 12) / (15 * 32))   # one lane: 0.225
    assert eff(4, 0, 0, 16) == 1.0
    # only (tid / 32) % 2 keeps every warp whole: the others split every warp 16/16
    assert _ref("02.branch_choice") == "C"
    assert _ref("02.branch_choice", order="warp parity offset half_warp") == "A"


def test_ch03_references():
    # 65,536 registers x 4 B = 256 KiB per SM; x 132 SMs = 33 MiB; V100: x 80 = 20 MiB
    assert _ref("03.registers_total") == pytest.approx(33.0)
    assert _ref("03.registers_total", gpu="v100") == pytest.approx(20.0)
    # 32 banks x 4 B x 132 SMs x 1.98 GHz = 33.45 TB/s over 3.35 TB/s; V100: 80 SMs, 1.53 GHz,
    # 900 GB/s
    assert _ref("03.shared_vs_dram") == pytest.approx(32 * 4 * 132 * 1.98e9 / 3.35e12)
    assert _ref("03.shared_vs_dram", gpu="v100") == pytest.approx(32 * 4 * 80 * 1.53e9 / 900e9)
    # CUDA C++ Programming Guide: shared memory is visible to the threads of one block;
    # local memory "resides in device memory"
    assert _ref("03.block_scratch") == "L1 / shared"
    assert _ref("03.local_memory") == "DRAM"
    w = _fn("03.write_traffic")
    assert w(1000, 3, 4, 128, "write-through") == 3 * 1000 * 4        # 12,000 B
    assert w(1000, 3, 4, 128, "write-back") == 32 * 128               # 4000 B -> 32 lines
    assert w(33, 3, 8, 64, "write-back") == 5 * 64                    # 264 B -> 5 lines
    assert w(1, 1, 1, 32, "write-back") == 32


def test_ch04_references():
    # y of 20-byte structs: bytes 4..627, lanes closer than 32 B: segments 0..19 all touched
    assert _ref("04.aos_sectors") == 20
    # y of 14-byte half structs: bytes 2..437: segments 0..13
    assert _ref("04.aos_sectors", fields=7, element="half") == 14
    # x of 12-byte structs: bytes 0..375: segments 0..11
    assert _ref("04.aos_sectors", fields=3, field="x") == 12
    # Nsight Compute on an H200 (docs/measured): 4, 5, 8, 32, 1, 8, 16 sectors per request
    q = find("04.sectors").answer
    measured = [q.reference(**case) for case in q.edge_cases()]
    assert measured == [4, 5, 8, 32, 1, 8, 16]
    bank = _fn("04.bank")
    assert [bank(a) for a in (0, 3, 4, 127, 128, 4100)] == [0, 0, 1, 31, 0, 1]
    # pitch 32 + P words: P = 1 is the smallest that makes it odd (conflict-free)
    assert _ref("04.padding") == "1"
    # row r starts 4008·r bytes in, 8·r mod 32 past a boundary: rows 0, 4 aligned (4 sectors),
    # the other six 5: 38 / 8
    assert _ref("04.row_pitch") == pytest.approx(38 / 8)
    # doubles, 1001 per row: 8008·r mod 32 = 8·r mod 32: rows 0 and 4 aligned (256 B = 8
    # sectors), the others 9: 70 / 8
    assert _ref("04.row_pitch", element="double", ld=1001) == pytest.approx(70 / 8)


def test_ch05_references():
    # H100 PCIe, FP64: 25.6 TFLOP/s / 2.0 TB/s (whitepaper Table 3)
    assert _ref("05.ridge_h100", gpu="h100 pcie", precision="fp64") == pytest.approx(12.8)
    assert _ref("05.ridge_h100", precision="fp8") == pytest.approx(1978.9 / 3.35)
    # the default, H100 SXM5 TF32 (a ridge no lesson works out): 494.7 / 3.35 = 147.7
    assert _ref("05.ridge_h100") == pytest.approx(494.7 / 3.35)
    # 64 FMAs: 128 FLOPs / 12 B = 10.7 FLOP/byte: above the A100's 19.5 / 2.039 = 9.56, below
    # the H100's 66.9 / 3.35 = 20.0
    assert _ref("05.axpy_bound") == "memory-bound"
    assert _ref("05.axpy_bound", gpu="a100", fmas=64) == "compute-bound"
    assert _ref("05.axpy_bound", fmas=64) == "memory-bound"
    # 2N³ / (3N² x 2 B) = N/3 >= 989.4 / 3.35 = 295.34: N = 887; L4: 121 / 0.3 x 3 = 1,210
    assert _ref("05.gemm_ridge_size") == 887
    assert _ref("05.gemm_ridge_size", gpu="l4") == 1210
    # FP32 on the H100's CUDA cores: 2N/12 >= 19.97: N = 120
    assert _ref("05.gemm_ridge_size", precision="fp32") == 120
    conv = _fn("05.conv_flops")
    # ResNet-50 conv1: 7x7, 3 -> 64, stride 2, pad 3 on 224²: 112² x 49 x 3 x 64 = 118.0 M
    # multiply-adds (He et al. 2016; the usual "118 MMACs"), so 236.0 MFLOP
    assert conv(224, 7, 3, 64, 3, 2) == 2 * 112**2 * 49 * 3 * 64
    # floor((10 - 3) / 3) + 1 = 3
    assert conv(10, 3, 8, 8, 0, 3) == 2 * 3 * 3 * 9 * 8 * 8
    # T/4 / (1 + T/(2N)) FLOP/byte vs 66.9 / 3.35 = 19.97: T = 64 gives 15.9, T = 128 gives 31.8
    assert _ref("05.tile_for_ridge") == "128"
    # A100: 9.56 -> 64 (T = 32 gives 8.0); RTX 3090: 35.6 / 0.936 = 38.0 -> 256
    assert _ref("05.tile_for_ridge", gpu="a100") == "64"
    assert _ref("05.tile_for_ridge", gpu="rtx 3090") == "256"
    # decode: ~1 FLOP/byte against an FP16 ridge of 989.4 / 3.35 = 295
    assert _ref("05.decode_bound") == "memory-bound"
    # 16 new tokens x 8 query heads per K/V head: ~128 FLOP/byte, still below 295; 64 x 8 = 512
    assert _ref("05.decode_bound", new_tokens=16, kv_heads=4) == "memory-bound"
    assert _ref("05.decode_bound", new_tokens=64, kv_heads=4) == "compute-bound"


def test_solutions_do_not_just_call_the_references():
    """Solutions compute their answers; none imports the question modules."""
    for chapter in COVERED:
        text = "\n".join(c.source for c in _read("solutions", chapter).cells)
        assert "gpu_lessons.questions" not in text and ".reference" not in text



# -- chapters 06-10: reference answers against hand derivations, measurements and papers ------------

H200_OCCUPANCY = ROOT / "tests" / "data" / "h200_occupancy.json"
TORCH_FLOPS = ROOT / "tests" / "data" / "torch_transformer_flops.json"


def test_ch06_references():
    q = find("06.occupancy_design")
    design = q.answer.reference()
    assert q.answer.verify(dict(zip(q.answer.names, design, strict=True))) is None
    # 06.which_change, the lesson's case: 128 threads, 32 registers, 32 KiB of shared memory on
    # an H100: (32,768 + 1,024) B per block, 233,472 // 33,792 = 6 blocks = 24 warps (37.5 %);
    # halving it: 233,472 // 17,408 = 13 blocks = 52 warps (81 %); 256 threads: 6 x 8 = 48
    # warps (75 %); fewer registers or 64 threads do not help
    assert _ref("06.which_change") == "A"
    assert _ref("06.which_change", order="regs_cut block_half smem_half block_double") == "C"
    # 40 warps = 10 per sub-partition: 16,384 // 10 = 1,638 -> 1,536 (256 units) = 48 x 32;
    # at 49 registers a warp takes 1,792: 9 per sub-partition, 36 warps
    assert _ref("06.max_registers") == 48
    # RTX 4090 (CC 8.9), 256 threads, 24 warps = 3 blocks: 6 warps per sub-partition,
    # 16,384 // 6 = 2,730 -> 2,560 = 80 registers
    assert _ref("06.max_registers", gpu="rtx 4090", threads=256, warps=24) == 80
    occ = _fn("06.occupancy_cc90")
    assert occ(256, 40, 0) == 0.75                 # 48 warps, not 51
    assert occ(32, 16, 0) == 0.5                   # 32 one-warp blocks
    assert occ(96, 32, 0) == 63 / 64               # 64 // 3 = 21 blocks of 3 warps
    assert occ(1024, 128, 0) == 0                  # 4,096 registers/warp: 16 warps < 32
    assert occ(256, 255, 0) == 8 / 64              # 8,192/warp: 2 per sub-partition
    assert occ(128, 32, 232_448) == 4 / 64         # 233,472 B with the reservation: 1 block
    # 200 threads = 7 warps: warps 9, registers 4·(16,384 // 1,536) // 7 = 5,
    # shared (12,345 + 1,024 -> 13,440): 17 -> 5 blocks = 35 warps
    assert occ(200, 48, 12_345) == 35 / 64
    rate = _fn("06.issue_rate")
    # I = j(a + 1), T = I - 1 + L: 8·5/404, 8·20/419, one FMA chain per warp 4/7
    assert rate(8, 4, 1, 400) == pytest.approx(40 / 404)
    assert rate(8, 4, 4, 400) == pytest.approx(160 / 419)
    assert rate(1, 0, 4, 4) == pytest.approx(4 / 7)
    assert rate(64, 8, 8, 300) == 1.0
    # loads in flight per SM = warps x ILP: A 64·1, B 32·4, C 16·4, D 8·8
    assert _ref("06.best_config") == "B"
    assert _ref("06.best_config", order="greedy lean balanced heavy") == "C"


def test_ch06_occupancy_reference_matches_the_cuda_runtime():
    """06.occupancy_cc90's reference against cuOccupancyMaxActiveBlocksPerMultiprocessor on an
    H200 (default carveout), a spread of the measured rows."""
    import json

    data = json.loads(H200_OCCUPANCY.read_text())
    cols = data["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in data["rows"]]
    rows = [r for r in rows if r["carveout"] is None and r["blocks_per_sm"] >= 0][::97]
    assert len(rows) > 100
    occ = _fn("06.occupancy_cc90")
    for r in rows:
        warps = -(-r["threads_per_block"] // 32)
        measured = r["blocks_per_sm"] * warps / 64
        got = occ(r["threads_per_block"], r["registers_per_thread"],
                  r["static_smem"] + r["dynamic_smem"])
        assert got == pytest.approx(measured), r


def test_ch07_references():
    assert _ref("07.symptom") == "latency-bound"    # every unit < 60 %, few warps
    assert _ref("07.symptom", profile="streaming") == "memory-bound"   # DRAM at 83 %
    assert _ref("07.symptom", profile="gemm") == "compute-bound"       # SM at 81 %
    # three kernels 2 + 3 + 2 accesses per element, fused 3: 4 x 33,554,432 x 2 B (BF16)
    assert _ref("07.fusion_bytes_saved") == pytest.approx(4 * 8192 * 4096 * 2 / 1e6)
    assert _ref("07.fusion_bytes_saved", tokens=2560, features=5120, dtype="fp32") == \
        pytest.approx(4 * 2560 * 5120 * 4 / 1e6)
    tiled = _fn("07.tiled_gemm_bytes")
    assert tiled(4096, 4096, 4096, 16, 4) == 4 * (2 * 4096**3 // 16 + 4096**2)
    # ⌈3000/128⌉ = 24 block columns, ⌈1000/128⌉ = 8 block rows: 2·(12e6 + 12e6 + 3e6)
    assert tiled(1000, 3000, 500, 128, 2) == 54_000_000
    assert tiled(64, 64, 64, 128, 4) == 4 * 3 * 64 * 64            # each operand once
    assert tiled(512, 512, 512, 1, 4) == 4 * (2 * 512**3 + 512**2)  # the naive kernel
    # ridge 19.5 / 2.039 = 9.564; T = 39: ⌈8192/39⌉ = 211, intensity 2·8192 / (4·423) = 9.68;
    # T = 38: ⌈8192/38⌉ = 216, 2·8192 / (4·433) = 9.46
    assert 2 * 8192 / (4 * 423) >= 19.5 / 2.039 > 2 * 8192 / (4 * 433)
    assert _ref("07.tile_for_ridge") == 39
    # A100: 64 lanes x 2 FLOP / 128 B = 1 FLOP/B; an r x r patch gives r/4; H100: 128 lanes, 2
    assert _ref("07.register_block") == 4
    assert _ref("07.register_block", gpu="h100") == 8
    assert _ref("07.which_fix") == "C"              # 78 % of the FP32 roof: tensor cores
    assert _ref("07.which_fix", case="transpose") == "B"          # shared memory at 86 %
    assert _ref("07.which_fix", case="tiny_kernels") == "D"       # launches: a graph
    assert _ref("07.which_fix", case="register_hungry") == "A"    # too few warps


# The H200's recorded launch costs (gpu_lessons/data/measured.toml, from the course's H200 run):
# 6.05 µs per back-to-back launch; 10.97 µs with a sync after each, so the sync adds 4.92 µs;
# 0.699 µs per node of a 1000-node graph, less (6.05 + 4.92) / 1000: 0.69 µs per node.
LAUNCH, SYNC, NODE = 6.05, 4.92, 0.69


def test_ch08_references():
    # 200 kernels shorter than a launch: busy = 200·d / (200·6.05 + d + 4.92) = 0.9
    assert _ref("08.min_kernel_time") == pytest.approx(
        0.9 * (200 * LAUNCH + SYNC) / (200 - 0.9), rel=1e-6)
    # 50 kernels, 60 %: still shorter than a launch
    assert _ref("08.min_kernel_time", n_kernels=50, target=60) == pytest.approx(
        0.6 * (50 * LAUNCH + SYNC) / (50 - 0.6), rel=1e-6)
    # 2 + 0.05·b >= 6.05: b = 81; 3 + 0.04·b >= 6.05: b = 76.25 -> 77
    assert _ref("08.batch_knee") == 81
    assert _ref("08.batch_knee", fixed_us=3.0, per_item_us=0.04) == 77
    ar = _fn("08.allreduce_time")
    # nccl-tests PERFORMANCE.md: bus bandwidth = algorithm bandwidth x 2(n-1)/n for all-reduce
    assert ar(10**9, 8, 450e9) == pytest.approx(10**9 * 2 * 7 / 8 / 450e9)
    assert ar(10**9, 1, 450e9) == 0
    # one all-reduce of S lasts 2·7/8·S / 50 GB/s; = 2 ms at S = 57.1 MB; 2 GPUs, 100 GB/s,
    # 0.8 ms: S = 80 MB
    assert _ref("08.max_bucket") == pytest.approx(2e-3 * 50e9 * 8 / 14 / 1e6, rel=1e-6)
    assert _ref("08.max_bucket", gpus=2, link_gbs=100, backward_ms=0.8) == pytest.approx(
        80.0, rel=1e-6)
    # free pieces 3, 1, 1 MiB: 1 - 3/5; 2, 1.5 and a 2.5 MiB tail: 1 - 2.5/6
    assert _ref("08.fragmentation") == pytest.approx(40.0)
    assert _ref("08.fragmentation", sizes="2 1 1.5 1") == pytest.approx(100 * (1 - 2.5 / 6))
    assert _ref("08.allocator_choice") == "paged"


def test_ch09_references():
    b, s, h, L, V = 8, 1024, 1024, 24, 50257
    # Korthikanti et al. 2022: 72·b·s·l·h²·(1 + s/(6h) + V/(12·l·h)) with i = 4h
    paper = 72 * b * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    # at 40 % MFU on 8 H100s (989.4 TFLOP/s dense BF16)
    assert _ref("09.step_time") == pytest.approx(1e3 * paper / (0.4 * 8 * 989.4e12), rel=1e-9)
    big = 72 * 32 * s * 48 * 1600**2 * (1 + s / (6 * 1600) + V / (12 * 48 * 1600))  # GPT-2 XL
    assert _ref("09.step_time", model="XL", batch=32, gpu="a100", n_gpus=16, mfu_pct=50) == \
        pytest.approx(1e3 * big / (0.5 * 16 * 312e12), rel=1e-9)
    fwd = _fn("09.forward_flops")
    assert fwd(1, 1, 1, 1, 1, 1) == 8 + 4 + 4 + 2
    # 6 x matmul weights per token (4h² + 3·h·i per layer, plus the LM head) + 12·L·s·h
    weights = 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 4096 * 32000
    per_token = 6 * weights + 12 * 32 * 4096 * 4096
    assert _ref("09.mfu_from_log") == pytest.approx(
        100 * per_token * 64 * 4096 / 3.2 / (8 * 989.4e12), rel=1e-9)
    assert _ref("09.mfu_from_log", gpu="a100", n_gpus=16, step_s=5.0) == pytest.approx(
        100 * per_token * 64 * 4096 / 5.0 / (16 * 312e12), rel=1e-9)
    assert _ref("09.wrong_peak") == pytest.approx(25 * 312 / 165.2)   # Ada whitepaper App. A
    assert _ref("09.wrong_peak", gpu="l40s", printed=18) == pytest.approx(18 * 312 / 362)
    assert _ref("09.mfu_or_hfu") == "HFU"
    s, l, h, V = 2048, 128, 25600, 51200
    ratio = (72 * (1 + s / (6 * h) + V / (12 * l * h))) / (96 * (1 + s / (6 * h) + V / (16 * l * h)))
    assert _ref("09.megatron_mfu") == pytest.approx(52 * ratio)


def test_ch09_forward_flops_reference_matches_torch():
    """09.forward_flops' reference against torch.utils.flop_counter on the stored models with
    plain multi-head attention and a two-matmul MLP."""
    import json

    fwd = _fn("09.forward_flops")
    plain = 0
    for c in json.loads(TORCH_FLOPS.read_text())["configs"]:
        cfg = c["config"]
        if (cfg["gated_mlp"] or cfg["n_kv_heads"] != cfg["n_heads"]
                or cfg["n_heads"] * cfg["head_dim"] != cfg["d_model"]):
            continue
        plain += 1
        assert fwd(cfg["batch"], cfg["seq_len"], cfg["d_model"], cfg["n_layers"], cfg["d_ff"],
                   cfg["vocab_size"]) == c["forward_flops"], c["name"]
    assert plain >= 4


def test_ch10_references():
    # float4 x: lanes 16 B apart span 512 B = 16 sectors, the store 4: 640 B per 256 B useful;
    # the H200 copied that pattern's 62,914,560 x 4 B x 2 = 503,316,480 useful bytes in 296.72 µs
    # (docs/measured/h200.md, stride 4: 1,696 GB/s useful)
    assert _ref("10.float4_dram_fraction") == pytest.approx(
        100 * 2.5 * 503_316_480 / 296.72e-6 / 4.8e12)
    assert _ref("10.float4_fix") == "B"
    assert _ref("10.float4_fix", order="tensor threads stage soa") == "D"
    # mystery B: 58,368 + 1,024 B per block -> 233,472 // 59,392 = 3 blocks = 24 warps per SM;
    # each warp keeps one 128-byte load in flight per 2 + 1,188 cycles (600 ns at 1,980 MHz):
    # 24 x 128 / 1,190 B per cycle per SM x 1.98e9 x 132 SMs = 674.7 GB/s of *loads*.  The time
    # is the bytes read at that rate (the stores follow the barrier and wait for nothing):
    # 2^26 x 4 / 674.7e9 = 397.9 µs, DRAM (read + written) at 2^29 / 397.9 µs = 28 % of 4.8 TB/s
    # and compute at 2^26 / 397.9 µs = 0.13 % of 66.9 TFLOP/s: both below 60 %, latency-bound
    from gpu_lessons.capstone import evidence
    from gpu_lessons.questions import lesson10

    load_rate = 24 * 128 / (2 + 600e-9 * 1.98e9) * 1.98e9 * 132
    staged = lesson10._staged_kernel()
    assert staged.seconds == pytest.approx(2**26 * 4 / load_rate)
    assert staged.seconds == pytest.approx(397.9e-6, abs=0.05e-6)
    assert evidence(staged).dram_fraction == pytest.approx(2**29 / (2**28 / load_rate) / 4.8e12)
    assert _ref("10.staged_verdict") == "latency-bound"
    # 4 blocks: 233,472 / 4 = 58,368 B each, minus the 1,024 B reservation: 14,336 floats;
    # 5 blocks: 46,694 -> 46,592 (128-B units) - 1,024 = 45,568 B = 11,392 -> 11,264 floats
    assert _ref("10.staged_buffer") == (233_472 // 4 - 1_024) // 4
    assert _ref("10.staged_buffer", blocks=5) == 11_264
    # one by one max(6.05 + 288, 144·6.05 + 2) + 4.92 = 878.12 µs; graph 6.05 + 144·2.69 + 4.92
    assert _ref("10.decode_graph_speedup") == pytest.approx(
        (144 * LAUNCH + 2 + SYNC) / (LAUNCH + 144 * (NODE + 2) + SYNC))
    # 300 kernels of 1 µs: 300·6.05 + 1 + 4.92; graph 6.05 + 300·1.69 + 4.92
    assert _ref("10.decode_graph_speedup", kernels=300, kernel_us=1.0) == pytest.approx(
        (300 * LAUNCH + 1 + SYNC) / (LAUNCH + 300 * (NODE + 1) + SYNC))
    frac = _fn("10.roofline_fraction")
    # docs/measured/h200.md: cuBLAS FP16 8192³ at 763.9 TFLOP/s = 77.2 % of 989 (full clock)
    assert frac(2 * 8192**3, 3 * 8192**2 * 2, 2 * 8192**3 / 763.9e12, 989e12, 4.8e12) == \
        pytest.approx(763.9 / 989)
    assert frac(0, 4.8e12, 2.0, 66.9e12, 4.8e12) == 0.5


def test_ch10_prompts_quote_the_models_numbers():
    """Times typed into the prompts are the ones the mystery kernels carry."""
    from gpu_lessons.questions import lesson10

    a, b = lesson10._float4_kernel(), lesson10._staged_kernel()
    assert f"{a.seconds * 1e6:.1f} µs" in find("10.float4_dram_fraction").prompt
    assert f"{b.seconds * 1e6:.0f} µs" in find("10.staged_verdict").prompt
    assert f"{a.cost.bytes / 1e6:.0f} MB" in find("10.float4_dram_fraction").prompt
    from gpu_lessons.system import launch_figures

    h200 = launch_figures("H200")
    for qid in ("08.min_kernel_time", "08.batch_knee", "10.decode_graph_speedup"):
        assert f"{h200.launch_us:g} µs" in find(qid).prompt, qid
