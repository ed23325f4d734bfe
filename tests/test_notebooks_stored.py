"""Notebooks are stored clean: valid JSON, no outputs, no execution counts, in course order."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("notebooks", "exercises", "solutions")
ALL = sorted(p for f in FOLDERS for p in (ROOT / f).glob("*.ipynb"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_has_no_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"cell {i} has stored outputs"
            assert cell.get("execution_count") is None, f"cell {i} has an execution count"


def test_lesson_notebooks_are_numbered_in_order():
    names = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    numbers = [int(re.match(r"(\d\d)_", n).group(1)) for n in names]
    assert names and names[0] == "00_start_here.ipynb"
    assert numbers == list(range(len(numbers))), names


def test_exercises_and_solutions_pair_up():
    ex = {p.name for p in (ROOT / "exercises").glob("*.ipynb")}
    sol = {p.name for p in (ROOT / "solutions").glob("*.ipynb")}
    assert ex == sol


@pytest.mark.parametrize("lesson", ["02", "03", "04", "05", "06", "07", "08"])
def test_every_puzzle_lesson_runs_a_worked_kernel_in_the_simulator(lesson):
    """Lessons 02-08 end with puzzles; each first builds and runs a kernel of their kind."""
    (path,) = (ROOT / "notebooks").glob(f"{lesson}_*.ipynb")
    cells = [c for c in json.loads(path.read_text("utf-8"))["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    kernels = [s for s in sources if re.search(r"^def \w+\(t, ", s, re.M)]
    assert kernels, f"{path.name} defines no kernel"
    names = {m for s in kernels for m in re.findall(r"^def (\w+)\(t, ", s, re.M)}
    assert any(re.search(rf"\brun\((?:\w+\.)?(?:{'|'.join(names)})\b", s) for s in sources), \
        f"{path.name} never runs its kernel"


# -- figures per lesson ---------------------------------------------------------------------------

def _view_drawers() -> set[str]:
    """Names in ``gpu_lessons.views`` that draw: every class that is an Explorer or a Picture,
    and every function with a ``return`` of a call to one of them (found to a fixed point, so
    ``reduction_tree_example`` -> ``scan_tree`` -> ``Drawing`` counts)."""
    import ast
    import importlib

    from gpu_lessons.views._base import Explorer, Picture

    trees = {p.stem: ast.parse(p.read_text("utf-8"))
             for p in (ROOT / "gpu_lessons" / "views").glob("*.py")}
    drawers = set()
    for stem, tree in trees.items():
        module = importlib.import_module(f"gpu_lessons.views.{stem}")
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                obj = getattr(module, node.name)
                if issubclass(obj, (Explorer, Picture)):
                    drawers.add(node.name)
    functions = [n for t in trees.values() for n in t.body if isinstance(n, ast.FunctionDef)]

    def called(node) -> str | None:
        f = node.func if isinstance(node, ast.Call) else None
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None

    grown = True
    while grown:
        before = len(drawers)
        drawers |= {f.name for f in functions
                    if any(isinstance(r, ast.Return) and called(r.value) in drawers
                           for r in ast.walk(f))}
        grown = len(drawers) > before
    return drawers


def _figure_cells(path: Path, drawers: set[str]) -> list[int]:
    """Indices of the code cells that call a drawing imported from ``gpu_lessons.views``."""
    import ast

    cells = json.loads(path.read_text("utf-8"))["cells"]
    imported, found = set(), []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "gpu_lessons.views"):
                imported |= {a.asname or a.name for a in node.names if a.name in drawers}
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in imported
               for n in ast.walk(tree)):
            found.append(i)
    return found


def test_the_drawings_are_the_registered_explorers_and_figures(tmp_path):
    """The reading of the views is not vacuous: every registered explorer and figure draws,
    a helper that only computes (``tree_edges``, ``lane_ranges``) does not count, and a
    notebook's cells are counted by what they call."""
    from gpu_lessons.views import EXPLORERS
    from gpu_lessons.views.figures import FIGURES

    drawers = _view_drawers()
    registered = {t.split(":")[1] for t in (*EXPLORERS.values(), *FIGURES.values())}
    assert registered <= drawers, registered - drawers
    assert {"compiled_explorer", "scan_tree", "KernelPicture"} <= drawers
    assert not {"tree_edges", "lane_ranges", "slider", "as_measurement"} & drawers
    sources = ["from gpu_lessons.views.figures import tile_reuse, tree_edges",
               "tree_edges(result, 'sdata')",            # computes edges, draws nothing
               "tile_reuse()", "# tile_reuse() in a comment", "x = 1"]
    cells = [{"cell_type": "code", "source": s} for s in sources]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells}), "utf-8")
    assert _figure_cells(tmp_path / "nb.ipynb", drawers) == [2]


@pytest.mark.parametrize("lesson", [f"{n:02d}" for n in range(1, 10)])
def test_every_lesson_shows_at_least_two_figures(lesson):
    """Lessons 01-09 each show two or more explorers or static figures of the package."""
    (path,) = (ROOT / "notebooks").glob(f"{lesson}_*.ipynb")
    cells = _figure_cells(path, _view_drawers())
    assert len(cells) >= 2, f"{path.name} shows {len(cells)} package figure(s), in cells {cells}"
