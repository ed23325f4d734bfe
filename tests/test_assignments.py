"""Assignments: per-student variants drawn with HMAC, releases without an answer oracle,
private question banks (gpu_lessons.assignments, gpu_lessons.questions.bank).

The drawing is checked against the documented recipe computed here with ``hmac`` directly;
releases are written to a temporary folder and read back as files, the way a student gets
them.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from gpu_lessons import checks, cli
from gpu_lessons.assignments import (
    Assignment,
    draw,
    form_spec,
    graded,
    questions_for,
    read_roster,
    release,
    released_check,
    student_id,
)
from gpu_lessons.checks import Choice, Design, Function, Number, find, judge, observe
from gpu_lessons.questions import CHAPTERS, templates
from gpu_lessons.questions.bank import load_bank

ROOT = Path(__file__).resolve().parents[1]
#: The template bank of docs/instructors.md: one graded question per chapter.
TEMPLATE_BANK = ROOT / "docs" / "bank_template"
SECRET = bytes(range(32))
KEY = SECRET.hex().encode()       # what a key file made with secrets.token_hex holds
STUDENTS = ("alice", "bob", "s1234567")
ALL = [q for n in CHAPTERS for q in templates(n)]


# -- drawing -------------------------------------------------------------------------------------

def _documented_draw(secret: bytes, student: str, q) -> dict:
    """The recipe of the assignments module docstring, written out independently."""
    total = math.prod(len(v.choices) for v in q.vary)
    message = b"gpu-lessons variant v1\x00" + student.encode() + b"\x00" + q.id.encode()
    index = 1 + int.from_bytes(hmac.new(secret, message, hashlib.sha256).digest(), "big") \
        % (total - 1)
    digits = []
    for v in reversed(q.vary):
        index, i = divmod(index, len(v.choices))
        digits.append((v.name, v.choices[i]))
    return dict(reversed(digits))


@pytest.mark.parametrize("q", [q for q in ALL if q.variants > 1], ids=lambda q: q.id)
def test_draw_follows_the_documented_hmac_recipe(q):
    for student in STUDENTS:
        params = draw(SECRET, student, q)
        assert params == _documented_draw(SECRET, student, q)
        assert params == draw(SECRET, student, q)                     # deterministic
        assert params != q.defaults()      # the lesson's numbers (public solution): never drawn


def test_questions_without_variants_keep_their_numbers():
    q = find("05.kernel_time")
    assert draw(SECRET, "alice", q) == {} and q.variants == 1


def test_draw_is_roughly_uniform():
    """05.ridge_h100 has 6 combinations, 5 of them drawn: 9,000 students give each about
    1,800 (a binomial count with sd sqrt(9000 x 0.2 x 0.8) = 38; the bounds are 5 sd)."""
    q = find("05.ridge_h100")
    counts = Counter(tuple(draw(SECRET, f"student{i}", q).values()) for i in range(9000))
    assert len(counts) == 5 and tuple(q.defaults().values()) not in counts
    assert all(1610 <= c <= 1990 for c in counts.values()), counts


def test_the_secret_and_the_student_both_matter():
    q = find("06.occupancy_design")
    by_student = {tuple(draw(SECRET, f"s{i}", q).values()) for i in range(50)}
    by_secret = {tuple(draw(bytes([i]) * 16, "alice", q).values()) for i in range(50)}
    assert len(by_student) > 40 and len(by_secret) > 40


def test_two_students_answers_differ_for_most_graded_points():
    """Over 40 pairs of students, the share of graded points (not function questions) whose
    right answer differs between the two: most of them (69 % on average when this was
    written; choice questions have few options, and eight questions do not vary)."""
    assignment = Assignment(SECRET)
    shares = []
    for i in range(40):
        a, b = f"student{2 * i}", f"student{2 * i + 1}"
        differ = total = 0
        for n in CHAPTERS:
            for qa, qb in zip(assignment.questions(a, n), assignment.questions(b, n), strict=True):
                if isinstance(qa.answer, Function):
                    continue
                total += qa.points
                if not _accepts(qb, _right_answer(qa)):
                    differ += qa.points
        shares.append(differ / total)
    assert sum(shares) / len(shares) >= 0.6, shares


@pytest.mark.parametrize("bad", ["", " ", "a/b", "../x", ".hidden", "-x", "a b", "x" * 101,
                                 "é", "a\x00b"])
def test_student_ids_that_cannot_name_a_folder_are_refused(bad):
    with pytest.raises(ValueError, match="student id"):
        student_id(bad)
    assert student_id(" alice ") == "alice" and student_id("a.b@uni.edu") == "a.b@uni.edu"


def test_a_short_secret_is_refused():
    with pytest.raises(ValueError, match="at least 16 random bytes"):
        Assignment(b"too short")
    with pytest.raises(TypeError, match="secret must be bytes"):
        Assignment("a string secret, not bytes")


# -- what the grader gets --------------------------------------------------------------------------

def _right_answer(q):
    """A right answer to bound question ``q``, as a learner would give it."""
    if isinstance(q.answer, Function):
        return q.answer.reference
    return q.answer.reference()


def _accepts(q, answer) -> bool:
    return judge(q, observe(answer)).correct


def test_questions_for_grades_only_what_the_public_package_cannot_answer():
    bank = load_bank(TEMPLATE_BANK)
    for n in CHAPTERS:
        # the built-in questions are practice in a release: the grader leaves them all out
        assert questions_for(SECRET, n)("alice") == ()
        mine = questions_for(SECRET, n, bank=TEMPLATE_BANK)("alice")
        assert [q.id for q in mine] == [q.id for q in bank[n]]
        for q in mine:
            assert q.params == (draw(SECRET, "alice", q) or {})
            assert _accepts(q, _right_answer(q)), q.id


def test_the_template_bank_has_a_graded_question_per_chapter():
    """Each has variants, and the lesson's own answer is right for at most 1 in 20 of them."""
    from gpu_lessons.assignments import MAX_PUBLIC_SHARE, practice_reason, public_share

    bank = load_bank(TEMPLATE_BANK)
    assert sorted(bank) == list(CHAPTERS)
    for qs in bank.values():
        for q in qs:
            assert q.variants > 1 and public_share(q) <= MAX_PUBLIC_SHARE, q.id
            assert practice_reason(q, from_bank=True) == "", q.id


