"""Cache explorer: run a classic loop's memory trace through a cache you configure.

Pick a trace (row- vs column-major traversal, naive vs tiled transpose, AoS vs SoA, a 2-D
stencil, naive vs tiled GEMM, random loads -- all from :mod:`gpu_lessons.traces`), a cache
size, line size, associativity and replacement policy; the readout gives hit rate, misses and
the bytes moved to and from the next level (:class:`gpu_lessons.cache.Cache`, flushed at the
end so every dirty byte is counted).

The two plots answer "why are cache lines 128 bytes?" with
:func:`gpu_lessons.traces.hit_rate_vs_line_size`: for the same cache size, longer lines raise
the hit rate of a streaming trace (one miss per line), but a scattered trace drags in bytes it
never uses, so the bytes fetched grow with the line.  NVIDIA keeps 128-byte lines and moves
32-byte sectors (CUDA C++ Best Practices Guide §10.2.1): tick "32-byte sectors" to see the
traffic of the current line size fall back for the scattered traces.

Traces are lesson-sized (4 K to 73 K accesses) so an update, sweep included, stays well under
100 ms.  The simulator is compiled with numba: construction runs it once on a tiny trace
(``warmup_ms``), which loads the compiled code -- or, the very first time in an environment,
compiles it (a few seconds) -- so no update pays for it.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import ipywidgets as widgets
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from .. import _validate, traces
from .._format import binary_bytes, percent
from ..cache import POLICIES, Cache
from ..memory import SECTOR_BYTES  # NVIDIA's fetch unit inside a 128-byte line
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown

#: Trace key -> (label, builder taking the tile size).  Sizes are chosen so that the default
#: 4 KiB cache holds a few rows but not a whole matrix: the traces then differ visibly.
TRACES = {
    "row-major": ("row-major traversal of a 64×64 float matrix",
                  lambda tile: traces.matrix_traversal(64, 64, 4, "row")),
    "column-major": ("column-major traversal of the same matrix",
                     lambda tile: traces.matrix_traversal(64, 64, 4, "column")),
    "transpose-naive": ("transpose 64×64 floats, naive",
                        lambda tile: traces.transpose(64, 64, 4)),
    "transpose-tiled": ("transpose 64×64 floats, tiled",
                        lambda tile: traces.transpose(64, 64, 4, tile=tile)),
    "aos": ("AoS: one field of 4096 structs of 4 floats",
            lambda tile: traces.field_access(4096, 4, (0,), "aos", 4)),
    "soa": ("SoA: the same field stored as its own array",
            lambda tile: traces.field_access(4096, 4, (0,), "soa", 4)),
    "stencil": ("5-point stencil over a 64×64 float grid",
                lambda tile: traces.stencil_2d(64, 64, 1, 4)),
    "gemm-naive": ("GEMM 32×32×32 floats, naive i-j-k loop",
                   lambda tile: traces.gemm(32, None, 4)),
    "gemm-tiled": ("GEMM 32×32×32 floats, tiled",
                   lambda tile: traces.gemm(32, tile, 4)),
    "random": ("4096 random float loads over 64 KiB",
               lambda tile: traces.random_access(4096, 65536, 4, seed=0)),
}
#: Traces that read the tile control.
TILED = ("transpose-tiled", "gemm-tiled")
TILES = (2, 4, 8, 16, 32)
CACHE_KIB = (1, 2, 4, 8, 16, 32, 64)
#: Line sizes offered and swept: 16 B to 512 B around NVIDIA's 128 B.
LINE_SIZES = (16, 32, 64, 128, 256, 512)
#: Associativities offered; 0 stands for fully associative (``ways=None`` in the model).
WAYS = (("direct-mapped (1)", 1), ("2", 2), ("4", 4), ("8", 8), ("16", 16),
        ("fully associative", 0))
#: Sweeps kept, so changing only the line size or sectors does not redo the sweep.
_SWEEPS_KEPT = 32


class CacheExplorer(Explorer):
    title = "Cache simulator: hit rate and traffic of a loop's memory trace"

    def __init__(self, trace="row-major", *, size_kib=4, line_bytes=128, ways=4,
                 policy="lru", tile=8, sectors=False):
        _validate.choice("trace", trace, TRACES)
        _validate.choice("size_kib", size_kib, CACHE_KIB)
        _validate.choice("line_bytes", line_bytes, LINE_SIZES)
        _validate.choice("ways", ways, [w for _, w in WAYS] + [None])
        _validate.choice("policy", policy, POLICIES)
        _validate.choice("tile", tile, TILES)
        if not isinstance(sectors, bool):
            raise TypeError(f"sectors must be True or False, got {sectors!r}")
        self._traces: dict = {}
        self._sweeps: OrderedDict = OrderedDict()
        self.stats = None  # CacheStats of the configured cache, run + flush
        self.sweep_result = None  # LineSizeSweep of the current trace and cache size

        factors = factors_of(LINE_SIZES)
        # One source per figure: each figure lives in its own bokeh document.
        self.sweep = ColumnDataSource(dict(line=[], hit_rate=[], misses=[], compulsory=[],
                                           capacity=[], conflict=[], geometry=[]))
        self.traffic = ColumnDataSource(dict(line=[], fetched_kib=[], ratio=[],
                                             written_kib=[]))
        self.current = ColumnDataSource(dict(line=[], hit_rate=[]))
        self.current_traffic = ColumnDataSource(dict(line=[], fetched_kib=[]))
        self.footprint = ColumnDataSource(dict(line=[], kib=[]))

        hits = figure(height=400, width=470, toolbar_location=None, x_range=factors,
                      y_range=Range1d(0, 105), x_axis_label="line size (bytes), same cache size",
                      y_axis_label="hit rate (%)", title="hit rate vs line size")
        hits.line("line", "hit_rate", source=self.sweep, color=PALETTE[0], line_width=2)
        dots = hits.scatter("line", "hit_rate", source=self.sweep, color=PALETTE[0], size=8,
                            legend_label="whole lines")
        hits.scatter("line", "hit_rate", source=self.current, color=PALETTE[3], size=12,
                     marker="diamond", legend_label="this cache")
        _legend_below(hits)
        hits.add_tools(HoverTool(renderers=[dots], tooltips=[
            ("line", "@line B (@geometry)"), ("hit rate", "@hit_rate{0.0} %"),
            ("misses", "@misses{0,0}"), ("compulsory", "@compulsory{0,0}"),
            ("capacity", "@capacity{0,0}"), ("conflict", "@conflict{0,0}")]))

        traffic = figure(height=400, width=470, toolbar_location=None, x_range=factors,
                         y_axis_type="log", x_axis_label="line size (bytes), same cache size",
                         y_axis_label="bytes fetched from next level (KiB, log)",
                         title="bytes fetched vs line size")
        traffic.line("line", "fetched_kib", source=self.traffic, color=PALETTE[2], line_width=2)
        tdots = traffic.scatter("line", "fetched_kib", source=self.traffic, color=PALETTE[2],
                                size=8, legend_label="whole lines")
        traffic.scatter("line", "fetched_kib", source=self.current_traffic, color=PALETTE[3],
                        size=12, marker="diamond", legend_label="this cache")
        traffic.line("line", "kib", source=self.footprint, color=PALETTE[7], line_width=1.5,
                     line_dash="dashed", legend_label="footprint (the least any cache fetches)")
        # powers of two read naturally for bytes; bokeh's default log ticks skip most of them
        traffic.yaxis.ticker = FixedTicker(ticks=[2.0**k for k in range(-6, 21)])
        _legend_below(traffic)
        traffic.add_tools(HoverTool(renderers=[tdots], tooltips=[
            ("line", "@line B"), ("fetched", "@fetched_kib{0,0.0} KiB"),
            ("× footprint", "@ratio{0.00}"), ("written back", "@written_kib{0,0.0} KiB")]))

        def selection(label, options, value):
            return widgets.SelectionSlider(options=options, value=value, description=label,
                                           style=STYLE, layout=LAYOUT, continuous_update=False)

        controls = {
            "trace": dropdown("trace", [(label, k) for k, (label, _) in TRACES.items()], trace),
            "tile": selection("tile (elements)", list(TILES), tile),
            "size_kib": selection("cache size (KiB)", list(CACHE_KIB), size_kib),
            "line_bytes": selection("line size (bytes)", list(LINE_SIZES), line_bytes),
            "ways": dropdown("associativity (ways)", WAYS, 0 if ways is None else ways),
            "policy": dropdown("replacement policy", list(POLICIES), policy),
            "sectors": widgets.Checkbox(value=sectors, style=STYLE, layout=LAYOUT,
                                        description="32-byte sectors (fetch only what is used)"),
        }
        self.warmup_ms = _warm_up()
        super().__init__(controls, [hits, traffic], notes=(
            "The sweep uses whole lines (no sectors) and the same size, ways and policy. "
            "Misses split into compulsory (first touch), capacity (a fully associative LRU "
            "cache of this size would miss too) and conflict (set mapping and policy): hover "
            "on a point."))

    def _trace_key(self) -> tuple:
        key = self.controls["trace"].value
        return key, (self.controls["tile"].value if key in TILED else None)

    def trace(self) -> traces.Trace:
        """The current trace (built once per trace and tile, then reused)."""
        key = self._trace_key()
        if key not in self._traces:
            self._traces[key] = TRACES[key[0]][1](key[1])
        return self._traces[key]

    def _sweep(self, trace, size: int, ways, policy: str) -> traces.LineSizeSweep:
        key = (self._trace_key(), size, ways, policy)
        if key in self._sweeps:
            self._sweeps.move_to_end(key)
        else:
            swept = [lb for lb in LINE_SIZES if _allowed(size, lb, ways, policy)]
            self._sweeps[key] = traces.hit_rate_vs_line_size(trace, size, ways, swept,
                                                             policy=policy)
            if len(self._sweeps) > _SWEEPS_KEPT:
                self._sweeps.popitem(last=False)
        return self._sweeps[key]

    def _update(self):
        self.set_readout("")  # a refused state shows only the warning, not stale numbers
        v = {k: c.value for k, c in self.controls.items()}
        self.controls["tile"].disabled = v["trace"] not in TILED
        trace = self.trace()
        size = v["size_kib"] * 1024
        ways = v["ways"] or None
        cache = Cache(size, v["line_bytes"], ways, v["policy"],
                      sector_bytes=SECTOR_BYTES if v["sectors"] else None)
        st = cache.run(trace) + cache.flush()
        self.stats = st

        sw = self._sweep(trace, size, ways, v["policy"])
        self.sweep_result = sw
        self.sweep.data = dict(
            line=factors_of(p.line_bytes for p in sw.points),
            hit_rate=[100 * p.hit_rate for p in sw.points],
            misses=[p.misses for p in sw.points],
            compulsory=[p.compulsory for p in sw.points],
            capacity=[p.capacity for p in sw.points],
            conflict=[p.conflict for p in sw.points],
            geometry=[f"{p.sets} sets × {p.ways} ways" for p in sw.points])
        self.traffic.data = dict(
            line=factors_of(p.line_bytes for p in sw.points),
            fetched_kib=[p.bytes_from_next / 1024 for p in sw.points],
            ratio=sw.traffic_ratio.tolist(),
            written_kib=[p.bytes_to_next / 1024 for p in sw.points])
        self.current.data = dict(line=[str(v["line_bytes"])], hit_rate=[100 * st.hit_rate])
        self.current_traffic.data = dict(line=[str(v["line_bytes"])],
                                         fetched_kib=[st.bytes_from_next / 1024])
        self.footprint.data = dict(line=factors_of(LINE_SIZES),
                                   kib=[sw.footprint_bytes / 1024] * len(LINE_SIZES))

        sector = f", {binary_bytes(SECTOR_BYTES)} sectors" if v["sectors"] else ""
        self.set_readout(
            f"{trace.name}: <b>hit rate {percent(st.hit_rate)}</b> — {st.hits:,} hits, "
            f"<b>{st.misses:,} misses</b> of {st.accesses:,} accesses; "
            f"<b>fetched {binary_bytes(st.bytes_from_next)}</b>, wrote back "
            f"{binary_bytes(st.bytes_to_next)} (footprint {binary_bytes(trace.footprint_bytes)}); "
            f"cache {binary_bytes(size)} = {cache.sets} sets × {cache.ways} ways × "
            f"{binary_bytes(cache.line_bytes)}{sector}, {cache.policy.upper()}")


def _warm_up() -> float:
    """Load (or, in a fresh environment, compile) the simulator's numba kernels on a tiny
    trace, so the cost is paid once at construction and never inside an update; returns ms."""
    start = time.perf_counter()
    tiny = traces.strided(64, 1)
    cache = Cache(1024, 64, 2, "lru", sector_bytes=SECTOR_BYTES)
    cache.run(tiny)
    cache.flush()
    traces.hit_rate_vs_line_size(tiny, 1024, 2, (64,))
    return (time.perf_counter() - start) * 1e3


def _legend_below(fig) -> None:
    """Move the legend under the plot, where it never hides a point."""
    legend = fig.legend[0]
    fig.center.remove(legend)
    fig.add_layout(legend, "below")


def factors_of(line_sizes) -> list[str]:
    """Line sizes as the categorical x factors of both plots."""
    return [str(lb) for lb in line_sizes]


def _allowed(size: int, line_bytes: int, ways, policy: str) -> bool:
    """Whether the model accepts this geometry (e.g. 8 ways of 512 B do not fit in 1 KiB)."""
    try:
        Cache(size, line_bytes, ways, policy)
    except ValueError:
        return False
    return True


def cache_explorer(trace: str = "row-major", **kwargs) -> CacheExplorer:
    """Explore a cache with one of :data:`TRACES`.  Keyword arguments set the other controls:
    ``size_kib``, ``line_bytes``, ``ways`` (``None`` = fully associative), ``policy``,
    ``tile`` and ``sectors``."""
    return CacheExplorer(trace, **kwargs)
