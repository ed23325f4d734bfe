"""The warp context's memory operations: loads, stores, shared arrays, atomics, shuffles and
barriers, each recorded with its sectors or banks."""

from __future__ import annotations

import numpy as np

from ... import _validate
from ..._math import round_up
from ...hardware import WARP_SIZE
from ...memory import global_load, shared_load
from .errors import SimtError
from .lanes import (
    _ALL_BITS,
    _ATOMIC,
    _LANE_IDS,
    _READ,
    _WRITE,
    ATOMIC_DTYPES,
    MAX_STATIC_SHARED_BYTES,
    SHARED_ALIGN,
    SIM_FILES,
    Lanes,
    _bits_mask,
    _caller_line,
    _mask_int,
    _Memory,
    _new_event,
    _SharedAlloc,
)
from .result import (
    Event,
    PartialWarp,
    SharedArray,
    ShuffleRead,
    UninitialisedRead,
)


class _MemoryOps:
    # -- memory ----------------------------------------------------------------------------------
    def shared(self, shape, dtype=np.float32, name: str | None = None) -> _Memory:
        """Declare a ``__shared__`` array of the block (the same array for all its warps).

        Contents start undefined (NaN for floats); every warp of the block must declare the
        same arrays in the same order.
        """
        shape = _validate.shape("shape", shape)
        dtype = np.dtype(dtype)
        _validate.choice("dtype itemsize", dtype.itemsize, (1, 2, 4, 8))
        k = self._shared_calls
        self._shared_calls += 1
        allocs = self._b.shared
        if k < len(allocs):
            a = allocs[k]
            if a.data.shape != shape or a.data.dtype != dtype:
                raise SimtError(f"warp {self.warp} declares shared array #{k} as {dtype}"
                                f"{list(shape)}, another warp declared {a.data.dtype}"
                                f"{list(a.data.shape)}: all warps must declare the same")
        else:
            nbytes = int(np.prod(shape)) * dtype.itemsize
            base = round_up(self._b.shared_top, SHARED_ALIGN)
            if base + nbytes > MAX_STATIC_SHARED_BYTES:
                raise ValueError(
                    f"shared arrays of this block need {base + nbytes} bytes; static shared "
                    f"memory is limited to {MAX_STATIC_SHARED_BYTES} bytes (48 KB) per block")
            data = (np.full(shape, np.nan, dtype) if dtype.kind == "f"
                    else np.zeros(shape, dtype))
            name = name or f"shared{k}"   # the rewrite passes the name the kernel's line gives it
            a = _SharedAlloc(name, data, base, np.zeros(data.size, bool))
            allocs.append(a)
            self._b.shared_top = base + nbytes
            sim = self._sim
            sim.shared_bytes = max(sim.shared_bytes, self._b.shared_top)
            if name not in sim.shared_arrays:
                sim.shared_arrays[name] = SharedArray(name, nbytes, _caller_line())
            known = self._sim.shapes.setdefault(name, ("shared", shape, dtype.itemsize))
            if known != ("shared", shape, dtype.itemsize):
                raise SimtError(f"two arrays are called {name!r} ({known[0]} "
                                f"{list(known[1])} and shared {list(shape)}): give each "
                                f"shared array its own name=")
        return _Memory(self, a.data, a.base, a.name, "shared", alloc=k)

    def _where_of(self, mem: _Memory, index, verb: str, line) -> tuple:
        """``(lanes, flat, offsets)``: the active lanes, the flat (row-major) element
        indices of ``mem[index]`` they touch and those elements' byte offsets from the
        array's base, bounds-checked for the active lanes only (a switched-off lane's
        index is never looked at)."""
        data = mem.data
        if (type(index) is Lanes and mem.contiguous and data.ndim == 1 and index._ctx is self
                and not self._mask_bits & ~index._defined and index._v.dtype.kind in "iu"):
            # the common case, a[i] on a 1-D array, without the general loop below
            act = self._active_lanes()
            if self._mask_bits == _ALL_BITS:  # a copy: the race log keeps these indices
                flat = index._v.astype(np.int64)
            else:
                flat = index._v[act].astype(np.int64, copy=False)
            if np.count_nonzero(flat.view(np.uint64) >= data.shape[0]):
                self._out_of_range(mem, (index,), act, verb)
            return act, flat, flat * data.itemsize
        if type(index) is not tuple:
            index = (index,)
        if len(index) != data.ndim:
            raise IndexError(f"{mem.name} has {data.ndim} dimension(s) {list(data.shape)}; "
                             f"index it with {data.ndim} index(es), got {len(index)}")
        bits = self._mask_bits
        act = self._active_lanes()
        flat = 0
        shape = data.shape
        for k, ix in enumerate(index):
            if type(ix) is Lanes:
                v = self._value(ix, bits, f"the index into {mem.name}")
                if v.dtype.kind not in "iu":
                    raise TypeError(f"index into {mem.name} must be an integer, got lane "
                                    f"values of type {v.dtype}")
                c = (v.astype(np.int64) if bits == _ALL_BITS
                     else v[act].astype(np.int64, copy=False))
                # one comparison finds both ends: negative values wrap to huge unsigned ones
                if np.count_nonzero(c.view(np.uint64) >= shape[k]):
                    self._out_of_range(mem, index, act, verb)
            elif isinstance(ix, (int, np.integer)) and not isinstance(ix, (bool, np.bool_)):
                c = int(ix)
                if not 0 <= c < shape[k]:
                    self._out_of_range(mem, index, act, verb)
            else:
                raise TypeError(f"index {k} into {mem.name} must be an int or integer lane "
                                f"values, got {type(ix).__name__}")
            flat = c if k == 0 else flat * shape[k] + c
        if type(flat) is not np.ndarray:  # every lane indexes the same element
            flat = np.full(act.size, flat, dtype=np.int64)
        if mem.contiguous:
            offsets = flat * data.itemsize
        else:
            comps = np.unravel_index(flat, shape)
            offsets = sum(c * s for c, s in zip(comps, data.strides, strict=True))
        return act, flat, offsets

    def _out_of_range(self, mem, index, act, verb):
        """Raise the IndexError naming the first active lane whose index is outside."""
        data = mem.data
        comps = [self._value(ix, self._mask_bits, "index")[act] if type(ix) is Lanes
                 else np.full(act.size, int(ix)) for ix in index]
        bad = np.zeros(act.size, dtype=bool)
        for k, c in enumerate(comps):
            bad |= (c < 0) | (c >= data.shape[k])
        j = int(np.argmax(bad))
        lane = int(act[j])
        where = ", ".join(str(int(c[j])) for c in comps)
        raise IndexError(
            f"lane {lane} of warp {self.warp} in block {tuple(self.block_idx)} "
            f"(thread {self._thread_of(lane)}) {verb} {mem.name}[{where}], outside its shape "
            f"{list(data.shape)}; on a GPU this would corrupt memory or fault")

    def _access(self, mem: _Memory, index, value, line):
        store = value is not None
        if not self._mask_bits:
            # Nothing issues; the values below only keep inactive code paths running.
            return None if store else Lanes(self, np.zeros(WARP_SIZE, mem.data.dtype), 0)
        lanes, flat, offsets = self._where_of(mem, index, "writes" if store else "reads", line)
        full = self._mask_bits == _ALL_BITS
        if store:
            v = self._value(value, self._mask_bits, f"the value stored into {mem.name}")
            mem.put(flat, v[lanes] if isinstance(v, np.ndarray) and not full else v)
            result = None
        elif full:
            result = Lanes(self, mem.take(flat), _ALL_BITS)
        else:
            out = np.zeros(WARP_SIZE, dtype=mem.data.dtype)
            out[lanes] = mem.take(flat)
            result = Lanes(self, out, self._mask_bits)
        kind = ("st." if store else "ld.") + mem.space
        self._record(mem, kind, lanes, flat, offsets, line, _WRITE if store else _READ)
        return result

    def _record(self, mem, kind, lanes, flat, offsets, line, access, serialisation=None,
                width=1, lane_mask=None):
        """Count one memory instruction and log what race/uninitialised checks need.

        ``width``: elements per lane of a vector access (``flat``/``offsets`` name each lane's
        first element; the access is one request of ``width`` times the element size);
        ``lane_mask``: the lanes whose addresses the instruction reads, where that is not the
        active mask (ldmatrix.x1 reads 8)."""
        mask = self._mask if lane_mask is None else lane_mask
        counts = _memory_counts(mem.space, mem.base, offsets, mask,
                                self._mask_bits if lane_mask is None else _mask_int(mask),
                                mem.data.dtype.itemsize * width)
        sim = self._sim
        indices = None
        if sim.record_indices:
            idx = [None] * WARP_SIZE
            for lane, f in zip(lanes.tolist(), flat.tolist(), strict=True):
                idx[lane] = f
            indices = tuple(idx)
        # _issue, unrolled: one Event built positionally (this runs per memory instruction)
        sim.count += 1
        if sim.count > sim.max_instructions:
            self._issue(kind, line)  # raises the max_instructions error
        b = self._b
        sim.events.append(_new_event(Event, (
            b.linear, self.warp, self._step, self._step + self._time_offset, b.phase, kind,
            self._mask_bits, self._path_t, line, mem.name, *counts, serialisation, None,
            None, indices, width if width > 1 else None)))
        self._step += 1
        if width > 1:   # the race and uninitialised checks see every element
            flat = (flat[:, None] + np.arange(width)).ravel()
            lanes = np.repeat(lanes, width)
        if mem.space == "shared":
            if self._b.in_flight:
                self._check_in_flight(mem, flat, "writes" if access == _WRITE else "reads",
                                      line)
            alloc = self._b.shared[mem._alloc]
            if access != _WRITE:
                written = alloc.written[flat]
                if np.count_nonzero(written) != written.size:
                    self._uninitialised(alloc, flat[~written], line)
            if access != _READ:
                alloc.written[flat] = True
            self._b.access_log.append((mem._alloc, flat, self.warp, access, line, lanes,
                                       self._warp_syncs))

    def _uninitialised(self, alloc, flat, line):
        """Record a read of unwritten shared memory: the first one per block, warp, line and
        array (a loop would otherwise record the same mistake thousands of times)."""
        sim = self._sim
        key = (self._b.linear, self.warp, line, alloc.name)
        if key in sim.uninitialised_seen:
            return
        sim.uninitialised_seen.add(key)
        index = tuple(int(i) for i in np.unravel_index(int(flat[0]), alloc.data.shape))
        if len(sim.uninitialised) < 1000:
            sim.uninitialised.append(UninitialisedRead(self._b.linear, self.warp, line,
                                                       alloc.name, index, int(flat.size)))
        sim.note(f"line {line}: warp {self.warp} of block {tuple(self.block_idx)} reads "
                 f"{alloc.name} where nothing was written yet (shared memory starts "
                 f"undefined)")

    def _thread_of(self, lane: int) -> tuple[int, int, int]:
        return tuple(int(d._v[lane]) for d in self.thread_idx)

    # -- atomics ---------------------------------------------------------------------------------
    def atomic_add(self, array, index, value) -> Lanes:
        """``old = atomicAdd(&array[index], value)`` for each active lane; returns ``old``.

        Lanes hitting the same element are applied in lane order (CUDA: unspecified order).
        """
        return self._atomic("atomic_add", array, index, value, None, _caller_line())

    def atomic_max(self, array, index, value) -> Lanes:
        """``old = atomicMax(&array[index], value)``: stores ``max(old, value)``; returns
        ``old``."""
        return self._atomic("atomic_max", array, index, value, None, _caller_line())

    def atomic_cas(self, array, index, compare, value) -> Lanes:
        """``old = atomicCAS(&array[index], compare, value)``: stores ``value`` where
        ``old == compare``; returns ``old`` (so a lane knows whether it won)."""
        return self._atomic("atomic_cas", array, index, value, compare, _caller_line())

    def _atomic(self, op, mem, index, value, compare, line) -> Lanes:
        if not isinstance(mem, _Memory):
            raise TypeError(f"t.{op}'s first argument must be a global or shared array "
                            f"(a kernel argument or t.shared(...)), got {type(mem).__name__}")
        data = mem.data
        if data.dtype.name not in ATOMIC_DTYPES[op]:
            raise TypeError(f"t.{op} on {mem.name}: CUDA has no {op.replace('_', '')[:6]}"
                            f"{op[7:].capitalize()} for {data.dtype} elements; the array must "
                            f"hold one of {', '.join(ATOMIC_DTYPES[op])}")
        bits = self._mask_bits
        if not bits:
            return Lanes(self, np.zeros(WARP_SIZE, data.dtype), 0)
        lanes, flat, offsets = self._where_of(mem, index, "updates", line)
        v = self._lane_operand(value, bits, lanes, data.dtype, f"t.{op}'s value")
        cmp = (None if compare is None else
               self._lane_operand(compare, bits, lanes, data.dtype, f"t.{op}'s compare"))
        _, counts = np.unique(flat, return_counts=True)
        serial = int(counts.max())
        if serial == 1:  # distinct elements: one vectorised read-modify-write
            old = mem.take(flat)
            mem.put(flat, _atomic_new(op, old, v, cmp))
        else:  # lanes on the same element take turns, in lane order
            old = np.empty(flat.size, data.dtype)
            for j, f in enumerate(flat.tolist()):
                o = mem._flat[f]
                old[j] = o
                mem._flat[f] = _atomic_new(op, o, v[j], None if cmp is None else cmp[j])
        out = np.zeros(WARP_SIZE, dtype=data.dtype)
        out[lanes] = old
        self._record(mem, "atom." + mem.space, lanes, flat, offsets, line, _ATOMIC,
                     serialisation=serial)
        return Lanes(self, out, bits)

    def _lane_operand(self, value, bits, lanes, dtype, what) -> np.ndarray:
        """The active lanes' values of an operand, converted to the array's element type
        (as C converts an argument to the parameter's type)."""
        v = self._value(value, bits, what)
        if isinstance(v, np.ndarray):
            return v[lanes].astype(dtype)
        return np.full(lanes.size, v).astype(dtype)

    # -- warp-level primitives -------------------------------------------------------------------
    def shfl_down(self, value, delta) -> Lanes:
        """``__shfl_down_sync(0xffffffff, value, delta)``: lane i gets lane i + delta's
        value; where i + delta > 31 it keeps its own."""
        line = _caller_line()
        d = self._shfl_operand(delta, "delta", line)
        return self._shuffle("shfl_down", value, _LANE_IDS + d, line)

    def shfl_up(self, value, delta) -> Lanes:
        """``__shfl_up_sync(0xffffffff, value, delta)``: lane i gets lane i - delta's value;
        where i - delta < 0 it keeps its own."""
        line = _caller_line()
        d = self._shfl_operand(delta, "delta", line)
        return self._shuffle("shfl_up", value, _LANE_IDS - d, line)

    def shfl_xor(self, value, lane_mask) -> Lanes:
        """``__shfl_xor_sync(0xffffffff, value, lane_mask)``: lane i gets lane
        i ^ lane_mask's value (the butterfly of a warp reduction)."""
        line = _caller_line()
        m = self._shfl_operand(lane_mask, "lane_mask", line)
        return self._shuffle("shfl_xor", value, _LANE_IDS ^ m, line)

    def shfl_idx(self, value, src_lane) -> Lanes:
        """``__shfl_sync(0xffffffff, value, src_lane)``: every lane gets lane
        ``src_lane % 32``'s value (a broadcast when ``src_lane`` is one number)."""
        line = _caller_line()
        s = self._shfl_operand(src_lane, "src_lane", line, signed=True)
        return self._shuffle("shfl_idx", value, s, line)

    def _shfl_operand(self, v, what, line, signed=False):
        """An int, or lane values, for a shuffle's lane argument: its low 5 bits, as
        ``shfl.sync`` reads them (PTX ISA, "shfl.sync": ``bval[4:0]``), so a delta of 33 acts
        as 1 and -1 (0xffffffff as CUDA's unsigned int) as 31."""
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            v = int(v)
            if not 0 <= v < WARP_SIZE:
                self._sim.note(f"line {line}: {what}={v} is outside 0..31; the hardware uses "
                               f"its low 5 bits, {v & 31}")
            return v & 31
        if type(v) is Lanes:
            vals = self._value(v, self._mask_bits, what)
            if vals.dtype.kind not in "iu":
                raise TypeError(f"{what} must be an integer, got lane values of type "
                                f"{vals.dtype}")
            return vals.astype(np.int64) & 31
        raise TypeError(f"{what} must be an int or integer lane values, "
                        f"got {type(v).__name__}")

    def _partial_warp(self, op: str, line) -> None:
        """Record a warp-wide operation that some running lanes of the warp did not execute."""
        missing = self._alive & ~self._mask
        if missing.any() and self._mask_bits:
            sim = self._sim
            if len(sim.partial_warps) < 1000:
                sim.partial_warps.append(PartialWarp(self._b.linear, self.warp, line, op,
                                                     tuple(np.flatnonzero(missing).tolist())))

    def _shuffle(self, op, value, src, line) -> Lanes:
        bits = self._mask_bits
        v = self._value(value, bits, f"t.{op}'s value")
        if not isinstance(v, np.ndarray):
            v = np.full(WARP_SIZE, v)
        if not bits:
            return Lanes(self, v.copy(), 0)
        self._partial_warp(op, line)
        inside = (src >= 0) & (src < WARP_SIZE)
        src = np.where(inside, src, _LANE_IDS)   # outside the warp: the lane's own value
        out = v[src]
        mask = self._mask
        stray = mask & inside & ~mask[src]
        n_stray = int(np.count_nonzero(stray))
        if n_stray:
            sim = self._sim
            for lane in np.flatnonzero(stray).tolist():
                if len(sim.shuffle_reads) < 1000:
                    sim.shuffle_reads.append(ShuffleRead(self._b.linear, self.warp, line, op,
                                                         lane, int(src[lane])))
            first = int(np.argmax(stray))
            sim.note(f"line {line}: {op} read lane {int(src[first])}, which was not active "
                     f"(warp {self.warp} of block {tuple(self.block_idx)}); CUDA leaves that "
                     f"value undefined")
        self._issue("shfl", line, inactive_reads=n_stray)
        return Lanes(self, out, bits, weak=type(value) is Lanes and value._weak)

    def syncwarp(self) -> None:
        """``__syncwarp()``: the warp's lanes meet (one ``bar.warp`` instruction).  Lanes of
        a warp run in lockstep here, but not on Volta and later GPUs, so the race check
        counts shared-memory accesses of different lanes between two of these as a race."""
        line = _caller_line()
        if self._mask_bits:
            self._partial_warp("syncwarp", line)
        self._issue("bar.warp", line)
        self._warp_syncs += 1

    # -- barrier ---------------------------------------------------------------------------------
    def sync(self) -> None:
        """``__syncthreads()``: wait until every warp of the block gets here."""
        line = _caller_line()
        mask = self._mask
        if not self._mask_bits:
            # the warp jumped over the code around this barrier (or every lane returned)
            return
        if (self._alive & ~mask).any():
            raise SimtError(
                f"t.sync() inside a branch that only some lanes of warp {self.warp} took; "
                f"__syncthreads() in divergent code is undefined behaviour (the other lanes "
                f"never arrive). Move the barrier out of the branch.")
        self._barrier_event = self._issue("bar.sync", line)
        self._barrier_line = line
        self._b.wait_at_barrier(self)