def test_single_variant_and_leaky_questions_are_practice():
    """The review's list: eight graded questions had one variant, and the public value was
    right for 87 % of 05.decode_bound's variants and 65 % of 05.axpy_bound's.  Such questions
    are practice even in a private bank."""
    from gpu_lessons.assignments import public_share

    for qid in ("03.block_scratch", "03.local_memory", "04.padding", "08.allocator_choice",
                "09.mfu_or_hfu", "09.megatron_mfu", "10.float4_dram_fraction",
                "10.staged_verdict"):
        q = find(qid)
        assert q.variants == 1 and not graded(q, from_bank=True), qid
    for qid, share in (("05.decode_bound", 0.87), ("05.axpy_bound", 0.65)):
        assert public_share(find(qid)) == pytest.approx(share, abs=0.01), qid
        assert not graded(find(qid), from_bank=True), qid
    for q in ALL:  # every built-in question is practice in a release
        assert not graded(q), q.id


@pytest.mark.parametrize("copier", ["bob", "carol", "s1234567"])
def test_a_notebook_copied_from_another_student_loses_the_variant_questions(copier):
    """A student hands in Alice's right answers: graded as themselves, most of the points of
    the varied questions are lost (a choice may coincide: it has few options; a design may
    meet both students' goals; two GPUs may share a number)."""
    lost = kept = 0
    for n in CHAPTERS:
        alice = Assignment(SECRET).questions_for(n)("alice")
        mine = Assignment(SECRET).questions_for(n)(copier)
        for qa, qb in zip(alice, mine, strict=True):
            if isinstance(qa.answer, Function) or qb.variants == 1:
                continue
            if _accepts(qb, _right_answer(qa)):
                kept += qb.points
            else:
                lost += qb.points
    assert lost >= 2 * kept, (lost, kept)


