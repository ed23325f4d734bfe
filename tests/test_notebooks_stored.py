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
