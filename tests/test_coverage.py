"""docs/coverage.md stays true: every notebook and heading it names exists."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _headings(notebook: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"])
            found += [line.lstrip("#").strip() for line in src.splitlines() if line.startswith("#")]
    return found


def _rows():
    text = (ROOT / "docs" / "coverage.md").read_text(encoding="utf-8")
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] and not set(cells[1]) <= {"-"} and cells[1] != "notebook":
            yield cells


def test_every_row_points_at_a_real_heading():
    missing = []
    rows = list(_rows())
    assert len(rows) >= 40
    for section, notebook, headings in rows:
        names = _headings(notebook)
        for heading in headings.split(";"):
            heading = re.sub(r"\s*\([^)]*\)\s*$", "", heading).strip()  # "(the CPU)" notes
            if not any(heading in name for name in names):
                missing.append(f"{notebook}: {heading!r} (for {section[:40]})")
    assert not missing, "\n".join(missing)


def test_every_lesson_is_in_the_table():
    named = {notebook for _, notebook, _ in _rows()}
    lessons = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} - {"00_start_here"}
    assert lessons <= named, lessons - named