def test_questions_for_reads_a_secret_file(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(SECRET.hex().encode() + b"\n")
    a = questions_for(key, 5)("alice")
    b = questions_for(SECRET.hex().encode(), 5)("alice")
    assert [q.params for q in a] == [q.params for q in b]


# -- releases --------------------------------------------------------------------------------------

def _roster(tmp_path, rows=STUDENTS, header=("student", "name")) -> Path:
    path = tmp_path / "roster.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for sid in rows:
            w.writerow([sid, f"Name of {sid}"])
    return path


def _key(tmp_path) -> Path:
    path = tmp_path / "key"
    path.write_bytes(KEY + b"\n")
    return path


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("release")
    out = tmp / "release"
    written = release(_roster(tmp), _key(tmp), out, chapters=[1, 5, 6, 10], name="spring",
                      bank=TEMPLATE_BANK)
    return out, written


def test_every_built_in_question_of_a_release_says_it_is_practice(released):
    """The grader leaves the built-in questions out of a release's grades, so their headings
    say so instead of offering points; the bank's graded questions keep theirs."""
    out, _ = released
    nb = nbformat.read(out / STUDENTS[0] / "05_roofline.ipynb", as_version=4)
    heads = {m.group(1): m.group(2) for c in nb.cells if c.cell_type == "markdown"
             for m in [re.search(r"\*`(\d\d\.\w+)` · ([^*]+)\*", c.source)] if m}
    for q in templates(5):
        assert heads[q.id] == "practice, not graded", q.id
    assert heads["05.bank_gemm_intensity"] == "1 point"
    manifest = json.loads((out / "release.json").read_text())
    audit = manifest["audit"]["05"]
    assert audit["questions"]["05.bank_gemm_intensity"] == "graded"
    assert all(v.startswith("practice: ") for k, v in audit["questions"].items()
               if not k.startswith("05.bank"))
    assert audit["puzzles"]["matmul_tiled"] == ["matmul_tiled@a_squared",
                                                "matmul_tiled@one_minus_b"]

def test_release_writes_one_folder_per_student_and_nothing_else(released):
    out, written = released
    assert sorted(p.name for p in out.iterdir()) == sorted([*STUDENTS, "release.json"])
    exercises = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb")
                       if p.name[:2] in ("01", "05", "06", "10"))
    for sid in STUDENTS:
        assert sorted(p.name for p in (out / sid).iterdir()) == exercises
    assert len(written) == 3 * 4
    manifest = json.loads((out / "release.json").read_text())
    assert manifest["assignment"] == "spring" and manifest["students"] == list(STUDENTS)
    assert manifest["chapters"] == [1, 5, 6, 10]


def test_release_holds_no_secret_and_no_solution(released):
    out, _ = released
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    for secret in (SECRET, SECRET.hex().encode(), SECRET.hex().upper().encode()):
        assert not any(secret in t for t in texts)
    assert not list(out.rglob("solutions")) and not list(out.rglob("*solution*"))
    # the solution cells' code does not ship either
    solution = nbformat.read(ROOT / "solutions" / "05_roofline.ipynb", as_version=4)
    answer = solution.cells[3].source            # the ridge point's worked answer
    assert all(answer.encode() not in t for t in texts)


def test_released_notebooks_name_the_assignment_and_ask_the_students_numbers(released):
    out, _ = released
    for sid in STUDENTS:
        nb = nbformat.read(out / sid / "05_roofline.ipynb", as_version=4)
        assert nb.metadata["gpu_lessons"] == {"chapter": 5, "assignment": "spring",
                                              "student": sid, "released": True}
        mine = Assignment(KEY).questions(sid, 5)
        cells = [c.source for c in nb.cells if c.cell_type == "markdown"]
        for number, q in enumerate(mine[:len(templates(5))], start=1):
            asked = re.sub(r"· \d+ points?\*", "· practice, not graded*", q.markdown(number),
                           count=1)
            assert asked in cells, q.id
        assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")
    prompts = {sid: next(c.source for c in nbformat.read(out / sid / "05_roofline.ipynb",
                                                         as_version=4).cells
                         if c.source.startswith("### 1.")) for sid in STUDENTS}
    assert len(set(prompts.values())) > 1          # students see different numbers


