"""Allocator explorer: a request trace replayed by a caching allocator (first fit, best fit) or
by fixed-size pages (:mod:`gpu_lessons.allocator`), drawn as a memory map with the reserved,
used and free bytes over time.

Every bar and number comes from the model; the view only lays them out.
"""

from __future__ import annotations

import numpy as np
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure

from .. import allocator
from .._format import binary_bytes, percent
from ._base import PALETTE, Explorer, dropdown, log_slider, slider

ALLOCATORS = (("caching allocator, first fit", "first_fit"),
              ("caching allocator, best fit", "best_fit"),
              ("fixed pages (PagedAttention)", "paged"))
ALLOCATOR_NAMES = {v: k for k, v in ALLOCATORS}
TRACES = (("LLM serving (variable lengths)", "serving"),
          ("training loop", "training"))
MAP_AT = ("peak reserved", "first out-of-memory", "end of trace", "the event chosen below")
STATE_COLOURS = {"used": PALETTE[0], "waste": PALETTE[3], "free": PALETTE[1]}
STATE_LABELS = {"used": "holds data", "waste": "internal waste (rounding, last page)",
                "free": "free but reserved (cached)"}
PAGE_TOKENS = (1, 4, 8, 16, 32, 64, 128, 256)
_TRACE_CACHE = 8


