"""The one place numbers get their units: every ``__repr__``, ``_repr_html_`` and explorer
readout formats through these helpers, so the course prints one style everywhere.

* times: :func:`duration` (``226 µs``, ``21.7 ms``), 3 significant figures;
* rates: :func:`flop_rate` (``989.4 TFLOP/s``, as datasheets quote peaks) and
  :func:`bandwidth` (``3,350 GB/s``, ``55.2 GB/s``), decimal prefixes as datasheets use;
* sizes: :func:`binary_bytes` (``48 KiB``, ``12.5 MiB``) since memory comes in powers of two,
  and :func:`memory_size` for a GPU's DRAM, which vendors quote in decimal GB;
* :func:`intensity` for FLOP/byte, :func:`si` for any other unit with an SI prefix,
  :func:`percent` (``46.2 %``, a space before the sign as the SI brochure writes it),
  :func:`tolerance` for a relative tolerance and :func:`ratio` for dimensionless numbers;
* :func:`exact_bytes` (``49,152 B``) where arithmetic is followed to the byte, :func:`fixed`
  (``1,600.0 µs``) where measured and modelled values compare at fixed decimals;
* :func:`html_table` for the small tables notebooks show, :func:`text_table` for the same
  table in a ``__repr__``, and :class:`Table`: a result of several columns declares them once;
* :class:`Readout`: a result declares its rows once (label, value, unit) and gets its
  ``__repr__``, ``_repr_html_`` and Markdown from them; :func:`quantity` formats one value by
  its unit.

Formatting only: no model arithmetic lives here."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass

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
    ``0.0217`` -> ``"21.7 ms"``, ``5e-8`` -> ``"50 ns"``; whole seconds from 1,000 s up
    (``"1,800 s"``, never ``"1.8e+03 s"``)."""
    if abs(seconds) >= 1000:
        return f"{seconds:,.0f} s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds * 1e9:.{digits}g} ns"


def percent(fraction: float, *, signed: bool = False) -> str:
    """A fraction as a percentage with 3 significant figures: ``0.462`` -> ``"46.2 %"``,
    ``0.00378`` -> ``"0.378 %"`` (one fixed decimal would print that as 0.4 %);
    ``signed=True`` shows the sign of a change: ``0.031`` -> ``"+3.1 %"``."""
    value = 100 * fraction
    if abs(value) < 5e-4:       # rounding noise (1e-14 %) is zero, not "3.33e-14 %"
        return "0 %"
    return f"{value:{'+' if signed else ''}.3g} %"


def tolerance(rtol: float) -> str:
    """A relative tolerance as a percentage, 3 significant figures and never rounded to zero
    (a tolerance is not noise): ``0.005`` -> ``"0.5 %"``, ``1e-9`` -> ``"1e-07 %"``."""
    return f"{100 * rtol:.3g} %"


def ratio(value: float) -> str:
    """A dimensionless number without exponent notation: ``0.167``, ``61.3``, ``1,024``,
    ``∞``."""
    if math.isinf(value):
        return "∞"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def flop_rate(flops_per_s: float) -> str:
    """FLOP/s as datasheets quote GPU peaks: TFLOP/s with one decimal from 1 TFLOP/s up
    (``989.4 TFLOP/s``, ``1,978.9 TFLOP/s``), an SI prefix and 4 significant figures below
    (``312.5 GFLOP/s``)."""
    if abs(flops_per_s) >= 1e12:
        return f"{flops_per_s / 1e12:,.1f} TFLOP/s"
    return si(flops_per_s, "FLOP/s", 4)


def bandwidth(bytes_per_s: float) -> str:
    """Bytes/s in decimal GB/s, as datasheets quote DRAM and links: ``3,350 GB/s``,
    ``55.2 GB/s``, ``0.5 GB/s`` (digits as :func:`ratio`)."""
    return f"{ratio(bytes_per_s / 1e9)} GB/s"


def intensity(flop_per_byte: float) -> str:
    """Arithmetic intensity, digits as :func:`ratio`: ``0.25 FLOP/byte``, ``2,731 FLOP/byte``
    (no SI prefix: a roofline's axis reads in FLOP/byte)."""
    return f"{ratio(flop_per_byte)} FLOP/byte"


def memory_size(nbytes: float) -> str:
    """A GPU memory's size: decimal GB from 1 GB up, as vendors quote DRAM capacity
    (``141 GB``), binary prefixes below, for caches, shared memory and register files
    (``50 MiB``, ``256 KiB``)."""
    if abs(nbytes) >= 1e9:
        return f"{nbytes / 1e9:,.4g} GB"
    return binary_bytes(nbytes)


