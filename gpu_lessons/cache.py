"""A set-associative cache simulator, fast enough for million-access traces in a notebook.

>>> import numpy as np
>>> c = Cache(size_bytes=32768, line_bytes=128, ways=4, policy="lru")
>>> st = c.run(np.arange(0, 4096, 4))          # stream 1024 floats
>>> st.hits, st.misses                          # one miss per 128-byte line: 4096 / 128 = 32
(992, 32)

The model
---------
A cache of ``size_bytes`` holds ``size_bytes / line_bytes`` lines in ``sets = size_bytes /
(line_bytes x ways)`` sets of ``ways`` lines each.  A byte address ``a`` belongs to line
``a // line_bytes``, which may live only in set ``(a // line_bytes) mod sets`` (Hennessy &
Patterson, *Computer Architecture*, 6th ed., App. B.1).  ``ways=1`` is direct-mapped;
``ways=None`` (one set) is fully associative.

*Replacement* picks the victim in a full set: ``"lru"`` evicts the line used longest ago,
``"fifo"`` the line filled longest ago (a hit does not refresh it), ``"random"`` a uniformly
random way from a seeded generator (``seed=``; the same seed gives the same evictions).  An
empty way is always filled before anything is evicted.

*Sectors* (``sector_bytes``, e.g. 32): NVIDIA's L1 and L2 keep one tag per 128-byte line but
move data in 32-byte sectors, so a miss fetches only the missing sectors of a line (CUDA C++
Best Practices Guide §10.2.1; Nsight Compute's ``lts__t_sectors_*`` counters).  With sectors,
every access is counted per sector it touches: a *hit* is a sector whose line is resident and
whose data is valid, a *miss* is any other sector; a miss on a resident line fills that sector
without evicting anything, a miss on an absent line takes a way (evicting a victim) and fills
only the sectors asked for.  Without ``sector_bytes`` the sector is the whole line, and every
access is counted once per line it touches.

*Access size*: each address is the first byte of an access of ``access_bytes`` bytes (default
1).  An access that spans several sectors or lines counts one lookup per sector (or line)
touched, in address order, so ``accesses`` can exceed ``requests``; aligned element-sized
accesses never span, and then ``accesses == requests``.

*Writes* (``is_write``): ``write_policy="write-back"`` marks the written sector dirty and sends
it to the next level only when its line is evicted (or on :meth:`Cache.flush`); a dirty line's
eviction is one *write-back* that moves its dirty sectors.  ``"write-through"`` sends every
store's bytes to the next level at once and never holds dirty data.  ``write_allocate=True``
treats a store miss like a load miss (fetch the sector, then write it); ``False`` sends the
store to the next level and leaves the cache unchanged.  Hits and misses count loads and
stores alike; ``stores`` and ``store_misses`` split them out.  (H&P App. B.1, "Q4: What
happens on a write?")

*Traffic*: ``bytes_from_next`` is fill traffic (one sector, or one line, per miss that
allocates); ``bytes_to_next`` is write-through stores, stores that miss without allocating,
and write-backs.

*Levels*: :class:`Hierarchy` chains caches: fills, write-backs and forwarded stores of one
level, in the order they happen (a miss's fill request before its victim's write-back), are
the accesses of the next; the last level's traffic is what DRAM sees.  The levels are
non-inclusive and there is no coherence traffic: an eviction in L2 leaves L1 untouched.

Checked against pycachesim 0.3.1 (RRZE-HPC, ``pip install pycachesim``): identical hits and
misses for LRU and FIFO over many geometries and traces, and identical write-back and
write-through traffic and two-level results where the two models coincide (see
``tests/models/test_cache.py``).  They differ on purpose in two places: pycachesim does not refresh
a line's LRU position on a store hit (textbook LRU, used here, does), and its write-back
no-write-allocate mode installs a dirty line without fetching it, where this model sends
the store on.

The simulation loop is compiled with numba (``cache=True``: the first call in a fresh
environment compiles for a second or two; later sessions load the compiled code from disk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numba
import numpy as np

from . import _validate
from ._format import Readout, Row, binary_bytes, html_table

POLICIES = ("lru", "fifo", "random")
WRITE_POLICIES = ("write-back", "write-through")

_POLICY_ID = {"lru": 0, "fifo": 1, "random": 2}

# Counter slots shared by the compiled kernels and the Python side.
_REQUESTS, _ACCESSES, _HITS, _MISSES, _STORES, _STORE_MISSES = 0, 1, 2, 3, 4, 5
_BYTES_REQUESTED, _BYTES_FROM_NEXT, _BYTES_TO_NEXT, _WRITEBACKS, _EVICTIONS = 6, 7, 8, 9, 10
_N_COUNTERS = 11

#: Largest address accepted: keeps ``address + access_bytes`` far from int64 overflow.
MAX_ADDRESS = 2**62


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class CacheStats(Readout):
    """What one cache level saw during a run (or since its last reset).

    ``accesses = hits + misses`` counts lookups: one per sector (sectored cache) or line
    touched by each request; ``requests`` counts the addresses given.  ``bytes_from_next`` is
    fill traffic from the next level, ``bytes_to_next`` write traffic to it.
    """

    name: str
    requests: int
    accesses: int
    hits: int
    misses: int
    stores: int
    store_misses: int
    bytes_requested: int
    bytes_from_next: int
    bytes_to_next: int
    writebacks: int
    evictions: int

    @property
    def hit_rate(self) -> float:
        """hits / accesses (NaN when there were no accesses)."""
        return self.hits / self.accesses if self.accesses else math.nan

    @property
    def miss_rate(self) -> float:
        """misses / accesses (NaN when there were no accesses)."""
        return self.misses / self.accesses if self.accesses else math.nan

    @property
    def loads(self) -> int:
        return self.accesses - self.stores

    def __add__(self, other: CacheStats) -> CacheStats:
        if not isinstance(other, CacheStats):
            return NotImplemented
        counts = {f.name: getattr(self, f.name) + getattr(other, f.name)
                  for f in fields(self) if f.name != "name"}
        return CacheStats(name=self.name, **counts)

    def readout_title(self) -> str:
        return self.name

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("accesses", self.accesses), Row("stores", self.stores),
                Row("hits", self.hits), Row("misses", self.misses),
                Row("misses on stores", self.store_misses),
                Row("hit rate", "n/a" if math.isnan(self.hit_rate) else self.hit_rate, "%"),
                Row("bytes from next level", self.bytes_from_next, "B"),
                Row("bytes to next level", self.bytes_to_next, "B"),
                Row("write-backs", self.writebacks), Row("evictions", self.evictions))


@dataclass(frozen=True)
class HierarchyStats:
    """Per-level statistics of a :class:`Hierarchy` run plus the DRAM traffic behind it.

    ``dram_bytes_read`` / ``dram_bytes_written`` are the last level's ``bytes_from_next`` and
    ``bytes_to_next``.
    """

    levels: tuple[CacheStats, ...]

    @property
    def dram_bytes_read(self) -> int:
        return self.levels[-1].bytes_from_next

    @property
    def dram_bytes_written(self) -> int:
        return self.levels[-1].bytes_to_next

    def __getitem__(self, i) -> CacheStats:
        return self.levels[i]

    def __repr__(self) -> str:
        lines = [f"  {s!r}" for s in self.levels]
        lines.append(f"  DRAM: {binary_bytes(self.dram_bytes_read)} read, "
                     f"{binary_bytes(self.dram_bytes_written)} written")
        return "HierarchyStats(\n" + ",\n".join(lines) + ")"

    def _repr_html_(self) -> str:
        cols = [{r.label: r.text for r in s.readout_rows()} for s in self.levels]
        rows = [(k, *(c[k] for c in cols)) for k in cols[0]]
        dram = (f"{binary_bytes(self.dram_bytes_read)} read, "
                f"{binary_bytes(self.dram_bytes_written)} written")
        rows.append(("DRAM traffic", dram, *[""] * (len(self.levels) - 1)))
        return html_table("Cache hierarchy", ("", *(s.name for s in self.levels)), rows)


# -- the cache --------------------------------------------------------------------------------
def _readonly(attr: str, doc: str) -> property:
    # Geometry is fixed at construction: the state arrays are sized from it.
    return property(lambda self: getattr(self, "_" + attr), doc=doc)


class Cache:
    """One cache level with state that persists across :meth:`run` calls.

    Parameters
    ----------
    size_bytes : total data capacity in bytes.
    line_bytes : line (block) size, a power of two; NVIDIA L1/L2 use 128.
    ways : lines per set; 1 is direct-mapped, ``None`` fully associative.  ``size_bytes``
        must be a whole number of sets: ``size_bytes % (line_bytes * ways) == 0``.
    policy : ``"lru"``, ``"fifo"`` or ``"random"``.
    sector_bytes : fetch granularity inside a line (a power of two dividing ``line_bytes``,
        at most 64 sectors per line), or ``None`` to move whole lines.
    write_policy : ``"write-back"`` or ``"write-through"``.
    write_allocate : whether a store miss brings the line (sector) into the cache.
    seed : seed of the ``"random"`` policy's generator (ignored by the others).
    name : label used in statistics.
    """

    size_bytes = _readonly("size_bytes", "Data capacity in bytes.")
    line_bytes = _readonly("line_bytes", "Line size in bytes (the unit of tags and placement).")
    ways = _readonly("ways", "Lines per set (associativity).")
    sets = _readonly("sets", "Number of sets: size_bytes / (line_bytes x ways).")
    sector_bytes = _readonly("sector_bytes", "Fetch unit in bytes (= line_bytes if unsectored).")
    sectored = _readonly("sectored", "Whether lines are filled sector by sector.")
    policy = _readonly("policy", "Replacement policy: 'lru', 'fifo' or 'random'.")
    write_policy = _readonly("write_policy", "'write-back' or 'write-through'.")
    write_allocate = _readonly("write_allocate", "Whether a store miss allocates.")
    seed = _readonly("seed", "Seed of the random policy's generator.")

    def __init__(self, size_bytes, line_bytes, ways, policy="lru", *, sector_bytes=None,
                 write_policy="write-back", write_allocate=True, seed=0, name="cache"):
        size_bytes = _validate.integer("size_bytes", size_bytes, low=1)
        line_bytes = _power_of_two("line_bytes", line_bytes)
        if line_bytes > size_bytes:
            raise ValueError(f"line_bytes must be <= size_bytes ({size_bytes}), "
                             f"got {line_bytes}")
        n_lines = size_bytes // line_bytes
        if ways is None:
            ways = n_lines
        ways = _validate.integer("ways", ways, low=1, high=n_lines)
        if size_bytes % (line_bytes * ways):
            raise ValueError(
                f"size_bytes must be a whole number of sets of ways x line_bytes = "
                f"{ways} x {line_bytes} = {binary_bytes(ways * line_bytes)}; got size_bytes={size_bytes}")
        if isinstance(policy, str):
            policy = policy.lower()
        self._policy = _validate.choice("policy", policy, POLICIES)
        if sector_bytes is None:
            self._sectored = False
            sector_bytes = line_bytes
        else:
            self._sectored = True
            sector_bytes = _power_of_two("sector_bytes", sector_bytes)
            if sector_bytes > line_bytes or line_bytes // sector_bytes > 64:
                raise ValueError(
                    f"sector_bytes must divide line_bytes ({line_bytes}) into 1 to 64 "
                    f"sectors; got sector_bytes={sector_bytes}")
        self._write_policy = _validate.choice("write_policy", write_policy, WRITE_POLICIES)
        if not isinstance(write_allocate, (bool, np.bool_)):
            raise TypeError(f"write_allocate must be True or False, got {write_allocate!r}")
        self._write_allocate = bool(write_allocate)
        self._seed = _validate.integer("seed", seed, low=0, high=2**64 - 1)
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        self.name = name

        self._size_bytes = size_bytes
        self._line_bytes = line_bytes
        self._ways = ways
        self._sets = size_bytes // (line_bytes * ways)
        self._sector_bytes = sector_bytes
        n = self.sets * self.ways
        # Per way: line id (-1 = empty), valid-sector and dirty-sector bit masks, and the
        # time of last use (LRU) or of fill (FIFO); -1 makes an empty way the first victim.
        self._tags = np.empty(n, np.int64)
        self._valid = np.empty(n, np.int64)
        self._dirty = np.empty(n, np.int64)
        self._stamp = np.empty(n, np.int64)
        self._clock = np.zeros(1, np.int64)
        self._rng = np.zeros(1, np.uint64)
        self._total = np.zeros(_N_COUNTERS, np.int64)
        self.reset()

    # -- public --------------------------------------------------------------------------
    def reset(self) -> None:
        """Empty the cache, zero the statistics and restart the random generator from ``seed``."""
        self._tags.fill(-1)
        self._valid.fill(0)
        self._dirty.fill(0)
        self._stamp.fill(-1)
        self._clock[0] = 0
        self._rng[0] = np.uint64(self.seed)
        self._total.fill(0)

    def run(self, addresses, is_write=None, access_bytes=None) -> CacheStats:
        """Simulate ``addresses`` (byte addresses, in program order) and return this run's stats.

        ``addresses`` may also be a :class:`gpu_lessons.traces.Trace`, whose ``is_write`` and
        ``access_bytes`` are used unless given here.  ``is_write`` is a bool array (``True``
        = store) or ``None`` for all loads; ``access_bytes`` is a positive int or an int array
        per access (default 1).  The cache keeps its contents afterwards; :attr:`stats` sums
        every run since :meth:`reset`.
        """
        req = _requests(addresses, is_write, access_bytes)
        counts, _ = self._simulate(req, emit=False)
        return self._stats(counts)

    def flush(self) -> CacheStats:
        """Write every dirty line back to the next level (lines stay valid, now clean)."""
        counts, _ = self._flush(emit=False)
        return self._stats(counts)

    @property
    def stats(self) -> CacheStats:
        """Statistics summed over every run and flush since the last :meth:`reset`."""
        return self._stats(self._total)

    def contents(self) -> np.ndarray:
        """Line ids held by each way, shape ``(sets, ways)``; ``-1`` marks an empty way.

        A line id is ``address // line_bytes``; set ``s`` can only hold ids ``= s mod sets``.
        """
        out = self._tags.reshape(self.sets, self.ways).copy()
        out.flags.writeable = False
        return out

    def __repr__(self) -> str:
        geometry = ("fully associative" if self.sets == 1 and self.ways > 1 else
                    "direct-mapped" if self.ways == 1 else f"{self.ways}-way")
        sector = f", {binary_bytes(self.sector_bytes)} sectors" if self.sectored else ""
        alloc = "write-allocate" if self.write_allocate else "no-write-allocate"
        return (f"Cache({self.name}: {binary_bytes(self.size_bytes)}, {binary_bytes(self.line_bytes)} lines"
                f"{sector}, {geometry}, {self.sets} sets, {self.policy.upper()}, "
                f"{self.write_policy}, {alloc})")

    # -- internals -----------------------------------------------------------------------
    def _stats(self, counts) -> CacheStats:
        c = [int(x) for x in counts]
        return CacheStats(
            name=self.name, requests=c[_REQUESTS], accesses=c[_ACCESSES], hits=c[_HITS],
            misses=c[_MISSES], stores=c[_STORES], store_misses=c[_STORE_MISSES],
            bytes_requested=c[_BYTES_REQUESTED], bytes_from_next=c[_BYTES_FROM_NEXT],
            bytes_to_next=c[_BYTES_TO_NEXT], writebacks=c[_WRITEBACKS],
            evictions=c[_EVICTIONS])

    def _simulate(self, req, *, emit):
        addr, lens, scalar_len, writes = req
        counts = np.zeros(_N_COUNTERS, np.int64)
        out = _out_buffers(self._emit_capacity(addr, lens, scalar_len, writes) if emit else 0)
        sector_bits = self.sector_bytes.bit_length() - 1
        n_out = _simulate(
            addr, lens, scalar_len, writes,
            self._tags, self._valid, self._dirty, self._stamp, self._clock, self._rng, counts,
            self.sets, self.ways, self.line_bytes.bit_length() - 1, sector_bits,
            _POLICY_ID[self.policy], self.write_policy == "write-back", self.write_allocate,
            emit, *out)
        self._total += counts
        return counts, tuple(a[:n_out] for a in out)

    def _flush(self, *, emit):
        counts = np.zeros(_N_COUNTERS, np.int64)
        n_sectors = self.line_bytes // self.sector_bytes
        out = _out_buffers(self.sets * self.ways * n_sectors if emit else 0)
        n_out = _flush(self._tags, self._valid, self._dirty, counts, self.line_bytes,
                       self.sector_bytes, n_sectors, emit, *out)
        self._total += counts
        return counts, tuple(a[:n_out] for a in out)

    def _emit_capacity(self, addr, lens, scalar_len, writes) -> int:
        # Every emitted request lies inside one sector of one access ("piece"): at most one
        # fill or forwarded store per piece, one write-through per store piece, and one
        # write-back per dirty sector, which a store piece creates at most once (plus those
        # already dirty when the run starts).
        bits = self.sector_bytes.bit_length() - 1
        ends = addr + (lens if lens.size else scalar_len) - 1
        pieces = (ends >> bits) - (addr >> bits) + 1
        store_pieces = int(pieces[writes].sum()) if writes.size else 0
        dirty = self.sets * self.ways * (self.line_bytes // self.sector_bytes)
        return int(pieces.sum()) + 2 * store_pieces + dirty


class Hierarchy:
    """Caches in series, first level first: what one level sends on is the next one's input.

    >>> l1 = Cache(32 * 1024, 128, 4, name="L1", sector_bytes=32)
    >>> l2 = Cache(1024 * 1024, 128, 16, name="L2", sector_bytes=32)
    >>> h = Hierarchy([l1, l2])
    >>> st = h.run(np.arange(0, 1 << 20, 4))
    >>> st.dram_bytes_read                     # 1 MiB streamed once, 32-byte sectors
    1048576

    Each level is simulated over the complete output stream of the level above.  This gives
    exactly the result of interleaved simulation because nothing flows back up: the levels
    are non-inclusive, so an L2 eviction never changes what L1 holds.
    """

    def __init__(self, levels):
        levels = list(levels) if not isinstance(levels, Cache) else [levels]
        if not levels:
            raise ValueError("levels must hold at least one Cache, got an empty list")
        for i, lv in enumerate(levels):
            if not isinstance(lv, Cache):
                raise TypeError(f"levels[{i}] must be a Cache, got {lv!r}")
        if len({id(lv) for lv in levels}) != len(levels):
            raise ValueError("levels must be distinct Cache objects (one appears twice)")
        self.levels = tuple(levels)

    def run(self, addresses, is_write=None, access_bytes=None) -> HierarchyStats:
        """Feed the accesses to the first level and the traffic of each level to the next."""
        req = _requests(addresses, is_write, access_bytes)
        stats = []
        for i, lv in enumerate(self.levels):
            last = i == len(self.levels) - 1
            counts, (a, n, w) = lv._simulate(req, emit=not last)
            stats.append(lv._stats(counts))
            req = (a, n, 0, w)
        return HierarchyStats(tuple(stats))

    def flush(self) -> HierarchyStats:
        """Write back dirty data level by level, so every store has reached DRAM."""
        stats = []
        incoming = None
        for i, lv in enumerate(self.levels):
            last = i == len(self.levels) - 1
            st = lv._stats(np.zeros(_N_COUNTERS, np.int64))
            parts = []
            if incoming is not None and incoming[0].size:
                counts, out = lv._simulate(incoming, emit=not last)
                st = st + lv._stats(counts)
                parts.append(out)
            counts, out = lv._flush(emit=not last)
            st = st + lv._stats(counts)
            parts.append(out)
            stats.append(st)
            if not last:
                a = np.concatenate([p[0] for p in parts])
                n = np.concatenate([p[1] for p in parts])
                w = np.concatenate([p[2] for p in parts])
                incoming = (a, n, 0, w)
        return HierarchyStats(tuple(stats))

    def reset(self) -> None:
        """Reset every level."""
        for lv in self.levels:
            lv.reset()

    @property
    def stats(self) -> HierarchyStats:
        """Per-level statistics since each level's last reset."""
        return HierarchyStats(tuple(lv.stats for lv in self.levels))

    def __repr__(self) -> str:
        return "Hierarchy(\n" + ",\n".join(f"  {lv!r}" for lv in self.levels) + ")"


