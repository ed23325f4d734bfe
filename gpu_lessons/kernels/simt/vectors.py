"""Vector loads and stores: 2 or 4 consecutive elements per lane in one instruction.

``x0, x1, x2, x3 = t.vload(a, i, 4)`` is CUDA's ``float4 v = *reinterpret_cast<const
float4*>(&a[i]);`` and ``t.vstore(a, i, (x0, x1, x2, x3))`` its store: one request of 16 bytes
per lane instead of four of 4, counted by the memory model as the 16-byte access it is
(sectors for global memory, wavefronts for shared: :mod:`gpu_lessons.memory`).  The hardware
needs the address aligned to the vector's size (CUDA C++ Programming Guide, "Size and Alignment
Requirement": a misaligned float4 access faults), so the simulator refuses a lane whose first
element is not at a multiple of ``width`` elements from a 16-byte aligned base.
"""

from __future__ import annotations

import numpy as np

from ...hardware import WARP_SIZE
from .lanes import _READ, _WRITE, SIM_FILES, Lanes, _caller_line, _Memory

#: Vector widths by element size: CUDA's vector types are at most 16 bytes (float4, int4,
#: double2).
WIDTHS = {4: (2, 4), 8: (2,)}


class _VectorOps:
    def _vector_where(self, array, index, width, verb: str, line, widths=None):
        """``widths``: the widths allowed (default: CUDA's vector types for the element)."""
        if not isinstance(array, _Memory):
            raise TypeError(f"t.v{verb}'s first argument must be a global or shared array, got "
                            f"{type(array).__name__}")
        itemsize = array.data.dtype.itemsize
        if widths is None:
            widths = WIDTHS.get(itemsize, ())
        if type(width) is not int or width not in widths:
            raise ValueError(f"width must be one of {widths} for "
                             f"{array.data.dtype} elements (CUDA's vector types hold at most "
                             f"16 bytes), got {width!r}")
        if not array.contiguous:
            raise ValueError(f"{array.name} is not contiguous in memory: a vector access needs "
                             f"consecutive elements")
        lanes, flat, offsets = self._where_of(array, index, "reads" if verb == "load" else
                                              "writes", line)
        last = array.data.shape[-1]
        row_end = flat % last + width > last
        if np.count_nonzero(row_end):
            lane = int(lanes[int(np.argmax(row_end))])
            raise IndexError(f"lane {lane} of warp {self.warp} {verb}s {width} elements of "
                             f"{array.name} from flat element {int(flat[np.argmax(row_end)])}, "
                             f"past the end of its last dimension ({last})")
        misaligned = (array.base + offsets) % (width * itemsize) != 0
        if np.count_nonzero(misaligned):
            j = int(np.argmax(misaligned))
            raise ValueError(
                f"line {line}: lane {int(lanes[j])} of warp {self.warp} in block "
                f"{tuple(self.block_idx)} {verb}s {width} x {array.data.dtype} from element "
                f"{int(flat[j])} of {array.name}, which is not a multiple of {width}: a "
                f"{width * itemsize}-byte vector access must be aligned to {width * itemsize} "
                f"bytes (on a GPU: a misaligned address fault); start each lane's vector at an "
                f"index that is a multiple of {width}")
        return lanes, flat, offsets

    def launch_bounds(self, max_threads, min_blocks=1) -> None:
        """``__launch_bounds__(max_threads, min_blocks)``: a launch of bigger blocks fails
        (CUDA C++ Programming Guide, "Launch Bounds"); ``min_blocks`` only guides the
        compiler's register budget, which :func:`gpu_lessons.kernels.compile` reports."""
        for name, v in (("max_threads", max_threads), ("min_blocks", min_blocks)):
            if type(v) is not int or v < 1:
                raise ValueError(f"t.launch_bounds: {name} must be a positive int, got {v!r}")
        threads = self._sim.threads_per_block
        if threads > max_threads:
            raise ValueError(f"the block has {threads} threads, more than the "
                             f"t.launch_bounds({max_threads}) the kernel declares: on a GPU "
                             f"this launch fails; launch blocks of at most {max_threads} threads")

    def vload(self, array, index, width) -> tuple:
        """``width`` consecutive elements from ``array[index]`` on, per lane: a tuple of lane
        values (one vector load instruction)."""
        line = _caller_line()
        if not self._mask_bits:
            return tuple(Lanes(self, np.zeros(WARP_SIZE, array.data.dtype), 0)
                         for _ in range(width))
        lanes, flat, offsets = self._vector_where(array, index, width, "load", line)
        got = array.take(flat[:, None] + np.arange(width))   # (active lanes, width)
        out = []
        for k in range(width):
            v = np.zeros(WARP_SIZE, array.data.dtype)
            v[lanes] = got[:, k]
            out.append(Lanes(self, v, self._mask_bits))
        self._record(array, "ld." + array.space, lanes, flat, offsets, line, _READ, width=width)
        return tuple(out)

    def vstore(self, array, index, values) -> None:
        """Store the tuple ``values`` (2 or 4 of them) at ``array[index]`` on, per lane (one
        vector store instruction)."""
        line = _caller_line()
        if type(values) is not tuple:
            raise TypeError(f"t.vstore's values must be a tuple of 2 or 4 values, got "
                            f"{type(values).__name__}")
        if not self._mask_bits:
            return
        lanes, flat, offsets = self._vector_where(array, index, len(values), "store", line)
        bits = self._mask_bits
        cols = []
        for k, v in enumerate(values):
            x = self._value(v, bits, f"value {k} stored by t.vstore")
            cols.append(x[lanes] if isinstance(x, np.ndarray) else np.full(lanes.size, x))
        array.put(flat[:, None] + np.arange(len(values)), np.stack(cols, axis=1))
        self._record(array, "st." + array.space, lanes, flat, offsets, line, _WRITE,
                     width=len(values))


SIM_FILES.add(__file__)
