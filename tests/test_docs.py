"""The guides' examples do what the guides say: docs/simulator.md's kernel runs as printed and its
tables name only fields that exist, docs/kernel_language.md's tables are the constructs registry
and every row's CUDA is what `to_cuda` writes for its Python, and the README's and instructors'
guide's counts match the package.

Expected values are derived by hand next to each assertion, not taken from the code's output.
"""

import re
import runpy
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpu_lessons import puzzles
from gpu_lessons.checks import evaluate
from gpu_lessons.kernels import constructs, simt, to_cuda
from gpu_lessons.kernels import lang as kernel_lang
from gpu_lessons.questions import templates
from gpu_lessons.questions.types import Function

ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _first_python_block(text: str) -> str:
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def _table_row(text: str, first_cell: str) -> str:
    """The line of a Markdown table whose first cell holds ``first_cell``."""
    return next(line for line in text.splitlines()
                if line.startswith("| ") and first_cell in line.split("|")[1])


def _names(cell: str) -> list[str]:
    """Backticked identifiers of a table cell (`a`, `stats(region=...)` -> stats)."""
    return re.findall(r"`([A-Za-z_]\w*)", cell)


def _simulator_example(tmp_path):
    """Run docs/simulator.md's kernel exactly as printed, from a file (as a learner would)."""
    path = tmp_path / "simulator_example.py"
    path.write_text(_first_python_block(_doc("docs/simulator.md")), encoding="utf-8")
    return runpy.run_path(str(path))


def test_simulator_md_example_runs_as_printed(tmp_path):
    ns = _simulator_example(tmp_path)
    r = ns["r"]
    # 0 + 1 + ... + 999 = 999 * 1000 / 2, exact in float32 (every partial sum is below 2^24).
    assert ns["out"][0] == 499_500
    # 4 blocks of 256 threads = 8 warps each: one t.sync() per block, five shuffles per warp
    # (offsets 16, 8, 4, 2, 1), one atomic per block (thread 0 only).
    assert r.barriers == 4
    assert r.totals.shuffle_instructions == 4 * 8 * 5
    assert r.totals.atomic_instructions == 4
    # `partial`: 8 float32 = 32 bytes of static shared memory per block.
    assert r.shared_bytes_per_block == 32
    assert r.races == () and r.uninitialised_reads == () and r.shuffle_reads == ()


def test_simulator_md_tables_name_real_fields(tmp_path):
    """Every field the "What a run records" table names is an attribute of what `run` returns."""
    text = _doc("docs/simulator.md")
    r = _simulator_example(tmp_path)["r"]
    recorded = text[text.index("## What a run records"):text.index("\nMeasures a puzzle")]
    rows = [line for line in recorded.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10
    for row in rows:
        first = row.split("|")[1]
        for name in _names(first):
            assert hasattr(r, name), f"SimResult has no {name!r} (docs/simulator.md)"
    event_cell = _table_row(recorded, "`events`").split("|")[2]
    event = r.events[0]
    for name in _names(event_cell.split(":", 1)[1]):
        if name not in {"record_indices", "True"}:
            assert hasattr(event, name), f"Event has no {name!r}"
    stats_cell = _table_row(recorded, "`totals`").split("|")[2]
    for name in _names(stats_cell.split(":", 1)[1]):
        assert hasattr(r.totals, name), f"Stats has no {name!r}"
    arrays_cell = _table_row(recorded, "`arrays[name]`").split("|")[2]
    for name in _names(arrays_cell.split(":", 1)[1]):
        assert hasattr(r.arrays["x"], name), f"ArrayStats has no {name!r}"
    # "Races inside a warp": lane l writes sh[l], then reads sh[l + 1], which lane l + 1 wrote
    # one instruction earlier with no t.syncwarp() between.
    race = simt.run(_warp_race, 1, 32, np.zeros(32, np.float32)).races[0]
    for name in ("writer_lane", "other_lane", "missing"):
        assert re.search(rf"`(Race\.)?{name}`", text)
    assert race.writer_lane != race.other_lane
    assert race.missing == "t.syncwarp()"


def _warp_race(t, out):
    sh = t.shared(32, np.float32)
    sh[t.lane] = t.lane * 1.0
    out[t.lane] = sh[(t.lane + 1) % 32]


def test_kernel_language_md_tables_are_the_constructs_registry():
    """docs/kernel_language.md's tables are printed from gpu_lessons.kernels.constructs."""
    text = _doc("docs/kernel_language.md")
    for section in ("python", "t"):
        assert constructs.markdown_table(section) in text, (
            f"regenerate the {section!r} table: python -m gpu_lessons.kernels.constructs")
    python_rows = text.index(constructs.markdown_table("python"))
    assert python_rows < text.index(constructs.markdown_table("t"))   # plain Python first


@pytest.mark.parametrize("construct", constructs.CONSTRUCTS, ids=lambda c: c.name)
def test_each_constructs_cuda_cell_is_what_to_cuda_writes(construct):
    source = constructs.EXAMPLE_HEAD + textwrap.indent(construct.example, "    ")
    kernel = kernel_lang.compile_kernel(source)
    x, y = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.int32)
    cuda = to_cuda(kernel, x, y, np.zeros(64, np.float32), 64)
    for piece in construct.cuda:
        assert piece in cuda, (construct.name, piece, cuda.body)
    row = next(line for line in constructs.markdown_table(construct.section).splitlines()
               if line.startswith(f"| {construct.name} |"))
    for piece in construct.cuda:
        assert f"`{piece}`" in row.replace("\\|", "|")


