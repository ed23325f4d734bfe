"""Memory-access traces of classic loops, for the cache simulator.

Every generator returns a :class:`Trace`: the byte addresses one thread touches, in program
order (``int64``), a ``bool`` array marking stores, and the element size.  A ``Trace`` passes
straight to :meth:`gpu_lessons.cache.Cache.run` and works wherever NumPy wants an array of
addresses (``np.asarray(trace)``).

>>> t = matrix_traversal(64, 64, element_bytes=4, order="row")
>>> len(t), t.addresses[:4].tolist()
(4096, [0, 4, 8, 12])

Matrices are stored row-major (C order) at a base address; a second array starts at the next
4 KiB boundary after the first, as an allocator would place it.  Arrays whose size is a
multiple of the cache's set span therefore map row for row onto the same sets: that is the
real conflict-miss pathology of power-of-two matrices, not an artefact.

:func:`hit_rate_vs_line_size` answers "why 128-byte lines?" with numbers: hit rate,
the classic three kinds of miss, and the bytes each line size moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _validate
from ._format import Readout, Row, binary_bytes, html_table, percent, text_table
from ._math import cdiv, round_up
from .cache import Cache, reuse_distances

#: Largest trace a generator builds; lesson-sized traces are 10^4 to 10^6 accesses.
MAX_ACCESSES = 20_000_000

_PAGE = 4096


@dataclass(frozen=True, eq=False, repr=False)
class Trace(Readout):
    """A sequence of memory accesses: byte ``addresses``, ``is_write`` per access, and size."""

    name: str
    addresses: np.ndarray
    is_write: np.ndarray
    access_bytes: int = 1

    def __post_init__(self):
        addr = np.ascontiguousarray(self.addresses, dtype=np.int64)
        w = np.ascontiguousarray(self.is_write, dtype=np.bool_)
        if addr.ndim != 1 or w.shape != addr.shape:
            raise ValueError(f"addresses and is_write must be 1-D and the same length, got "
                             f"shapes {addr.shape} and {w.shape}")
        _validate.integer("access_bytes", self.access_bytes, low=1)
        addr.flags.writeable = False
        w.flags.writeable = False
        object.__setattr__(self, "addresses", addr)
        object.__setattr__(self, "is_write", w)

    def __len__(self) -> int:
        return self.addresses.shape[0]

    def __array__(self, dtype=None, copy=None):
        if dtype is None or np.dtype(dtype) == self.addresses.dtype:
            return self.addresses.copy() if copy else self.addresses
        return self.addresses.astype(dtype)

    @property
    def stores(self) -> int:
        return int(self.is_write.sum())

    @property
    def loads(self) -> int:
        return len(self) - self.stores

    @property
    def footprint_bytes(self) -> int:
        """Distinct bytes the trace touches: the least traffic any cache could get away with."""
        if not len(self):
            return 0
        starts = np.unique(self.addresses)
        gaps = np.minimum(np.diff(starts), self.access_bytes)
        return int(gaps.sum()) + self.access_bytes

    def readout_title(self) -> str:
        return f"Trace {self.name}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("accesses", len(self)), Row("stores", self.stores),
                Row("access size", self.access_bytes, "B"),
                Row("footprint", self.footprint_bytes, "B"))


# -- generators ---------------------------------------------------------------------------------
def matrix_traversal(rows, cols, element_bytes=4, order="row", *, base=0) -> Trace:
    """Read every element of a row-major ``rows x cols`` matrix, row by row or column by column.

    ``order="row"`` walks consecutive addresses (stride ``element_bytes``); ``"column"``
    jumps ``cols x element_bytes`` bytes between accesses, so each new line is used for one
    element before the walk comes back ``rows`` accesses later.
    """
    rows, cols = _validate.dimensions(rows=rows, cols=cols)
    e, base = _elem(element_bytes), _base(base)
    order = _validate.choice("order", order, ("row", "column"))
    _check_size(rows * cols)
    i = np.arange(rows, dtype=np.int64)[:, None]
    j = np.arange(cols, dtype=np.int64)[None, :]
    idx = i * cols + j
    if order == "column":
        idx = idx.T
    return _loads(f"{order}-major traversal of {rows}×{cols} × {binary_bytes(e)}",
                  base + idx.ravel() * e, e)


def strided(count, stride, element_bytes=4, *, base=0) -> Trace:
    """``count`` loads ``stride`` elements apart: ``base + k x stride x element_bytes``."""
    count = _validate.integer("count", count, low=0, high=MAX_ACCESSES)
    stride = _validate.integer("stride", stride, low=0)
    e, base = _elem(element_bytes), _base(base)
    k = np.arange(count, dtype=np.int64)
    return _loads(f"stride-{stride} loads of {binary_bytes(e)}", base + k * stride * e, e)


def random_access(count, footprint_bytes, element_bytes=4, *, seed=0, base=0) -> Trace:
    """``count`` loads of elements drawn uniformly from an array of ``footprint_bytes``."""
    count = _validate.integer("count", count, low=0, high=MAX_ACCESSES)
    e = _elem(element_bytes)
    footprint = _validate.integer("footprint_bytes", footprint_bytes, low=e)
    seed = _validate.integer("seed", seed, low=0)
    base = _base(base)
    idx = np.random.default_rng(seed).integers(0, footprint // e, size=count, dtype=np.int64)
    return _loads(f"random loads of {binary_bytes(e)} over {binary_bytes(footprint)}", base + idx * e, e)


def field_access(n, n_fields=4, fields=(0,), layout="aos", field_bytes=4, *, base=0) -> Trace:
    """Loop over ``n`` records reading the listed ``fields`` of each, in AoS or SoA layout.

    AoS (array of structs): record ``i``'s field ``f`` is at ``(i x n_fields + f) x
    field_bytes``, so reading one field of four uses a quarter of every line fetched.  SoA
    (struct of arrays): field ``f`` of record ``i`` is at ``(f x n + i) x field_bytes``, so
    each field is its own dense stream.
    """
    n = _validate.integer("n", n, low=1)
    n_fields = _validate.integer("n_fields", n_fields, low=1)
    fields = tuple(fields) if not isinstance(fields, (int, np.integer)) else (int(fields),)
    if not fields:
        raise ValueError("fields must name at least one field, got an empty sequence")
    f = np.array([_validate.integer("fields", x, low=0, high=n_fields - 1) for x in fields],
                 dtype=np.int64)
    layout = _validate.choice("layout", layout, ("aos", "soa"))
    e, base = _elem(field_bytes, "field_bytes"), _base(base)
    _check_size(n * f.size)
    i = np.arange(n, dtype=np.int64)[:, None]
    idx = i * n_fields + f[None, :] if layout == "aos" else f[None, :] * n + i
    names = ",".join(str(x) for x in fields)
    return _loads(f"{layout.upper()}: fields {names} of {n} records × {n_fields} fields",
                  base + idx.ravel() * e, e)


def transpose(rows, cols=None, element_bytes=4, tile=None, *, src_base=0,
              dst_base=None) -> Trace:
    """``B[j, i] = A[i, j]`` for a ``rows x cols`` matrix: a load of A, then a store to B.

    Naive (``tile=None``): ``for i: for j:`` — A is read along rows, B written down columns,
    one element per line per visit.  Tiled: the same loop over ``tile x tile`` blocks, so the
    lines of a block of B are reused while they are still cached.  Edge tiles are clipped.
    """
    rows, cols = _validate.dimensions(rows=rows, cols=cols if cols is not None else rows)
    e = _elem(element_bytes)
    src_base = _base(src_base, "src_base")
    dst_base = _after(src_base, rows * cols * e) if dst_base is None else _base(dst_base,
                                                                                "dst_base")
    _check_size(2 * rows * cols)
    if tile is None:
        i = np.repeat(np.arange(rows, dtype=np.int64), cols)
        j = np.tile(np.arange(cols, dtype=np.int64), rows)
        label = "naive"
    else:
        t = _validate.integer("tile", tile, low=1)
        i, j = _tiled_2d(rows, cols, t)
        label = f"{t}×{t} tiles"
    load = src_base + (i * cols + j) * e
    store = dst_base + (j * rows + i) * e
    return _interleave(f"transpose {rows}×{cols} × {binary_bytes(e)}, {label}", [load, store],
                       [False, True], e)


def stencil_1d(n, radius=1, element_bytes=4, *, src_base=0, dst_base=None) -> Trace:
    """``out[i] = sum(in[i-r .. i+r])`` for every interior ``i``: ``2r+1`` loads, one store."""
    n = _validate.integer("n", n, low=1)
    r = _validate.integer("radius", radius, low=0)
    if n <= 2 * r:
        raise ValueError(f"n must be > 2 x radius = {2 * r} so there are interior points, "
                         f"got n={n}")
    e = _elem(element_bytes)
    src_base = _base(src_base, "src_base")
    dst_base = _after(src_base, n * e) if dst_base is None else _base(dst_base, "dst_base")
    _check_size((n - 2 * r) * (2 * r + 2))
    i = np.arange(r, n - r, dtype=np.int64)
    cols = [src_base + (i + d) * e for d in range(-r, r + 1)] + [dst_base + i * e]
    return _interleave(f"1-D stencil, radius {r}, {n} × {binary_bytes(e)}", cols,
                       [False] * (2 * r + 1) + [True], e)


def stencil_2d(rows, cols, radius=1, element_bytes=4, *, src_base=0, dst_base=None) -> Trace:
    """Cross-shaped (5-point for ``radius=1``) stencil over the interior of a row-major grid.

    For each interior ``(i, j)`` in row order: loads ``in[i-r..i-1, j]``, ``in[i, j-r..j+r]``,
    ``in[i+1..i+r, j]`` (``4r+1`` points, ascending addresses), then stores ``out[i, j]``.
    The rows above and below are ``cols x element_bytes`` bytes away: whether they are still
    cached decides the hit rate.
    """
    rows, cols = _validate.dimensions(rows=rows, cols=cols)
    r = _validate.integer("radius", radius, low=0)
    if rows <= 2 * r or cols <= 2 * r:
        raise ValueError(f"rows and cols must be > 2 x radius = {2 * r}, got {rows}×{cols}")
    e = _elem(element_bytes)
    src_base = _base(src_base, "src_base")
    dst_base = (_after(src_base, rows * cols * e) if dst_base is None
                else _base(dst_base, "dst_base"))
    _check_size((rows - 2 * r) * (cols - 2 * r) * (4 * r + 2))
    i = np.repeat(np.arange(r, rows - r, dtype=np.int64), cols - 2 * r)
    j = np.tile(np.arange(r, cols - r, dtype=np.int64), rows - 2 * r)
    offsets = ([(d, 0) for d in range(-r, 0)] + [(0, d) for d in range(-r, r + 1)]
               + [(d, 0) for d in range(1, r + 1)])
    streams = [src_base + ((i + di) * cols + (j + dj)) * e for di, dj in offsets]
    streams.append(dst_base + (i * cols + j) * e)
    return _interleave(f"2-D {4 * r + 1}-point stencil, {rows}×{cols} × {binary_bytes(e)}", streams,
                       [False] * len(offsets) + [True], e)


def gemm(n, tile=None, element_bytes=4, *, a_base=0, b_base=None, c_base=None) -> Trace:
    """``C = A·B`` for ``n x n`` row-major matrices, as one thread's loop nest.

    Naive (``tile=None``)::

        for i, for j: acc = 0; for k: acc += A[i,k]*B[k,j]  (load A, load B); store C[i,j]

    Tiled with ``tile = T``: ``for ti, tj, tk`` over T-blocks, then ``for i, j`` in the block:
    load ``C[i,j]`` (except in the first k-block), ``T`` pairs of loads of A and B, store
    ``C[i,j]``.  Tiling keeps a T×T block of B and a T-wide strip of A in the cache, cutting
    the misses on B by about a factor of T.  Edge blocks are clipped.  ``tile=n`` gives the
    naive trace.
    """
    n = _validate.integer("n", n, low=1)
    t = n if tile is None else _validate.integer("tile", tile, low=1)
    t = min(t, n)
    e = _elem(element_bytes)
    a_base = _base(a_base, "a_base")
    b_base = _after(a_base, n * n * e) if b_base is None else _base(b_base, "b_base")
    c_base = _after(b_base, n * n * e) if c_base is None else _base(c_base, "c_base")
    nt = cdiv(n, t)
    _check_size(2 * n**3 + 2 * n * n * nt)

    # Index grid over (ti, tj, tk, ii, jj); every point is one (i, j, k-block) visit whose
    # events are [load C, (load A, load B) x T, store C].
    ti, tj, tk, ii, jj = np.meshgrid(*(np.arange(nt, dtype=np.int64),) * 3,
                                     *(np.arange(t, dtype=np.int64),) * 2, indexing="ij")
    i = (ti * t + ii).ravel()
    j = (tj * t + jj).ravel()
    kb = tk.ravel() * t
    k = kb[:, None] + np.arange(t, dtype=np.int64)[None, :]
    events = np.empty((i.size, 2 * t + 2), np.int64)
    events[:, 0] = c_base + (i * n + j) * e
    events[:, 1:-1:2] = a_base + (i[:, None] * n + k) * e
    events[:, 2:-1:2] = b_base + (k * n + j[:, None]) * e
    events[:, -1] = events[:, 0]
    keep = np.zeros(events.shape, bool)
    inside = (i < n) & (j < n)
    keep[:, 0] = inside & (kb > 0)
    keep[:, 1:-1:2] = keep[:, 2:-1:2] = inside[:, None] & (k < n)
    keep[:, -1] = inside
    writes = np.zeros(events.shape, bool)
    writes[:, -1] = True
    label = "naive" if t == n else f"{t}×{t} tiles"
    return Trace(f"GEMM {n}×{n}×{n} × {binary_bytes(e)}, {label}", events[keep], writes[keep], e)


# -- why 128-byte lines ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LineSizePoint:
    """One line size of a :func:`hit_rate_vs_line_size` sweep.

    ``compulsory + capacity + conflict == misses`` (Hill's three Cs: first touches; the rest
    of a fully associative LRU cache's misses; what set mapping and the policy add — negative
    when they happen to beat LRU).
    """

    line_bytes: int
    sets: int
    ways: int
    accesses: int
    hits: int
    misses: int
    compulsory: int
    capacity: int
    conflict: int
    bytes_from_next: int
    bytes_to_next: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else math.nan


@dataclass(frozen=True)
class LineSizeSweep:
    """Hit rate and traffic of one trace through same-size caches with different line sizes."""

    trace_name: str
    size_bytes: int
    footprint_bytes: int
    points: tuple[LineSizePoint, ...]

    @property
    def line_bytes(self) -> np.ndarray:
        return np.array([p.line_bytes for p in self.points])

    @property
    def hit_rate(self) -> np.ndarray:
        return np.array([p.hit_rate for p in self.points])

    @property
    def bytes_from_next(self) -> np.ndarray:
        return np.array([p.bytes_from_next for p in self.points])

    @property
    def traffic_ratio(self) -> np.ndarray:
        """Bytes fetched per distinct byte the trace touches (1.0 is the minimum)."""
        return self.bytes_from_next / max(self.footprint_bytes, 1)

    def _table(self) -> list[list[str]]:
        head = ["line", "sets × ways", "hit rate", "misses", "compulsory", "capacity",
                "conflict", "bytes fetched", "× footprint", "bytes written"]
        rows = [head]
        for p, ratio in zip(self.points, self.traffic_ratio, strict=True):
            rows.append([binary_bytes(p.line_bytes), f"{p.sets} × {p.ways}",
                         f"{percent(p.hit_rate)}", f"{p.misses:,}", f"{p.compulsory:,}",
                         f"{p.capacity:,}", f"{p.conflict:,}", binary_bytes(p.bytes_from_next),
                         f"{ratio:.2f}", binary_bytes(p.bytes_to_next)])
        return rows

    def __repr__(self) -> str:
        return (f"LineSizeSweep({self.trace_name}; {binary_bytes(self.size_bytes)} cache, "
                f"footprint {binary_bytes(self.footprint_bytes)})\n"
                + text_table(None, self._table(), align="right"))

    def _repr_html_(self) -> str:
        rows = self._table()
        caption = (f"{self.trace_name}: {binary_bytes(self.size_bytes)} cache, footprint "
                   f"{binary_bytes(self.footprint_bytes)}")
        return html_table(caption, rows[0], rows[1:])


def hit_rate_vs_line_size(trace, size_bytes, ways, line_sizes=(16, 32, 64, 128, 256, 512), *,
                          policy="lru", seed=0) -> LineSizeSweep:
    """Run ``trace`` through caches of ``size_bytes`` and ``ways`` with each line size.

    Why lines are neither tiny nor huge: a streaming trace misses once per line, so short
    lines mean more misses (and, in hardware, more tags and more requests) for the same bytes;
    but a cache of fixed size holds ``size_bytes / line_bytes`` lines, so long lines leave
    fewer lines (more capacity and conflict misses) and every miss drags in bytes a scattered
    access never uses, so the bytes fetched grow.  NVIDIA's answer is a 128-byte line (a
    warp's 32 × 4-byte load) with 32-byte sectors: tags at line granularity, traffic at
    sector granularity (CUDA C++ Best Practices Guide §10.2.1).

    Each point runs a fresh write-back, write-allocate cache and flushes it at the end, so
    ``bytes_to_next`` counts every dirty byte.  The three Cs come from the trace's LRU stack
    distances (:func:`gpu_lessons.cache.reuse_distances`): compulsory = first touches of a
    line, capacity = further misses of a fully associative LRU cache of the same size,
    conflict = the rest (Hill & Smith, IEEE Trans. Computers 38(12), 1989).
    """
    if not isinstance(trace, Trace):
        trace = Trace("addresses", _validate_addresses(trace),
                      np.zeros(np.shape(trace), bool), 1)
    size_bytes = _validate.integer("size_bytes", size_bytes, low=1)
    if isinstance(line_sizes, (int, np.integer)):
        line_sizes = (int(line_sizes),)
    line_sizes = [_validate.integer("line_sizes", x, low=1) for x in line_sizes]
    if not line_sizes:
        raise ValueError("line_sizes must hold at least one line size, got none")
    points = []
    for lb in line_sizes:
        cache = Cache(size_bytes, lb, ways, policy, seed=seed)
        st = cache.run(trace) + cache.flush()
        d = reuse_distances(trace, lb)
        lines = size_bytes // lb
        compulsory = int((d < 0).sum())
        fully = compulsory + int((d >= lines).sum())
        points.append(LineSizePoint(
            line_bytes=lb, sets=cache.sets, ways=cache.ways, accesses=st.accesses,
            hits=st.hits, misses=st.misses, compulsory=compulsory,
            capacity=fully - compulsory, conflict=st.misses - fully,
            bytes_from_next=st.bytes_from_next, bytes_to_next=st.bytes_to_next))
    return LineSizeSweep(trace.name, size_bytes, trace.footprint_bytes, tuple(points))


# -- helpers ----------------------------------------------------------------------------------------
def _elem(value, name="element_bytes") -> int:
    return _validate.integer(name, value, low=1, high=4096)


def _base(value, name="base") -> int:
    return _validate.integer(name, value, low=0, high=2**50)


def _after(base: int, nbytes: int) -> int:
    """First 4 KiB boundary at or after the end of an array of ``nbytes`` at ``base``."""
    return round_up(base + nbytes, _PAGE)


def _check_size(n: int) -> None:
    if n > MAX_ACCESSES:
        raise ValueError(f"that trace would have {n:,} accesses; the limit is "
                         f"{MAX_ACCESSES:,} (use a smaller matrix)")


def _validate_addresses(addresses) -> np.ndarray:
    a = np.asarray(addresses)
    if a.dtype.kind not in "iu":
        raise TypeError(f"trace must be a Trace or an int array of addresses, "
                        f"got dtype {a.dtype}")
    return a.astype(np.int64).ravel()


def _loads(name, addresses, element_bytes) -> Trace:
    addresses = np.asarray(addresses, dtype=np.int64).ravel()
    return Trace(name, addresses, np.zeros(addresses.size, bool), element_bytes)


def _interleave(name, streams, is_write, element_bytes) -> Trace:
    """Access k of stream 0, of stream 1, ... then k+1: the order of one loop body."""
    addr = np.stack(streams, axis=1).ravel()
    w = np.broadcast_to(np.array(is_write, bool), (len(streams[0]), len(streams))).ravel()
    return Trace(name, addr, w, element_bytes)


def _tiled_2d(rows, cols, t):
    """Row and column indices of a ``for ti: for tj: for i: for j`` walk, edges clipped."""
    nr, nc = cdiv(rows, t), cdiv(cols, t)
    ti, tj, ii, jj = np.meshgrid(np.arange(nr), np.arange(nc), np.arange(t), np.arange(t),
                                 indexing="ij")
    i = (ti * t + ii).ravel().astype(np.int64)
    j = (tj * t + jj).ravel().astype(np.int64)
    keep = (i < rows) & (j < cols)
    return i[keep], j[keep]
