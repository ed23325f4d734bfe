"""What a SIMT simulator run records: events, hazards and totals (see :mod:`gpu_lessons.kernels.simt`).

* :class:`Event` -- one warp instruction with its active mask and, for memory instructions,
  the memory model's counts;
* :class:`Race`, :class:`UninitialisedRead`, :class:`ShuffleRead` -- hazards, each with the
  block, warp and source line;
* :class:`Stats` -- totals over any set of events (the whole run, a branch region, one warp,
  one array); :class:`ArrayStats` -- per-array traffic (requests, sectors, elements);
* :class:`SimResult` -- all of it for one launch.

Every figure a kernel puzzle grades is here: sectors per request (coalescing), wavefronts
beyond the ideal (bank conflicts), SIMT efficiency (divergence, per region too), global
loads per element (reuse), barriers, races, uninitialised shared reads, shuffles that read
an inactive lane, and the serialisation of atomics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ... import _validate
from ..._format import Readout, Row, binary_bytes
from ..._math import cdiv
from ...hardware import WARP_SIZE
from ...memory import BANK_BYTES, BANKS, SECTOR_BYTES

#: Instruction kinds the simulator issues (its own instruction set, not SASS).
KINDS = ("alu", "branch", "ld.global", "st.global", "ld.shared", "st.shared", "bar.sync",
         "atom.global", "atom.shared", "shfl", "bar.warp", "cp.async", "mma")
MEMORY_KINDS = ("ld.global", "st.global", "atom.global", "ld.shared", "st.shared",
                "atom.shared")
_LANE_IDS = np.arange(WARP_SIZE)


class Event(NamedTuple):
    """One warp instruction (or a ``reconverge`` marker, which issues nothing).

    ``step``: the warp's issue slot (0, 1, 2, ...); ``time``: step plus the slots the warp
    spent waiting at barriers for slower warps, so warps line up at barriers; ``phase``: how
    many barriers the block has passed; ``mask``: active lanes, bit i = lane i;
    ``path``: the branch bodies it is inside (``"L12:then"``, ``"parity:else"``, ...);
    ``line``: the kernel's source line.

    Memory instructions carry ``array`` and the memory model's counts: ``sectors`` and
    ``requests`` (global), ``wavefronts``, ``ideal_wavefronts`` and ``bank_conflicts``
    (shared); ``requested_bytes`` (global), and with ``run(..., record_indices=True)``
    ``indices``: per lane, the flat (row-major) element index it touched, ``None`` for an
    inactive lane.  Atomics carry ``serialisation``: how many active lanes hit the most
    contended address.  ``shfl`` carries ``inactive_reads``: active lanes that read an
    inactive lane.  ``bar.sync`` carries ``wait``: issue slots spent waiting for slower warps.
    A vector access (``t.vload``/``t.vstore``) carries ``width``: elements per lane (2 or 4),
    one request of that many times the element size; ``indices`` name each lane's first.
    """

    block: int
    warp: int
    step: int
    time: int
    phase: int
    kind: str
    mask: int
    path: tuple[str, ...]
    line: int | None
    array: str | None = None
    sectors: int | None = None
    requests: int | None = None
    requested_bytes: int | None = None
    wavefronts: int | None = None
    ideal_wavefronts: int | None = None
    bank_conflicts: int | None = None
    serialisation: int | None = None
    inactive_reads: int | None = None
    wait: int | None = None
    indices: tuple | None = None
    width: int | None = None

    @property
    def issued(self) -> bool:
        return self.kind != "reconverge"

    @property
    def active(self) -> int:
        """Active lanes."""
        return self.mask.bit_count()

    @property
    def lanes(self) -> np.ndarray:
        """The active mask as bool[32]."""
        return (self.mask >> _LANE_IDS) & 1 == 1

    def in_region(self, region: str) -> bool:
        """Inside the branch labelled ``region`` (``"parity"`` = both paths,
        ``"parity:then"`` = one)."""
        return any(p == region or p.startswith(region + ":") for p in self.path)


@dataclass(frozen=True)
class Race:
    """A shared-memory word that two warps touched between the same two barriers, one
    of them writing it: a missing ``__syncthreads()``.  Two atomics never race with each
    other; an atomic and a plain read or write of another warp do.  Also two lanes of one
    warp, one writing the word, between the same two ``t.syncwarp()`` calls: a missing
    ``__syncwarp()`` (``writer_lane`` and ``other_lane`` say which)."""

    block: int
    phase: int
    array: str
    index: tuple[int, ...]
    writer_warp: int
    writer_line: int | None
    other_warp: int
    other_line: int | None
    other_access: str  # "read", "write" or "atomic"
    writer_access: str = "write"  # "write" or "atomic"
    #: For a race between lanes of one warp (no ``t.syncwarp()`` between): the two lanes.
    writer_lane: int | None = None
    other_lane: int | None = None

    @property
    def within_warp(self) -> bool:
        return self.writer_lane is not None

    @property
    def missing(self) -> str:
        """The barrier that would order the two accesses."""
        return "t.syncwarp()" if self.within_warp else "t.sync()"

    def __str__(self) -> str:
        where = ("before the first t.sync()" if self.phase == 0
                 else f"after t.sync() #{self.phase}")
        idx = ", ".join(map(str, self.index))
        verbs = {"read": "reads", "write": "writes", "atomic": "updates (atomically)"}
        if self.within_warp:
            return (f"race on {self.array}[{idx}] in block {self.block} {where}: lane "
                    f"{self.writer_lane} of warp {self.writer_warp} writes it (line "
                    f"{self.writer_line}) and lane {self.other_lane} of the same warp "
                    f"{verbs[self.other_access]} it (line {self.other_line}) with nothing "
                    f"between to order them (since Volta a warp's lanes may run apart)")
        return (f"race on {self.array}[{idx}] in block {self.block} {where}: warp "
                f"{self.writer_warp} {verbs[self.writer_access]} it (line {self.writer_line}) "
                f"and warp {self.other_warp} {verbs[self.other_access]} it "
                f"(line {self.other_line}) with no barrier in between")


@dataclass(frozen=True)
class UninitialisedRead:
    """A read of shared memory that no thread of the block had written yet (shared memory
    starts undefined).  ``index``: the first such element; ``elements``: how many of the
    elements this instruction read were unwritten.  One is recorded per block, warp, line
    and array: the first time that line read unwritten words."""

    block: int
    warp: int
    line: int | None
    array: str
    index: tuple[int, ...]
    elements: int

    def __str__(self) -> str:
        idx = ", ".join(map(str, self.index))
        return (f"line {self.line}: warp {self.warp} of block {self.block} reads "
                f"{self.array}[{idx}] (and {self.elements - 1} more) where nothing was "
                f"written yet (shared memory starts undefined)" if self.elements > 1 else
                f"line {self.line}: warp {self.warp} of block {self.block} reads "
                f"{self.array}[{idx}] where nothing was written yet (shared memory starts "
                f"undefined)")


@dataclass(frozen=True)
class ShuffleRead:
    """An active lane whose shuffle read a lane that was not active: CUDA leaves the value
    undefined (Programming Guide, "Warp Shuffle Functions")."""

    block: int
    warp: int
    line: int | None
    op: str          # "shfl_down", "shfl_up", "shfl_xor", "shfl_idx"
    lane: int        # the reading lane
    src_lane: int    # the inactive lane it read

    def __str__(self) -> str:
        return (f"line {self.line}: {self.op} in lane {self.lane} of warp {self.warp} "
                f"(block {self.block}) read lane {self.src_lane}, which was not active "
                f"(CUDA leaves that value undefined)")


@dataclass(frozen=True)
class PartialWarp:
    """A warp-wide operation (a full-mask shuffle, ``__syncwarp()``) that only some of the warp's
    running lanes executed.  CUDA requires every non-exited lane named in the mask to execute
    it, or the result is undefined (Programming Guide, "Warp Shuffle Functions" and
    "Synchronization Functions"); lanes that returned have exited and do not count, lanes a
    branch or a ``break`` left out do."""

    block: int
    warp: int
    line: int | None
    op: str                   # "shfl_down", "shfl_up", "shfl_xor", "shfl_idx", "syncwarp"
    missing: tuple[int, ...]  # running lanes that did not execute it

    def __str__(self) -> str:
        lanes = ", ".join(map(str, self.missing[:8])) + (", ..." if len(self.missing) > 8 else "")
        return (f"line {self.line}: t.{self.op}() ran under a branch that left lanes {lanes} of "
                f"warp {self.warp} (block {self.block}) out; every lane that has not returned "
                f"must execute a full-mask warp operation, or CUDA leaves its result undefined "
                f"- move it out of the branch (lanes with nothing to add can add 0)")


@dataclass(frozen=True)
class Fp64Use:
    """A kernel line that computes in float64 (FP64): a Python float in ``t.local(0.0)``, a
    float64 argument or ``np.float64`` mixed into the arithmetic.  FP64 runs at 1/2 of FP32's
    rate on an H100/H200 and 1/64 on consumer GPUs (the catalog's ``fp64`` figures)."""

    line: int | None
    instructions: int

    def __str__(self) -> str:
        return (f"line {self.line}: {self.instructions:,} warp instructions in float64 (FP64); "
                f"if the data is float32, keep the arithmetic float32 (acc = 0.0 then acc += x[i], "
                f"or t.local(0.0, np.float32))")


@dataclass(frozen=True)
class SharedArray:
    """A ``__shared__`` array a block declared (``t.shared``): its name, its bytes and the
    kernel line that declared it."""

    name: str
    nbytes: int
    line: int | None

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.name}: {binary_bytes(self.nbytes)}{where}"


