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