def _atomic_new(op, old, v, cmp):
    if op == "atomic_add":
        return old + v
    if op == "atomic_max":
        return np.maximum(old, v)
    return np.where(old == cmp, v, old)


_COUNT_CACHE: dict = {}


def _memory_counts(space: str, base: int, offsets: np.ndarray, mask: np.ndarray,
                   mask_bits: int, itemsize: int) -> tuple:
    """The memory model's counts for one warp access, memoised: the tuple (sectors,
    requests, requested_bytes, wavefronts, ideal_wavefronts, bank_conflicts) in
    :class:`Event`'s field order, ``None`` where a field is for the other space.

    Sectors and lines (global) and banks, words and wavefronts (shared) do not change when
    every address moves by the same multiple of 128 bytes, so the pattern is cached relative
    to its first 128-byte boundary: regular kernels repeat a handful of patterns.
    ``offsets``: byte offsets of the active lanes' elements, in lane order.
    """
    # relative to the 128-byte boundary below the first active lane's address (the
    # counts are the same for any such shift; lanes below it give negative numbers)
    first = base + int(offsets[0])
    relative = offsets + (base - first // 128 * 128)
    key = (space, itemsize, relative.tobytes(), mask_bits)
    hit = _COUNT_CACHE.get(key)
    if hit is not None:
        return hit
    full = np.zeros(WARP_SIZE, dtype=np.int64)
    full[mask] = base + offsets
    if space == "global":
        g = global_load(full, itemsize, mask=mask)
        hit = (g.sectors, g.requests, int(mask.sum()) * itemsize, None, None, None)
    else:
        s = shared_load(full, itemsize, mask=mask)
        hit = (None, None, None, s.wavefronts, s.ideal_wavefronts, s.bank_conflicts)
    if len(_COUNT_CACHE) > 20_000:
        _COUNT_CACHE.clear()
    _COUNT_CACHE[key] = hit
    return hit


def _undefined_message(what, missing: int, defined: int) -> str:
    lanes = np.flatnonzero(_bits_mask(missing)).tolist()
    has = np.flatnonzero(_bits_mask(defined)).tolist()
    return (f"{what} is not defined on lanes {_lane_list(lanes)} that are active here (it "
            f"holds values only for lanes {_lane_list(has)}, probably because it was assigned "
            f"inside a t.if_/t.else_/t.while_ body). Declare it before the branch with "
            f"y = t.local(0) and assign inside with y[...] = ..., or merge the two paths with "
            f"t.where(cond, a, b).")


def _lane_list(lanes) -> str:
    if not lanes:
        return "(none)"
    if len(lanes) > 8:
        return "[" + ", ".join(map(str, lanes[:8])) + f", … ({len(lanes)} lanes)]"
    return "[" + ", ".join(map(str, lanes)) + "]"



SIM_FILES.add(__file__)
