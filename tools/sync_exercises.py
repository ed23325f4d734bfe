"""Write the question cells of the exercise and solution notebooks from the question registry.

    .venv/bin/python tools/sync_exercises.py          # rewrite what is out of date
    .venv/bin/python tools/sync_exercises.py --check  # only report (exit 1 when out of date)

Every exercise notebook has the same layout: an introduction (the chapter's title, the time
the set takes as the recorded walk-through states it in ``docs/measured/walkthrough.md``, how the
checks work, the tools loaded below), one code cell of imports, then for each question of
``gpu_lessons.questions.load(N)``, in order, three cells — the question (``question.markdown``:
heading, id and points, the prompt with the lesson's own numbers), the answer cell and the
check cell — then the "Done" cell with a link to the next exercise set, then whatever follows
it (puzzle cells).  This tool rewrites the introduction's first cell and import cell, the question cells
and the "Next" line of the Done cell, adds the answer and check cells of a new question (the stub from
``question.stub()``; a solution's answer has to be written by hand, and the tool says so), and
drops the cells of a question that no longer exists.  Answer cells that exist are kept as
they are.  ``gpu-lessons release`` writes each student's notebook by swapping the question
cells for the student's variants, so it needs the cells to be exactly ``question.markdown``
(``tests/test_exercises.py`` checks that they are).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from gpu_lessons.questions import CHAPTERS, load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from walkthrough import stated_minutes, time_line  # noqa: E402  (a sibling script)

FOLDERS = ("exercises", "solutions")

#: Each exercise set's title and the paragraph that says what its first cell loads.
INTRO = {
    1: ("CPU vs GPU",
        "The GPU catalog is loaded below as `gpu`: `gpu(\"h100\")` gives an H100 SXM5 with "
        "`.sms`, `.fp32_cores_per_sm`, `.boost_mhz`, `.bandwidth` (B/s) and more, each with its "
        "source in `.sources`."),
    2: ("Threads, warps and SMs",
        "Loaded below: the GPU catalog (`gpu`) and the compute-capability table "
        "(`compute_capability(\"9.0\")` has `.max_warps_per_sm`, `.max_threads_per_block`, …)."),
    3: ("The memory hierarchy",
        "Loaded below: the GPU catalog (`gpu`), the memory ladder (`memory_ladder(\"h100\")` "
        "prints every level with its size and bandwidth) and the cache simulator (`Cache`)."),
    4: ("Cache lines, sectors, coalescing and banks",
        "Loaded below: the memory-transaction model (`global_load`, `shared_load` and the "
        "pattern helpers `strided`, `aos_field`, `matrix_row`, `tile_column`) to test your "
        "reasoning on; the function answers should use the rules themselves."),
    5: ("Roofline",
        "Loaded below: the GPU catalog (`gpu(\"h100\").peak_flops(\"fp16\")` in FLOP/s, "
        "`.bandwidth` in B/s — dense peaks only) and the kernel cost models in `costs` to test "
        "your reasoning on."),
    6: ("Occupancy and latency hiding",
        "Loaded below: the compute-capability table (`compute_capability(\"9.0\")`: fields "
        "`max_warps_per_sm`, `max_blocks_per_sm`, `max_sm_shared`, `shared_unit`, "
        "`reserved_shared_per_block`, …), the occupancy calculator `occupancy(...)` (its "
        "`limiters` name the binding limits) and the latency-hiding model in `latency`."),
    7: ("Bottlenecks and the optimisation playbook",
        "Loaded below: `costs` (FLOPs and bytes of kernels) and the GPU catalog (`gpu`). The "
        "60 % rule of notebook 07: a unit at 60 % of its peak or more is the bottleneck; when "
        "every unit is below 60 %, the kernel is latency-bound."),
    8: ("System level",
        "Loaded below: `system` (launch overhead, CUDA graphs, all-reduce, overlap timelines; "
        "`system.launch_figures(\"H200\")` holds the measured launch costs) and `allocator` "
        "(caching and paged allocators on alloc/free traces)."),
    9: ("MFU",
        "Conventions, as in the lesson: a multiply-add is 2 FLOPs; only matmuls count; the "
        "causal mask is not discounted; backward ≈ 2 × forward; MFU divides by the **dense** "
        "peak of the precision the model trains in (`gpu(name).peak_flops(precision)`, "
        "loaded below)."),
    10: ("Capstone: more mystery kernels",
         "These questions bring kernels the notebook does not show. Work as in the notebook: "
         "count, place on the roofline, check the resources, then decide with the 60 % rule (a "
         "unit at 60 % of its peak or more is the bottleneck; all below 60 % means "
         "latency-bound). Loaded below: `memory` (sectors), `occupancy`, `latency`, `system` "
         "and the GPU catalog (`gpu`). The H200: 132 SMs, 66.9 TFLOP/s FP32, 4.8 TB/s HBM3e."),
}

#: The first code cell of each exercise set: what the introduction says is loaded.
IMPORTS = {
    1: "from gpu_lessons.checks import check\nfrom gpu_lessons.hardware import gpu",
    2: "from gpu_lessons.checks import check\nfrom gpu_lessons.hardware import gpu\n"
       "from gpu_lessons.occupancy import compute_capability",
    3: "from gpu_lessons.cache import Cache\nfrom gpu_lessons.checks import check\n"
       "from gpu_lessons.hardware import gpu\nfrom gpu_lessons.ladder import memory_ladder",
    4: "from gpu_lessons.checks import check\nfrom gpu_lessons.memory import aos_field, "
       "global_load, matrix_row, shared_load, strided, tile_column",
    5: "from gpu_lessons import costs\nfrom gpu_lessons.checks import check\n"
       "from gpu_lessons.hardware import gpu",
    6: "from gpu_lessons import latency\nfrom gpu_lessons.checks import check\n"
       "from gpu_lessons.occupancy import compute_capability, occupancy",
    7: "from gpu_lessons import costs\nfrom gpu_lessons.checks import check\n"
       "from gpu_lessons.hardware import gpu",
    8: "from gpu_lessons import allocator, system\nfrom gpu_lessons.checks import check",
    9: "from gpu_lessons.checks import check\nfrom gpu_lessons.hardware import gpu",
    10: "from gpu_lessons import latency, memory, occupancy, system\n"
        "from gpu_lessons.checks import check\nfrom gpu_lessons.hardware import gpu",
}

HOW = """These exercises go with the lesson notebook `notebooks/{lesson}`. Each question has
three cells: the question, a cell for your answer, and a **check** cell.

