"""Numbers with units go through ``gpu_lessons._format`` (CONTRIBUTING, "Three modules serve
every layer"): no f-string in the package formats a number and writes its unit after it.

The check reads every module with ``ast`` and flags an f-string where a replacement field is
followed by a unit -- ``f"{t * 1e6:.1f} µs"``, ``f"{n:,} B"``, ``f"{x}GB/s"`` after a number
format -- or formats a number as a percentage (``f"{x:.1%}"``); ``_format`` itself is where
those live.  The fix is the helper: ``duration(t)``, ``binary_bytes(n)``, ``bandwidth(b)``,
``percent(f)``, ``si(x, "Hz")``, or a ``Readout`` row with its unit.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpu_lessons"

#: Unit symbols a number must not be followed by outside ``_format``.
UNITS = ("B", "kB", "KB", "KiB", "MB", "MiB", "GB", "GiB", "TB", "TiB", "B/s", "kB/s", "KB/s",
         "MB/s", "GB/s", "TB/s", "s", "ms", "µs", "us", "ns", "Hz", "kHz", "MHz", "GHz", "FLOP",
         "FLOPs", "GFLOP", "TFLOP", "FLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s",
         "FLOP/byte", "W", "%")
_UNIT = re.compile(r"(?P<space>\s?)(?P<unit>"
                   + "|".join(map(re.escape, sorted(UNITS, key=len, reverse=True)))
                   + r")(?![\w/])")
_NUMBER_SPEC = re.compile(r"[,_]|\.\d|[deEfFgGn%]$")

#: Where numbers may be formatted by hand: ``_format``, the one place they belong.
ALLOWED = ("gpu_lessons/_format.py",)


def _spec_text(field: ast.FormattedValue) -> str:
    spec = field.format_spec
    return "".join(v.value for v in spec.values if isinstance(v, ast.Constant)) if spec else ""


def unit_fstrings(source: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """``(line, unit)`` of every f-string in ``source`` that writes a number with a unit."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        for i, field in enumerate(parts):
            if not isinstance(field, ast.FormattedValue) or field.conversion != -1:
                continue
            spec = _spec_text(field)
            if spec.endswith("%"):
                found.append((node.lineno, "%"))
                continue
            after = parts[i + 1] if i + 1 < len(parts) else None
            if not (isinstance(after, ast.Constant) and isinstance(after.value, str)):
                continue
            m = _UNIT.match(after.value)
            # "{n} B" is a number and its unit; "{name}s" is a plural unless a number format
            # says the field is a number
            if m and (m["space"] or _NUMBER_SPEC.search(spec) or m["unit"] == "%"):
                found.append((node.lineno, m["unit"]))
    return found


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _allowed(rel: str) -> bool:
    return any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED)


@pytest.mark.parametrize(("source", "units"), [
    ('f"{x:.1f} GB/s"', ["GB/s"]),
    ('f"{t * 1e6:.0f} µs"', ["µs"]),
    ('f"{n:,} B per block"', ["B"]),
    ('f"{n} MiB"', ["MiB"]),
    ('f"{clock:,.0f}MHz"', ["MHz"]),
    ('f"{f:.1%} of peak"', ["%"]),
    ('f"{100 * f:.0f} %, then {t:g} s"', ["%", "s"]),
    ('f"ran {a}" f" in {t:.2f} ms"', ["ms"]),       # implicit concatenation is one f-string
    # not a number with a unit
    ('f"{name}s"', []),                             # a plural
    ('f"{n} sectors, {k} bytes"', []),              # a count of things
    ('f"{duration(t)} per kernel"', []),            # already through _format
    ('f"{x!r} s"', []),                             # a repr, in a message about a value
    ('"%.1f GB/s" % x', []),                        # not an f-string (not this test's job)
    ('f"{n:,} Blocks"', []),                        # a word that starts like a unit
])
def test_the_scan_finds_numbers_written_with_units(source, units):
    assert [u for _, u in unit_fstrings(source)] == units


def test_no_number_is_written_with_a_unit_outside_format():
    found = [f"{p.relative_to(ROOT)}:{line}: a number written with {unit!r}; use _format"
             for p in _modules() if not _allowed(p.relative_to(ROOT).as_posix())
             for line, unit in unit_fstrings(p.read_text(encoding="utf-8"), str(p))]
    assert not found, "\n".join(found)


def test_every_allowed_path_still_needs_its_place():
    """The allow-list only shrinks: a path with nothing left to move comes off it."""
    rels = [p.relative_to(ROOT).as_posix() for p in _modules()]
    for allowed in ALLOWED:
        if allowed == "gpu_lessons/_format.py":
            continue
        mine = [r for r in rels if r == allowed or (allowed.endswith("/") and r.startswith(allowed))]
        assert mine, f"{allowed} is allowed but no longer exists: strike it off ALLOWED"
        assert any(unit_fstrings((ROOT / r).read_text(encoding="utf-8")) for r in mine), (
            f"{allowed} writes no number with a unit any more: strike it off ALLOWED")
