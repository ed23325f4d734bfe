"""Asynchronous copies from global to shared memory: ``cp.async`` (compute capability 8.0 on).

``t.copy_async(sa, (r, c), a, i, 4)`` starts copying ``a[i : i + 4]`` into ``sa[r, c : c + 4]``
for each active lane, without waiting and without registers: one instruction (``LDGSTS``) that
reads global memory like a load and writes shared memory when the data arrives.
``t.commit()`` closes this thread's current group of copies (``cp.async.commit_group``);
``t.wait(n)`` waits until at most ``n`` of its committed groups are still in flight
(``cp.async.wait_group n``), so ``t.wait(0)`` waits for all of them and ``t.wait(1)`` lets the
newest group (the next tile) keep loading while the kernel computes on the older one.  The wait
covers the thread's own copies only: other threads see the data after a ``t.sync()`` that
follows their waits (PTX ISA, "Data Movement and Conversion Instructions: cp.async").

The simulator reads the global values when the copy is issued (no kernel writes an array it
copies from in the same launch) and writes them into shared memory at the wait.  Until then the
shared elements are *in flight*: any warp that reads or writes one gets an error naming the copy
and the wait it needs, the hazard a GPU would leave as stale or torn data.  Copies still in
flight when the kernel returns complete, as on a GPU.
"""

from __future__ import annotations

import numpy as np

from ..._format import binary_bytes
from .errors import SimtError
from .lanes import _READ, _WRITE, SIM_FILES, _caller_line, _Memory

#: Bytes one cp.async may copy (PTX: cp-size 4, 8 or 16).
COPY_BYTES = (4, 8, 16)


class _AsyncOps:
    def copy_async(self, dst, dst_index, src, src_index, width) -> None:
        """Copy ``width`` consecutive elements of global ``src`` from ``src_index`` into shared
        ``dst`` from ``dst_index``, per active lane, asynchronously (see the module)."""
        line = _caller_line()
        for what, arr, space in (("destination", dst, "shared"), ("source", src, "global")):
            if not isinstance(arr, _Memory) or arr.space != space:
                raise TypeError(f"t.copy_async's {what} must be a {space} array, got "
                                f"{getattr(arr, 'space', type(arr).__name__)}")
        if dst.data.dtype != src.data.dtype:
            raise TypeError(f"t.copy_async copies bytes between arrays of one type, got "
                            f"{src.data.dtype} into {dst.data.dtype}")
        size = dst.data.dtype.itemsize
        if type(width) is not int or width * size not in COPY_BYTES:
            raise ValueError(f"t.copy_async copies 4, 8 or 16 bytes a lane: width must make "
                             f"width x {binary_bytes(size)} one of them, got {width!r}")
        if not self._mask_bits:
            return
        if width == 1:
            lanes, s_flat, s_off = self._where_of(src, src_index, "reads", line)
            _, d_flat, _ = self._where_of(dst, dst_index, "writes", line)
        else:
            ok = (width,)   # any width of 8 or 16 bytes (checked above), halves' 8 too
            lanes, s_flat, s_off = self._vector_where(src, src_index, width, "load", line, ok)
            _, d_flat, _ = self._vector_where(dst, dst_index, width, "store", line, ok)
        cols = np.arange(width)
        values = src.take(s_flat[:, None] + cols)
        targets = (d_flat[:, None] + cols).ravel()
        self._check_in_flight(dst, targets, "writes", line)
        # the global read is counted as the load it is (sectors, requests)
        self._record(src, "ld.global", lanes, s_flat, s_off, line, _READ, width=width)
        pending = self._b.in_flight.setdefault(dst._alloc, {})
        for e in targets.tolist():
            pending[e] = line
        self._async_open.append((dst, targets, values.ravel(), np.repeat(lanes, width), line))

    def commit(self) -> None:
        """Close this thread's group of copies (``cp.async.commit_group``)."""
        line = _caller_line()
        if not self._mask_bits:
            return
        self._async_groups.append(self._async_open)
        self._async_open = []
        self._issue("cp.async", line)

    def wait(self, groups) -> None:
        """Wait until at most ``groups`` committed groups are in flight, then their data is in
        shared memory for this thread (``cp.async.wait_group``)."""
        line = _caller_line()
        if type(groups) is not int or groups < 0:
            raise ValueError(f"t.wait's argument is how many groups may stay in flight, an int "
                             f">= 0 known when the kernel is compiled, got {groups!r}")
        if not self._mask_bits:
            return
        while len(self._async_groups) > groups:
            self._land(self._async_groups.pop(0), line)
        self._issue("cp.async", line)

    def _land(self, group, line) -> None:
        """Write one group's copies into shared memory, as stores of this warp at ``line``."""
        for dst, targets, values, lanes, copy_line in group:
            dst.put(targets, values)
            alloc = self._b.shared[dst._alloc]
            alloc.written[targets] = True
            pending = self._b.in_flight.get(dst._alloc, {})
            for e in targets.tolist():
                pending.pop(e, None)
            self._b.access_log.append((dst._alloc, targets, self.warp, _WRITE, copy_line,
                                       lanes, self._warp_syncs))

    def _finish_copies(self) -> None:
        """At the kernel's end: copies in flight complete, as on a GPU."""
        for group in (*self._async_groups, self._async_open):
            self._land(group, None)
        self._async_groups, self._async_open = [], []

    def _check_in_flight(self, mem, flat, verb, line) -> None:
        """Refuse a shared access to elements an asynchronous copy has not landed in yet."""
        pending = self._b.in_flight.get(mem._alloc)
        if not pending:
            return
        hit = next((int(e) for e in np.asarray(flat).ravel().tolist() if e in pending), None)
        if hit is None:
            return
        index = tuple(int(i) for i in np.unravel_index(hit, mem.data.shape))
        raise SimtError(
            f"line {line}: warp {self.warp} of block {tuple(self.block_idx)} {verb} "
            f"{mem.name}{list(index)}, which the t.copy_async of line {pending[hit]} has not "
            f"landed in yet: its thread must t.commit() and t.wait(...) for that group, and "
            f"the block t.sync() after the wait, before the element is read or written")


SIM_FILES.add(__file__)