def _forms(x: float) -> set[str]:
    """Ways a reference could be printed (small whole numbers left out: "32 lanes" is prose)."""
    if float(x).is_integer() and abs(x) < 100:
        return set()
    forms = {repr(x), f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:g}", f"{x:,.0f}", f"{x:.2f}",
             f"{x:.1f}", repr(float(x))}
    if float(x).is_integer():
        forms |= {str(int(x)), f"{int(x):,}"}
    return {f for f in forms if len(f.replace(".", "").replace(",", "").strip("0")) >= 3}


def test_released_files_contain_no_reference_value_of_the_students_variant(released):
    out, _ = released
    for sid in STUDENTS:
        for n in (1, 5, 6, 10):
            path = next((out / sid).glob(f"{n:02d}_*.ipynb"))
            text = path.read_text(encoding="utf-8")
            for q in Assignment(KEY).questions(sid, n):
                if isinstance(q.answer, Number):
                    ref = float(q.answer.reference())
                    leaked = [f for f in _forms(ref) if re.search(
                        rf"(?<![\d.]){re.escape(f)}(?![\d])", text)]
                    assert not leaked, (sid, q.id, ref, leaked)


def _setup_check(nb):
    """The released notebook's ``check``, from its first code cell, run as a learner would."""
    first = next(c for c in nb.cells if c.cell_type == "code")
    namespace: dict = {}
    exec(compile(first.source, "<released setup>", "exec"), namespace)
    return namespace["check"]


def _output(check, qid, answer) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check(qid, answer)
    return buf.getvalue()


def _other_answer(q):
    """A wrong answer of the right form."""
    spec = q.answer
    if isinstance(spec, Number):
        ref = spec.reference()
        return round(ref) + 3 if spec.integer else ref * 1.37
    if isinstance(spec, Choice):
        right = checks._option(spec.options, spec.reference())
        return next(o for o in spec.options if o != right)
    design = list(spec.reference())
    design[0] = 32 if design[0] != 32 else 64
    return tuple(design)


def test_a_released_check_says_the_same_for_a_right_and_a_wrong_answer(released):
    out, _ = released
    for n in (1, 5, 6, 10):
        nb = nbformat.read(next((out / "alice").glob(f"{n:02d}_*.ipynb")), as_version=4)
        check = _setup_check(nb)
        bank_ids = {q.id for q in load_bank(TEMPLATE_BANK)[n]}
        for q in Assignment(KEY, bank=load_bank(TEMPLATE_BANK)).questions("alice", n):
            if q.id not in bank_ids:
                # the built-in questions are practice: they keep their instant feedback
                assert "✓" in _output(check, q.id, _right_answer(q)), q.id
                continue
            right = _output(check, q.id, _right_answer(q))
            wrong = _output(check, q.id, _other_answer(q))
            assert not _accepts(q, _other_answer(q))
            assert right == wrong, (q.id, right, wrong)
            assert "recorded" in right and "does not say whether it is right" in right
            assert "✓" not in right and "correct" not in right
            assert "not attempted" in _output(check, q.id, ...)


def test_a_released_check_refuses_answers_of_the_wrong_form():
    check = released_check({qid: form_spec(find(qid)) for qid in (
        "06.max_registers", "06.which_change", "06.occupancy_design")})
    with pytest.raises(checks.CheckFailed, match="expected a whole number of registers"):
        check("06.max_registers", 48.5)
    with pytest.raises(checks.CheckFailed, match="expected a number in"):
        check("06.max_registers", "48")
    with pytest.raises(checks.CheckFailed, match="expected one of 'A', 'B', 'C', 'D'"):
        check("06.which_change", "E")
    with pytest.raises(checks.CheckFailed, match="expected a tuple"):
        check("06.occupancy_design", 256)
    check5 = released_check({"05.ridge_h100": form_spec(find("05.ridge_h100"))})
    with pytest.raises(checks.CheckFailed, match=r"not a plausible size.*check the units"):
        check5("05.ridge_h100", 2.9e12)           # FLOP/s over B/s forgotten: 10¹⁰ too big