def fixed(value: float, unit: str, decimals: int = 1) -> str:
    """A measured quantity to fixed decimals in the unit it was measured in, so measured and
    modelled values line up digit for digit: ``fixed(1600, "µs")`` -> ``"1,600.0 µs"``,
    ``fixed(123.456, "GB/s", 2)`` -> ``"123.46 GB/s"``."""
    return f"{value:,.{decimals}f} {unit}"


def exact_bytes(nbytes: int) -> str:
    """A byte count to the byte, for arithmetic a reader follows step by step (an occupancy
    limit's rounding): ``49152`` -> ``"49,152 B"``; :func:`binary_bytes` rounds to a prefix."""
    return f"{nbytes:,} B"


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


def text_table(header: Iterable | None, rows: Iterable[Iterable], *, align: str = "left") -> str:
    """The same table as plain text for ``__repr__``: each column padded to its widest cell
    (``align="right"`` pads on the left; ``"numbers"``: the first column to the left, the rest
    to the right), two spaces between columns, no trailing blanks."""
    table = [[str(c) for c in r] for r in ([header] if header else []) + [list(r) for r in rows]]
    widths = [max(len(r[i]) for r in table if i < len(r))
              for i in range(max((len(r) for r in table), default=0))]

    def pad(i, c):
        left = align == "left" or (align == "numbers" and i == 0)
        return c.ljust(widths[i]) if left else c.rjust(widths[i])

    return "\n".join("  ".join(pad(i, c) for i, c in enumerate(r)).rstrip() for r in table)


class Table:
    """A result that is a table of several columns, declared once: a subclass defines
    :meth:`table` (caption, header, rows of text) and gets its ``__repr__`` (the caption over
    :func:`text_table`) and ``_repr_html_`` (:func:`html_table`) from it."""

    def table(self) -> tuple[str, Iterable | None, list]:
        raise NotImplementedError(f"{type(self).__name__} declares no table")

    def __repr__(self) -> str:
        caption, header, rows = self.table()
        body = text_table(header, rows, align="numbers")
        return f"{caption}\n{body}" if body else caption

    def _repr_html_(self) -> str:
        return html_table(*self.table())


# -- one readout for every result ---------------------------------------------------------------

def _plain(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return ratio(value)
    return str(value)


#: How each unit is written: values in base units (seconds, bytes, bytes/s, FLOP/s, a fraction
#: for ``"%"``); any other unit gets an SI prefix (:func:`si`), no unit a plain number.
UNITS = {"s": duration, "B": binary_bytes, "B/s": bandwidth, "FLOP/s": flop_rate,
         "FLOP/byte": intensity, "%": percent, "": _plain}


def quantity(value, unit: str = "") -> str:
    """``value`` written with ``unit`` as the course writes it: ``quantity(2.26e-4, "s")`` ->
    ``"226 µs"``, ``quantity(160, "B")`` -> ``"160 B"``, ``quantity(0.8, "%")`` -> ``"80 %"``,
    ``quantity(3, "")`` -> ``"3"``; text is kept as it is."""
    if isinstance(value, str):
        return value
    if unit in UNITS:
        return UNITS[unit](value)
    return si(value, unit)


@dataclass(frozen=True)
class Row:
    """One line of a readout: what it is, its value (in the unit's base: seconds, bytes) and
    the unit (a key of :data:`UNITS` or any SI unit; ``""`` for a count or text)."""

    label: str
    value: object
    unit: str = ""

    @property
    def text(self) -> str:
        return quantity(self.value, self.unit)


class Readout:
    """A result that declares its rows once and gets every way of showing them.

    A subclass (a frozen dataclass with ``repr=False``) defines :meth:`readout_rows` (and
    :meth:`readout_title` where the class name is not the title); ``repr`` is
    ``Title: label value, ...``, ``_repr_html_`` a two-column table and :meth:`markdown` a
    Markdown table, all from the same rows.
    """

    def readout_title(self) -> str:
        return type(self).__name__

    def readout_rows(self) -> tuple[Row, ...]:
        raise NotImplementedError(f"{type(self).__name__} declares no readout rows")

    def __repr__(self) -> str:
        rows = ", ".join(f"{r.label} {r.text}" for r in self.readout_rows())
        return f"{self.readout_title()}: {rows}"

    def _repr_html_(self) -> str:
        return html_table(self.readout_title(), None,
                          [(r.label, r.text) for r in self.readout_rows()])

    def markdown(self) -> str:
        """The rows as a Markdown table under the title in bold."""
        def cell(s: str) -> str:
            return s.replace("|", "\\|")

        lines = [f"**{cell(self.readout_title())}**", "", "| | |", "|---|---|"]
        lines += [f"| {cell(r.label)} | {cell(r.text)} |" for r in self.readout_rows()]
        return "\n".join(lines) + "\n"
