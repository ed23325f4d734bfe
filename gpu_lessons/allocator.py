"""GPU memory allocators on request traces: a caching allocator against fixed-size pages.

A trace is a sequence of ``alloc(id, size)`` and ``free(id)`` events (sizes in bytes).  Two
allocators replay it:

Caching allocator (:func:`caching`), PyTorch's CUDA caching allocator
    (c10/cuda/CUDACachingAllocator.cpp with its default settings; "CUDA semantics → memory
    management" in the PyTorch docs).  What is modelled:

    * every request is rounded up to a multiple of ``round_bytes`` (PyTorch: 512 B);
    * memory is reserved from the device in *segments* (PyTorch's ``cudaMalloc`` calls) and cut
      into blocks; when no cached free block fits, a new segment is reserved;
    * two pools that never share blocks: requests of at most 1 MiB come from the **small pool**,
      whose segments are 2 MiB, so many small tensors share one; larger ones from the **large
      pool**, where a request under 10 MiB reserves a 20 MiB segment that later requests of
      that range share, and one of 10 MiB or more reserves itself rounded up to 2 MiB;
    * a free block is chosen ``"best_fit"`` (the smallest that fits, as PyTorch does) or
      ``"first_fit"`` (the lowest address that fits); it is split when enough remains — in the
      small pool at least 512 B, in the large pool more than 1 MiB — otherwise the whole block
      is handed out and the rest is internal waste;
    * on free, a block merges with free neighbours *in the same segment* — never across
      segments, which are separate device allocations;
    * when a new segment would exceed ``capacity``, every fully free segment of both pools is
      released (``empty_cache``) and the reservation retried; if it still does not fit, the
      request fails (out of memory) and is skipped (its later ``free`` is ignored).

    Not modelled: streams, ``max_split_size_mb``, ``roundup_power2_divisions``, expandable
    segments, garbage collection, and PyTorch's first OOM step (releasing one large enough
    cached block before all of them).  Segments live in one address range: a new one goes into
    the lowest gap left by released segments that fits, else at the end.

    ``pools="one"`` replaces the two pools by one whose segments are the request rounded up to
    ``segment_bytes`` and whose blocks are split when at least ``min_split_bytes`` remain: an
    allocator small enough to trace by hand, which the exercises use.

Paged allocator (:func:`paged`), as vLLM's PagedAttention (W. Kwon et al., "Efficient Memory
    Management for Large Language Model Serving with PagedAttention", SOSP 2023)
    The pool is cut into pages of ``page_bytes`` (a KV-cache block of ``B`` tokens is
    ``B × bytes per token``); a request of ``size`` bytes takes ``ceil(size / page_bytes)``
    pages, any free ones, contiguous or not (the lowest-numbered first).  A sequence of ``n``
    tokens takes ``ceil(n / B)`` pages and wastes only the unused part of its last page, at most
    ``B − 1`` tokens.  No request can fail while enough pages are free: no external
    fragmentation.

Measures, after every event
    used (bytes requested by live allocations), allocated (bytes of the blocks or pages holding
    them: used + internal waste), reserved (bytes taken from the device: segments, or pages ever
    touched), and external fragmentation of the reserved-but-free memory,

        fragmentation = 1 − largest free block / total free

    (the usual measure: "Fragmentation (computing)", Wikipedia; P. Wilson, M. Johnstone,
    M. Neely, D. Boles, "Dynamic Storage Allocation: A Survey and Critical Review", IWMM 1995,
    discusses why any one number is only a summary).  0 when the free memory is one piece (or
    for pages, where any free page serves any request); near 1 when it is in crumbs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _validate
from ._format import Readout, Row, binary_bytes, html_table, text_table
from ._math import cdiv, round_up

MiB = 2**20
GiB = 2**30
POLICIES = ("best_fit", "first_fit")

#: The rules of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default
#: settings).  Every request is rounded up to a multiple of kMinBlockSize:
ROUND_BYTES = 512
#: kSmallSize: requests up to 1 MiB (after rounding) are served from the small pool,
SMALL_SIZE = 1 * MiB
#: kSmallBuffer: whose segments are 2 MiB, shared by many small requests;
SMALL_BUFFER = 2 * MiB
#: kLargeBuffer and kMinLargeAlloc: a large request under 10 MiB reserves a 20 MiB segment,
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
#: kRoundLarge: and one of 10 MiB or more reserves itself rounded up to 2 MiB.
ROUND_LARGE = 2 * MiB
#: Granularity of a new segment when ``pools="one"``.
SEGMENT_BYTES = 2 * MiB
#: "pytorch": a small and a large pool with the rules above; "one": one pool, a simpler
#: allocator for drawing by hand (see :func:`caching`).
POOLS = ("pytorch", "one")


def kv_bytes_per_token(n_layers: int, kv_hidden: int, dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token: ``2 (K and V) × layers × kv_hidden × bytes per element``.

    ``kv_hidden`` = KV heads × head size (the model width without grouped-query attention).
    OPT-13B: 2 × 40 × 5120 × 2 = 819,200 B, the "800 KB" of Kwon et al. 2023 §3.
    """
    L = _validate.integer("n_layers", n_layers, low=1)
    h = _validate.integer("kv_hidden", kv_hidden, low=1)
    b = _validate.integer("dtype_bytes", dtype_bytes, low=1, high=16)
    return 2 * L * h * b