1. Replace the `...` (or the body of the function that raises `NotImplementedError`) with
   your answer. Compute it in the cell — the course's catalog and models are there to use —
   rather than typing a number you found elsewhere.
2. Run the check cell below it. It prints **✓** and the points when the answer is right. A
   wrong answer shows one red line that says *what* looks wrong (a factor of 2, the wrong GPU,
   the wrong units …), never the answer itself. Function answers are tried on many inputs,
   and the first one that fails is shown.
3. A question you have not answered yet prints "not attempted" and does not stop the
   notebook.

Units matter: each question says which ones it wants."""

_CHECK = re.compile(r"""^\s*check\(\s*["'](\d\d\.[a-z0-9_]+)["']\s*,\s*([A-Za-z_]\w*)\s*\)\s*$""")


def notebook_path(folder: str, chapter: int) -> Path:
    (path,) = sorted((ROOT / folder).glob(f"{chapter:02d}_*.ipynb"))
    return path


def intro(chapter: int) -> str:
    title, tools = INTRO[chapter]
    lesson = notebook_path("exercises", chapter).name
    minutes = stated_minutes()[f"exercises/{Path(lesson).stem}"]
    return (f"# Exercises {chapter:02d} · {title}\n\n{time_line(minutes)}\n\n"
            f"{HOW.format(lesson=lesson)}\n\n{tools}")


def next_line(chapter: int) -> str:
    if chapter == CHAPTERS[-1]:
        return "That is the end of the course's exercises."
    nxt = chapter + 1
    return (f"Next: [Exercises {nxt:02d} · {INTRO[nxt][0]}]"
            f"({notebook_path('exercises', nxt).name}).")


def _check_of(cell) -> tuple[str, str] | None:
    if cell.cell_type != "code":
        return None
    match = _CHECK.match(cell.source)
    return (match.group(1), match.group(2)) if match else None


def sync(folder: str, chapter: int) -> tuple[object, list[str]]:
    """The notebook with its question cells, intro and Next line brought up to date, and the
    list of notes for the maintainer (solutions still to write)."""
    path = notebook_path(folder, chapter)
    nb = nbformat.read(path, as_version=4)
    checks = [(i, *c) for i, cell in enumerate(nb.cells) if (c := _check_of(cell))]
    if not checks:
        raise SystemExit(f"{path}: no check cells found")
    first, last = checks[0][0] - 2, checks[-1][0]
    head, tail = nb.cells[:first], nb.cells[last + 1:]
    answers = {qid: nb.cells[i - 1] for i, qid, _ in checks}
    old_questions = {qid: nb.cells[i - 2] for i, qid, _ in checks}
    old_checks = {qid: nb.cells[i] for i, qid, _ in checks}
    notes = []
    body = []
    for number, q in enumerate(load(chapter), start=1):
        stub, call = q.stub().split("\n\n", 1)
        question = old_questions.get(q.id) or nbformat.v4.new_markdown_cell()
        question.source = q.markdown(number)
        answer = answers.get(q.id)
        if answer is None:
            answer = nbformat.v4.new_code_cell(stub.rstrip("\n"))
            if folder == "solutions":
                notes.append(f"{path.name}: write the solution of {q.id} (a stub was added)")
        check = old_checks.get(q.id) or nbformat.v4.new_code_cell()
        check.source = call
        body += [question, answer, check]
    markdown = [c for c in head if c.cell_type == "markdown"]
    if markdown:
        markdown[0].source = intro(chapter)
    code = [c for c in head if c.cell_type == "code"]
    if code:
        code[0].source = IMPORTS[chapter]
    done = next((c for c in tail if c.cell_type == "markdown"
                 and c.source.lstrip().startswith("## Done")), None)
    if done is not None:
        text = re.sub(r"\s*(Next:.*|That is the end of the course's exercises\.)\s*$", "",
                      done.source, flags=re.S)
        done.source = f"{text}\n{next_line(chapter)}" if text.endswith("\n") else \
            f"{text} {next_line(chapter)}"
    nb.cells = head + body + tail
    return nb, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report only; exit 1 if stale")
    args = parser.parse_args()
    stale = []
    for chapter in CHAPTERS:
        for folder in FOLDERS:
            path = notebook_path(folder, chapter)
            nb, notes = sync(folder, chapter)
            text = nbformat.writes(nb, version=4, indent=1) + "\n"
            for note in notes:
                print(note)
            if text != path.read_text(encoding="utf-8"):
                stale.append(path)
                if not args.check:
                    path.write_text(text, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    for path in stale:
        print(f"{verb}: {path.relative_to(ROOT)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