@dataclass(frozen=True, repr=False)
class Stats(Readout):
    """Totals over a set of warp instructions.

    simt_efficiency      = sum(active lanes) / (32 x instructions)
    sectors_per_request  = global sectors / global requests (4 is ideal for 4-byte loads)
    global_efficiency    = bytes the lanes asked for / (sectors x 32 B)
    bank_conflicts       = shared wavefronts - ideal wavefronts (Nsight Compute's count)
    barrier_wait         = issue slots warps spent waiting at barriers for slower warps
    atomic_serialisation = sum over atomic instructions of the most lanes that hit one
                           address (32 lanes on one counter: 32; all distinct: 1 each)

    Global requests, sectors and shared wavefronts include loads, stores and atomics.
    """

    instructions: int
    active_lanes: int
    by_kind: dict = field(hash=False)
    global_requests: int
    global_sectors: int
    global_requested_bytes: int
    shared_requests: int
    shared_wavefronts: int
    bank_conflicts: int
    barrier_instructions: int
    barrier_wait: int
    shared_ideal_wavefronts: int = 0
    atomic_instructions: int = 0
    atomic_lanes: int = 0
    atomic_serialisation: int = 0
    shuffle_instructions: int = 0
    shuffle_inactive_reads: int = 0

    @property
    def simt_efficiency(self) -> float:
        return self.active_lanes / (WARP_SIZE * self.instructions) if self.instructions else 0.0

    @property
    def sectors_per_request(self) -> float:
        return (self.global_sectors / self.global_requests if self.global_requests
                else float("nan"))

    @property
    def global_efficiency(self) -> float:
        moved = 32 * self.global_sectors
        return self.global_requested_bytes / moved if moved else float("nan")

    @property
    def mean_serialisation(self) -> float:
        """atomic_serialisation / atomic_instructions: lanes per address, on average over
        the atomic instructions (1 = no contention); nan without atomics."""
        return (self.atomic_serialisation / self.atomic_instructions
                if self.atomic_instructions else float("nan"))

    def readout_rows(self) -> tuple[Row, ...]:
        """Warp instructions and SIMT efficiency, then each kind of traffic the run had."""
        rows = [Row("warp instructions", self.instructions),
                Row("SIMT efficiency", self.simt_efficiency, "%")]
        if self.global_requests:
            rows += [Row("global requests", self.global_requests),
                     Row("global sectors", self.global_sectors),
                     Row("sectors / request", self.sectors_per_request),
                     Row("moved bytes used", self.global_efficiency, "%")]
        if self.shared_requests:
            rows += [Row("shared requests", self.shared_requests),
                     Row("shared wavefronts", self.shared_wavefronts),
                     Row("bank conflicts", self.bank_conflicts)]
        if self.atomic_instructions:
            rows += [Row("atomic instructions", self.atomic_instructions),
                     Row("atomic lane operations", self.atomic_lanes),
                     Row("atomic serialisation", self.atomic_serialisation)]
        if self.shuffle_instructions:
            rows += [Row("shuffles", self.shuffle_instructions),
                     Row("shuffle reads of inactive lanes", self.shuffle_inactive_reads)]
        if self.barrier_instructions:
            rows += [Row("barrier instructions", self.barrier_instructions),
                     Row("issue slots waiting at barriers", self.barrier_wait)]
        return tuple(rows)