def test_the_plausible_range_is_rounded_out_to_powers_of_ten():
    """Positive, from 10⁶ below the smallest reference of any variant to 10⁶ above the
    largest, each bound a power of ten: it says nothing about any one student's answer."""
    spec = form_spec(find("05.ridge_h100"))
    refs = [find("05.ridge_h100").bind({"gpu": g, "precision": p}).answer.reference()
            for g in ("h100", "h100 pcie") for p in ("tf32", "fp8", "fp64")]
    assert spec["low"] == 10.0 ** math.floor(math.log10(min(refs) / 1e6))
    assert spec["high"] == 10.0 ** math.ceil(math.log10(max(refs) * 1e6))
    assert spec["low"] == 1e-5 and spec["high"] == 1e9      # refs from 10.0 to 756.5 FLOP/byte
    for q in ALL:
        form = form_spec(q)
        for bound in (form.get("low"), form.get("high")):
            if bound is not None:
                assert math.log10(bound) == round(math.log10(bound)), (q.id, bound)


def test_which_questions_a_release_grades():
    assert not graded(find("05.ridge_h100")) and not graded(find("06.occupancy_design"))
    assert not graded(find("05.kernel_time"))
    # the same questions in a private bank: graded when their variants keep the public
    # answer from passing
    assert graded(find("05.ridge_h100"), from_bank=True)
    assert not graded(find("05.kernel_time"), from_bank=True)  # one variant: practice


