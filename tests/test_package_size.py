"""The package stays small enough to read: no module over 1,000 lines and the whole package
under the line budget ``CONTRIBUTING.md`` states (every line of every ``.py`` file counted,
blank lines and docstrings included, as ``wc -l`` counts them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpu_lessons"

#: The longest a module may grow: past this, split it by job.
MODULE_LINES = 1000


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _budget() -> int:
    """The budget as ``CONTRIBUTING.md`` states it ("a line budget of 41,500 lines")."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    found = re.search(r"line\s+budget\s+of\s+([\d,]+)\s+lines", text)
    assert found, "CONTRIBUTING.md states no line budget"
    return int(found.group(1).replace(",", ""))


def test_no_module_is_over_a_thousand_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := _lines(p)) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def test_the_package_is_within_its_line_budget():
    total = sum(_lines(p) for p in PACKAGE.rglob("*.py"))
    assert total <= _budget(), (f"gpu_lessons/ has {total:,} lines, over the budget of "
                                f"{_budget():,} in CONTRIBUTING.md")


def test_the_reader_counts_lines_as_wc_does(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\n\n# c\n")
    assert _lines(f) == 3
