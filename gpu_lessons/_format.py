"""Text helpers the models share for their ``__repr__`` and ``_repr_html_``: SI prefixes,
percentages and small HTML tables.  Formatting only: no model arithmetic lives here."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable

#: SI prefixes, largest first (BIPM, "The International System of Units", 9th ed., Table 7).
SI_PREFIXES = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"),
               (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str, digits: int = 3) -> str:
    """``digits`` significant figures with the largest SI prefix that keeps the number >= 1:
    ``si(4.8e12, "B/s")`` -> ``"4.8 TB/s"``, ``si(1.23e19, "FLOP")`` -> ``"12.3 EFLOP"``."""
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def duration(seconds: float, digits: int = 3) -> str:
    """A time with the unit that keeps the number >= 1: ``2.26e-4`` -> ``"226 µs"``,
    ``0.0217`` -> ``"21.7 ms"``, ``5e-8`` -> ``"50 ns"``."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds * 1e9:.{digits}g} ns"


def percent(fraction: float) -> str:
    """A fraction as a percentage with 3 significant figures: ``0.462`` -> ``"46.2 %"``,
    ``0.00378`` -> ``"0.378 %"`` (one fixed decimal would print that as 0.4 %)."""
    return f"{100 * fraction:.3g} %"


def ratio(value: float) -> str:
    """A dimensionless number without exponent notation: ``0.167``, ``61.3``, ``1,024``,
    ``∞``."""
    if math.isinf(value):
        return "∞"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def binary_bytes(nbytes: float, spec: str = ",.4g") -> str:
    """A byte count with a binary prefix, since memory sizes are powers of two:
    ``3 * 2**20`` -> ``"3 MiB"``, ``1536`` -> ``"1.5 KiB"``, ``100`` -> ``"100 B"``.
    ``spec`` formats the number in front of the prefix (``",.2f"``: ``"12.50 MiB"``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:{spec}} {unit}"
    return f"{nbytes:,.0f} B"


def html_table(caption: str, header: Iterable | None, rows: Iterable[Iterable], *,
               escape: bool = True) -> str:
    """A small HTML table for ``_repr_html_``: a caption, an optional header row, the rows.

    ``escape=False`` keeps markup the caller put in the cells on purpose (``<b>``); with the
    default every caption, header and cell is HTML-escaped.
    """
    def cell(value) -> str:
        return html.escape(str(value)) if escape else str(value)

    head = ("<tr>" + "".join(f"<th>{cell(h)}</th>" for h in header) + "</tr>"
            if header else "")
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><caption>{cell(caption)}</caption>{head}{body}</table>"
