"""Per-thread arrays: ``acc = t.local((8, 8), np.float32)`` is CUDA's ``float acc[8][8] = {};``.

Each lane holds its own elements.  Every index is a number known when the kernel is compiled
(:mod:`gpu_lessons.kernels.registers` checks the source), so on a GPU the compiler keeps the
array in registers; reading or writing an element issues no instruction of its own (the
arithmetic that produces the value does).
"""

from __future__ import annotations

import numpy as np

from ...hardware import WARP_SIZE
from .lanes import _ALL_BITS, SIM_FILES, Lanes


class Registers:
    """One warp's copy of a per-thread array: ``shape`` elements per lane, zero to begin with."""

    __slots__ = ("_ctx", "_v", "shape")

    def __init__(self, ctx, shape: tuple[int, ...], dtype):
        self._ctx = ctx
        self.shape = shape
        self._v = np.zeros((*shape, WARP_SIZE), dtype)   # the lanes last: one element's 32 lanes

    dtype = property(lambda self: self._v.dtype)

    def __repr__(self):
        return f"<per-thread array {self._v.dtype}{list(self.shape)}>"

    def _at(self, index) -> tuple[int, ...]:
        if type(index) is not tuple:
            index = (index,)
        shape = self.shape
        if len(index) == len(shape):   # the common case, plain ints in range: no copying
            for ix, d in zip(index, shape, strict=True):
                if type(ix) is not int or not 0 <= ix < d:
                    break
            else:
                return index
        if len(index) != len(self.shape):
            raise IndexError(f"this per-thread array has {len(self.shape)} dimension(s) "
                             f"{list(self.shape)}; index it with {len(self.shape)} number(s), "
                             f"got {len(index)}")
        out = []
        for k, ix in enumerate(index):
            if type(ix) is Lanes or isinstance(ix, (bool, np.bool_)) or \
                    not isinstance(ix, (int, np.integer)):
                raise TypeError(f"index {k} into a per-thread array must be a number known when "
                                f"the kernel is compiled (a constant or the variable of a loop "
                                f"with constant bounds), got {type(ix).__name__}")
            if not 0 <= ix < self.shape[k]:
                raise IndexError(f"index {int(ix)} is outside dimension {k} of a per-thread "
                                 f"array of shape {list(self.shape)}")
            out.append(int(ix))
        return tuple(out)

    def __getitem__(self, index) -> Lanes:
        return Lanes(self._ctx, self._v[self._at(index)].copy(), _ALL_BITS)

    def __setitem__(self, index, value):
        ctx = self._ctx
        slot = self._v[self._at(index)]   # a view: this element's 32 lanes
        v = ctx._value(value, ctx._mask_bits, "the value stored into a per-thread array")
        mask = ctx._mask
        slot[mask] = v[mask] if isinstance(v, np.ndarray) else v


SIM_FILES.add(__file__)
