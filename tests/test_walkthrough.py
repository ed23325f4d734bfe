"""The times the course states come from the recorded walk-through (docs/measured/walkthrough.md,
made by tools/walkthrough.py): each lesson's header, each exercise set's header (in exercises/ and
solutions/) and the README's notebook table say what the table says, the table's arithmetic
holds, and it was made from the lessons as they are now."""

import importlib.util
import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "measured" / "walkthrough.md"


def _tool(name):
    sys.path.insert(0, str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


WALK = _tool("walkthrough")
WORDS = _tool("word_count")


def _rows():
    rows = {}
    for line in RECORD.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| ((?:notebooks|exercises)/\S+) \| (.+) \|$", line)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            words, reading, cells_n, run_s, pred, expl, quest, doing, total, stated = cells
            rows[m.group(1)] = dict(
                words=int(words.replace(",", "")), reading=float(reading), cells=int(cells_n),
                run_s=float(run_s), predictions=int(pred), explorers=int(expl),
                questions=int(quest), doing=float(doing), total=float(total),
                stated=int(stated.split()[0]))
    return rows


ROWS = _rows()
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_lesson_and_exercise_set_was_walked():
    names = {f"notebooks/{p.stem}" for p in LESSONS}
    names |= {f"exercises/{p.stem}" for p in (ROOT / "exercises").glob("*.ipynb")}
    assert names == set(ROWS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_arithmetic_of_each_row(name):
    r = ROWS[name]
    assert r["reading"] == pytest.approx(r["words"] / WALK.READING_WPM, abs=0.05)
    doing = (r["cells"] * WALK.CELL_MIN + r["predictions"] * WALK.PREDICTION_MIN
             + r["explorers"] * WALK.EXPLORER_MIN + r["questions"] * WALK.QUESTION_MIN)
    assert r["doing"] == pytest.approx(doing, abs=0.05)
    assert r["total"] == pytest.approx(r["words"] / WALK.READING_WPM + r["run_s"] / 60 + doing,
                                       abs=0.1)
    assert r["stated"] == max(WALK.ROUND_MIN,
                              WALK.ROUND_MIN * math.ceil(r["total"] / WALK.ROUND_MIN - 1e-9))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_lesson_header_states_the_walked_time(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    header = "".join(nb["cells"][0]["source"])
    stated = ROWS[f"notebooks/{path.stem}"]["stated"]
    assert f"**Time:** about {stated} minutes." in header


EXERCISE_SETS = sorted((ROOT / "exercises").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", EXERCISE_SETS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_exercise_header_states_the_walked_time(path):
    """Exercise and solution notebooks share their header: the exercise set's walked time."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    header = "".join(nb["cells"][0]["source"])
    stated = ROWS[f"exercises/{path.stem}"]["stated"]
    assert header.startswith("# Exercises ")
    assert header.split("\n\n")[1] == f"**Time:** about {stated} minutes."


def test_the_tools_read_the_same_table():
    """sync_exercises.py writes the headers from the record through walkthrough.stated_minutes,
    which reads the same "stated" column as this test."""
    assert WALK.stated_minutes() == {name: r["stated"] for name, r in ROWS.items()}


def test_apply_with_the_recorded_table_changes_nothing(tmp_path, monkeypatch):
    """--apply, given walks that reproduce the record, rewrites no header and no README row:
    what it writes is what the tests above expect."""
    for folder in ("notebooks", "exercises", "solutions"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    monkeypatch.setattr(WALK, "ROOT", tmp_path)
    walks = [WALK.Walk(name, r["words"], r["cells"], r["run_s"], r["predictions"], r["explorers"],
                       r["questions"]) for name, r in ROWS.items()]
    assert all(w.stated_min == ROWS[w.notebook]["stated"] for w in walks)
    WALK.apply(walks)
    for path in [*LESSONS, *EXERCISE_SETS, ROOT / "README.md"]:
        copy = tmp_path / path.relative_to(ROOT)
        assert copy.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_walk_was_made_from_the_lessons_as_they_are(path):
    """A lesson whose prose changed by more than 15 % since the walk needs a new walk."""
    recorded = ROWS[f"notebooks/{path.stem}"]["words"]
    assert WORDS.notebook_words(path).visible == pytest.approx(recorded, rel=0.15)


def test_the_readme_table_states_the_walked_times():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in LESSONS:
        lesson = ROWS[f"notebooks/{path.stem}"]["stated"]
        ex = ROWS.get(f"exercises/{path.stem}")
        cell = f"{lesson} min" + (f" + {ex['stated']} min" if ex else "")
        row = next(line for line in readme.splitlines() if f"| `{path.stem}` |" in line)
        assert row.rstrip().endswith(f"| {cell} |"), row


WORD_RECORD = ROOT / "docs" / "measured" / "word_count.md"


def _word_rows():
    """``{notebook: (before visible, before total, after visible, after collapsed)}`` from
    docs/measured/word_count.md."""
    rows = {}
    for line in WORD_RECORD.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| (\d\d_\w+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|", line)
        if m:
            rows[m.group(1)] = tuple(int(g.replace(",", "")) for g in m.groups()[1:])
    return rows


def test_the_word_count_record_is_the_lessons_as_they_are():
    """docs/measured/word_count.md counts the lessons as committed (re-run
    ``tools/word_count.py --before c6c2ad4 --md docs/measured/word_count.md`` after editing
    prose), and the visible prose is at least 25 % shorter than before the editorial pass."""
    rows = _word_rows()
    assert set(rows) == {p.stem for p in LESSONS}
    for path in LESSONS:
        now = WORDS.notebook_words(path)
        _, _, visible, collapsed = rows[path.stem]
        assert now.visible == pytest.approx(visible, rel=0.02, abs=10), path.stem
        assert now.collapsed == pytest.approx(collapsed, rel=0.02, abs=10), path.stem
    before = sum(r[0] for r in rows.values())
    after = sum(WORDS.notebook_words(p).visible for p in LESSONS)
    assert after <= 0.75 * before, f"visible prose {after:,} words against {before:,} before"