# -- reuse (stack) distances ------------------------------------------------------------------
def reuse_distances(addresses, line_bytes, access_bytes=None) -> np.ndarray:
    """LRU stack distance of every line access: distinct other lines used since its last use.

    ``-1`` marks a line's first use (a compulsory miss).  A fully associative LRU cache of
    ``C`` lines misses exactly on the accesses with distance ``-1`` or ``>= C`` (Mattson,
    Gecsei, Slutz & Traiger, "Evaluation techniques for storage hierarchies", IBM Systems
    Journal 9(2), 1970), so one pass gives the miss count of every cache size::

        misses(C) = np.sum((d < 0) | (d >= C))

    Accesses that span lines give one entry per line, as :meth:`Cache.run` counts them.
    Computed in O(n log n) with a Fenwick tree over access times.
    """
    line_bytes = _power_of_two("line_bytes", line_bytes)
    addr, lens, scalar_len, _ = _requests(addresses, None, access_bytes)
    lines = _line_pieces(addr, lens, scalar_len, line_bytes.bit_length() - 1)
    if lines.size == 0:
        return np.zeros(0, np.int64)
    _, dense = np.unique(lines, return_inverse=True)
    return _stack_distances(dense.astype(np.int64).ravel())


# -- input checking ----------------------------------------------------------------------------
def _power_of_two(name, value) -> int:
    value = _validate.integer(name, value, low=1)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, got {value}")
    return value


