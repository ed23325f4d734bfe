"""Write the kernel-puzzle cells at the end of the exercise and solution notebooks 02–08.

    python tools/puzzle_cells.py            # rewrite the puzzle cells of every notebook
    python tools/puzzle_cells.py --check    # exit 1 if a notebook differs from what it would write

Each puzzle gets a statement (from the puzzle's own definition in ``gpu_lessons.puzzles``), a
kernel cell (the stub in ``exercises/``, the worked kernel from ``solutions/puzzle_kernels.py``
in ``solutions/``), a check cell, for some puzzles a ``show`` cell, and an optional GPU cell
(``puzzles.run_on_gpu``: the kernel shown as CUDA C, then run and timed on the learner's GPU).  Every
cell it writes carries ``{"gpu_lessons": {"puzzle": <id or "intro">, "role": ...}}`` in its
metadata; the tool replaces exactly those cells and leaves every other cell alone.  The block
goes before the notebook's closing "## Done" cell (or at the end).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_lessons import puzzles  # noqa: E402
from gpu_lessons.puzzles._section import NOTEBOOKS  # noqa: E402

KERNELS = ROOT / "solutions" / "puzzle_kernels.py"

#: Puzzles whose picture is worth a cell of its own (the ones about a pattern you can see).
SHOW = ("split_work", "stencil", "aos_to_soa", "transpose_naive", "transpose", "matmul_tiled",
        "reduce_tree", "reduce", "reduce_shuffle")

INTRO = """\
## Kernel puzzles

Now write kernels. Each puzzle gives a spec (the output, as NumPy computes it), the kernel's
signature and its launch; you write the kernel from one thread's point of view in the SIMT
simulator, as lesson 02's leaky ReLU does (`t.thread_idx`, `t.return_if`, `t.if_`). Everything
else a kernel may use — shared memory (`t.shared`), barriers (`t.sync`), per-lane variables
(`t.local`), loops (`t.while_`), atomics, warp shuffles — is listed with its CUDA C counterpart in
`docs/kernel_language.md`, and explained in `help(gpu_lessons.simt)`. Kernels are checked against
that language first: the same rules `gpu_lessons.kernels.to_cuda` needs to turn them into CUDA C.

The check cell prints **✓** when the kernel is *correct* — the spec's output on several random
inputs, including sizes that leave blocks part-empty, with no race and no read of shared memory
nothing wrote — and *efficient*: within every budget listed, each the best a sound kernel
reaches, measured by the simulator. (Memory moves in 32-byte *sectors*: a warp's load of 32
consecutive 4-byte values costs 4 sectors, the fewest it can, while lanes that read far apart
cost a sector each, up to 32; lesson 04 measures it.) Otherwise one red line says what failed
first, the line of your kernel it points at, and the lesson section that explains it. An
untouched stub prints "not attempted". `puzzles.show(...)` draws your kernel: one warp's lanes
over time, and the memory it touched."""


def load_kernels():
    spec = importlib.util.spec_from_file_location("puzzle_kernels", KERNELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_source(p) -> str:
    """The worked kernel's cell: its choice constants, then the function, as written in
    solutions/puzzle_kernels.py."""
    text = KERNELS.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    parts = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.lower() in p.choices):
            parts.append(lines[node.lineno - 1] + "\n\n\n")
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == p.kernel_name)
    parts.append("\n".join(lines[fn.lineno - 1:fn.end_lineno]) + "\n")
    return "".join(parts)


def _cell(kind: str, source: str, puzzle: str, role: str):
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = make(source.rstrip("\n"))
    cell.metadata["gpu_lessons"] = {"puzzle": puzzle, "role": role}
    cell["id"] = f"puzzle-{puzzle}-{role}"  # stable ids: rewriting leaves git diffs small
    return cell


def puzzle_cells(lesson: int, solution: bool) -> list:
    """The cells the tool writes into lesson ``lesson``'s exercise (or solution) notebook."""
    # bfloat16 kernels name their dtype through ml_dtypes (NumPy has none)
    bf16 = "import ml_dtypes\n" if any("ml_dtypes" in p.goal for p in puzzles.puzzles(lesson)) \
        else ""
    cells = [_cell("markdown", INTRO, "intro", "statement"),
             _cell("code", f"{bf16}import numpy as np\n\nimport gpu_lessons\n"
                           "from gpu_lessons import puzzles\n\n"
                           "_ = gpu_lessons.setup(report=False)  # loads bokeh, so puzzles.show can draw",
                   "intro", "setup")]
    for k, p in enumerate(puzzles.puzzles(lesson), start=1):
        args = "".join(f", {name}={name.upper()}" for name in p.choices)
        cells.append(_cell("markdown", f"### Puzzle {k} · `{p.id}` — {p.title}\n\n"
                                       f"{p.describe()}", p.id, "statement"))
        cells.append(_cell("code", solution_source(p) if solution else p.stub(), p.id, "kernel"))
        cells.append(_cell("code", f'puzzles.check("{p.id}", {p.kernel_name}{args})', p.id,
                           "check"))
        if p.id in SHOW:
            cells.append(_cell("code", f'puzzles.show("{p.id}", {p.kernel_name}{args})', p.id,
                               "show"))
        # every puzzle: the learner's own kernel in CUDA C on a GPU, beside the models
        cells.append(_cell("code", "# Your kernel as CUDA C; optional, with an NVIDIA GPU: "
                                   "run and timed at a realistic size\n"
                                   f'puzzles.run_on_gpu("{p.id}", {p.kernel_name}{args})', p.id,
                           "gpu"))
    return cells


def is_puzzle_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("gpu_lessons", {})
    return isinstance(meta, dict) and "puzzle" in meta


def rewrite(nb, lesson: int, solution: bool):
    """``nb`` with its puzzle cells replaced by :func:`puzzle_cells`."""
    kept = [c for c in nb.cells if not is_puzzle_cell(c)]
    at = len(kept)
    for i, c in enumerate(kept):
        if c.cell_type == "markdown" and c.source.lstrip().startswith("## Done"):
            at = i
    nb.cells = kept[:at] + puzzle_cells(lesson, solution) + kept[at:]
    return nb


def _strip(cells):
    return [(c.cell_type, c.source, c.metadata.get("gpu_lessons")) for c in cells]


def main(argv=None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    differ = []
    for lesson, name in NOTEBOOKS.items():
        for folder in ("exercises", "solutions"):
            path = ROOT / folder / name
            nb = nbformat.read(path, as_version=4)
            before = _strip(nb.cells)
            rewrite(nb, lesson, folder == "solutions")
            if _strip(nb.cells) == before:
                continue
            differ.append(f"{folder}/{name}")
            if not check:
                nbformat.write(nb, path)
    if differ:
        print(("differ from the puzzles: " if check else "rewrote: ") + ", ".join(differ))
    return 1 if (check and differ) else 0


if __name__ == "__main__":
    raise SystemExit(main())