#: OPT-13B in FP16 (Kwon et al. 2023): the serving trace's default.
KV_BYTES_OPT_13B = 2 * 40 * 5120 * 2
#: vLLM's default KV block size, tokens (Kwon et al. 2023 §7; ``--block-size 16``).
BLOCK_TOKENS = 16


def page_bytes(tokens: int, *, bytes_per_token: int = KV_BYTES_OPT_13B) -> int:
    """Bytes of one KV-cache page (a vLLM block) holding ``tokens`` tokens:
    ``tokens × bytes_per_token`` (default: OPT-13B in FP16, :data:`KV_BYTES_OPT_13B`).

    vLLM's 16-token block of OPT-13B: 16 × 819,200 B = 13,107,200 B = 12.5 MiB.
    """
    t = _validate.integer("tokens", tokens, low=1)
    b = _validate.integer("bytes_per_token", bytes_per_token, low=1)
    return t * b


# -- traces ----------------------------------------------------------------------------------------

class Event(NamedTuple):
    """One trace event: ``op`` "alloc" (``size`` bytes) or "free"; ``id`` an int or str."""

    op: str
    id: int | str
    size: int = 0


def alloc(id: int | str, size: int) -> Event:
    """An allocation of ``size`` bytes owned by ``id``."""
    return Event("alloc", _owner(id), _validate.integer("size", size, low=1))


def free(id: int | str) -> Event:
    """Release the allocation owned by ``id``."""
    return Event("free", _owner(id))


def _owner(id):
    if isinstance(id, bool) or not isinstance(id, int | str):
        raise TypeError(f"id must be an int or str, got {id!r} ({type(id).__name__})")
    return id


def _events(trace) -> list[Event]:
    """Check a trace: well-formed events, no double alloc, no free of an unknown id."""
    if isinstance(trace, str | bytes) or not isinstance(trace, Iterable):
        raise TypeError(f"trace must be a sequence of alloc/free events, got {trace!r}")
    out, live = [], set()
    for i, ev in enumerate(trace):
        if not isinstance(ev, tuple) or not ev or ev[0] not in ("alloc", "free"):
            raise ValueError(f"trace[{i}] must be alloc(id, size) or free(id), got {ev!r}")
        if ev[0] == "alloc":
            if len(ev) != 3:
                raise ValueError(f"trace[{i}] must be ('alloc', id, size), got {ev!r}")
            e = alloc(ev[1], ev[2])
            if e.id in live:
                raise ValueError(f"trace[{i}] allocates id {e.id!r}, which is already live")
            live.add(e.id)
        else:
            if len(ev) not in (2, 3):
                raise ValueError(f"trace[{i}] must be ('free', id), got {ev!r}")
            e = free(ev[1])
            if e.id not in live:
                raise ValueError(f"trace[{i}] frees id {e.id!r}, which is not allocated")
            live.discard(e.id)
        out.append(e)
    return out