def test_a_released_notebook_runs_unanswered_in_a_kernel(released):
    """In Jupyter: the setup cell imports only the package, and every question reports "not
    attempted" (the released checks do not need the secret)."""
    from nbclient import NotebookClient

    out, _ = released
    nb = nbformat.read(out / "bob" / "10_capstone.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs)
    assert printed.count("not attempted") == len(templates(10)) + 1  # and the bank's


@pytest.mark.parametrize("problem, message", [
    ("out_not_empty", "not an empty folder"),
    ("secret_inside", "inside the release folder"),
    ("duplicate", "appears twice"),
    ("bad_id", "student id"),
    ("no_column", "no column named 'student'"),
    ("short_secret", "at least 16 random bytes"),
])
def test_release_refuses_unsafe_or_broken_input(tmp_path, problem, message):
    roster, key, out = _roster(tmp_path), _key(tmp_path), tmp_path / "out"
    if problem == "out_not_empty":
        out.mkdir()
        (out / "old.txt").write_text("x")
    elif problem == "secret_inside":
        out.mkdir()
        key = out / "key"
        key.write_text(SECRET.hex())
    elif problem == "duplicate":
        roster = _roster(tmp_path, rows=("alice", "bob", "alice"))
    elif problem == "bad_id":
        roster = _roster(tmp_path, rows=("alice", "../bob"))
    elif problem == "no_column":
        roster = _roster(tmp_path, header=("name", "email"))
    elif problem == "short_secret":
        key.write_text("abc")
    with pytest.raises(ValueError, match=message):
        release(roster, key, out, chapters=[5])


def test_roster_reads_the_usual_column_names(tmp_path):
    for header in ("student", "Student_ID", "id"):
        path = _roster(tmp_path, header=(header, "name"))
        assert read_roster(path) == list(STUDENTS)


def test_the_release_command(tmp_path, capsys):
    out = tmp_path / "rel"
    code = cli.main(["release", "--roster", str(_roster(tmp_path)), "--secret-file",
                     str(_key(tmp_path)), "--out", str(out), "--chapters", "5-6,9"])
    assert code == 0 and "released 9 notebooks for 3 students" in capsys.readouterr().out
    assert sorted(p.name[:2] for p in (out / "alice").iterdir()) == ["05", "06", "09"]
    code = cli.main(["release", "--roster", str(_roster(tmp_path)), "--secret-file",
                     str(_key(tmp_path)), "--out", str(out)])
    assert code == 2 and "not an empty folder" in capsys.readouterr().err
    code = cli.main(["release", "--roster", str(_roster(tmp_path)), "--secret-file",
                     str(_key(tmp_path)), "--out", str(tmp_path / "r2"), "--chapters", "x"])
    assert code == 2 and "--chapters" in capsys.readouterr().err


# -- private banks ---------------------------------------------------------------------------------

def _doc_bank(tmp_path) -> Path:
    """The example bank of docs/instructors.md, exactly as printed there."""
    text = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- example bank: (\w+\.py) -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/instructors.md has no example bank"
    folder = tmp_path / "bank"
    folder.mkdir(parents=True)
    (folder / match.group(1)).write_text(match.group(2), encoding="utf-8")
    return folder


def test_the_documented_example_bank_loads_and_is_graded(tmp_path):
    bank = load_bank(_doc_bank(tmp_path))
    assert list(bank) == [5] and [q.id for q in bank[5]] == ["05.copy_time", "05.copy_bound"]
    mine = questions_for(SECRET, 5, bank=_doc_bank(tmp_path / "again"))("alice")
    # copy_bound has one variant, so it is practice: only copy_time is graded
    assert [q.id for q in mine] == ["05.copy_time"]
    copy = mine[0]
    # read and write megabytes x 10⁶ B at the datasheet bandwidth, in µs
    bandwidth = {"h100": 3.35e12, "a100": 2.039e12, "h200": 4.8e12, "l40s": 864e9}
    expected = 2 * copy.params["megabytes"] * 1e6 / bandwidth[copy.params["gpu"]] * 1e6
    assert copy.answer.reference() == pytest.approx(expected)
    assert _accepts(copy, expected) and not _accepts(copy, expected / 2)
    assert judge(copy, observe(expected / 2)).mistake == "read_only"


def test_a_release_with_a_bank_asks_its_questions_with_form_only_checks(tmp_path):
    out = tmp_path / "out"
    release(["alice"], SECRET, out, chapters=[5], bank=_doc_bank(tmp_path))
    nb = nbformat.read(out / "alice" / "05_roofline.ipynb", as_version=4)
    sources = [c.source for c in nb.cells]
    more = sources.index("## More questions\n\nYour instructor added these questions to the "
                         "chapter.")
    assert more < next(i for i, s in enumerate(sources) if s.startswith("## Done"))
    assert 'check("05.copy_time", copy_time_us)' in sources
    check = _setup_check(nb)
    assert "05.copy_time" in check.forms and "05.copy_bound" in check.forms
    assert "recorded" in _output(check, "05.copy_bound", "memory-bound")
    assert "recorded" in _output(check, "05.copy_bound", "compute-bound")


def test_bank_questions_are_validated_like_built_in_ones(tmp_path):
    folder = tmp_path / "bank"
    folder.mkdir()
    header = "from gpu_lessons.questions.types import Number, Question, Vary\n"
    cases = {
        "no QUESTIONS tuple": "X = 1\n",
        "duplicate id or name": header + (
            "QUESTIONS = (Question(id='05.ridge_h100', name='other', points=1, prompt='p', "
            "answer=Number(reference=lambda: 1.0, units='x')),)\n"),
        "not well posed": header + (
            "QUESTIONS = (Question(id='05.same', name='same', points=1, prompt='{n}', "
            "vary=(Vary('n', (1, 2), 'n'),), answer=Number(reference=lambda n: 3.0, "
            "units='x')),)\n"),
        "importing it failed": "import no_such_module_here\n",
    }
    for message, source in cases.items():
        (folder / "q.py").write_text(source)
        with pytest.raises(ValueError, match=message):
            load_bank(folder)
    with pytest.raises(ValueError, match="not a folder"):
        load_bank(tmp_path / "missing")
    (folder / "q.py").unlink()
    with pytest.raises(ValueError, match="holds no question modules"):
        load_bank(folder)


def test_form_specs_of_every_kind():
    assert form_spec(find("06.which_change"))["options"] == ["A", "B", "C", "D"]
    design = form_spec(find("06.occupancy_design"))
    assert design["fields"][0] == ["threads_per_block", "int"]
    assert form_spec(find("02.resident_threads"))["integer"] is True
    check = released_check({"06.occupancy_design": design})
    assert "recorded" in _output(check, "06.occupancy_design", (256, 64, "registers"))
    assert isinstance(find("06.occupancy_design").answer, Design)


# -- grading a class with the key ----------------------------------------------------------------

def _answered(nb, questions) -> None:
    """Fill a released notebook's answer cells with right answers to ``questions`` (the
    function questions stay stubs)."""
    by_id = {q.id: q for q in questions}
    for i, cell in enumerate(nb.cells):
        match = re.match(r"""^check\("(\d\d\.\w+)", (\w+)\)$""", cell.source)
        if match and not isinstance(by_id[match.group(1)].answer, Function):
            q = by_id[match.group(1)]
            nb.cells[i - 1].source = f"{q.name} = {_right_answer(q)!r}"


def test_grading_with_the_key_grades_only_what_the_public_package_cannot_answer(tmp_path,
                                                                               capsys):
    """The whole loop: release chapter 05 with the template bank, answer, copy, grade with
    ``--secret-file`` and ``--roster``.  Alice answers her bank question right, and adds the
    generic oracle cell (every built-in question answered by the package's own references)
    and the public worked kernels; Bob hands in Alice's notebook; Dave hands in the public
    solution notebook unchanged; Carol is not on the roster.  The built-in questions are not
    graded at all, the public kernels fail each student's puzzle variants, so Alice earns her
    bank question's point only, Dave earns nothing."""
    from gpu_lessons.grading import sandbox
    from gpu_lessons.questions.bank import load_bank as _load

    roster, key = _roster(tmp_path, rows=("alice", "bob", "dave")), _key(tmp_path)
    release(roster, key, tmp_path / "rel", chapters=[5], bank=TEMPLATE_BANK)
    nb = nbformat.read(tmp_path / "rel" / "alice" / "05_roofline.ipynb", as_version=4)
    alice = Assignment(KEY, bank=_load(TEMPLATE_BANK)).questions("alice", 5)
    _answered(nb, alice)
    nb.cells.append(nbformat.v4.new_code_cell(
        "from gpu_lessons.questions import load as _load\n"
        "for _q in _load(5):  # the generic oracle: the package's reference for every prompt\n"
        "    _r = _q.answer.reference\n"
        "    globals()[_q.name] = _r if type(_q.answer).__name__ == 'Function' else _r()"))
    worked = (ROOT / "solutions" / "puzzle_kernels.py").read_text("utf-8")
    for name in ("matmul_naive_kernel", "matmul_tiled_kernel"):
        body = re.search(rf"^def {name}\(.*?(?=^def |^# --)", worked, re.S | re.M).group(0)
        nb.cells.append(nbformat.v4.new_code_cell("import numpy as np\n\n\n" + body.strip()))
    for student in ("alice", "bob", "carol"):
        folder = tmp_path / "subs" / student
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "05_roofline.ipynb")
    (tmp_path / "subs" / "dave").mkdir()
    (tmp_path / "subs" / "dave" / "05_roofline.ipynb").write_bytes(
        (ROOT / "solutions" / "05_roofline.ipynb").read_bytes())
    out = tmp_path / "grades" / "grades.csv"
    args = ["grade", str(tmp_path / "subs"), "--out", str(out), "--secret-file", str(key),
            "--roster", str(roster), "--bank", str(TEMPLATE_BANK), "--chapter", "5",
            "--jobs", "2", "--cell-timeout", "30", "--timeout", "240"]
    if sandbox.unavailable() or sandbox.containment_unavailable():
        args.append("--no-sandbox")          # trusted notebooks: written by this test
    assert cli.main(args) == 0, capsys.readouterr().err
    rows = {r["student"]: r for r in json.loads(out.with_suffix(".json").read_text())["rows"]}
    bank_q = alice[-1]
    assert bank_q.id == "05.bank_gemm_intensity"
    columns = [bank_q.id, "puzzle:matmul_naive", "puzzle:matmul_tiled"]
    assert sorted(rows["alice"]["points"]) == sorted(columns)
    assert rows["alice"]["points"] == {bank_q.id: 1.0, "puzzle:matmul_naive": 0.0,
                                       "puzzle:matmul_tiled": 0.0}, rows["alice"]
    assert "matmul_tiled@" in rows["alice"]["feedback"]["puzzle:matmul_tiled"]
    bob_q = Assignment(KEY, bank=_load(TEMPLATE_BANK)).questions("bob", 5)[-1]
    kept = float(_accepts(bob_q, _right_answer(bank_q)))
    assert rows["bob"]["total"] == kept == 0.0
    assert rows["dave"]["total"] == 0 and rows["dave"]["max"] == 3
    assert "not on the roster" in rows["carol"]["reason"] and rows["carol"]["total"] == 0