def _requests(addresses, is_write, access_bytes):
    """Normalise user input to (int64 addresses, int64 lengths or empty, scalar length, bools)."""
    if hasattr(addresses, "addresses") and hasattr(addresses, "is_write"):
        trace = addresses
        addresses = trace.addresses
        if is_write is None:
            is_write = trace.is_write
        if access_bytes is None:
            access_bytes = getattr(trace, "access_bytes", 1)
    if access_bytes is None:
        access_bytes = 1
    # int_array copies: a contiguous, writable int64 array the compiled loop can take
    addr = _validate.int_array("addresses", addresses, max_ndim=1).reshape(-1)
    if addr.size and (addr.min() < 0 or addr.max() >= MAX_ADDRESS):
        bad = addr[(addr < 0) | (addr >= MAX_ADDRESS)][0]
        raise ValueError(f"addresses must be byte addresses in [0, 2**62), got {bad}")

    if np.ndim(access_bytes) == 0:
        scalar_len = _validate.integer("access_bytes", access_bytes, low=1, high=2**30)
        lens = np.zeros(0, np.int64)
    else:
        lens = _validate.int_array("access_bytes", access_bytes, max_ndim=1).reshape(-1)
        if lens.shape != addr.shape:
            raise ValueError(f"access_bytes must be one int or one per address "
                             f"({addr.size}), got {lens.size} values")
        if lens.size and (lens.min() < 1 or lens.max() > 2**30):
            raise ValueError(f"access_bytes must be between 1 and 2**30, "
                             f"got {lens[(lens < 1) | (lens > 2**30)][0]}")
        scalar_len = 0

    if is_write is None:
        writes = np.zeros(0, np.bool_)
    else:
        w = np.asarray(is_write)
        if w.dtype != np.bool_:
            if w.dtype.kind not in "iu" or (w.size and not np.isin(w, (0, 1)).all()):
                raise TypeError(f"is_write must be a bool array (True = store), "
                                f"got dtype {w.dtype}")
            w = w.astype(np.bool_)
        if w.shape != addr.shape:
            raise ValueError(f"is_write must have one entry per address ({addr.size}), "
                             f"got shape {w.shape}")
        writes = _writable(np.ascontiguousarray(w)) if w.any() else np.zeros(0, np.bool_)
    return addr, lens, scalar_len, writes