def serving_trace(n_requests: int = 200, *, seed: int = 0, prompt_tokens=(16, 512),
                  output_tokens=(16, 512), bytes_per_token: int = KV_BYTES_OPT_13B,
                  concurrency: float = 32.0) -> tuple[Event, ...]:
    """KV-cache allocations of an LLM server: requests arrive, live, and finish.

    Request ``i`` (ids 0, 1, …) has ``prompt + output`` tokens, each drawn uniformly from the
    inclusive ranges given, and allocates ``tokens × bytes_per_token`` bytes for its whole life
    (its final length: no growth step by step).  It lives ``output`` decode steps.  Arrivals are
    a Poisson process whose rate gives ``concurrency`` requests in flight on average (Little's
    law: rate = concurrency / mean lifetime).  Frees at a time come before allocations at the
    same time.  Seeded: the same arguments give the same trace.
    """
    n = _validate.integer("n_requests", n_requests, low=1, high=1_000_000)
    s = _validate.integer("seed", seed, low=0)
    p_lo, p_hi = _range("prompt_tokens", prompt_tokens, 0)
    o_lo, o_hi = _range("output_tokens", output_tokens, 1)
    bpt = _validate.integer("bytes_per_token", bytes_per_token, low=1)
    conc = _validate.positive("concurrency", concurrency)
    rng = np.random.default_rng(s)
    prompt = rng.integers(p_lo, p_hi + 1, size=n)
    output = rng.integers(o_lo, o_hi + 1, size=n)
    rate = conc / ((o_lo + o_hi) / 2)
    arrive = np.cumsum(rng.exponential(1 / rate, size=n))
    timed = []
    for i in range(n):
        timed.append((float(arrive[i]), 1, i, alloc(i, int(prompt[i] + output[i]) * bpt)))
        timed.append((float(arrive[i] + output[i]), 0, i, free(i)))
    timed.sort(key=lambda t: t[:3])
    return tuple(t[3] for t in timed)


def _range(name, value, low):
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (low, high) pair of integers, got {value!r}") from None
    lo = _validate.integer(f"{name}[0]", lo, low=low)
    hi = _validate.integer(f"{name}[1]", hi, low=lo)
    return lo, hi


def training_trace(n_steps: int = 3, *, n_layers: int = 12, weight_bytes: int = 8 * MiB,
                   activation_bytes: int = 32 * MiB, workspace_bytes: int = 4 * MiB,
                   vary: float = 0.0, seed: int = 0) -> tuple[Event, ...]:
    """A training loop's allocations, the same shapes every step unless ``vary`` > 0.

    Weights ``w{l}`` first (kept).  Each step ``s``: forward, per layer — workspace ``ws``,
    activation ``a{s}.{l}``, free ``ws``; backward, last layer first — workspace, weight
    gradient ``g{s}.{l}``, free the activation, free the workspace; then in step 0 the Adam
    states ``opt{l}`` (2 × weights, kept), and the gradients are freed
    (``zero_grad(set_to_none=True)``, PyTorch's default).  ``vary``: activations of a step are
    scaled by a factor drawn uniformly from ``[1 − vary, 1]`` (a variable sequence length).
    """
    steps = _validate.integer("n_steps", n_steps, low=1, high=10_000)
    L = _validate.integer("n_layers", n_layers, low=1, high=10_000)
    w = _validate.integer("weight_bytes", weight_bytes, low=1)
    a = _validate.integer("activation_bytes", activation_bytes, low=1)
    ws = _validate.integer("workspace_bytes", workspace_bytes, low=1)
    v = _validate.real("vary", vary, low=0.0, high=0.99)
    rng = np.random.default_rng(_validate.integer("seed", seed, low=0))
    ev = [alloc(f"w{l}", w) for l in range(L)]
    for s in range(steps):
        act = a if v == 0 else max(1, round(a * rng.uniform(1 - v, 1)))
        for l in range(L):
            ev += [alloc("ws", ws), alloc(f"a{s}.{l}", act), free("ws")]
        for l in reversed(range(L)):
            ev += [alloc("ws", ws), alloc(f"g{s}.{l}", w), free(f"a{s}.{l}"), free("ws")]
        if s == 0:
            ev += [alloc(f"opt{l}", 2 * w) for l in range(L)]
        ev += [free(f"g{s}.{l}") for l in range(L)]
    return tuple(ev)


# -- results ---------------------------------------------------------------------------------------

class MapEntry(NamedTuple):
    """A piece of the memory map: bytes ``[start, start + size)`` in ``state`` "used" (holding
    ``owner``'s data), "waste" (inside ``owner``'s block but not requested) or "free" (cached,
    ``owner`` None)."""

    start: int
    size: int
    state: str
    owner: int | str | None


