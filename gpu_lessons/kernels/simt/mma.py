"""Tensor cores: ``t.mma`` (``mma.sync.aligned.m16n8k16``) and ``t.ldmatrix``
(``ldmatrix.sync.aligned.m8n8``), warp-wide, in the PTX ISA's fragment layouts
(:mod:`gpu_lessons.kernels.fragments`).

``t.mma(d, a, b, c)``: D = A B + C, A 16 × 16 and B 16 × 8 of float16 or bfloat16, C and D
float32; per lane ``a`` holds 8 halves, ``b`` 4, ``c`` and ``d`` 4 floats (``d`` may be ``c``).
Each output is ``c + p0 + ... + p15`` in float32, left to right, each product exact (bar a
bfloat16 product's overflow or underflow), each addition rounded to nearest even.  The
hardware's internal order and rounding are not documented and differ in the last bits
(``tools/device/mma_h200.py`` records by how much on an H200).

``t.ldmatrix(r, s, index, n, trans=False)``: ``n`` (1, 2, 4) 8 × 8 matrices of halves from
shared ``s``; lanes ``8j .. 8j + 7`` give, as ``index``, the start of a 16-byte row of matrix
``j``, and ``r[2j], r[2j + 1]`` receive this lane's two elements of it: a shared load of 16 bytes
for each of ``8 n`` lanes, at least ``n`` wavefronts, more where rows share banks.
"""

from __future__ import annotations

import numpy as np

from ...hardware import WARP_SIZE
from ..fragments import SHAPES, TABLES, ldmatrix_source
from .errors import SimtError
from .lanes import _ALL_BITS, _LANE_IDS, _READ, SIM_FILES, _caller_line, _Memory
from .registers import Registers

HALVES = ("float16", "bfloat16")


class _MmaOps:
    def _whole_warp(self, op: str, line) -> None:
        if self._mask_bits != _ALL_BITS:
            missing = np.flatnonzero(~self._mask).tolist()
            raise SimtError(
                f"line {line}: t.{op} is executed by the whole warp, but lanes {missing[:8]}"
                f"{' ...' if len(missing) > 8 else ''} of warp {self.warp} in block "
                f"{tuple(self.block_idx)} are not here (a branch, a return, or a block that is "
                f"not a multiple of 32 threads); {op}.sync.aligned with lanes missing is "
                f"undefined: call it where every lane of the warp runs")

    def mma(self, d, a, b, c) -> None:
        """``d = a @ b + c`` over the warp (m16n8k16; see the module)."""
        line = _caller_line()
        for name, arr, dtypes in (("d", d, ("float32",)), ("a", a, HALVES), ("b", b, HALVES),
                                  ("c", c, ("float32",))):
            size = SHAPES["c" if name == "d" else name][2]
            if type(arr) is not Registers or arr.shape != (size,) or arr.dtype.name not in dtypes:
                got = (f"a per-thread array {arr.dtype}{list(arr.shape)}" if type(arr) is
                       Registers else type(arr).__name__)
                raise TypeError(f"t.mma(d, a, b, c): {name} must be a per-thread array of "
                                f"{size} {' or '.join(dtypes)} (t.local(({size},), ...)), "
                                f"got {got}")
        if a.dtype != b.dtype:
            raise TypeError(f"t.mma: a and b hold one type (float16 or bfloat16), got "
                            f"{a.dtype} and {b.dtype}")
        if not self._mask_bits:
            return
        self._whole_warp("mma", line)
        (la, ea), (lb, eb), (lc, ec) = TABLES["a"], TABLES["b"], TABLES["c"]
        A = a._v[ea, la].astype(np.float32)      # 16 x 16
        B = b._v[eb, lb].astype(np.float32)      # 16 x 8
        acc = c._v[ec, lc].astype(np.float32)    # 16 x 8
        for k in range(16):                      # exact products, one rounding per addition
            acc = acc + A[:, k:k + 1] * B[k:k + 1, :]
        d._v[ec, lc] = acc
        self._issue("mma", line)

    def ldmatrix(self, r, s, index, n, trans=False) -> None:
        """Load ``n`` 8 x 8 matrices of halves from shared ``s`` into ``r`` (see the module)."""
        line = _caller_line()
        if not isinstance(s, _Memory) or s.space != "shared" or s.dtype.name not in HALVES:
            raise TypeError(f"t.ldmatrix reads a shared array of float16 or bfloat16, got "
                            f"{s!r}")
        if type(n) is not int or n not in (1, 2, 4):
            raise ValueError(f"t.ldmatrix loads 1, 2 or 4 matrices, got {n!r}")
        if type(trans) is not bool:
            raise TypeError(f"t.ldmatrix's trans is True or False, got {trans!r}")
        if type(r) is not Registers or r.shape != (2 * n,) or r.dtype != s.dtype:
            raise TypeError(f"t.ldmatrix(r, s, index, {n}): r must be a per-thread array of "
                            f"{2 * n} {s.dtype} (two halves, one register, per matrix)")
        if not self._mask_bits:
            return
        self._whole_warp("ldmatrix", line)
        lanes, flat, offsets = self._where_of(s, index, "reads", line)
        used = lanes < 8 * n
        lanes, flat, offsets = lanes[used], flat[used], offsets[used]
        last = s.data.shape[-1]
        bad = ((s.base + offsets) % 16 != 0) | (flat % last + 8 > last)
        if np.count_nonzero(bad):
            j = int(np.argmax(bad))
            raise ValueError(
                f"line {line}: lane {int(lanes[j])} of warp {self.warp} gives t.ldmatrix the "
                f"row at element {int(flat[j])} of {s.name}: each row is 8 halves (16 bytes) "
                f"that start 16-byte aligned, inside one row of the array")
        rows = s.take(flat[:, None] + np.arange(8))   # (8 n, 8): the matrices' rows
        for j in range(n):
            for h in range(2):
                src, col = ldmatrix_source(_LANE_IDS, j, h, trans)
                r._v[2 * j + h] = rows[src, col]
        mask = np.zeros(WARP_SIZE, bool)
        mask[lanes] = True
        self._record(s, "ld.shared", lanes, flat, offsets, line, _READ, width=8,
                     lane_mask=mask)


SIM_FILES.add(__file__)