def test_released_notebooks_are_not_graded_without_the_key(released, tmp_path, capsys):
    """Graded without ``--secret-file``, released notebooks would be judged against the
    lessons' own numbers (which the public solutions answer) instead of each student's: the
    grader refuses before running anything when most of them say they come from a release."""
    out, _ = released
    subs = tmp_path / "subs"
    for sid in STUDENTS:
        (subs / sid).mkdir(parents=True)
        (subs / sid / "05_roofline.ipynb").write_bytes((out / sid / "05_roofline.ipynb").read_bytes())
    grades = tmp_path / "grades.csv"
    assert cli.main(["grade", str(subs), "--out", str(grades), "--no-puzzles"]) == 2
    err = capsys.readouterr().err
    assert "3 of the 3 notebooks" in err and "--secret-file" in err
    assert not grades.exists()


def test_one_notebook_claiming_a_release_only_warns(released, tmp_path, capsys):
    """Metadata is the student's to write: one notebook that claims to come from a release
    must not stop the run for everyone, so a minority gets a warning, not a refusal."""
    import argparse

    out, _ = released
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.ipynb").write_bytes((out / "alice" / "05_roofline.ipynb").read_bytes())
    practice = (ROOT / "exercises" / "05_roofline.ipynb").read_bytes()
    for name in ("bob.ipynb", "carol.ipynb"):
        (subs / name).write_bytes(practice)
    args = argparse.Namespace(submissions=str(subs), secret_file=None, roster=None, bank=None,
                              chapter=5)
    assert cli._questions_for(args) is None
    err = capsys.readouterr().err
    assert "warning: 1 of the 3 notebooks" in err and "--secret-file" in err


