"""One run's shared state and the blocks it runs: warps as greenlets, barriers, races."""

from __future__ import annotations

import numpy as np
from greenlet import greenlet

from ..._math import cdiv
from ...hardware import WARP_SIZE
from .lanes import (
    _ATOMIC,
    _READ,
    _WRITE,
    SIM_FILES,
    Dim3,
    _Aborted,
    _SharedAlloc,
)
from .result import (
    Event,
    PartialWarp,
    Race,
    SharedArray,
    ShuffleRead,
    UninitialisedRead,
)
from .warp import WarpContext

# -- running ---------------------------------------------------------------------------------------



class _Sim:
    """State shared by all blocks of one run."""

    def __init__(self, kernel, grid, block, args, order, max_instructions, record_indices,
                 shapes):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.threads_per_block = block.x * block.y * block.z
        self.warps_per_block = cdiv(self.threads_per_block, WARP_SIZE)
        self.args = args
        self.order = order
        self.rng = np.random.default_rng(order) if not isinstance(order, str) else None
        self.max_instructions = max_instructions
        self.record_indices = record_indices
        self.shapes = shapes  # array name -> (space, shape, itemsize)
        self.events: list[Event] = []
        self.races: list[Race] = []
        self.notes: list[str] = []
        self.uninitialised: list[UninitialisedRead] = []
        self.uninitialised_seen: set = set()
        self.shuffle_reads: list[ShuffleRead] = []
        self.partial_warps: list[PartialWarp] = []
        self.fp64_lines: dict = {}                       # line -> float64 instructions
        self.barriers = 0
        self.count = 0
        self.shared_bytes = 0                            # the most one block declared
        self.shared_arrays: dict[str, SharedArray] = {}  # name -> first declaration

    def fp64(self, line, inputs):
        """Count a float64 arithmetic instruction at ``line``."""
        self.fp64_lines[line] = self.fp64_lines.get(line, 0) + 1

    def note(self, text: str):
        if len(self.notes) < 50 and text not in self.notes:
            self.notes.append(text)

    def warp_order(self, n: int) -> list[int]:
        if self.order == "ascending":
            return list(range(n))
        if self.order == "descending":
            return list(range(n - 1, -1, -1))
        return [int(i) for i in self.rng.permutation(n)]


