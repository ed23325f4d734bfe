"""Which lane holds which matrix element: the tensor cores' fragment layouts.

``mma.sync.aligned.m16n8k16`` multiplies a 16 × 16 A by a 16 × 8 B and adds a 16 × 8 C, the
warp's registers holding the matrices (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
floating point type").  With ``g = lane // 4`` and ``q = lane % 4``, lane ``lane`` holds of A
``a[i]`` at row ``g + 8 (i // 2 % 2)``, column ``2q + i % 2 + 8 (i // 4)``; of B ``b[i]`` at
row ``2q + i % 2 + 8 (i // 2)``, column ``g``; of C and D ``c[i]`` at row ``g + 8 (i // 2)``,
column ``2q + i % 2``.  Two halves make one 32-bit register (``a[0]`` its low 16 bits).
``ldmatrix`` loads 8 × 8 matrices of halves into that layout: lanes ``8j .. 8j + 7`` give matrix
``j``'s row addresses, and lane ``lane`` receives row ``g``, columns ``2q, 2q + 1`` (``.trans``:
column ``g``, rows ``2q, 2q + 1``) in its register ``j`` (PTX ISA, "Warp-level matrix load
instruction: ldmatrix").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate
from .._format import html_table

#: (rows, columns, registers per lane) of each operand of m16n8k16.
SHAPES = {"a": (16, 16, 8), "b": (16, 8, 4), "c": (16, 8, 4)}
OPERANDS = tuple(SHAPES)


def _tables(operand: str) -> tuple[np.ndarray, np.ndarray]:
    """(lane, element index) of every element of one operand, each rows × columns."""
    rows, cols, _ = SHAPES[operand]
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    if operand == "a":
        lane = (r % 8) * 4 + (c % 8) // 2
        index = c % 2 + 2 * (r // 8) + 4 * (c // 8)
    elif operand == "b":
        lane = c * 4 + (r % 8) // 2
        index = r % 2 + 2 * (r // 8)
    else:
        lane = (r % 8) * 4 + c // 2
        index = c % 2 + 2 * (r // 8)
    return np.broadcast_to(lane, (rows, cols)).copy(), np.broadcast_to(index, (rows, cols)).copy()


#: operand -> (lane, element index), each a rows × columns array
TABLES = {op: _tables(op) for op in OPERANDS}


@dataclass(frozen=True)
class MmaLayout:
    """Where each element of one mma.m16n8k16 operand lives: ``lane[r, c]`` and
    ``element[r, c]`` (the index into that lane's per-thread array: ``a[0..7]``,
    ``b[0..3]``, ``c[0..3]``)."""

    operand: str
    lane: np.ndarray
    element: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.lane.shape

    def cell(self, r: int, c: int) -> str:
        return f"L{int(self.lane[r, c])}:{self.operand}[{int(self.element[r, c])}]"

    def of_lane(self, lane: int) -> list[tuple[int, int]]:
        """The (row, column) of each of this lane's elements, in element order."""
        return [tuple(int(x) for x in np.argwhere((self.lane == lane) & (self.element == i))[0])
                for i in range(SHAPES[self.operand][2])]

    def __repr__(self) -> str:
        rows, cols = self.shape
        width = max(len(self.cell(r, c)) for r in range(rows) for c in range(cols))
        return "\n".join([f"mma.m16n8k16 operand {self.operand} ({rows} x {cols}): lane:element",
                          *(" ".join(self.cell(r, c).rjust(width) for c in range(cols))
                            for r in range(rows))])

    def _repr_html_(self) -> str:
        rows, cols = self.shape
        return html_table(f"mma.m16n8k16 operand {self.operand}: lane:element",
                          ["row", *[str(c) for c in range(cols)]],
                          [[str(r), *[self.cell(r, c) for c in range(cols)]]
                           for r in range(rows)])


def mma_layout(operand: str = "a") -> MmaLayout:
    """The fragment layout of one operand of ``t.mma`` (``"a"``, ``"b"`` or ``"c"``; D is laid
    out as C): which lane, and which element of its per-thread array, holds each element."""
    lane, element = TABLES[_validate.choice("operand", operand, OPERANDS)]
    return MmaLayout(operand, lane, element)


def ldmatrix_source(lane: np.ndarray, matrix: int, half: int, trans: bool):
    """For ``ldmatrix``: (the lane whose row address is read, the column in that row) that
    gives lane ``lane`` element ``half`` (0 or 1) of its register ``matrix``."""
    g, q = lane // 4, lane % 4
    if trans:
        return matrix * 8 + 2 * q + half, g
    return matrix * 8 + g, 2 * q + half