@dataclass(frozen=True, repr=False)
class OOM(Readout):
    """The first request that could not be served."""

    event: int                  # index in the trace
    id: int | str
    size: int                   # bytes requested
    need: int                   # bytes the allocator needed (after rounding)
    capacity: int
    reserved: int
    allocated: int
    largest_free: int           # largest free block inside the reserved memory

    @property
    def free_total(self) -> int:
        """Capacity not holding any allocation: cached free + never reserved."""
        return self.capacity - self.allocated

    def readout_title(self) -> str:
        return f"Out of memory at event {self.event}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("id", repr(self.id)), Row("requested", self.size, "B"),
                Row("needs", self.need, "B"), Row("free in total", self.free_total, "B"),
                Row("largest free block", self.largest_free, "B"),
                Row("unreserved", self.capacity - self.reserved, "B"))


@dataclass(frozen=True, repr=False, eq=False)
class AllocatorRun(Readout):
    """One allocator replaying one trace.  Arrays have one entry per event (state after it).

    ``maps[i]``: the memory map after event ``i`` for each requested snapshot;
    ``segments[i]``: the reserved ranges ``(start, size)`` then.  ``final_map`` / ``final_segments``:
    after the last event.  ``failed``: ids whose allocation failed; ``first_oom``: the first.
    """

    allocator: str
    capacity: int | None
    settings: dict = field(compare=False)
    used: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    largest_free: np.ndarray
    first_oom: OOM | None
    failed: tuple
    maps: dict = field(compare=False)
    segments: dict = field(compare=False)
    final_map: tuple[MapEntry, ...]
    final_segments: tuple[tuple[int, int], ...]

    @property
    def free_cached(self) -> np.ndarray:
        """Reserved bytes not allocated, per event."""
        return self.reserved - self.allocated

    @property
    def waste(self) -> np.ndarray:
        """Internal waste per event: allocated − used (rounding, unsplit remainders, last pages)."""
        return self.allocated - self.used

    @property
    def fragmentation(self) -> np.ndarray:
        """``1 − largest free block / total free`` of the reserved memory, per event (0 when
        nothing is free)."""
        free_ = self.free_cached.astype(float)
        out = np.zeros_like(free_)
        np.divide(self.largest_free, free_, out=out, where=free_ > 0)
        return np.where(free_ > 0, 1.0 - out, 0.0)

    @property
    def peak_used(self) -> int:
        return int(self.used.max(initial=0))

    @property
    def peak_allocated(self) -> int:
        return int(self.allocated.max(initial=0))

    @property
    def peak_reserved(self) -> int:
        return int(self.reserved.max(initial=0))

    @property
    def peak_waste(self) -> int:
        return int(self.waste.max(initial=0))

    @property
    def max_fragmentation(self) -> float:
        return float(self.fragmentation.max(initial=0.0))

    @property
    def peak_event(self) -> int:
        """The event at which reservation first reached its peak (the allocator had to grow
        that far: nothing cached fitted)."""
        return int(np.argmax(self.reserved)) if self.reserved.size else 0

    @property
    def fragmentation_at_peak(self) -> float:
        """Fragmentation of the cached free memory at :attr:`peak_event`."""
        return float(self.fragmentation[self.peak_event]) if self.reserved.size else 0.0

    @property
    def unused_at_peak(self) -> int:
        """Reserved bytes holding no data at :attr:`peak_event` (cached free + internal waste)."""
        i = self.peak_event
        return int(self.reserved[i] - self.used[i]) if self.reserved.size else 0

    @property
    def used_fraction_at_peak(self) -> float:
        """Peak used / peak reserved: how much of what was taken from the device held data."""
        return self.peak_used / self.peak_reserved if self.peak_reserved else 1.0

    def _stats(self) -> tuple[Row, ...]:
        """The rows :class:`AllocatorComparison` shows as columns, labelled by ``_HEAD``."""
        oom = "none" if self.first_oom is None else f"event {self.first_oom.event}"
        values = ((self.peak_used, "B"), (self.peak_allocated, "B"), (self.peak_reserved, "B"),
                  (self.used_fraction_at_peak, "%"), (self.peak_waste, "B"),
                  (self.unused_at_peak, "B"), (self.fragmentation_at_peak, "%"),
                  (len(self.failed), ""), (oom, ""))
        return tuple(Row(label, v, unit)
                     for label, (v, unit) in zip(self._HEAD[1:], values, strict=True))

    def _row(self):
        return (self.allocator, *(r.text for r in self._stats()))

    _HEAD = ("allocator", "peak used", "peak allocated", "peak reserved", "peak used/reserved",
             "peak internal waste", "unused at peak reserved", "fragmentation then", "failed",
             "first OOM")

    def readout_title(self) -> str:
        return f"{self.allocator} allocator"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("events", self.used.size),
                Row("capacity", "unlimited" if self.capacity is None else self.capacity, "B"),
                *self._stats())


