"""Assignments: per-student variants, released notebooks without an answer oracle.

An instructor releases the exercise notebooks to a class with a secret key::

    gpu-lessons release --roster roster.csv --secret-file key --out release/

and grades the submissions with the same key (``gpu-lessons grade ... --roster roster.csv
--secret-file key``).  Nothing secret is written into the release.

How each student's numbers are drawn
------------------------------------
A question with variants (:class:`~gpu_lessons.questions.types.Vary`) has ``P`` combinations
of parameter choices, numbered in mixed radix (the first ``Vary`` most significant; index 0 is
every parameter at its default).  For student ``s`` and question ``q`` the index is::

    d = HMAC-SHA256(secret, b"gpu-lessons variant v1\\0" + s + b"\\0" + q)   # UTF-8
    index = 1 + int.from_bytes(d, "big") mod (P - 1)

so every combination except the lesson's own numbers (whose worked answer is public, in
``solutions/``) is equally likely (the modulo bias is below 2^-240), the same student always
gets the same numbers, and without the secret nobody can tell which numbers another student
got, or predict their own for a question before the release.

What is graded, and what is practice
------------------------------------
The course is public: every built-in question's reference ships in the package every student
has, so one call computes any variant's answer (``templates(5)[3].bind(params).answer
.reference()``), and a notebook can do it for every question at once.  So in a release
**every built-in question is practice**: it keeps its instant feedback, its heading says
"practice, not graded", and the grader leaves it out.  What a release grades is what the
public package cannot answer:

* **the kernel puzzles, each as a per-student variant** (:mod:`gpu_lessons.puzzles.variants`),
  drawn from the key like the numbers: the public worked kernels fail every variant, and a
  kernel adapted to it passes.  A puzzle without variants would be practice;
* **the instructor's private bank** (``--bank``; ``docs/bank_template/`` has one question per
  chapter), whose references never ship.  A bank question is practice too when it has a single
  variant, or when the lesson's own answer (its first choices) is right for more than 1 in 20
  of the variants a student can be drawn (:func:`practice_reason`).

:func:`audit` says which is which, and why, for every chapter of a release; the release
writes it into ``release.json``.  In a released notebook a graded bank question's ``check``
(:func:`released_check`) tests the answer's *form* only — the right type, a whole number where
a count is asked for, one of the options, and a plausible size — and says the answer will be
graded from the submitted notebook; it never judges correctness or names a mistake, so it
prints the same for a right and a wrong answer.  The plausible size of a number is: positive,
at least 10⁶ times smaller than the smallest reference of any variant and at most 10⁶ times
larger than the largest, each bound rounded out to a power of ten — so it says nothing about
any student's answer.

What this protects, and what it does not: variants stop answers being passed between
students; the public solutions, the public worked kernels and a notebook that calls the
package's references earn no graded mark; a student who understands a worked kernel can
still adapt it to their variant (that is the skill asked for), and a bank is only as private
as you keep it.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import math
import pprint
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from . import checks
from . import questions as _questions
from ._format import percent
from .questions.audit import variants as _variants
from .questions.bank import load_bank
from .questions.types import Choice, Design, Function, Number, Question

_DOMAIN = b"gpu-lessons variant v1\x00"
_PUZZLE_DOMAIN = b"gpu-lessons puzzle variant v1\x00"
#: A question whose public answer is right for more of its variants than this is practice.
MAX_PUBLIC_SHARE = 1 / 20
_STUDENT = re.compile(r"^[A-Za-z0-9@+][A-Za-z0-9._@+-]{0,99}$")
#: The shortest secret accepted: 16 bytes (128 bits), e.g. ``secrets.token_hex(32)``.
MIN_SECRET_BYTES = 16
#: How far outside every variant's reference a released check still calls a number plausible.
PLAUSIBLE_FACTOR = 1e6


# -- drawing ---------------------------------------------------------------------------------

def student_id(text) -> str:
    """A roster's student id, checked: 1-100 characters of letters, digits and ``. _ @ + -``,
    not starting with ``.``, ``_`` or ``-`` (it names the student's release folder)."""
    if not isinstance(text, str):
        raise TypeError(f"student id must be a string, got {text!r}")
    value = text.strip()
    if not _STUDENT.match(value):
        raise ValueError(f"student id {text!r} is not allowed: use 1-100 letters, digits and "
                         f". _ @ + - (not first), e.g. 'alice' or 's1234567'")
    return value


def draw(secret: bytes, student: str, question: Question) -> dict:
    """The parameters of ``question`` for ``student`` (see the module docstring)."""
    base = question.template or question
    total = base.variants
    if total == 1:
        return base.defaults()
    message = _DOMAIN + student_id(student).encode() + b"\x00" + base.id.encode()
    digest = hmac.new(_secret_bytes(secret), message, hashlib.sha256).digest()
    index = 1 + int.from_bytes(digest, "big") % (total - 1)
    values = {}
    for v in reversed(base.vary):
        index, i = divmod(index, len(v.choices))
        values[v.name] = v.choices[i]
    return {v.name: values[v.name] for v in base.vary}


def draw_puzzle(secret: bytes, student: str, puzzle_id: str) -> str:
    """The variant of puzzle ``puzzle_id`` drawn for ``student``: a ``"<id>@<key>"`` id
    (:mod:`gpu_lessons.puzzles.variants`), each variant equally likely, or the plain id for a
    puzzle without variants."""
    from .puzzles.variants import variants

    found = variants(puzzle_id)
    if not found:
        return puzzle_id
    message = _PUZZLE_DOMAIN + student_id(student).encode() + b"\x00" + puzzle_id.encode()
    digest = hmac.new(_secret_bytes(secret), message, hashlib.sha256).digest()
    return found[int.from_bytes(digest, "big") % len(found)].id


@dataclass(frozen=True)
class Assignment:
    """The questions of a class: the built-in chapters plus an optional private bank, each
    student's variants drawn from ``secret``."""

    secret: bytes = field(repr=False)
    name: str = "gpu-lessons"
    bank: Mapping[int, tuple[Question, ...]] = field(default_factory=dict)

    def __post_init__(self):
        _secret_bytes(self.secret)

    def templates(self, chapter) -> tuple[Question, ...]:
        """A chapter's questions as declared: the built-in ones, then the bank's."""
        n = _questions.chapter_number(chapter)
        return _questions.templates(n) + tuple(self.bank.get(n, ()))

    def questions(self, student: str, chapter) -> tuple[Question, ...]:
        """``student``'s questions of ``chapter``, bound to the parameters drawn for them."""
        return tuple(q.bind(draw(self.secret, student, q)) for q in self.templates(chapter))

    def questions_for(self, chapter) -> Callable[[str], tuple[Question, ...]]:
        """The function the grader takes: student id -> that student's bound questions."""
        n = _questions.chapter_number(chapter)

        def questions_for(student: str) -> tuple[Question, ...]:
            return self.questions(student, n)

        return questions_for


def questions_for(secret, chapter, *, bank=None,
                  roster=None) -> Callable[[str], tuple[Question, ...]]:
    """Student id -> that student's bound questions of ``chapter``: what the grader takes.

    ``secret``: bytes, or the path of a secret file (a release): each student's graded
    questions (:func:`graded`: the built-in questions are practice and left out, so only a
    private bank's questions remain); ``None`` grades every question with the lessons' own
    numbers (a private bank without variants, say).  ``bank``: a private bank's folder.
    ``roster``: a roster CSV or a list of ids; a student not on it is refused with a
    ``ValueError`` naming them (the grader reports it in that submission's row).
    """
    n = _questions.chapter_number(chapter)
    extra = load_bank(bank) if bank else {}
    allowed = None
    if roster is not None:
        allowed = set(read_roster(roster) if isinstance(roster, (str, Path))
                      else map(student_id, roster))
    if secret is None:
        fixed = tuple(q.bind() for q in _questions.templates(n) + tuple(extra.get(n, ())))

        def same_for_all(student: str) -> tuple[Question, ...]:
            _on_roster(student, allowed)
            return fixed

        return same_for_all
    if isinstance(secret, (str, Path)):
        secret = read_secret(secret)
    drawn = Assignment(secret, bank=extra).questions_for(n)
    bank_ids = {q.id for q in extra.get(n, ())}

    marked = {q.id for q in extra.get(n, ()) if graded(q, from_bank=True)}

    def questions(student: str) -> tuple[Question, ...]:
        # The built-in questions are practice in a release: the package every student has
        # computes each one's reference for any numbers, in one call.
        _on_roster(student, allowed)
        return tuple(q for q in drawn(student) if q.id in marked and q.id in bank_ids)

    return questions


def puzzles_for(secret, chapter, *, roster=None, points: float = 1.0) -> Callable[[str], tuple]:
    """Student id -> that student's graded puzzles of ``chapter`` (grading ``Puzzle`` entries
    whose ids name the drawn variants; a puzzle without variants is practice and left out).
    ``secret``: bytes or a secret file's path."""
    from .grading.plan import chapter_puzzles
    from .puzzles.variants import variants

    if isinstance(secret, (str, Path)):
        secret = read_secret(secret)
    secret = _secret_bytes(secret)
    allowed = None
    if roster is not None:
        allowed = set(read_roster(roster) if isinstance(roster, (str, Path))
                      else map(student_id, roster))
    plain = tuple(p for p in chapter_puzzles(_questions.chapter_number(chapter), points)
                  if variants(p.id))

    def puzzles(student: str) -> tuple:
        from dataclasses import replace

        _on_roster(student, allowed)
        return tuple(replace(p, id=draw_puzzle(secret, student, p.id)) for p in plain)

    return puzzles


def public_share(question: Question) -> float:
    """The share of the variants a student can be drawn (all but the lesson's own) for which
    the lesson's own answer — its first choices' reference, what a public solution holds —
    is judged right.  1.0 for a question without variants; 0.0 for a function question (a
    function's reference is code, not a value to copy)."""
    base = question.template or question
    if base.variants == 1:
        return 1.0
    if isinstance(base.answer, Function):
        return 0.0
    public = base.bind(base.defaults()).answer.reference()
    hits = total = 0
    for params in _variants(base):
        if params == base.defaults():
            continue
        q = base.bind(params)
        total += 1
        hits += checks.judge(q, checks.observe(public)).points == q.points
    return hits / total if total else 1.0


def practice_reason(question: Question, *, from_bank: bool = False) -> str:
    """Why a release does not grade ``question`` ("" when it grades it)."""
    if not from_bank:
        return ("its reference ships with the public package: one call computes the answer "
                "for any variant")
    base = question.template or question
    if base.variants == 1:
        return "it has one variant: every student gets the same numbers"
    share = public_share(base)
    if share > MAX_PUBLIC_SHARE:
        return (f"the lesson's own answer is right for {percent(share)} of its variants "
                f"(more than 1 in 20)")
    return ""


def audit(assignment: Assignment, chapters: Iterable) -> dict:
    """What a release grades, chapter by chapter: ``{"05": {"questions": {id: "graded" or
    "practice: why"}, "puzzles": {id: [variant ids] or "practice: why"}}}``."""
    from .puzzles import puzzles as _puzzles
    from .puzzles.variants import variants

    bank_ids = {q.id for qs in assignment.bank.values() for q in qs}
    report = {}
    for n in sorted({_questions.chapter_number(c) for c in chapters}):
        qs = {}
        for q in assignment.templates(n):
            why = practice_reason(q, from_bank=q.id in bank_ids)
            qs[q.id] = f"practice: {why}" if why else "graded"
        ps = {}
        for p in (_puzzles(n) if 2 <= n <= 8 else ()):
            ps[p.id] = [v.id for v in variants(p.id)] or "practice: it has no variants"
        report[f"{n:02d}"] = {"questions": qs, "puzzles": ps}
    return report


def _on_roster(student: str, allowed: set | None) -> None:
    if allowed is not None and student not in allowed:
        raise ValueError(f"student {student!r} is not on the roster: check the submission's "
                         f"folder or file name")


def read_secret(path) -> bytes:
    """The secret key in a file (surrounding whitespace dropped), at least 16 bytes."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"secret file {str(path)!r} cannot be read: {exc.strerror}") from exc
    return _secret_bytes(raw.strip())


def _secret_bytes(secret) -> bytes:
    if not isinstance(secret, bytes):
        raise TypeError(f"secret must be bytes, got {type(secret).__name__}")
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the secret is {len(secret)} bytes; use at least "
                         f"{MIN_SECRET_BYTES} random bytes, e.g. python3 -c \"import secrets; "
                         f"print(secrets.token_hex(32))\" > key")
    return secret


def read_roster(path) -> list[str]:
    """Student ids from a CSV roster with a header row: the column ``student``, ``student_id``
    or ``id`` (other columns, such as names or e-mails, are ignored).  Duplicates and ids a
    folder cannot be named after are refused, naming the row."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"roster {str(path)!r} cannot be read: {exc.strerror}") from exc
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ValueError(f"roster {str(path)!r} is empty")
    header = [h.strip().lower() for h in rows[0]]
    column = next((header.index(h) for h in ("student", "student_id", "id") if h in header), None)
    if column is None:
        raise ValueError(f"roster {str(path)!r}: the header {rows[0]!r} has no column named "
                         f"'student', 'student_id' or 'id'")
    ids: list[str] = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        cell = row[column] if column < len(row) else ""
        try:
            sid = student_id(cell)
        except ValueError as exc:
            raise ValueError(f"roster {str(path)!r} line {line}: {exc}") from None
        if sid in ids:
            raise ValueError(f"roster {str(path)!r} line {line}: {sid!r} appears twice")
        ids.append(sid)
    if not ids:
        raise ValueError(f"roster {str(path)!r} lists no students")
    return ids


# -- what a released notebook may check ------------------------------------------------------

def form_spec(question: Question) -> dict:
    """What a released check may test about an answer to ``question`` (any variant): its
    kind, units or options, and for a number the plausible range (module docstring)."""
    base = question.template or question
    spec = base.answer
    out: dict = {"kind": base.kind, "name": base.name, "points": base.points}
    if isinstance(spec, Number):
        return {**out, **_number_range(base), "units": spec.units, "integer": spec.integer}
    if isinstance(spec, Choice):
        return {**out, "options": list(spec.options)}
    if isinstance(spec, Design):
        return {**out, "fields": [[n, k if k == "int" else list(k)] for n, k in spec.fields]}
    return {**out, "signature": spec.signature}


@cache
def _number_range(base: Question) -> dict:
    refs = [float(base.bind(p).answer.reference()) for p in _variants(base)]
    if not all(r > 0 and math.isfinite(r) for r in refs):
        return {"low": None, "high": None}
    low = 10.0 ** math.floor(math.log10(min(refs) / PLAUSIBLE_FACTOR))
    high = 10.0 ** math.ceil(math.log10(max(refs) * PLAUSIBLE_FACTOR))
    return {"low": low, "high": high}


def graded(question: Question, *, from_bank: bool = False) -> bool:
    """Whether a release grades ``question`` (and its released notebook checks it for form
    only): a private bank's question with variants that the lesson's own answer does not
    give away (:func:`practice_reason`).  The built-in questions are practice."""
    return not practice_reason(question, from_bank=from_bank)


def released_check(forms: Mapping[str, Mapping],
                   practice: Mapping[str, Mapping] | None = None) -> Callable:
    """The ``check`` of a released notebook: form only for the questions in ``forms``
    (``{question id: form_spec(...)}``), instant feedback for the others — judged on the
    student's own numbers for those in ``practice`` (``{question id: parameters}``, what the
    prompt shows; nothing secret).

    A form check prints the same line for every answer of the right form, right or wrong,
    and raises :class:`~gpu_lessons.checks.CheckFailed` only for an answer of the wrong form
    (a string for a number, a fraction for a count, an option that does not exist).
    """
    forms = {qid: dict(spec) for qid, spec in forms.items()}
    practice = {qid: dict(params) for qid, params in (practice or {}).items()}

    def check(question_id, answer, *, strict: bool = False) -> None:
        if question_id not in forms:
            if question_id in practice:  # the student's own numbers, not the lesson's
                question_id = checks.find(question_id).bind(practice[question_id])
            checks.check(question_id, answer, strict=strict)
            return
        form = forms[question_id]
        problem = _form_problem(form, answer)
        points = checks._points(form["points"])
        if problem == checks.NOT_ATTEMPTED:
            message = (f"… {question_id}: not attempted yet — replace the `...` in "
                       f"`{form['name']}` with your answer ({points})")
            if strict:
                raise checks.CheckFailed(message)
            print(message)
        elif problem:
            raise checks.CheckFailed(f"✗ {question_id}: {problem}")
        else:
            print(f"● {question_id}: answer recorded ({_form_words(form)}). It is graded from "
                  f"the notebook you submit; this check does not say whether it is right "
                  f"({points}).")

    check.forms = forms
    check.practice = practice
    return check


def _form_words(form: Mapping) -> str:
    kind = form["kind"]
    if kind == "number":
        return f"a whole number of {form['units']}" if form.get("integer") else \
            f"a number in {form['units']}"
    if kind == "choice":
        return "one of the options"
    if kind == "design":
        return f"a tuple ({', '.join(n for n, _ in form['fields'])})"
    return "a function"


def _form_problem(form: Mapping, answer) -> str | None:
    """What is wrong with the form of ``answer`` (None when nothing is)."""
    if answer is Ellipsis:
        return checks.NOT_ATTEMPTED
    kind = form["kind"]
    if kind == "function":
        return None if callable(answer) else f"expected a function `{form['signature']}`."
    obs = checks.observe(answer)
    if kind == "number":
        if obs["kind"] != "number" or not math.isfinite(obs["value"]):
            return f"expected a number in {form['units']}, got {checks._describe(obs)}."
        x = obs["value"]
        if form.get("integer") and not float(x).is_integer():
            return f"expected a whole number of {form['units']}, got {x!r}."
        low, high = form.get("low"), form.get("high")
        if low is not None and not (low <= x <= high):
            return (f"{x!r} is not a plausible size for this answer in {form['units']} (a "
                    f"positive number between {low:g} and {high:g}): check the units.")
        return None
    if kind == "choice":
        shown = ", ".join(repr(o) for o in form["options"])
        if obs["kind"] != "str" or checks._option(form["options"], obs["value"]) is None:
            return f"expected one of {shown}, got {checks._describe(obs)}."
        return None
    fields = tuple((n, k if k == "int" else tuple(k)) for n, k in form["fields"])
    design = checks.read_design(Design(fields, verify=None, reference=None), obs)
    return design if isinstance(design, str) else None


# -- releasing notebooks ---------------------------------------------------------------------

def release(roster: Sequence[str] | str | Path, secret, out, *, chapters: Iterable = (),
            bank=None, name: str | None = None, exercises=None) -> list[Path]:
    """Write each student's exercise notebooks to ``out/<student>/`` and return their paths.

    ``roster`` is a CSV file (:func:`read_roster`) or a list of ids; ``secret`` is bytes or a
    secret file's path; ``chapters`` defaults to every chapter; ``bank`` is a private bank's
    folder; ``exercises`` the folder of exercise notebooks (default: the repository's).  ``out``
    must be new or empty.  Also writes ``out/release.json`` (the assignment, chapters, students
    and question ids — nothing secret).  Nothing else is written: no solutions, no secret.
    """
    students = (read_roster(roster) if isinstance(roster, (str, Path))
                else [student_id(s) for s in roster])
    if len(set(students)) != len(students):
        raise ValueError("the roster lists a student twice")
    secret_path = Path(secret) if isinstance(secret, (str, Path)) else None
    secret = read_secret(secret) if secret_path else _secret_bytes(secret)
    out = Path(out)
    if secret_path is not None and _inside(secret_path, out):
        raise ValueError(f"the secret file {str(secret_path)!r} is inside the release folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"out={str(out)!r} exists and is not an empty folder; release into a "
                         f"new one")
    numbers = sorted({_questions.chapter_number(c) for c in chapters} or _questions.CHAPTERS)
    assignment = Assignment(secret, name=name or out.name or "gpu-lessons",
                            bank=load_bank(bank) if bank else {})
    sources = {n: _exercise_notebook(n, exercises) for n in numbers}
    bank_ids = {q.id for qs in assignment.bank.values() for q in qs}
    # Every bank question gets a form-only check (its reference is not in the package);
    # only those the audit passes are graded.
    forms = {n: {q.id: form_spec(q) for q in assignment.templates(n) if q.id in bank_ids}
             for n in numbers}
    written = []
    for student in students:
        folder = out / student
        folder.mkdir(parents=True)
        for n in numbers:
            nb = released_notebook(sources[n], assignment, student, n, forms[n])
            path = folder / sources[n].name
            _write_notebook(nb, path)
            written.append(path)
    manifest = {"assignment": assignment.name, "chapters": numbers, "students": students,
                "questions": {f"{n:02d}": [q.id for q in assignment.templates(n)]
                              for n in numbers},
                "audit": audit(assignment, numbers)}
    (out / "release.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return written


def released_notebook(source: Path, assignment: Assignment, student: str, chapter: int,
                      forms: Mapping[str, Mapping]):
    """One student's copy of the exercise notebook ``source`` (an ``nbformat`` notebook)."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    defaults = {q.id: (i, q) for i, q in enumerate(_questions.load(chapter), start=1)}
    mine = {q.id: q for q in assignment.questions(student, chapter)}
    asked = set()
    for i, cell in enumerate(nb.cells):
        qid = _checked_id(cell)
        if qid is None or qid not in defaults:
            continue
        number, default = defaults[qid]
        question_cell = nb.cells[i - 2] if i >= 2 else None
        if question_cell is None or question_cell.source != default.markdown(number):
            raise ValueError(f"{source.name}: the cell that asks {qid} is not the question's "
                             f"prompt; run tools/sync_exercises.py")
        question_cell.source = mine[qid].markdown(number)
        if qid not in forms:  # a built-in function question: practice in a release
            question_cell.source = re.sub(r"(\*`[^`]+` · )[^*]+\*", r"\1practice, not graded*",
                                          question_cell.source, count=1)
        asked.add(qid)
    missing = [qid for qid in defaults if qid not in asked]
    if missing:
        raise ValueError(f"{source.name} does not ask {', '.join(missing)}")
    extra = [q for q in mine.values() if q.id not in defaults]
    if extra:
        at = next((i for i in range(len(nb.cells) - 1, -1, -1)
                   if nb.cells[i].cell_type == "markdown"
                   and nb.cells[i].source.lstrip().startswith("## Done")), len(nb.cells))
        cells = [nbformat.v4.new_markdown_cell("## More questions\n\nYour instructor added "
                                               "these questions to the chapter.")]
        for number, q in enumerate(extra, start=len(defaults) + 1):
            stub, call = q.stub().split("\n\n", 1)
            cells += [nbformat.v4.new_markdown_cell(q.markdown(number)),
                      nbformat.v4.new_code_cell(stub.rstrip("\n")),
                      nbformat.v4.new_code_cell(call)]
        nb.cells[at:at] = cells
    _set_up_puzzles(nb, assignment.secret, student, chapter)
    practice = {q.id: q.params for q in mine.values() if q.id in defaults and q.params}
    _set_up_checks(nb, forms, assignment.name, student, practice)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["gpu_lessons"] = {"chapter": chapter, "assignment": assignment.name,
                                  "student": student, "released": True}
    return nb


def _set_up_puzzles(nb, secret: bytes, student: str, chapter: int) -> None:
    """Give each puzzle of the notebook the student's variant: its statement, and the id its
    check, picture and GPU cells name."""
    if not 2 <= chapter <= 8:
        return
    from . import puzzles as _puzzles

    for p in _puzzles.puzzles(chapter):
        vid = draw_puzzle(secret, student, p.id)
        if vid == p.id:
            continue
        mine = _puzzles.find(vid)
        heading = "### Puzzle "
        stated = [c for c in nb.cells if c.cell_type == "markdown"
                  and c.source.startswith(heading) and f"· `{p.id}` —" in c.source]
        spec_line = f"- Spec (NumPy): `{p.spec}`"
        if len(stated) != 1 or spec_line not in stated[0].source:
            raise ValueError(f"the exercise notebook of chapter {chapter:02d} does not state "
                             f"puzzle {p.id}'s spec as the package does; run "
                             f"tools/puzzle_cells.py")
        title, _, body = stated[0].source.partition("\n\n")
        body = body.replace(spec_line, f"- Spec (NumPy): `{mine.spec}` (your variant)")
        stated[0].source = (f"{title}\n\n**Your variant ({mine.variant}, graded).** "
                            f"{mine.what} Its spec differs from the lesson's: the kernel "
                            f"must compute the spec below.\n\n{body}")
        for cell in nb.cells:
            if cell.cell_type == "code":
                for call in ("check", "show", "run_on_gpu"):
                    cell.source = cell.source.replace(f'puzzles.{call}("{p.id}",',
                                                      f'puzzles.{call}("{vid}",')


def _set_up_checks(nb, forms: Mapping, name: str, student: str,
                   practice: Mapping | None = None) -> None:
    """Make the first code cell import the form-only check, and say so in a note above it."""
    import nbformat

    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    lines = [line for line in nb.cells[first].source.splitlines()
             if line.strip() != "from gpu_lessons.checks import check"]
    setup = ("# `check`: instant feedback on the course's practice questions, with your numbers; "
             "on graded ones, the form of an answer only (grading happens after you submit).\n"
             "from gpu_lessons.assignments import released_check\n\n"
             f"check = released_check(\n"
             f"    {pprint.pformat(dict(forms), width=92, sort_dicts=False)},\n"
             f"    practice={pprint.pformat(dict(practice or {}), width=82, sort_dicts=False)})")
    nb.cells[first].source = "\n".join([*lines, "", setup]) if lines else setup
    note = (f"> **Assignment `{name}` · `{student}`.** The numbers in these questions are "
            f"yours: other students have different ones. The course's own questions are "
            f"practice: they keep their instant feedback and are not graded. What is graded "
            f"are the kernel puzzles — each is your own variant, with a spec that differs "
            f"from the lesson's — and the questions your instructor added; for those, `check` "
            f"only tells you whether an answer has the right *form* (a number in the right "
            f"units, one of the options), not whether it is right. Everything graded is "
            f"graded from the notebook you submit.")
    nb.cells.insert(first, nbformat.v4.new_markdown_cell(note))


def _checked_id(cell) -> str | None:
    if cell.cell_type != "code":
        return None
    match = re.match(r"""^\s*check\(\s*["'](\d\d\.[a-z0-9_]+)["']\s*,""", cell.source)
    return match.group(1) if match else None


def _exercise_notebook(chapter: int, folder) -> Path:
    root = Path(folder) if folder else _default_exercises()
    found = sorted(root.glob(f"{chapter:02d}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"no single exercise notebook for chapter {chapter:02d} in "
                         f"{str(root)!r} (pass --exercises DIR)")
    return found[0]


def _default_exercises() -> Path:
    here = Path(__file__).resolve().parents[1] / "exercises"
    return here if here.is_dir() else Path("exercises")


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _write_notebook(nb, path: Path) -> None:
    import nbformat

    path.write_text(nbformat.writes(nb, version=4, indent=1) + "\n", encoding="utf-8")
