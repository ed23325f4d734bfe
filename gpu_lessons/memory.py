"""Memory transactions of one warp-wide load, counted the way Nsight Compute counts them.

Global memory (Volta and later)
    L1 and L2 lines are 128 bytes, split into four 32-byte *sectors*; only the sectors a warp
    touches move (docs/misconceptions.md, M14: a line is not the unit of transfer).  One warp-wide load
    instruction is one *request*, and it costs as many sectors as there are distinct 32-byte
    segments among its lanes' accesses.  Nsight Compute reports the two as
    ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum`` and
    ``l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum``.
    Sources: CUDA C++ Best Practices Guide §10.2.1 "Coalesced Access to Global Memory";
    Nsight Compute Kernel Profiling Guide, "Memory Tables" (request, sector, wavefront).

Shared memory
    32 banks, each 4 bytes wide: ``bank = (address // 4) % 32``.  Lanes that read the same
    32-bit word share it (broadcast); lanes that read *different* words of one bank are
    served one word per cycle, so an n-way conflict costs n *wavefronts*.  A wavefront
    delivers at most 32 banks x 4 B = 128 bytes, so a warp's 8-byte load is processed as two
    half-warp phases and a 16-byte load as four quarter-warp phases (fewer when lanes pair
    up on the same address), and conflicts are counted inside each phase (see
    :func:`shared_load` for the full rule and its sources).
    Nsight Compute: ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum`` and
    ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`` (wavefronts beyond the ideal).
    Source: CUDA C++ Programming Guide, "Compute Capability 5.x → Shared Memory" (the same
    bank layout holds for every later compute capability).

>>> global_load(strided(1)).sectors          # 32 consecutive floats
4
>>> global_load(strided(1, offset=4)).sectors  # the same, 4 bytes off
5
>>> shared_load(tile_column(0, width=32)).wavefronts             # column of a 32x32 tile
32
>>> shared_load(tile_column(0, width=32, padding=1)).wavefronts  # pad one column
1
>>> constant_load(broadcast(0)).passes       # every lane reads one __constant__ word
1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import _validate
from ._format import Readout, Row
from .hardware import WARP_SIZE

#: Unit of transfer between L1/L2/DRAM since Maxwell/Pascal (Best Practices Guide §10.2.1).
SECTOR_BYTES = 32
#: L1/L2 cache line: four sectors (Nsight Compute Kernel Profiling Guide, "sector").
LINE_BYTES = 128
SECTORS_PER_LINE = LINE_BYTES // SECTOR_BYTES
#: Shared-memory banks and bank width (Programming Guide, "Compute Capability 5.x").
BANKS = 32
BANK_BYTES = 4
#: Bytes one shared-memory wavefront can deliver: one word from each bank.
WAVEFRONT_BYTES = BANKS * BANK_BYTES
#: Per-thread access widths the load instructions offer (LD/LDS .8 .16 .32 .64 .128).
ACCESS_SIZES = (1, 2, 4, 8, 16)

# Keeps every address computation exact in int64; far beyond any device's address space.
_ADDRESS_LIMIT = 2**62
# Word indices stay below 2**60, so a phase number (< 4) fits above them in an int64.
_PHASE_SHIFT = 60


# -- results ------------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class GlobalLoad(Readout):
    """One warp's global load: what it asked for and the 32-byte sectors that had to move.

    ``lane_sector[i]`` is the sector index (``address // 32``) lane ``i`` reads, ``None`` for
    an inactive lane; a naturally aligned access of at most 16 bytes never straddles two
    sectors, so one index per lane is the whole map.
    """

    addresses: tuple[int | None, ...]
    bytes_per_thread: int
    sectors: int
    lines: int
    requests: int
    lane_sector: tuple[int | None, ...]

    @property
    def active_lanes(self) -> int:
        return sum(a is not None for a in self.addresses)

    @property
    def requested_bytes(self) -> int:
        """Active lanes x bytes per thread (lanes reading the same bytes each count)."""
        return self.active_lanes * self.bytes_per_thread

    @property
    def moved_bytes(self) -> int:
        """Sectors x 32 bytes: what L1 actually fetches for this request."""
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """requested / moved bytes.  Above 1 when lanes share data (a broadcast moves 32 B
        and serves 32 lanes), 0 when no lane is active."""
        return self.requested_bytes / self.moved_bytes if self.sectors else 0.0

    @property
    def sector_ids(self) -> tuple[int, ...]:
        """The distinct sectors touched (``address // 32``), ascending."""
        return tuple(sorted({s for s in self.lane_sector if s is not None}))

    @property
    def line_ids(self) -> tuple[int, ...]:
        """The distinct 128-byte lines touched (``address // 128``), ascending; as many as
        :attr:`lines`."""
        return self.block_ids(LINE_BYTES)

    def block_ids(self, block_bytes: int) -> tuple[int, ...]:
        """The distinct aligned ``block_bytes``-byte blocks touched (``address // block_bytes``),
        ascending.  ``block_bytes``: a power of two, at least one 32-byte sector -- 32 gives
        :attr:`sector_ids`, 128 :attr:`line_ids`, 64 the DRAM fetches of an L2 that fetches
        64 bytes at a time.  A lane's access lies inside one sector, so the blocks are those
        its sector lies in: ``sector // (block_bytes / 32)``.
        """
        b = _validate.integer("block_bytes", block_bytes, low=SECTOR_BYTES)
        if b & (b - 1):
            raise ValueError(f"block_bytes={b} must be a power of two (32, 64, 128, ...): "
                             f"aligned blocks of memory")
        per_block = b // SECTOR_BYTES
        return tuple(sorted({s // per_block for s in self.sector_ids}))

    def readout_title(self) -> str:
        return "Global load, one warp"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("active lanes", f"{self.active_lanes} of {WARP_SIZE}"),
                Row("access size per thread", self.bytes_per_thread, "B"),
                Row("requests", self.requests),
                Row("sectors (32 B)", self.sectors),
                Row("lines (128 B)", self.lines),
                Row("requested", self.requested_bytes, "B"),
                Row("moved", self.moved_bytes, "B"),
                Row("efficiency", self.efficiency, "%"))


@dataclass(frozen=True, repr=False)
class SharedLoad(Readout):
    """One warp's shared-memory load: wavefronts, bank conflicts and the bank map.

    ``lane_words[i]``: the 32-bit words lane ``i`` reads, as word indices ``address // 4``
    (one word for accesses of up to 4 bytes, two for 8 bytes, four for 16 bytes; empty for
    an inactive lane).  ``lane_banks[i]``: the bank of each of those words, ``word % 32``.
    ``lane_phase[i]``: which phase (group of lanes served together) lane ``i`` belongs to.
    ``bank_words[p][k]``: distinct 32-bit words phase ``p`` reads from bank ``k``; the
    phase costs ``max(bank_words[p])`` wavefronts.
    """

    addresses: tuple[int | None, ...]
    bytes_per_thread: int
    wavefronts: int
    ideal_wavefronts: int
    lane_words: tuple[tuple[int, ...], ...]
    lane_banks: tuple[tuple[int, ...], ...]
    lane_phase: tuple[int | None, ...]
    bank_words: tuple[tuple[int, ...], ...]

    @property
    def bank_conflicts(self) -> int:
        """Wavefronts beyond the ideal: what Nsight Compute's
        ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`` counts."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def phases(self) -> int:
        return len(self.bank_words)

    @property
    def active_lanes(self) -> int:
        return sum(a is not None for a in self.addresses)

    @property
    def ways(self) -> int:
        """The worst conflict degree in any phase (1 = conflict-free, 0 = no active lane)."""
        return max((max(p) for p in self.bank_words), default=0)

    def readout_title(self) -> str:
        return "Shared-memory load, one warp"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("active lanes", f"{self.active_lanes} of {WARP_SIZE}"),
                Row("access size per thread", self.bytes_per_thread, "B"),
                Row("phases", self.phases), Row("wavefronts", self.wavefronts),
                Row("ideal wavefronts", self.ideal_wavefronts),
                Row("bank conflicts", self.bank_conflicts),
                Row("worst conflict", f"{self.ways}-way"))


@dataclass(frozen=True, repr=False)
class ConstantLoad(Readout):
    """One warp's load through the constant cache: one pass per distinct address the lanes read.

    ``unique_addresses``: the distinct byte addresses the active lanes read, ascending.
    """

    addresses: tuple[int | None, ...]
    bytes_per_thread: int
    unique_addresses: tuple[int, ...]

    @property
    def passes(self) -> int:
        """The serialised reads: one per distinct address (1 = a broadcast to the whole warp)."""
        return len(self.unique_addresses)

    @property
    def active_lanes(self) -> int:
        return sum(a is not None for a in self.addresses)

    def readout_title(self) -> str:
        return "Constant-cache load, one warp"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("active lanes", f"{self.active_lanes} of {WARP_SIZE}"),
                Row("access size per thread", self.bytes_per_thread, "B"),
                Row("distinct addresses", self.passes), Row("passes", self.passes))


# -- the models ---------------------------------------------------------------------------------

def global_load(addresses, bytes_per_thread: int = 4, *, mask=None) -> GlobalLoad:
    """Sectors and lines one warp-wide global load touches.

    ``addresses``: 32 byte addresses, one per lane (``None`` = inactive lane); ``mask``:
    optional 32 bools, ``False`` = inactive.  Each active lane reads ``bytes_per_thread``
    bytes starting at its address, which must be a multiple of ``bytes_per_thread``.

    sectors  = |{ floor(a / 32) : a an active lane's address }|
    lines    = |{ floor(a / 128) }|
    requests = 1 (one warp instruction), 0 if no lane is active

    A naturally aligned access of b <= 16 bytes lies inside one 32-byte sector, so "every
    sector overlapping [a, a+b)" is the single sector ``a // 32``.  Measured with Nsight
    Compute on an H200 (sectors / requests): 4 sectors for 32 consecutive floats, 5 when
    misaligned by 4 bytes, 8 at stride 2, 32 at stride >= 8, 1 when every lane reads one
    address, 8 for 32 consecutive doubles, 16 for 32 consecutive float4 (these and every other
    pattern in ``tests/data/h200_ncu_memory.json`` match exactly).
    """
    a, active, b = _lanes(addresses, bytes_per_thread, mask)
    sector = a // SECTOR_BYTES
    touched = np.unique(sector[active])
    lines = np.unique(touched // SECTORS_PER_LINE).size
    return GlobalLoad(
        addresses=_as_tuple(a, active),
        bytes_per_thread=b,
        sectors=int(touched.size),
        lines=int(lines),
        requests=int(active.any()),
        lane_sector=_as_tuple(sector, active),
    )


def constant_load(addresses, bytes_per_thread: int = 4, *, mask=None) -> ConstantLoad:
    """A warp-wide read of ``__constant__`` data through the constant cache (same arguments
    as :func:`global_load`).  The cache serves one address at a time: "requests to different
    addresses by threads within a warp are serialized, so cost scales linearly with the number
    of unique addresses read by all threads within a warp" (CUDA C++ Programming Guide,
    "Constant Memory")::

        passes = |{ a : a an active lane's address }|

    so 32 lanes reading one value take 1 pass, 32 lanes reading 32 consecutive floats 32.
    """
    a, active, b = _lanes(addresses, bytes_per_thread, mask)
    return ConstantLoad(addresses=_as_tuple(a, active), bytes_per_thread=b,
                        unique_addresses=tuple(int(x) for x in np.unique(a[active])))


def line_sectors(line: int) -> range:
    """The four 32-byte sectors of 128-byte line ``line``: ``4·line`` to ``4·line + 3``."""
    line = _validate.integer("line", line, low=0)
    return range(line * SECTORS_PER_LINE, (line + 1) * SECTORS_PER_LINE)


def shared_load(addresses, bytes_per_thread: int = 4, *, mask=None) -> SharedLoad:
    """Wavefronts and bank conflicts of one warp-wide shared-memory load.

    Same arguments as :func:`global_load`.  The rule, step by step:

    1. Each active lane reads ``max(1, b/4)`` consecutive 32-bit words starting at word
       ``a // 4``; word ``w`` lives in bank ``w % 32``.
    2. Lanes are split into *phases* so that a conflict-free phase fits in one 128-byte
       wavefront: for b <= 4 the whole warp is one phase (32 x 4 B = 128 B); for b = 8, two
       half-warps (lanes 0-15, 16-31); for b = 16, four quarter-warps (0-7, 8-15, ...).
    3. Exception for 8- and 16-byte loads: if every active lane i finds lane i^1 inactive or
       reading the same address -- or every active lane finds lane i^2 so; one of the two
       must hold across the whole warp -- lanes pair up, each pair needs one copy of the
       data, and neighbouring phases merge: one 32-lane phase for b = 8, two half-warp
       phases for b = 16 (half-warps never merge further).  Source: NVIDIA Developer
       Forums, "Unexpected shared memory bank conflict" (2019, answer from NVIDIA, stated
       for CC 7.0-7.5: a 128-bit load drops from 4 requests to 2).  Measured with Nsight
       Compute on an H200 (CC 9.0): an 8-byte broadcast costs 1 wavefront, a 16-byte
       broadcast 2, lanes reading double ``i // 2`` 1 (``tests/data/h200_ncu_memory.json``).
    4. A phase costs as many wavefronts as the most distinct words any single bank must
       deliver in it (same word = broadcast, no cost); a phase with no active lane is
       skipped (costs 0).

    wavefronts       = sum over phases of max_bank |distinct words of that bank|
    ideal_wavefronts = number of phases with an active lane
    bank_conflicts   = wavefronts - ideal_wavefronts

    So 32 distinct, conflict-free 8-byte reads cost 2 wavefronts and 0 conflicts, 16-byte
    ones 4 and 0, and 32 lanes reading different words of one bank cost 32 wavefronts and
    31 conflicts.  The rule reproduces every H200 shared-load measurement in that file.
    """
    a, active, b = _lanes(addresses, bytes_per_thread, mask)
    words_per_lane = max(1, b // BANK_BYTES)
    words = (a // BANK_BYTES)[:, None] + np.arange(words_per_lane)
    lanes_per_phase = WARP_SIZE if b <= BANK_BYTES else WAVEFRONT_BYTES // b
    if b > BANK_BYTES and _pairs_share_addresses(a, active):
        lanes_per_phase *= 2
    phase = np.arange(WARP_SIZE) // lanes_per_phase

    n_phases = WARP_SIZE // lanes_per_phase
    # One sort for all phases: tag each word with its phase in bits the words never use.
    tagged = np.unique((phase[:, None] << _PHASE_SHIFT | words)[active])
    slot = (tagged >> _PHASE_SHIFT) * BANKS + tagged % BANKS
    counts = np.bincount(slot, minlength=n_phases * BANKS).reshape(n_phases, BANKS)
    per_phase = counts.max(axis=1)
    return SharedLoad(
        addresses=_as_tuple(a, active),
        bytes_per_thread=b,
        wavefronts=int(per_phase.sum()),
        ideal_wavefronts=int(np.count_nonzero(per_phase)),
        lane_words=_per_lane(words, active),
        lane_banks=_per_lane(words % BANKS, active),
        lane_phase=_as_tuple(phase, active),
        bank_words=tuple(tuple(row) for row in counts.tolist()),
    )


def _pairs_share_addresses(a: np.ndarray, active: np.ndarray) -> bool:
    """True when, across the whole warp, lanes i and i^1 -- or lanes i and i^2 -- never need
    different data (an inactive partner needs nothing)."""
    for partner in (np.arange(WARP_SIZE) ^ 1, np.arange(WARP_SIZE) ^ 2):
        if np.all(~active | ~active[partner] | (a == a[partner])):
            return True
    return False


# -- input checks -------------------------------------------------------------------------------

def _lanes(addresses, bytes_per_thread, mask) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate one warp's addresses; return (int64 addresses, active lanes, access size)."""
    b = _validate.integer("bytes_per_thread", bytes_per_thread)
    _validate.choice("bytes_per_thread", b, ACCESS_SIZES)
    if isinstance(addresses, (str, bytes)) or not isinstance(addresses, (Sequence, np.ndarray)):
        raise TypeError(f"addresses must be a list or array of {WARP_SIZE} byte addresses "
                        f"(int, or None for an inactive lane), got {type(addresses).__name__}")
    if len(addresses) != WARP_SIZE:
        raise ValueError(f"addresses must have exactly {WARP_SIZE} entries (one per lane of a "
                         f"warp), got {len(addresses)}")

    # With a mask, an inactive lane's address is never checked: code under a branch may
    # compute addresses for switched-off lanes that lie outside any array (``s[tid - 1]``
    # under ``if tid >= 1``), and the hardware never issues them.
    on = None if mask is None else _mask(mask)
    arr = None
    if isinstance(addresses, np.ndarray) and addresses.dtype.kind in "iu":
        arr = addresses
    elif all(type(v) is int for v in addresses):  # the common case: skip the per-lane loop
        arr = np.array(addresses)
        if arr.dtype.kind not in "iu":  # too large for int64: the loop below reports it
            arr = None
    if arr is not None:
        if arr.ndim != 1:
            raise ValueError(f"addresses must be one-dimensional with {WARP_SIZE} entries, "
                             f"got shape {arr.shape}")
        out_of_range = (arr < 0) | (arr >= _ADDRESS_LIMIT)
        bad = np.flatnonzero(out_of_range if on is None else out_of_range & on)
        if bad.size:
            i = int(bad[0])
            _validate.integer(f"addresses[{i}]", int(arr[i]), low=0, high=_ADDRESS_LIMIT - 1)
        a = arr.astype(np.int64)
        active = np.ones(WARP_SIZE, dtype=bool)
    else:
        a = np.zeros(WARP_SIZE, dtype=np.int64)
        active = np.ones(WARP_SIZE, dtype=bool)
        for i, v in enumerate(addresses):
            if v is None:
                active[i] = False
            elif on is not None and not on[i]:
                continue  # switched off by the mask: its address is not used
            else:
                a[i] = _validate.integer(f"addresses[{i}]", v, low=0, high=_ADDRESS_LIMIT - 1)

    if on is not None:
        clash = np.flatnonzero(on & ~active)
        if clash.size:
            i = int(clash[0])
            raise ValueError(f"addresses[{i}] is None but mask[{i}] is True: an active lane "
                             f"needs an address (set mask[{i}]=False to switch the lane off)")
        active = on

    misaligned = np.flatnonzero(active & (a % b != 0))
    if misaligned.size:
        i = int(misaligned[0])
        raise ValueError(
            f"addresses[{i}]={int(a[i])} is not aligned to bytes_per_thread={b}: a {b}-byte "
            f"access must start at a multiple of {b} (the hardware faults with 'misaligned "
            f"address' otherwise); use addresses that are multiples of {b}")
    a[~active] = 0
    return a, active, b


def _mask(mask) -> np.ndarray:
    if isinstance(mask, (str, bytes)) or not isinstance(mask, (Sequence, np.ndarray)):
        raise TypeError(f"mask must be a list or array of {WARP_SIZE} bools, "
                        f"got {type(mask).__name__}")
    if len(mask) != WARP_SIZE:
        raise ValueError(f"mask must have exactly {WARP_SIZE} entries (one per lane), "
                         f"got {len(mask)}")
    if isinstance(mask, np.ndarray) and mask.dtype == bool:
        return mask.astype(bool, copy=True).ravel()
    for i, m in enumerate(mask):
        if not isinstance(m, (bool, np.bool_)):
            raise TypeError(f"mask[{i}] must be True or False, got {m!r} ({type(m).__name__})")
    return np.array(mask, dtype=bool)


def _per_lane(rows: np.ndarray, active: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """One tuple per lane from a (32, k) array; ``()`` for an inactive lane."""
    return tuple(tuple(row) if on else () for row, on in zip(rows.tolist(), active, strict=True))


def _as_tuple(values: np.ndarray, active: np.ndarray) -> tuple[int | None, ...]:
    return tuple(v if on else None for v, on in zip(values.tolist(), active.tolist(), strict=True))


# -- common access patterns -> the 32 addresses -------------------------------------------------

def strided(stride: int = 1, *, element_bytes: int = 4, offset: int = 0) -> list[int]:
    """Lane i reads element ``i x stride`` of an array that starts ``offset`` bytes past an
    aligned base: address = offset + i x stride x element_bytes.

    ``stride`` is in elements (0 = every lane reads the same element); ``offset`` is in bytes,
    so ``strided(1, offset=4)`` is the classic "misaligned by one float" case.
    """
    stride = _validate.integer("stride", stride, low=0)
    eb = _validate.integer("element_bytes", element_bytes, low=1)
    offset = _validate.integer("offset", offset, low=0)
    return [offset + lane * stride * eb for lane in range(WARP_SIZE)]


def broadcast(address: int = 0) -> list[int]:
    """Every lane reads the same address."""
    address = _validate.integer("address", address, low=0)
    return [address] * WARP_SIZE


def aos_field(struct_bytes: int, field_offset: int = 0, *, start: int = 0) -> list[int]:
    """Array of structures: lane i reads one field of struct ``start + i``.

    address = (start + i) x struct_bytes + field_offset.  With 12-byte structs (three floats)
    the warp's 32 floats are spread over 384 bytes instead of 128.
    """
    sb = _validate.integer("struct_bytes", struct_bytes, low=1)
    fo = _validate.integer("field_offset", field_offset, low=0, high=sb - 1)
    start = _validate.integer("start", start, low=0)
    return [(start + lane) * sb + fo for lane in range(WARP_SIZE)]


def soa_field(field: int = 0, *, length: int, element_bytes: int = 4,
              start: int = 0) -> list[int]:
    """Structure of arrays: lane i reads element ``start + i`` of field array ``field``.

    Field ``k`` is a separate array of ``length`` elements placed after the previous ones:
    address = (field x length + start + i) x element_bytes.
    """
    field = _validate.integer("field", field, low=0)
    length = _validate.integer("length", length, low=WARP_SIZE)
    eb = _validate.integer("element_bytes", element_bytes, low=1)
    start = _validate.integer("start", start, low=0, high=length - WARP_SIZE)
    return [(field * length + start + lane) * eb for lane in range(WARP_SIZE)]


def matrix_row(row: int, *, ld: int, element_bytes: int = 4, col: int = 0) -> list[int]:
    """Row-major matrix with leading dimension ``ld`` (elements per row): lane i reads
    ``A[row, col + i]``, address = (row x ld + col + i) x element_bytes."""
    row = _validate.integer("row", row, low=0)
    ld = _validate.integer("ld", ld, low=WARP_SIZE)
    eb = _validate.integer("element_bytes", element_bytes, low=1)
    col = _validate.integer("col", col, low=0, high=ld - WARP_SIZE)
    return [(row * ld + col + lane) * eb for lane in range(WARP_SIZE)]


def matrix_column(col: int, *, ld: int, element_bytes: int = 4, row: int = 0) -> list[int]:
    """Row-major matrix with leading dimension ``ld``: lane i reads ``A[row + i, col]``,
    address = ((row + i) x ld + col) x element_bytes.  Consecutive lanes are
    ``ld x element_bytes`` bytes apart."""
    ld = _validate.integer("ld", ld, low=1)
    col = _validate.integer("col", col, low=0, high=ld - 1)
    eb = _validate.integer("element_bytes", element_bytes, low=1)
    row = _validate.integer("row", row, low=0)
    return [((row + lane) * ld + col) * eb for lane in range(WARP_SIZE)]


def tile_column(col: int, *, width: int = 32, padding: int = 0,
                element_bytes: int = 4) -> list[int]:
    """A shared-memory tile ``T[32][width + padding]``: lane i reads ``T[i][col]``.

    Unpadded 32-wide float tile: every lane hits bank ``col`` (a 32-way conflict).  One
    column of padding shifts row i by i banks, so the column spreads over all 32 banks.
    """
    width = _validate.integer("width", width, low=1)
    padding = _validate.integer("padding", padding, low=0)
    col = _validate.integer("col", col, low=0, high=width - 1)
    return matrix_column(col, ld=width + padding, element_bytes=element_bytes)


# -- a strided copy's DRAM traffic ------------------------------------------------------------------

#: Consecutive warps whose traffic is counted together (see :func:`predicted_traffic`).
NEIGHBOUR_WARPS = 32


def predicted_traffic(stride: int, element_bytes: int, offset: int = 0, *,
                      fetch_bytes: int = 32) -> dict:
    """Bytes one warp of the strided copy needs and moves from DRAM, by the memory model.

    The copy kernel does ``dst[i] = src[i*stride + offset]``: 32 lanes read one element each
    at ``(offset + lane*stride) * element_bytes`` and write one element each contiguously.
    *Useful* bytes are what the program asked for: 32 elements read + 32 written.  *Moved*
    bytes are whole 32-byte sectors, found by :func:`global_load` for each
    warp's read and write (stores move sectors the same way).  At stride 1 the two are
    equal, so ``useful / moved`` scales the stride-1 bandwidth to a prediction.

    DRAM traffic is what limits a copy this large, so the sectors are counted as DRAM sees
    them: over :data:`NEIGHBOUR_WARPS` consecutive warps, per warp.  Neighbouring warps run
    at about the same time and L2 keeps a sector until the neighbour asks for it, so a sector
    two warps share (a misaligned copy's boundary) moves once.  ``sectors_read`` is still
    the first warp's own count, the number Nsight Compute reports per request.

    ``fetch_bytes`` > 32: on a miss L2 fetches ``fetch_bytes`` aligned bytes from DRAM (64 B
    fits the H200's strided copies within 13 %, ``docs/measured/h200.md``; the CUDA runtime's
    ``cudaLimitMaxL2FetchGranularity`` is a hint, an upper bound a program sets, not a report
    of what a miss fetches), so the moved bytes are the distinct ``fetch_bytes`` blocks the
    sectors fall in.  It matters once lanes are 64 bytes or more apart and each uses only one
    sector of its block.
    """
    stride = _validate.integer("stride", stride, low=0, high=1 << 20)
    element_bytes = _validate.choice("element_bytes", element_bytes, ACCESS_SIZES)
    offset = _validate.integer("offset", offset, low=0, high=1 << 20)
    fetch_bytes = _validate.choice("fetch_bytes", fetch_bytes, (32, 64, 128))
    eb = element_bytes
    reads = [global_load(strided(stride, element_bytes=eb, offset=(offset + 32 * w * stride) * eb),
                         bytes_per_thread=eb) for w in range(NEIGHBOUR_WARPS)]
    writes = [global_load(strided(1, element_bytes=eb, offset=32 * w * eb), bytes_per_thread=eb)
              for w in range(NEIGHBOUR_WARPS)]

    def moved(loads) -> float:
        blocks = set().union(*(load.block_ids(fetch_bytes) for load in loads))
        return fetch_bytes * len(blocks) / len(loads)

    useful = 2 * 32 * eb
    total = moved(reads) + moved(writes)
    return {"sectors_read": int(reads[0].sectors), "sectors_written": int(writes[0].sectors),
            "useful_bytes": useful, "moved_bytes": total, "useful_over_moved": useful / total}