def _writable(a: np.ndarray) -> np.ndarray:
    # Numba compiles read-only arrays (a Trace's) as a separate type; one copy avoids a
    # second compilation of every kernel.
    return a if a.flags.writeable else a.copy()


def _out_buffers(n):
    return np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.bool_)


# -- compiled kernels ----------------------------------------------------------------------------
@numba.njit(cache=True)
def _next_random(rng):
    # splitmix64 (Steele, Lea & Flood, OOPSLA 2014): small, fast and reproducible.
    s = rng[0] + np.uint64(0x9E3779B97F4A7C15)
    rng[0] = s
    z = (s ^ (s >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True)
def _emit_writeback(base, line_bytes, sector_bytes, n_sectors, mask, pos, out_a, out_n, out_w):
    for k in range(n_sectors):
        if (mask >> k) & 1:
            out_a[pos] = base * line_bytes + k * sector_bytes
            out_n[pos] = sector_bytes
            out_w[pos] = True
            pos += 1
    return pos


@numba.njit(cache=True)
def _popcount(x):
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@numba.njit(cache=True)
def _simulate(addr, lens, scalar_len, writes,
              tags, valid, dirty, stamp, clock, rng, counts,
              sets, ways, line_bits, sector_bits, policy, write_back, write_allocate,
              emit, out_a, out_n, out_w):
    line_bytes = np.int64(1) << line_bits
    sector_bytes = np.int64(1) << sector_bits
    per_line_bits = line_bits - sector_bits
    n_sectors = np.int64(1) << per_line_bits
    set_mask = sets - 1 if (sets & (sets - 1)) == 0 else -1
    has_lens = lens.shape[0] > 0
    has_writes = writes.shape[0] > 0
    t = clock[0]
    pos = 0
    accesses = hits = misses = stores = store_misses = 0
    from_next = to_next = writebacks = evictions = requested = 0

    for r in range(addr.shape[0]):
        a = addr[r]
        n = lens[r] if has_lens else scalar_len
        w = writes[r] if has_writes else False
        requested += n
        end = a + n
        first = a >> sector_bits
        last = (end - 1) >> sector_bits
        for sec in range(first, last + 1):
            line = sec >> per_line_bits
            bit = np.int64(1) << (sec & (n_sectors - 1))
            s = line & set_mask if set_mask >= 0 else line % sets
            b = s * ways
            t += 1
            accesses += 1
            if w:
                stores += 1
            # One pass over the set: find the line, and remember the victim in case it is absent.
            way = -1
            victim = b
            oldest = stamp[b]
            for k in range(b, b + ways):
                if tags[k] == line:
                    way = k
                    break
                if stamp[k] < oldest:
                    oldest = stamp[k]
                    victim = k
            hit = way >= 0 and (valid[way] & bit) != 0
            if hit:
                hits += 1
                if policy == 0:
                    stamp[way] = t
            else:
                misses += 1
                if w:
                    store_misses += 1
                if not w or write_allocate:
                    old_line = -1
                    old_dirty = 0
                    if way < 0:
                        if policy == 2 and tags[victim] >= 0:
                            # The oldest stamp is an empty way whenever one exists (empty
                            # ways carry -1), so random replacement still fills empty ways
                            # first.
                            victim = b + np.int64(_next_random(rng) % np.uint64(ways))
                        way = victim
                        if tags[way] >= 0:
                            evictions += 1
                            old_line = tags[way]
                            old_dirty = dirty[way]
                        tags[way] = line
                        valid[way] = 0
                        dirty[way] = 0
                        stamp[way] = t
                    elif policy == 0:
                        stamp[way] = t

                    valid[way] |= bit
                    from_next += sector_bytes
                    if emit:
                        out_a[pos] = sec << sector_bits
                        out_n[pos] = sector_bytes
                        out_w[pos] = False
                        pos += 1
                    # The victim's write-back follows the fill request, as in pycachesim.
                    if old_dirty != 0:
                        writebacks += 1
                        to_next += _popcount(old_dirty) * sector_bytes
                        if emit:
                            pos = _emit_writeback(old_line, line_bytes, sector_bytes,
                                                  n_sectors, old_dirty, pos, out_a, out_n,
                                                  out_w)
            if w:
                if write_back and (hit or write_allocate):
                    dirty[way] |= bit   # the store stays in the cache until the line leaves
                else:
                    # write-through, or a store miss that does not allocate: the bytes the
                    # store writes into this sector go on to the next level
                    lo = max(a, sec << sector_bits)
                    hi = min(end, (sec + 1) << sector_bits)
                    to_next += hi - lo
                    if emit:
                        out_a[pos] = lo
                        out_n[pos] = hi - lo
                        out_w[pos] = True
                        pos += 1

    clock[0] = t
    counts[0] += addr.shape[0]
    counts[1] += accesses
    counts[2] += hits
    counts[3] += misses
    counts[4] += stores
    counts[5] += store_misses
    counts[6] += requested
    counts[7] += from_next
    counts[8] += to_next
    counts[9] += writebacks
    counts[10] += evictions
    return pos


@numba.njit(cache=True)
def _flush(tags, valid, dirty, counts, line_bytes, sector_bytes, n_sectors,
           emit, out_a, out_n, out_w):
    pos = 0
    for k in range(tags.shape[0]):
        if tags[k] >= 0 and dirty[k] != 0:
            counts[9] += 1
            counts[8] += _popcount(dirty[k]) * sector_bytes
            if emit:
                pos = _emit_writeback(tags[k], line_bytes, sector_bytes, n_sectors,
                                      dirty[k], pos, out_a, out_n, out_w)
            dirty[k] = 0
    return pos


@numba.njit(cache=True)
def _line_pieces_kernel(addr, lens, scalar_len, line_bits, out):
    has_lens = lens.shape[0] > 0
    pos = 0
    for r in range(addr.shape[0]):
        n = lens[r] if has_lens else scalar_len
        for line in range(addr[r] >> line_bits, ((addr[r] + n - 1) >> line_bits) + 1):
            out[pos] = line
            pos += 1
    return pos


def _line_pieces(addr, lens, scalar_len, line_bits) -> np.ndarray:
    ends = addr + (lens if lens.size else scalar_len) - 1
    total = int(((ends >> line_bits) - (addr >> line_bits) + 1).sum())
    out = np.empty(total, np.int64)
    _line_pieces_kernel(addr, lens, scalar_len, line_bits, out)
    return out


@numba.njit(cache=True)
def _stack_distances(ids):
    n = ids.shape[0]
    tree = np.zeros(n + 1, np.int64)   # Fenwick tree: 1 at the latest use of each line
    last = np.full(ids.max() + 1, -1, np.int64)
    out = np.empty(n, np.int64)
    for t in range(n):
        x = ids[t]
        p = last[x]
        if p < 0:
            out[t] = -1
        else:
            # Distinct lines since time p = latest-use marks in (p, t).
            total = 0
            i = t
            while i > 0:
                total += tree[i]
                i -= i & -i
            i = p + 1
            while i > 0:
                total -= tree[i]
                i -= i & -i
            out[t] = total
            i = p + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
        i = t + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
        last[x] = t
    return out