def _snapshots(snapshots, n) -> set[int]:
    if isinstance(snapshots, int):
        snapshots = (snapshots,)
    out = set()
    for s in snapshots:
        if n == 0:
            raise ValueError(f"snapshots: the trace is empty, so there is no event {s!r}")
        out.add(_validate.integer("snapshots", s, low=-n, high=n - 1) % n)
    return out


def _capacity(capacity):
    return None if capacity is None else _validate.integer("capacity", capacity, low=1)


# -- the caching allocator -------------------------------------------------------------------------

class _Block:
    __slots__ = ("owner", "req", "seg", "size", "start")

    def __init__(self, start, size, owner, req, seg):
        self.start, self.size, self.owner, self.req, self.seg = start, size, owner, req, seg


class _Device:
    """The device side: segments reserved in one address range, within ``capacity`` bytes.

    A new segment goes into the lowest gap released segments left that fits, else at the end,
    so without releases the reserved memory is contiguous and grows at its end."""

    def __init__(self, capacity: int | None):
        self.capacity = capacity
        self.segments: dict[int, int] = {}     # start -> size
        self.reserved = 0

    def reserve(self, size: int) -> int | None:
        """The start of a new segment of ``size`` bytes, or None if it would exceed capacity."""
        if self.capacity is not None and self.reserved + size > self.capacity:
            return None
        base = 0
        for start in sorted(self.segments):
            if start - base >= size:
                break
            base = start + self.segments[start]
        self.segments[base] = size
        self.reserved += size
        return base

    def release(self, start: int) -> None:
        self.reserved -= self.segments.pop(start)


class _Pool:
    """The blocks of one pool, by address: each segment the pool reserved is cut into blocks,
    allocated or free.  ``segment_size(need)`` is the size of a new segment for a request of
    ``need`` bytes; a block is split when at least ``min_split`` bytes would remain."""

    def __init__(self, device: _Device, *, best_fit: bool, segment_size, min_split: int):
        self.device, self.best_fit = device, best_fit
        self.segment_size, self.min_split = segment_size, min_split
        self.blocks: list[_Block] = []
        self.starts: list[int] = []            # blocks[i].start, for bisect

    def _insert(self, b: _Block) -> None:
        i = bisect.bisect_left(self.starts, b.start)
        self.blocks.insert(i, b)
        self.starts.insert(i, b.start)

    def _remove(self, i: int) -> None:
        del self.blocks[i]
        del self.starts[i]

    def find(self, need: int) -> _Block | None:
        """A free block of at least ``need`` bytes: the smallest (best fit) or the lowest."""
        pick = None
        for b in self.blocks:
            if b.owner is None and b.size >= need:
                if not self.best_fit:
                    return b
                if pick is None or b.size < pick.size:
                    pick = b
                    if b.size == need:
                        break
        return pick

    def grow(self, need: int) -> _Block | None:
        """Reserve a new segment for a request of ``need`` bytes; its one free block."""
        size = self.segment_size(need)
        base = self.device.reserve(size)
        if base is None:
            return None
        b = _Block(base, size, None, 0, base)
        self._insert(b)
        return b

    def take(self, b: _Block, need: int, owner, requested: int) -> None:
        """Hand ``need`` bytes of free block ``b`` to ``owner``; split off the rest if it is
        large enough to be worth keeping as its own free block."""
        if b.size - need >= self.min_split:
            self._insert(_Block(b.start + need, b.size - need, None, 0, b.seg))
            b.size = need
        b.owner, b.req = owner, requested

    def give_back(self, b: _Block) -> None:
        """Free ``b``: it merges with free neighbours in the same segment, never across."""
        b.owner, b.req = None, 0
        i = bisect.bisect_left(self.starts, b.start)
        if i + 1 < len(self.blocks):
            nx = self.blocks[i + 1]
            if nx.owner is None and nx.seg == b.seg:
                b.size += nx.size
                self._remove(i + 1)
        if i > 0:
            pv = self.blocks[i - 1]
            if pv.owner is None and pv.seg == b.seg:
                pv.size += b.size
                self._remove(i)

    def release_free_segments(self) -> None:
        """Give every segment that is one free block back to the device (``empty_cache``)."""
        for i in range(len(self.blocks) - 1, -1, -1):
            b = self.blocks[i]
            if b.owner is None and b.size == self.device.segments[b.seg]:
                self.device.release(b.seg)
                self._remove(i)

    def largest_free(self) -> int:
        return max((b.size for b in self.blocks if b.owner is None), default=0)