class AllocatorExplorer(Explorer):
    title = "GPU memory: caching allocator vs fixed pages"

    def __init__(self, *, policy: str = "best_fit", trace: str = "serving", seed: int = 0,
                 n_requests: int = 200, n_steps: int = 3, vary_percent: int = 50,
                 capacity_gib: float = 20.0, page_tokens: int = allocator.BLOCK_TOKENS,
                 map_at: str = "peak reserved", event: int = 0):
        self._traces: dict = {}        # recent traces and comparisons, so moving the
        self._comparisons: dict = {}   # event slider or switching allocator only redraws
        self.blocks = ColumnDataSource(dict(start=[], end=[], row=[], color=[], state=[],
                                            owner=[], size=[], where=[]))
        self.segments = ColumnDataSource(dict(start=[], end=[], row=[], size=[]))
        self.series = ColumnDataSource(dict(event=[], used=[], allocated=[], reserved=[],
                                            unit=[]))
        self.oom = ColumnDataSource(dict(event=[], need=[], y=[]))

        rows = ["reserved segments", "memory map"]
        mm = figure(y_range=FactorRange(*reversed(rows)), height=210, width=980,
                    toolbar_location="above", tools="xpan,xwheel_zoom,reset")
        # the whole pool behind everything: what is not covered was never reserved
        self.pool = mm.hbar(y=["memory map"], left=[0], right=[1], height=0.8,
                            color="#EEEEEE", legend_label="not reserved")
        segs = mm.hbar(y="row", left="start", right="end", height=0.5, source=self.segments,
                       fill_color="#D0D0D0", line_color="black", legend_label="segment")
        blocks = mm.hbar(y="row", left="start", right="end", height=0.8, source=self.blocks,
                         color="color", line_color="white", line_width=0.3,
                         legend_field="state")
        mm.add_tools(HoverTool(renderers=[blocks], tooltips=[
            ("", "@state"), ("owner", "@owner"), ("size", "@size"), ("addresses", "@where")]))
        mm.add_tools(HoverTool(renderers=[segs], tooltips=[("segment", "@size")]))
        legend = mm.legend[0]
        mm.center.remove(legend)
        mm.add_layout(legend, "right")
        mm.ygrid.visible = False
        self.map_figure = mm

        ts = figure(height=250, width=980, x_axis_label="trace event", toolbar_location="above",
                    tools="xpan,xwheel_zoom,reset")
        for key, name, colour, dash in (("reserved", "reserved", PALETTE[4], "solid"),
                                        ("allocated", "allocated (blocks, pages)", PALETTE[1],
                                         "dashed"),
                                        ("used", "used (bytes requested)", PALETTE[0],
                                         "solid")):
            ts.line("event", key, source=self.series, line_width=2, color=colour,
                    line_dash=dash, legend_label=name)
        ts.scatter("event", "y", source=self.oom, marker="x", size=14, line_width=3,
                   color=PALETTE[3], legend_label="first out-of-memory")
        ts.add_tools(HoverTool(tooltips=[("event", "@event"), ("used", "@used{0,0.00} @unit"),
                                         ("allocated", "@allocated{0,0.00} @unit"),
                                         ("reserved", "@reserved{0,0.00} @unit")],
                               mode="vline"))
        self.capacity_span = Span(dimension="width", line_dash="dashed", line_color="black",
                                  location=1)
        self.event_span = Span(dimension="height", line_color=PALETTE[7], location=0)
        ts.add_layout(self.capacity_span)
        ts.add_layout(self.event_span)
        legend = ts.legend[0]
        ts.center.remove(legend)
        ts.add_layout(legend, "right")
        ts.y_range.start = 0
        self.series_figure = ts

        controls = {
            "policy": dropdown("allocator", list(ALLOCATORS), policy),
            "trace": dropdown("request trace", list(TRACES), trace),
            "seed": slider("trace seed", seed, 0, 20),
            "n_requests": slider("serving: requests", n_requests, 10, 400, 10,
                                 unit="requests"),
            "n_steps": slider("training: steps", n_steps, 1, 8, unit="steps"),
            "vary_percent": slider("training: activation size varies", vary_percent, 0, 90,
                                   5, unit="%"),
            "capacity_gib": log_slider("pool capacity", capacity_gib, -1, 2, unit="GiB"),
            "page_tokens": dropdown("page size (KV tokens of OPT-13B)", list(PAGE_TOKENS),
                              page_tokens),
            "map_at": dropdown("memory map at", list(MAP_AT), map_at),
            "event": slider("chosen event", event, 0, max(event, 400), unit="trace index"),
        }
        super().__init__(controls, [column(self.map_figure, self.series_figure)], notes=(
            "Serving: each request holds its KV cache (prompt + output tokens × 800 KiB, "
            "OPT-13B in FP16) until it finishes. The caching allocator rounds requests, "
            "splits cached blocks and reserves new segments when nothing fits; pages serve "
            "any request from any free pages, so only the last page of each is partly "
            "wasted."))

    def _on_change(self, change):
        if change["owner"] is self.controls["event"]:
            with self.quietly():
                self.controls["map_at"].value = MAP_AT[-1]  # moving the slider picks it
        self.update()

    def _trace_key(self) -> tuple:
        c = self.controls
        if c["trace"].value == "serving":
            return ("serving", c["seed"].value, c["n_requests"].value)
        return ("training", c["seed"].value, c["n_steps"].value, c["vary_percent"].value)

    def _trace(self):
        key = self._trace_key()
        if key not in self._traces:
            if key[0] == "serving":
                tr = allocator.serving_trace(key[2], seed=key[1])
            else:
                tr = allocator.training_trace(key[2], seed=key[1], vary=key[3] / 100)
            if len(self._traces) >= _TRACE_CACHE:
                self._traces.pop(next(iter(self._traces)))
            self._traces[key] = tr
        return self._traces[key]

    def _update(self):
        c = self.controls
        serving = c["trace"].value == "serving"
        c["n_requests"].disabled = not serving
        c["n_steps"].disabled = c["vary_percent"].disabled = serving
        trace = self._trace()
        capacity = int(c["capacity_gib"].value * allocator.GiB)
        page_bytes = allocator.page_bytes(c["page_tokens"].value)
        key = (self._trace_key(), capacity, page_bytes)
        if key not in self._comparisons:
            if len(self._comparisons) >= _TRACE_CACHE:
                self._comparisons.pop(next(iter(self._comparisons)))
            self._comparisons[key] = allocator.compare(trace, page_bytes=page_bytes,
                                                       capacity=capacity)
        cmp = self._comparisons[key]
        self.comparison = cmp
        policy = c["policy"].value
        summary = cmp[policy]
        where = c["map_at"].value
        n = len(trace)
        if where == "peak reserved":
            k = summary.peak_event
        elif where == "first out-of-memory" and summary.first_oom is not None:
            k = summary.first_oom.event
        elif where == "the event chosen below":
            k = min(c["event"].value, n - 1)
        else:  # end of trace, or no out-of-memory to show
            k = n - 1
        with self.quietly():
            c["event"].max = n - 1
            c["event"].value = k
        if policy == "paged":
            run = allocator.paged(trace, page_bytes=page_bytes, capacity=capacity, snapshots=(k,))
        else:
            run = allocator.caching(trace, capacity=capacity, policy=policy, snapshots=(k,))
        self.run, self.event = run, k

        # show the pool up to its capacity, unless no allocator comes near it
        span = min(capacity, 1.25 * max(r.peak_reserved for r in cmp.runs))
        big = span >= 4 * allocator.GiB
        unit, scale = ("GiB", 1 / allocator.GiB) if big else ("MiB", 1 / allocator.MiB)
        self.unit, self.scale = unit, scale   # plotted value = bytes × scale
        entries = run.maps[k]
        self.blocks.data = dict(
            start=[e.start * scale for e in entries],
            end=[(e.start + e.size) * scale for e in entries],
            row=["memory map"] * len(entries),
            color=[STATE_COLOURS[e.state] for e in entries],
            state=[STATE_LABELS[e.state] for e in entries],
            owner=["–" if e.owner is None else str(e.owner) for e in entries],
            size=[binary_bytes(e.size) for e in entries],
            where=[f"{e.start * scale:,.3f}–{(e.start + e.size) * scale:,.3f} {unit}"
                   for e in entries])
        segs = run.segments[k]
        self.segments.data = dict(start=[s * scale for s, _ in segs],
                                  end=[(s + z) * scale for s, z in segs],
                                  row=["reserved segments"] * len(segs),
                                  size=[binary_bytes(z) for _, z in segs])
        self.pool.glyph.right = capacity * scale
        self.map_figure.x_range.start = 0
        self.map_figure.x_range.end = span * scale * 1.01
        self.map_figure.xaxis.axis_label = f"address ({unit})"
        self.map_figure.title.text = (f"{ALLOCATOR_NAMES[policy]}: memory after event {k} "
                                      f"(trace of {n} events)")

        self.series.data = dict(event=np.arange(n), used=run.used * scale,
                                allocated=run.allocated * scale, reserved=run.reserved * scale,
                                unit=[unit] * n)
        oom = run.first_oom
        self.oom.data = (dict(event=[oom.event], need=[oom.need], y=[oom.reserved * scale])
                         if oom else dict(event=[], need=[], y=[]))
        self.capacity_span.location = capacity * scale
        self.event_span.location = k
        self.series_figure.yaxis.axis_label = f"memory ({unit})"
        self.series_figure.y_range.end = span * scale * 1.05

        self._readout(cmp, policy, run, k, c["page_tokens"].value, page_bytes)

    def _readout(self, cmp, policy, run, k, page_tokens, page_bytes):
        b = binary_bytes
        rows = []
        for r in cmp.runs:
            oom = ("no request failed" if r.first_oom is None else
                   f"{len(r.failed)} failed, first at event {r.first_oom.event}")
            line = (f"{r.allocator.replace('_', ' ')}: peak used {b(r.peak_used)}, reserved "
                    f"{b(r.peak_reserved)} ({percent(r.used_fraction_at_peak)} used), fragmentation "
                    f"at peak {percent(r.fragmentation_at_peak)}, waste {b(r.peak_waste)}; {oom}")
            rows.append(f"<b>{line}</b>" if r.allocator == policy else line)
        oom = run.first_oom
        oom_text = ("" if oom is None else
                    f" First failure: event {oom.event} needed {b(oom.need)} with "
                    f"{b(oom.free_total)} free in total but a largest free block of "
                    f"{b(oom.largest_free)}.")
        self.set_readout(
            "<br>".join(rows) +
            f"<br>After event {k}: used {b(run.used[k])}, reserved {b(run.reserved[k])}, free "
            f"cached {b(run.free_cached[k])} of which the largest block is "
            f"{b(run.largest_free[k])}: fragmentation <b>{percent(run.fragmentation[k])}</b> "
            f"(1 − largest free block / free).{oom_text} Pages: {page_tokens} tokens = "
            f"{b(page_bytes)}.")


def allocator_explorer(**kwargs) -> AllocatorExplorer:
    """A request trace replayed by a caching allocator (first/best fit) or fixed pages:
    memory map at a chosen moment, used/reserved over the trace, fragmentation and failures.

    Keyword arguments (all optional): ``policy`` ("first_fit"/"best_fit"/"paged"), ``trace``
    ("serving"/"training"), ``seed``, ``n_requests``, ``n_steps``, ``vary_percent``,
    ``capacity_gib``, ``page_tokens``, ``map_at`` (one of :data:`MAP_AT`), ``event``.
    """
    return AllocatorExplorer(**kwargs)