def test_kernel_language_md_error_message_is_the_checkers():
    quoted = "line 7: `import os` is not part of the kernel language: kernels cannot import modules;"
    assert quoted in _doc("docs/kernel_language.md")
    source = "def k(t, x):\n" + "    i = 0\n" * 5 + "    import os\n"     # `import os` on line 7
    try:
        kernel_lang.validate(source)
    except kernel_lang.KernelLanguageError as exc:
        assert str(exc).startswith(quoted)
        assert (exc.construct, exc.lineno) == ("import", 7)
    else:
        raise AssertionError("`import os` was accepted")


def test_readme_counts():
    readme = _doc("README.md")
    n_puzzles = len(puzzles.puzzles())
    assert f"`gpu_lessons.puzzles`, {n_puzzles} in all" in readme
    # the ladder, the tensor-core and the attention puzzles have H200 runs of their own
    own_runs = ("mma_tile", "hgemm_mma", "flash_attention", "decode_attention")
    ladder = sum(p.id.startswith("sgemm_") or p.id in own_runs for p in puzzles.puzzles())
    assert (f"the worked kernels of all {n_puzzles} puzzles matched their specs "
            f"({n_puzzles - ladder}\nthrough their notebooks' GPU cells") in readme
    sizes = [len(templates(n)) for n in range(1, 11)]
    assert f"one per chapter, {min(sizes)}–{max(sizes)} graded questions each" in readme
    assert f"end with **kernel puzzles** ({n_puzzles} in all)" in _doc("docs/instructors.md")
    assert sorted({p.lesson for p in puzzles.puzzles()}) == list(range(2, 9))


def test_instructors_md_built_in_questions_are_practice_because_one_call_answers_them():
    """The guide's reason for grading no built-in question in a release: the public package
    answers any variant of any of them in one call (the call the guide quotes, and the
    generic oracle over a whole chapter), and wrapping the package's model passes the
    function questions."""
    from gpu_lessons import roofline

    doc = _doc("docs/instructors.md")
    assert "every built-in question is practice" in doc.replace("**", "")
    call = 'templates(5)[3].bind({"gpu": "b200", "precision": "tf32"}).answer.reference()'
    assert call in doc
    q = templates(5)[3].bind({"gpu": "b200", "precision": "tf32"})
    assert evaluate(q, eval(call, {"templates": templates})).correct
    for n in range(1, 11):  # the oracle: every question of every chapter, one call each
        for t in templates(n):
            ref = t.bind().answer.reference
            assert evaluate(t.bind(), ref if isinstance(t.answer, Function) else ref()).correct

    def kernel_time(flops, bytes_moved, peak_flops, bandwidth):
        return roofline.kernel_time(flops, bytes_moved, peak_flops, bandwidth)

    assert evaluate("05.kernel_time", kernel_time).correct