def _stats(events) -> Stats:
    by_kind = dict.fromkeys(KINDS, 0)
    active = greq = gsec = gbytes = sreq = swave = sideal = bwait = 0
    alanes = aserial = sinactive = 0
    for e in events:
        kind = e.kind
        if kind == "reconverge":
            continue
        by_kind[kind] += 1
        lanes = e.mask.bit_count()
        active += lanes
        if e.array is not None:
            if e.sectors is not None:
                greq += e.requests
                gsec += e.sectors
                gbytes += e.requested_bytes
            else:
                sreq += 1
                swave += e.wavefronts
                sideal += e.ideal_wavefronts
            if e.serialisation is not None:
                alanes += lanes
                aserial += e.serialisation
        elif e.wait:
            bwait += e.wait
        elif e.inactive_reads:
            sinactive += e.inactive_reads
    return Stats(instructions=sum(by_kind.values()), active_lanes=active, by_kind=by_kind,
                 global_requests=greq, global_sectors=gsec, global_requested_bytes=gbytes,
                 shared_requests=sreq, shared_wavefronts=swave, bank_conflicts=swave - sideal,
                 barrier_instructions=by_kind["bar.sync"], barrier_wait=bwait,
                 shared_ideal_wavefronts=sideal,
                 atomic_instructions=by_kind["atom.global"] + by_kind["atom.shared"],
                 atomic_lanes=alanes, atomic_serialisation=aserial,
                 shuffle_instructions=by_kind["shfl"], shuffle_inactive_reads=sinactive)