def _pytorch_large_segment(need: int) -> int:
    # get_allocation_size: a 1-10 MiB request reserves a 20 MiB segment that later requests of
    # that range share; from 10 MiB on, the request rounded up to 2 MiB
    return LARGE_BUFFER if need < MIN_LARGE_ALLOC else round_up(need, ROUND_LARGE)


def caching(trace, *, capacity: int | None = None, policy: str = "best_fit",
            pools: str = "pytorch", round_bytes: int = ROUND_BYTES,
            segment_bytes: int | None = None, min_split_bytes: int | None = None,
            release_on_oom: bool = True, snapshots: Iterable[int] = ()) -> AllocatorRun:
    """Replay ``trace`` through the caching allocator of the module docstring.

    ``capacity``: device bytes the allocator may reserve (``None``: unlimited); ``policy``:
    "best_fit" (PyTorch's) or "first_fit"; ``round_bytes``: request rounding;
    ``pools``: "pytorch" (a small pool for requests up to :data:`SMALL_SIZE` and a large pool,
    each with PyTorch's segment sizes and split rules) or "one" (one pool whose new segments
    are the request rounded up to ``segment_bytes``, default :data:`SEGMENT_BYTES`, and whose
    blocks are split when at least ``min_split_bytes`` remain, default ``round_bytes``: an
    allocator small enough to trace by hand); ``snapshots``: event indices after which to
    record the memory map.
    """
    events = _events(trace)
    cap = _capacity(capacity)
    _validate.choice("policy", policy, POLICIES)
    _validate.choice("pools", pools, POOLS)
    if pools == "pytorch" and (segment_bytes, min_split_bytes) != (None, None):
        raise ValueError("segment_bytes and min_split_bytes go with pools='one'; PyTorch's "
                         "pools size their segments and split their blocks by their own rules")
    rb = _validate.integer("round_bytes", round_bytes, low=1, high=GiB)
    sb = ms = None
    if pools == "one":
        sb = _validate.integer("segment_bytes", SEGMENT_BYTES if segment_bytes is None
                               else segment_bytes, low=1)
        if sb % rb:
            raise ValueError(f"segment_bytes must be a multiple of round_bytes ({rb}), got {sb}")
        ms = rb if min_split_bytes is None else _validate.integer("min_split_bytes",
                                                                  min_split_bytes, low=1)
    release_on_oom = _validate.flag("release_on_oom", release_on_oom)
    snaps = _snapshots(snapshots, len(events))

    device = _Device(cap)
    best = policy == "best_fit"
    if pools == "pytorch":
        # should_split: a small-pool block is split if at least kMinBlockSize (512 B) remain,
        # a large-pool block only if more than kSmallSize (1 MiB) remain
        small = _Pool(device, best_fit=best, segment_size=lambda need: SMALL_BUFFER,
                      min_split=rb)
        large = _Pool(device, best_fit=best, segment_size=_pytorch_large_segment,
                      min_split=SMALL_SIZE + 1)
        all_pools = (small, large)

        def pool_for(need):
            return small if need <= SMALL_SIZE else large
    else:
        one = _Pool(device, best_fit=best, segment_size=lambda need: round_up(need, sb),
                    min_split=ms)
        all_pools = (one,)

        def pool_for(need):
            return one

    owned: dict = {}                   # owner -> (pool, block)
    failed: list = []                  # ids whose allocation failed, in trace order
    skipped: set = set()               # failed ids whose free is still to come
    used = allocated = 0
    n = len(events)
    series = np.zeros((4, n), dtype=np.int64)
    maps, seg_maps = {}, {}
    first_oom = None

    def largest_free() -> int:
        return max(pool.largest_free() for pool in all_pools)

    def blocks() -> list[_Block]:
        return sorted((b for pool in all_pools for b in pool.blocks), key=lambda b: b.start)

    for k, ev in enumerate(events):
        if ev.op == "alloc":
            need = round_up(ev.size, rb)
            pool = pool_for(need)
            b = pool.find(need) or pool.grow(need)
            if b is None and release_on_oom:
                for p in all_pools:
                    p.release_free_segments()
                b = pool.grow(need)
            if b is None:
                failed.append(ev.id)
                skipped.add(ev.id)
                if first_oom is None:
                    first_oom = OOM(k, ev.id, ev.size, need, cap, device.reserved, allocated,
                                    largest_free())
            else:
                pool.take(b, need, ev.id, ev.size)
                owned[ev.id] = (pool, b)
                used += ev.size
                allocated += b.size
        elif ev.id in skipped:
            skipped.discard(ev.id)       # the request never got memory: nothing to free
        else:
            pool, b = owned.pop(ev.id)
            used -= b.req
            allocated -= b.size
            pool.give_back(b)
        series[:, k] = (used, allocated, device.reserved, largest_free())
        if k in snaps:
            maps[k] = _block_map(blocks())
            seg_maps[k] = tuple(sorted(device.segments.items()))

    settings = dict(policy=policy, pools=pools, round_bytes=rb, segment_bytes=sb,
                    min_split_bytes=ms, release_on_oom=release_on_oom)
    return AllocatorRun(policy, cap, settings, *series, first_oom, tuple(failed), maps, seg_maps,
                        _block_map(blocks()), tuple(sorted(device.segments.items())))