def test_public_solutions_earn_no_graded_point_in_any_chapter():
    """What a release grades, chapter by chapter: the bank's questions (which no public
    solution notebook answers: it never names them) and each student's puzzle variants (which
    every public worked kernel fails: tests/puzzles/test_puzzle_variants.py).  No built-in question,
    and no plain puzzle, is ever a graded column."""
    from gpu_lessons.assignments import puzzles_for
    from gpu_lessons.puzzles import puzzles as all_puzzles

    builtin = {q.id for q in ALL}
    for n in CHAPTERS:
        solution = nbformat.read(next((ROOT / "solutions").glob(f"{n:02d}_*.ipynb")),
                                 as_version=4)
        code = "\n".join(c.source for c in solution.cells if c.cell_type == "code")
        for student in STUDENTS:
            graded_qs = questions_for(SECRET, n, bank=TEMPLATE_BANK)(student)
            assert graded_qs and not {q.id for q in graded_qs} & builtin
            for q in graded_qs:
                assert not re.search(rf"^\s*{q.name}\s*=", code, re.M), (n, q.name)
            mine = puzzles_for(SECRET, n)(student)
            assert [p.column for p in mine] == [f"puzzle:{p.id}" for p in
                                                (all_puzzles(n) if 2 <= n <= 8 else ())]
            assert all("@" in p.id for p in mine), mine


def test_puzzle_variants_are_drawn_from_the_key():
    from gpu_lessons.assignments import draw_puzzle
    from gpu_lessons.puzzles.variants import variants

    drawn = Counter(draw_puzzle(SECRET, f"s{i}", "transpose") for i in range(300))
    assert set(drawn) == {v.id for v in variants("transpose")}
    assert min(drawn.values()) > 60  # three variants, about 100 each
    assert draw_puzzle(SECRET, "ann", "transpose") == draw_puzzle(SECRET, "ann", "transpose")
    other = bytes(reversed(SECRET))
    assert any(draw_puzzle(SECRET, f"s{i}", "reduce") != draw_puzzle(other, f"s{i}", "reduce")
               for i in range(10))