@dataclass(frozen=True, repr=False)
class ArrayStats(Readout):
    """Traffic of one array over a run (shared arrays: summed over every block's copy).

    ``loads``/``stores``/``atomics``: warp instructions (requests) on it;
    ``load_elements`` etc.: element accesses by active lanes (a warp load of 32 lanes
    counts 32); ``*_sectors``: 32-byte sectors moved (global arrays); ``wavefronts`` and
    ``ideal_wavefronts``: shared-memory wavefronts (shared arrays).
    ``loads_per_element = load_elements / size``: how often each element was loaded on
    average -- 1 for perfect reuse through registers or shared memory, ``n`` for a naive
    matrix multiply's inputs.
    """

    name: str
    space: str
    shape: tuple[int, ...]
    itemsize: int = 4
    loads: int = 0
    stores: int = 0
    atomics: int = 0
    load_elements: int = 0
    store_elements: int = 0
    atomic_elements: int = 0
    load_sectors: int = 0
    store_sectors: int = 0
    atomic_sectors: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def requests(self) -> int:
        return self.loads + self.stores + self.atomics

    @property
    def sectors(self) -> int:
        return self.load_sectors + self.store_sectors + self.atomic_sectors

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests and self.space == "global" \
            else float("nan")

    @property
    def bank_conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts

    @property
    def loads_per_element(self) -> float:
        return self.load_elements / self.size

    def readout_title(self) -> str:
        return f"{self.space} {self.name}{list(self.shape)}"

    def readout_rows(self) -> tuple[Row, ...]:
        rows = [Row("loads", self.loads), Row("elements loaded", self.load_elements),
                Row("loads per element", self.loads_per_element), Row("stores", self.stores),
                Row("atomics", self.atomics)]
        if self.space == "global" and self.requests:
            rows += [Row("sectors", self.sectors),
                     Row("sectors / request", self.sectors_per_request)]
        if self.space == "shared" and self.requests:
            rows += [Row("wavefronts", self.wavefronts), Row("bank conflicts", self.bank_conflicts)]
        return tuple(rows)