def _block_map(blocks) -> tuple[MapEntry, ...]:
    out = []
    for b in blocks:
        if b.owner is None:
            out.append(MapEntry(b.start, b.size, "free", None))
        else:
            out.append(MapEntry(b.start, b.req, "used", b.owner))
            if b.size > b.req:
                out.append(MapEntry(b.start + b.req, b.size - b.req, "waste", b.owner))
    return tuple(out)


# -- the paged allocator ---------------------------------------------------------------------------

def paged(trace, *, page_bytes: int, capacity: int | None = None,
          snapshots: Iterable[int] = ()) -> AllocatorRun:
    """Replay ``trace`` through fixed-size pages (PagedAttention; module docstring).

    ``page_bytes``: bytes per page (``BLOCK_TOKENS × bytes per token`` for a KV cache);
    ``capacity``: pool bytes (``capacity // page_bytes`` pages; ``None``: unlimited).
    Reserved = pages ever touched (taking the lowest free page first, that is the peak number
    of pages in use).  A request fails only if fewer pages are free than it needs.
    """
    events = _events(trace)
    pb = _validate.integer("page_bytes", page_bytes, low=1)
    cap = _capacity(capacity)
    if cap is not None and cap < pb:
        raise ValueError(f"capacity ({binary_bytes(cap)}) must hold at least one page of {binary_bytes(pb)}")
    n_pages = math.inf if cap is None else cap // pb
    snaps = _snapshots(snapshots, len(events))

    # Freed pages below the high-water mark.  Sorted before an allocation takes the lowest ones
    # (a C sort of the whole list beats popping a heap page by page when requests need
    # thousands of small pages).
    free_pages: list[int] = []
    unsorted = False
    high = 0                            # pages ever touched
    owned: dict = {}                    # owner -> (pages, size)
    failed: list = []
    skipped: set = set()
    used = in_use = 0
    n = len(events)
    series = np.zeros((4, n), dtype=np.int64)
    maps, seg_maps = {}, {}
    first_oom = None
    for k, ev in enumerate(events):
        if ev.op == "alloc":
            need = cdiv(ev.size, pb)
            if len(free_pages) + (n_pages - high) < need:
                failed.append(ev.id)
                skipped.add(ev.id)
                if first_oom is None:
                    first_oom = OOM(k, ev.id, ev.size, need * pb, cap, high * pb, in_use * pb,
                                    len(free_pages) * pb)
            else:
                if unsorted:
                    free_pages.sort()
                    unsorted = False
                reuse = min(need, len(free_pages))
                take = free_pages[:reuse]
                del free_pages[:reuse]
                fresh = need - reuse
                take += range(high, high + fresh)
                high += fresh
                owned[ev.id] = (take, ev.size)
                used += ev.size
                in_use += need
        elif ev.id in skipped:
            skipped.discard(ev.id)
        else:
            pages, size = owned.pop(ev.id)
            free_pages.extend(pages)
            unsorted = True
            used -= size
            in_use -= len(pages)
        # any free page serves any request: the largest usable "block" is all of them
        series[:, k] = (used, in_use * pb, high * pb, len(free_pages) * pb)
        if k in snaps:
            maps[k], seg_maps[k] = _page_map(owned, free_pages, pb), ((0, high * pb),)

    settings = dict(page_bytes=pb, pages=None if cap is None else int(n_pages))
    return AllocatorRun("paged", cap, settings, *series, first_oom, tuple(failed), maps, seg_maps,
                        _page_map(owned, free_pages, pb), ((0, high * pb),))