class _BlockRun:
    """One thread block: its warps take turns, one barrier phase at a time.

    Each warp is a greenlet; ``run`` switches to a warp, which runs until it reaches a
    barrier (and switches back) or finishes.  An exception in a warp comes out of that
    switch, and the warps still waiting at a barrier are unwound with ``_Aborted``.
    """

    def __init__(self, sim: _Sim, linear: int, block_idx: Dim3):
        self.sim = sim
        self.linear = linear
        self.block_idx = block_idx
        self.phase = 0
        self.shared: list[_SharedAlloc] = []
        self.shared_top = 0
        self.access_log: list[tuple] = []
        self.in_flight: dict = {}   # shared alloc -> {element: line of its t.copy_async}

    def run(self):
        sim = self.sim
        warps = [WarpContext(self, w) for w in range(sim.warps_per_block)]
        for w in warps:
            w._glet = greenlet(self._warp_main)
        try:
            while any(w.state in ("new", "barrier") for w in warps):
                for i in sim.warp_order(len(warps)):
                    w = warps[i]
                    if w.state not in ("new", "barrier"):
                        continue
                    w.state = "running"
                    w._glet.switch(w)
                self._end_phase(warps)
        except BaseException:
            self._abandon(warps)
            raise

    def _warp_main(self, w: WarpContext):
        with np.errstate(all="ignore"):  # float faults give inf/nan, as on a GPU
            try:
                self.sim.kernel(w, *w._args)
                w._finish_copies()
            except _Aborted:
                w.state = "aborted"
                return
        w.state = "done"

    def wait_at_barrier(self, w: WarpContext):
        w.state = "barrier"
        w._glet.parent.switch()

    def _abandon(self, warps):
        for w in warps:
            if w.state == "barrier" and w._glet:
                w._glet.throw(_Aborted())

    def _end_phase(self, warps):
        at_barrier = [w for w in warps if w.state == "barrier"]
        self._check_races()
        if not at_barrier:
            return
        lines = {w._barrier_line for w in at_barrier}
        if len(lines) > 1:
            self.sim.note(f"block {self.linear}: warps met at t.sync() calls on different "
                          f"lines {sorted(lines)}; __syncthreads() must be reached by all "
                          f"threads at the same call")
        # The barrier opens when the last warp arrives; the others wait for it.
        events = self.sim.events
        arrive = {w.warp: events[w._barrier_event].time for w in at_barrier}
        release = max(arrive.values())
        for w in at_barrier:
            wait = release - arrive[w.warp]
            events[w._barrier_event] = events[w._barrier_event]._replace(wait=wait)
            w._time_offset += wait
        self.phase += 1
        self.sim.barriers += 1

    def _check_races(self):
        log, self.access_log = self.access_log, []
        if not log:
            return
        for k, alloc in enumerate(self.shared):
            entries = [e for e in log if e[0] == k]
            if not entries:
                continue
            self._check_lane_races(alloc, entries)
            if len({e[2] for e in entries}) < 2:
                continue  # no second warp to race with
            sizes = [len(e[1]) for e in entries]
            elems = np.concatenate([e[1] for e in entries])
            warp = np.repeat([e[2] for e in entries], sizes)
            access = np.repeat([e[3] for e in entries], sizes)
            seq = np.repeat(np.arange(len(entries)), sizes)
            order = np.lexsort((seq, elems))
            elems, warp, access, seq = elems[order], warp[order], access[order], seq[order]
            starts = np.flatnonzero(np.r_[True, elems[1:] != elems[:-1]])
            ends = np.r_[starts[1:], len(elems)]
            several = np.minimum.reduceat(warp, starts) != np.maximum.reduceat(warp, starts)
            writes = np.logical_or.reduceat(access != _READ, starts)
            plain = np.logical_or.reduceat(access != _ATOMIC, starts)
            for g in np.flatnonzero(several & writes & plain):
                s, e = starts[g], ends[g]
                found = _race_pair(warp[s:e], access[s:e])
                if found is None:
                    continue
                a, b = found
                self.sim.races.append(Race(
                    block=self.linear, phase=self.phase, array=alloc.name,
                    index=tuple(int(i) for i in np.unravel_index(int(elems[s]),
                                                                 alloc.data.shape)),
                    writer_warp=int(warp[s + a]), writer_line=entries[int(seq[s + a])][4],
                    other_warp=int(warp[s + b]), other_line=entries[int(seq[s + b])][4],
                    other_access=("read", "write", "atomic")[access[s + b]],
                    writer_access=("read", "write", "atomic")[access[s + a]]))

    def _check_lane_races(self, alloc, entries):
        """Races between lanes of one warp: a word one lane writes and another lane reads or
        writes, in different instructions with no ``t.syncwarp()`` between.  The simulator
        runs a warp's lanes in lockstep, but since Volta each thread has its own program
        counter and a warp's lanes may run apart (CUDA C++ Programming Guide, "Independent
        Thread Scheduling"): only ``__syncwarp()`` orders them."""
        sizes = [len(e[1]) for e in entries]
        elems = np.concatenate([e[1] for e in entries])
        lane = np.concatenate([e[5] for e in entries])
        # one group per warp, interval between t.syncwarp() calls and word
        group = np.repeat([e[2] * (1 << 32) + e[6] for e in entries], sizes)
        access = np.repeat([e[3] for e in entries], sizes)
        seq = np.repeat(np.arange(len(entries)), sizes)
        order = np.lexsort((seq, elems, group))
        elems, lane, group, access, seq = (elems[order], lane[order], group[order],
                                           access[order], seq[order])
        new = np.r_[True, (elems[1:] != elems[:-1]) | (group[1:] != group[:-1])]
        starts = np.flatnonzero(new)
        ends = np.r_[starts[1:], len(elems)]
        several = np.minimum.reduceat(lane, starts) != np.maximum.reduceat(lane, starts)
        writes = np.logical_or.reduceat(access == _WRITE, starts)
        for g in np.flatnonzero(several & writes):
            s, e = starts[g], ends[g]
            found = _lane_race_pair(lane[s:e], access[s:e], seq[s:e])
            if found is None:
                continue
            a, b = found
            writer, other = entries[int(seq[s + a])], entries[int(seq[s + b])]
            self.sim.races.append(Race(
                block=self.linear, phase=self.phase, array=alloc.name,
                index=tuple(int(i) for i in np.unravel_index(int(elems[s]), alloc.data.shape)),
                writer_warp=writer[2], writer_line=writer[4],
                other_warp=other[2], other_line=other[4],
                other_access=("read", "write", "atomic")[access[s + b]],
                writer_access="write", writer_lane=int(lane[s + a]),
                other_lane=int(lane[s + b])))
            return  # one per array and phase: the first tells the learner what to fix


def _lane_race_pair(lane: np.ndarray, access: np.ndarray, seq: np.ndarray):
    """Positions (writer, other) of a plain write by one lane and an access of the same word
    by another lane in a different instruction; ``None`` if there are none.  Lanes of one
    instruction writing one word together are not counted: the hardware keeps one of them."""
    for a in np.flatnonzero(access == _WRITE).tolist():
        others = np.flatnonzero((lane != lane[a]) & (seq != seq[a]))
        if others.size:
            return a, int(others[0])
    return None


def _race_pair(warp: np.ndarray, access: np.ndarray):
    """Positions (writer, other) of two accesses of one word by different warps that race:
    at least one writes and not both are atomic; ``None`` if there are none."""
    plain_writes = np.flatnonzero(access == _WRITE)
    for a in plain_writes.tolist():  # a plain write races with any access of another warp
        others = np.flatnonzero(warp != warp[a])
        if others.size:
            other_writes = others[access[others] != _READ]
            return a, int(other_writes[0] if other_writes.size else others[0])
    atomics = np.flatnonzero(access == _ATOMIC)
    for a in atomics.tolist():  # an atomic races with a plain read of another warp
        readers = np.flatnonzero((warp != warp[a]) & (access == _READ))
        if readers.size:
            return a, int(readers[0])
    return None



SIM_FILES.add(__file__)