def _array_stats(events, shapes: dict) -> dict[str, ArrayStats]:
    acc = {name: dict(loads=0, stores=0, atomics=0, load_elements=0, store_elements=0,
                      atomic_elements=0, load_sectors=0, store_sectors=0, atomic_sectors=0,
                      wavefronts=0, ideal_wavefronts=0) for name in shapes}
    prefix = {"ld": "load", "st": "store", "atom": "atomic"}
    for e in events:
        if e.array is None:
            continue
        a = acc[e.array]
        op = prefix[e.kind.split(".")[0]]
        a[op + "s"] += 1
        a[op + "_elements"] += e.mask.bit_count()
        if e.sectors is not None:
            a[op + "_sectors"] += e.sectors
        else:
            a["wavefronts"] += e.wavefronts
            a["ideal_wavefronts"] += e.ideal_wavefronts
    return {name: ArrayStats(name, space, shape, itemsize, **acc[name])
            for name, (space, shape, itemsize) in shapes.items()}


@dataclass(frozen=True, repr=False)
class AccessMap(Readout):
    """Per element of one array: how the selected memory instructions touched it.

    Arrays are flat (row-major, ``size`` elements).  ``accesses``: lane accesses (loads +
    stores + atomics, one per active lane); ``loads``/``stores``/``atomics``: the same by
    kind; ``first_block``/``first_warp``/``first_lane``: who touched it first (-1: never).
    ``byte_offset``: from the array's start (row-major layout, as the simulator places it:
    global arrays 256-byte aligned, shared arrays 128-byte aligned, so these are the
    element's position within sectors and banks); ``sector = byte_offset // 32`` (global
    memory's unit of transfer); ``bank = (byte_offset // 4) % 32`` (shared memory's bank,
    of the element's first 4-byte word).  ``sectors_touched``: the distinct sectors.
    """

    array: str
    space: str
    shape: tuple[int, ...]
    itemsize: int
    instructions: int
    accesses: np.ndarray
    loads: np.ndarray
    stores: np.ndarray
    atomics: np.ndarray
    first_block: np.ndarray
    first_warp: np.ndarray
    first_lane: np.ndarray

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def byte_offset(self) -> np.ndarray:
        return np.arange(self.size, dtype=np.int64) * self.itemsize

    @property
    def sector(self) -> np.ndarray:
        return self.byte_offset // SECTOR_BYTES

    @property
    def bank(self) -> np.ndarray:
        return self.byte_offset // BANK_BYTES % BANKS

    @property
    def sectors_touched(self) -> np.ndarray:
        return np.unique(self.sector[self.accesses > 0])

    def readout_title(self) -> str:
        return f"AccessMap of {self.space} {self.array}{list(self.shape)}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("instructions", self.instructions),
                Row("lane accesses", int(self.accesses.sum())),
                Row("elements touched", int(np.count_nonzero(self.accesses))),
                Row("elements", self.size))