def _page_map(owned, free_pages, pb) -> tuple[MapEntry, ...]:
    """The pool as runs of pages: free, used by one owner, and the unused tail of each owner's
    last page ("waste").  Vectorised: with 1-token pages a snapshot holds ~50,000 pages."""
    owners = list(owned)
    page = [np.asarray(free_pages, dtype=np.int64)]
    who = [np.full(len(free_pages), -1, dtype=np.int64)]
    tail = [np.full(len(free_pages), pb, dtype=np.int64)]
    for k, (pages, size) in enumerate(owned.values()):
        p = np.asarray(pages, dtype=np.int64)
        t = np.full(len(p), pb, dtype=np.int64)
        t[-1] = size - (len(p) - 1) * pb          # bytes used in the last page
        page.append(p)
        who.append(np.full(len(p), k, dtype=np.int64))
        tail.append(t)
    page, who, used = (np.concatenate(a) for a in (page, who, tail))
    if not len(page):
        return ()
    order = np.argsort(page, kind="stable")
    page, who, used = page[order], who[order], used[order]
    # a run continues while pages are adjacent, have the same owner, and the previous page is full
    breaks = np.ones(len(page), dtype=bool)
    breaks[1:] = (page[1:] != page[:-1] + 1) | (who[1:] != who[:-1]) | (used[:-1] < pb)
    starts = np.flatnonzero(breaks)
    ends = np.r_[starts[1:], len(page)]
    sizes = np.add.reduceat(used, starts)
    out: list[MapEntry] = []
    for s, e, size in zip(starts.tolist(), ends.tolist(), sizes.tolist(), strict=True):
        k = int(who[s])
        owner = None if k < 0 else owners[k]
        start = int(page[s]) * pb
        out.append(MapEntry(start, size, "free" if owner is None else "used", owner))
        last_used = int(used[e - 1])
        if last_used < pb:
            out.append(MapEntry(start + size, pb - last_used, "waste", owner))
    return tuple(out)


# -- side by side ----------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class AllocatorComparison:
    """First fit, best fit and paging on the same trace (see :func:`compare`)."""

    runs: tuple[AllocatorRun, ...]

    def __getitem__(self, name: str) -> AllocatorRun:
        for r in self.runs:
            if r.allocator == name:
                return r
        return _validate.choice("allocator", name, [r.allocator for r in self.runs])

    def __repr__(self) -> str:
        return text_table(AllocatorRun._HEAD, [r._row() for r in self.runs])

    def _repr_html_(self) -> str:
        return html_table("Allocators on one trace", AllocatorRun._HEAD, [r._row() for r in self.runs])


def compare(trace, *, page_bytes: int, capacity: int | None = None,
            snapshots: Iterable[int] = (), **caching_kw) -> AllocatorComparison:
    """Run first fit, best fit (:func:`caching`, extra keywords go to it) and :func:`paged`."""
    events = _events(trace)
    snapshots = tuple(snapshots) if not isinstance(snapshots, int) else (snapshots,)
    runs = [caching(events, capacity=capacity, policy=p, snapshots=snapshots, **caching_kw)
            for p in ("first_fit", "best_fit")]
    runs.append(paged(events, page_bytes=page_bytes, capacity=capacity, snapshots=snapshots))
    return AllocatorComparison(tuple(runs))