def _access_map(info: ArrayStats, events) -> AccessMap:
    size = info.size
    per = {k: np.zeros(size, np.int64) for k in ("ld", "st", "atom")}
    first = np.full((3, size), -1, np.int64)
    for e in events:
        lanes = [lane for lane, i in enumerate(e.indices) if i is not None]
        idx = np.array([e.indices[lane] for lane in lanes], dtype=np.int64)
        np.add.at(per[e.kind.split(".")[0]], idx, 1)
        fresh = first[0, idx] < 0
        if fresh.any():
            f = idx[fresh]
            first[0, f] = e.block
            first[1, f] = e.warp
            first[2, f] = np.array(lanes)[fresh]
    loads, stores, atomics = per["ld"], per["st"], per["atom"]
    return AccessMap(info.name, info.space, info.shape, info.itemsize, len(events),
                     loads + stores + atomics, loads, stores, atomics,
                     first[0], first[1], first[2])


@dataclass(frozen=True, repr=False)
class SimResult(Readout):
    """What a run recorded: the event log, hazards and totals.

    ``barriers``: block-wide barriers passed (one per ``__syncthreads()`` per block);
    ``notes``: things worth a look that are not errors, in words (uninitialised shared reads,
    warps meeting at different barriers, shuffles reading inactive lanes);
    ``uninitialised_reads``, ``shuffle_reads``: the same hazards as data;
    ``partial_warps``: shuffles and ``t.syncwarp()`` that only some running lanes executed (a
    hazard); ``fp64``: the lines that compute in float64, with their warp instructions;
    ``arrays``: :class:`ArrayStats` per array name (kernel arguments and shared arrays);
    ``shared_bytes_per_block``: the static shared memory one block declared, in bytes — its
    ``t.shared`` arrays laid out one after another, each from a 128-byte boundary, as the
    simulator places them (the most any block of the run declared; what the occupancy
    calculator needs as ``shared_mem_per_block``); ``shared_arrays``: those arrays, each with
    the line that declared it.
    """

    kernel: str
    grid: object
    block: object
    order: object
    events: tuple[Event, ...]
    races: tuple[Race, ...]
    notes: tuple[str, ...]
    barriers: int
    totals: Stats
    uninitialised_reads: tuple[UninitialisedRead, ...] = ()
    shuffle_reads: tuple[ShuffleRead, ...] = ()
    shared_bytes_per_block: int = 0
    shared_arrays: tuple[SharedArray, ...] = ()
    partial_warps: tuple[PartialWarp, ...] = ()
    fp64: tuple[Fp64Use, ...] = ()
    #: array name -> (space, shape, itemsize), for :attr:`arrays`
    array_shapes: dict = field(default_factory=dict, hash=False, compare=False)

    @cached_property
    def arrays(self) -> dict[str, ArrayStats]:
        """:class:`ArrayStats` per array name (kernel arguments and shared arrays), summed
        over the whole run; computed on first use."""
        return _array_stats(self.events, self.array_shapes)

    # the numbers a lesson asks for first
    simt_efficiency = property(lambda self: self.totals.simt_efficiency)
    instructions = property(lambda self: self.totals.instructions)
    sectors_per_request = property(lambda self: self.totals.sectors_per_request)
    bank_conflicts = property(lambda self: self.totals.bank_conflicts)

    @property
    def warps_per_block(self) -> int:
        return cdiv(self.block.x * self.block.y * self.block.z, WARP_SIZE)

    @property
    def hazards(self) -> tuple[str, ...]:
        """Every race, uninitialised read, inactive-lane shuffle and partial-warp operation, in
        words (empty when the run is clean)."""
        return (tuple(map(str, self.races)) + tuple(map(str, self.uninitialised_reads))
                + tuple(map(str, self.shuffle_reads)) + tuple(map(str, self.partial_warps)))

    def stats(self, *, region: str | None = None, kind: str | None = None,
              block: int | None = None, warp: int | None = None,
              array: str | None = None) -> Stats:
        """Totals over the instructions that match every filter given.

        ``region``: a branch label (``t.if_(cond, "parity")`` → ``"parity"`` for both paths,
        ``"parity:then"``/``"parity:else"`` for one; unlabelled branches are ``"L<line>"``);
        ``kind``: one of :data:`KINDS`, or ``"global"``/``"shared"`` for every memory
        instruction of that space; ``block``: linear block index; ``warp``: warp index
        within the block; ``array``: the memory instructions on one array.
        """
        if kind is not None:
            _validate.choice("kind", kind, (*KINDS, "global", "shared"))
        if array is not None:
            _validate.choice("array", array, tuple(self.arrays))
        evs = [e for e in self.events
               if (region is None or e.in_region(region))
               and (kind is None or e.kind == kind or e.kind.endswith("." + kind))
               and (block is None or e.block == block)
               and (warp is None or e.warp == warp)
               and (array is None or e.array == array)]
        return _stats(evs)

    def warp_events(self, block: int = 0, warp: int = 0) -> list[Event]:
        """One warp's issued instructions in issue order."""
        return [e for e in self.events if e.block == block and e.warp == warp and e.issued]

    def access_map(self, array: str, *, block: int | None = None, warp: int | None = None,
                   step: int | None = None) -> AccessMap:
        """Which elements of ``array`` the memory instructions touched, per element.

        Needs a run made with ``record_indices=True``.  ``block``/``warp`` keep one block's
        or one warp's instructions; ``step`` (with ``block`` and ``warp``, default 0) keeps
        the one instruction at that issue slot.
        """
        _validate.choice("array", array, tuple(self.arrays))
        if step is not None:
            block = 0 if block is None else block
            warp = 0 if warp is None else warp
        evs = [e for e in self.events
               if e.array == array and (block is None or e.block == block)
               and (warp is None or e.warp == warp) and (step is None or e.step == step)]
        if step is not None and not evs:
            raise ValueError(f"step={step}: warp {warp} of block {block} issued no memory "
                             f"instruction on {array} at that issue slot")
        if any(e.indices is None for e in evs):
            raise ValueError("this run did not record element indices: run the kernel with "
                             "simt.run(..., record_indices=True) to draw its access map")
        info = self.arrays[array]
        return _access_map(info, evs)

    def lane_matrix(self, block: int = 0, warp: int = 0) -> np.ndarray:
        """bool[32, steps]: which lanes were active at each issue slot of one warp —
        the lanes x time picture of divergence."""
        evs = self.warp_events(block, warp)
        if not evs:
            return np.zeros((WARP_SIZE, 0), dtype=bool)
        return np.stack([e.lanes for e in evs], axis=1)

    def readout_title(self) -> str:
        return f"SIMT run of {self.kernel}<<<{launch_text(self.grid, self.block)}>>>"

    def readout_rows(self) -> tuple[Row, ...]:
        """The warps' order, the totals' rows, the shared memory declared, the barriers, the
        races (the first three named) and the first five notes."""
        order = (f"{self.order}" if isinstance(self.order, str)
                 else f"random, seed {self.order}")
        declared = ((Row("shared memory declared per block", self.shared_bytes_per_block, "B"),
                     Row("shared arrays", ", ".join(map(str, self.shared_arrays))))
                    if self.shared_bytes_per_block else ())
        return (Row("warps take turns in order", order), *self.totals.readout_rows(), *declared,
                Row("barriers (block-wide)", self.barriers), Row("races", len(self.races)),
                *(Row("race", str(r)) for r in self.races[:3]),
                *(Row("note", n) for n in self.notes[:5]))


def launch_text(grid, block, *, drop_trailing_ones: bool = False) -> str:
    """A launch's grid and block as its ``<<<grid, block>>>`` shows them: ``4`` for (4, 1, 1),
    otherwise every dimension, ``(4, 2, 1)``, or with ``drop_trailing_ones`` the dimensions up
    to the last that is not 1, ``(4, 2)``."""
    def one(d) -> str:
        d = tuple(d)
        if all(v == 1 for v in d[1:]):
            return str(d[0])
        while drop_trailing_ones and d[-1] == 1:
            d = d[:-1]
        return "(" + ", ".join(str(v) for v in d) + ")"

    return f"{one(grid)}, {one(block)}"
