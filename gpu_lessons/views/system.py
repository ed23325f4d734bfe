"""System explorers: launch overhead, communication/computation overlap, allocator memory map.

* :func:`launch_explorer` — :func:`gpu_lessons.system.batch_sweep` (GPU utilisation against
  batch size, one line per launch mode) and :func:`gpu_lessons.system.kernel_sequence` (the
  CPU/GPU timeline of one step as a Gantt chart).
* :func:`overlap_explorer` — :func:`gpu_lessons.system.training_step` with overlap off and on:
  the step's breakdown and the compute/communication streams as a Gantt chart.
* :func:`allocator_explorer` — :mod:`gpu_lessons.allocator`: a request trace replayed by a
  caching allocator (first fit, best fit) or by fixed-size pages, drawn as a memory map.

Every bar and number comes from those models; the views only lay them out.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure

from .. import allocator, system
from .._format import binary_bytes
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown, log_slider, slider
from .overlap_measured import MeasuredOverlapPanel

#: Colour and legend entry of each kind of timeline bar (``system.SEGMENT_KINDS``; Okabe–Ito,
#: grey for waiting).
SEGMENT_STYLES = {
    "kernel": (PALETTE[0], "kernel"), "launch": (PALETTE[1], "launch"),
    "graph launch": (PALETTE[4], "graph launch"), "sync": ("#A0A0A0", "sync wait"),
    "forward": (PALETTE[0], "forward"), "backward": (PALETTE[5], "backward"),
    "comm": (PALETTE[3], "all-reduce"),
}

MODE_LABELS = {"async": "async: launches overlap kernels",
               "sync": "sync after every kernel",
               "graph": "CUDA Graph: one launch for all"}
#: Batch sizes on the utilisation curve (log-spaced integers).
BATCHES = np.unique(np.geomspace(1, 65536, 160).astype(np.int64))
BATCH_CHOICES = tuple(2**k for k in range(17))


def _gantt_data(timeline) -> dict:
    """Columns for the Gantt chart from the model's ``Segment`` bars (times as given)."""
    styles = [SEGMENT_STYLES[s.kind] for s in timeline]
    return dict(lane=[s.lane for s in timeline], start=[s.start for s in timeline],
                end=[s.end for s in timeline], label=[s.label for s in timeline],
                kind=[s.kind for s in timeline], color=[c for c, _ in styles],
                legend=[name for _, name in styles],
                length=[s.end - s.start for s in timeline])


def _gantt(source, lanes, unit: str, width: int = 900, height: int = 200):
    fig = figure(y_range=FactorRange(*lanes), height=height, width=width,
                 x_axis_label=f"time ({unit})", toolbar_location="above",
                 tools="xpan,xwheel_zoom,reset")
    bars = fig.hbar(y="lane", left="start", right="end", height=0.7, color="color",
                    line_color="white", line_width=0.5, source=source, legend_field="legend")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("", "@label"), ("start", f"@start{{0,0.00}} {unit}"),
        ("end", f"@end{{0,0.00}} {unit}"), ("length", f"@length{{0,0.00}} {unit}")]))
    legend = fig.legend[0]
    fig.center.remove(legend)
    fig.add_layout(legend, "right")
    fig.ygrid.visible = False
    return fig


def _pct(x: float) -> str:
    return f"{x:.1%}"


# -- launch overhead --------------------------------------------------------------------------------

class LaunchExplorer(Explorer):
    title = "Launch overhead: when the CPU cannot feed the GPU"

    def __init__(self, *, n_kernels: int = 10, fixed_us: float = 2.0, per_item_us: float = 0.05,
                 batch: int = 32, mode: str = "async", figures: str = "H200",
                 launch_us: float | None = None, final_sync: bool = True):
        costs = system.launch_figures(figures)
        self.curves = ColumnDataSource(dict(batch=[], **{m: [] for m in system.MODES}))
        self.current = ColumnDataSource(dict(batch=[], utilisation=[], kernel_us=[]))
        self.bars = ColumnDataSource(dict(lane=[], start=[], end=[], label=[], kind=[],
                                          color=[], legend=[], length=[]))
        curve = figure(x_axis_type="log", height=330, width=520,
                       x_axis_label="batch size (items, log scale)",
                       y_axis_label="GPU busy (% of step time)", y_range=(0, 105),
                       toolbar_location=None)
        self._lines = {}
        for k, m in enumerate(system.MODES):
            self._lines[m] = curve.line("batch", m, source=self.curves, line_width=2,
                                        color=PALETTE[k], legend_label=MODE_LABELS[m])
        dot = curve.scatter("batch", "utilisation", source=self.current, size=13,
                            marker="diamond", color=PALETTE[3], legend_label="current")
        curve.add_tools(HoverTool(renderers=list(self._lines.values()), tooltips=[
            ("batch", "@batch items"), ("async", "@async{0.0} %"), ("sync", "@sync{0.0} %"),
            ("graph", "@graph{0.0} %"), ("kernel", "@kernel_us{0,0.00} µs")]))
        curve.add_tools(HoverTool(renderers=[dot], tooltips=[
            ("batch", "@batch items"), ("GPU busy", "@utilisation{0.0} %"),
            ("kernel", "@kernel_us{0,0.00} µs")]))
        curve.legend.location = "bottom_right"
        self.knee = Span(dimension="height", line_dash="dashed", line_color=PALETTE[7],
                         location=1)
        curve.add_layout(self.knee)
        self.curve_figure = curve
        self.gantt_figure = _gantt(self.bars, ["GPU", "CPU"], "µs")

        controls = {
            "fixed_us": slider("kernel time, fixed part", fixed_us, 0, 50, 0.5, integer=False,
                               unit="µs"),
            "per_item_us": slider("kernel time per item", per_item_us, 0, 2, 0.01,
                                  integer=False, unit="µs"),
            "batch": widgets.SelectionSlider(options=list(BATCH_CHOICES), value=batch,
                                             description="batch size (items)", style=STYLE,
                                             layout=LAYOUT, continuous_update=False),
            "n_kernels": slider("kernels per step", n_kernels, 1, 64, unit="kernels"),
            "mode": dropdown("how kernels are issued",
                             [(v, k) for k, v in MODE_LABELS.items()], mode),
            "final_sync": widgets.Checkbox(value=final_sync,
                                           description="CPU waits for the step to finish",
                                           style=STYLE, layout=LAYOUT),
            "figures": dropdown("measured costs of", list(system.LAUNCH_FIGURES), costs.name),
            "launch_us": slider("launch overhead (CPU)", costs.launch_us if launch_us is None
                                else launch_us, 0.5, 20, 0.1, integer=False, unit="µs"),
        }
        super().__init__(controls, [row(self.curve_figure, self.gantt_figure)], notes=(
            "Kernel time = fixed part + time per item × batch. A launch costs the CPU the "
            "launch overhead; when a kernel is shorter than that, the GPU waits (dashed line: "
            "kernel time = launch overhead). Sync and CUDA Graph costs are the measured ones "
            "of the chosen system."))

    def _on_change(self, change):
        if change["owner"] is self.controls["figures"]:
            # a new system brings its own measured launch cost; one update for both changes
            with self.quietly():
                self.controls["launch_us"].value = system.launch_figures(change["new"]).launch_us
        self.update()

    def _update(self):
        c = self.controls
        kw = dict(figures=c["figures"].value, launch_us=c["launch_us"].value,
                  final_sync=c["final_sync"].value)
        n, mode, batch = c["n_kernels"].value, c["mode"].value, c["batch"].value
        fixed, per = c["fixed_us"].value, c["per_item_us"].value
        sweeps = {m: system.batch_sweep(BATCHES, fixed_us=fixed, per_item_us=per, n_kernels=n,
                                        mode=m, **kw) for m in system.MODES}
        self.sweeps = sweeps
        self.curves.data = dict(batch=BATCHES, kernel_us=sweeps[mode].kernel_us,
                                **{m: s.utilisation * 100 for m, s in sweeps.items()})
        for m, line in self._lines.items():
            line.glyph.line_width = 4 if m == mode else 1.5
            line.glyph.line_alpha = 1.0 if m == mode else 0.55
        here = system.batch_sweep([batch], fixed_us=fixed, per_item_us=per, n_kernels=n,
                                  mode=mode, **kw)
        d = float(here.kernel_us[0])
        run = system.kernel_sequence(n, d, mode=mode, **kw)
        self.run = run
        self.current.data = dict(batch=[batch], utilisation=[run.utilisation * 100],
                                 kernel_us=[d])
        knee = here.knee_batch
        self.knee.location = knee if np.isfinite(knee) and knee > 0 else None
        self.bars.data = _gantt_data(run.timeline)
        self.gantt_figure.x_range.start = 0
        self.gantt_figure.x_range.end = max(s.end for s in run.timeline) * 1.02
        self.gantt_figure.title.text = (f"one step: {n} kernels of {d:,.2f} µs, "
                                        f"{MODE_LABELS[mode]}")
        others = system.compare_modes(n, d, **kw)
        self.modes = others
        knee_text = (f"kernel time equals the launch overhead at batch {knee:,.0f}"
                     if np.isfinite(knee) and knee > 0 else
                     "kernels are longer than a launch at every batch" if knee == 0 else
                     "kernels are shorter than a launch at every batch")
        self.set_readout(
            f"Batch {batch}: kernel <b>{d:,.2f} µs</b>, launch {run.launch_us:g} µs. Step of "
            f"{n} kernels: <b>{run.step_us:,.1f} µs</b> ({run.per_kernel_us:,.2f} µs/kernel), "
            f"GPU busy <b>{_pct(run.utilisation)}</b>; {knee_text}.<br>"
            + "; ".join(f"{MODE_LABELS[r.mode].split(':')[0]}: {r.step_us:,.1f} µs "
                        f"({r.per_kernel_us:,.2f} µs/kernel), busy {_pct(r.utilisation)}"
                        for r in others.runs)
            + f" (sync round trip {run.sync_us:g} µs, graph node {run.graph_node_us:g} µs).")


def launch_explorer(**kwargs) -> LaunchExplorer:
    """Kernel duration (fixed + per item × batch), launch overhead, sync, CUDA Graphs:
    GPU utilisation against batch size and a CPU/GPU timeline of one step.

    Keyword arguments (all optional): ``n_kernels``, ``fixed_us``, ``per_item_us``, ``batch``
    (a power of two, 1 to 65536), ``mode`` ("async"/"sync"/"graph"), ``figures``
    ("H200"/"V100"), ``launch_us``, ``final_sync``.
    """
    return LaunchExplorer(**kwargs)


# -- communication / computation overlap ----------------------------------------------------------

def _link_label(name: str) -> str:
    return f"{name} ({system.LINKS[name][0] / 1e9:,.1f} GB/s per direction)"


def _bucket_index(bucket_mib) -> int:
    sizes = [v for _, v in BUCKETS]
    if bucket_mib not in sizes:
        raise ValueError(f"bucket_mib must be one of {sizes} (None = one bucket per layer), "
                         f"got {bucket_mib!r}")
    return sizes.index(bucket_mib)


BUCKETS = (("one per layer", None), ("25 MiB (DDP default)", 25), ("100 MiB", 100),
           ("400 MiB", 400))


class OverlapExplorer(Explorer):
    title = "Communication/computation overlap in data-parallel training"

    def __init__(self, *, n_layers: int = 12, forward_ms: float = 2.0, grad_mib: float = 64,
                 gpus: int = 8, link: str = "pcie4", overlap: bool = True,
                 comm_sm_percent: float | None = None, bucket_mib: float | None = None,
                 measured=None):
        # measured points beside the model (a panel of their own, sharing the SM slider)
        self.measured = None if measured is None else MeasuredOverlapPanel(measured)
        if comm_sm_percent is None:
            comm_sm_percent = (10 if self.measured is None else
                               round(100 * self.measured.measurement.contention.comm_sm_fraction))
        self.bars = ColumnDataSource(dict(lane=[], start=[], end=[], label=[], kind=[],
                                          color=[], legend=[], length=[]))
        self.breakdown = ColumnDataSource(dict(case=[], compute=[], sharing=[], exposed=[]))
        self.gantt_figure = _gantt(self.bars, ["comm", "compute"], "ms", width=980,
                                   height=210)
        cases = ["overlap off", "overlap on"]
        bd = figure(y_range=cases, height=170, width=980, x_axis_label="step time (ms)",
                    toolbar_location=None, title="step time, broken down")
        parts = ["compute", "sharing", "exposed"]
        names = {"compute": "compute alone", "sharing": "compute slowed by comm kernels",
                 "exposed": "exposed communication"}
        renderers = bd.hbar_stack(parts, y="case", height=0.6, source=self.breakdown,
                                  color=[PALETTE[0], PALETTE[1], PALETTE[3]],
                                  legend_label=[names[p] for p in parts])
        bd.add_tools(HoverTool(renderers=renderers, tooltips=[
            ("", "@case"), ("compute alone", "@compute{0,0.000} ms"),
            ("slowed by SM sharing", "+@sharing{0,0.000} ms"),
            ("exposed communication", "+@exposed{0,0.000} ms")]))
        legend = bd.legend[0]
        bd.center.remove(legend)
        bd.add_layout(legend, "right")
        bd.x_range.start = 0
        self.breakdown_figure = bd

        link_options = [(_link_label(k), k) for k in system.LINKS]
        controls = {
            "n_layers": slider("layers", n_layers, 1, 48, unit="layers"),
            "forward_ms": slider("forward time per layer", forward_ms, 0.1, 20, 0.1,
                                 integer=False, unit="ms"),
            "grad_mib": slider("gradients per layer", grad_mib, 1, 1024, 1, integer=False,
                               unit="MiB"),
            "gpus": slider("data-parallel GPUs", gpus, 1, 64, unit="GPUs"),
            "link": dropdown("link (comm bandwidth)", link_options, link),
            "overlap": widgets.Checkbox(value=overlap, style=STYLE, layout=LAYOUT,
                                        description="overlap all-reduce with backward"),
            "comm_sm_percent": slider("SMs taken by comm kernels", comm_sm_percent, 0, 95,
                                      unit="%"),
            # index=, not value=: ipywidgets reads value=None as "nothing selected", which would
            # hide the "one per layer" entry whose value is None.
            "bucket_mib": widgets.Dropdown(options=list(BUCKETS),
                                           index=_bucket_index(bucket_mib),
                                           description="gradient bucket (MiB)", style=STYLE,
                                           layout=LAYOUT),
        }
        plots = [self.gantt_figure, self.breakdown_figure]
        if self.measured is not None:
            plots.append(self.measured.figure)
        super().__init__(controls, [column(*plots)], notes=(
            "Backward takes twice the forward time. Each bucket's ring all-reduce moves "
            "2(p−1)/p of its bytes per GPU; with overlap it starts when its last layer's "
            "backward is done (as PyTorch DDP does), and while it runs compute gets only "
            "the SMs the communication kernels leave."))

    def _step(self, overlap: bool) -> system.StepRun:
        c = self.controls
        bucket = c["bucket_mib"].value
        return system.training_step(
            c["forward_ms"].value, None, c["grad_mib"].value * 2**20,
            n_layers=c["n_layers"].value, gpus=c["gpus"].value,
            link_bandwidth=c["link"].value, overlap=overlap,
            bucket_bytes=None if bucket is None else bucket * 2**20,
            comm_sm_fraction=c["comm_sm_percent"].value / 100)

    def _update(self):
        overlap = self.controls["overlap"].value
        runs = {False: self._step(False), True: self._step(True)}
        self.runs = runs
        run = runs[overlap]
        self.step = run
        self.bars.data = _gantt_data(run.timeline)
        self.gantt_figure.x_range.start = 0
        self.gantt_figure.x_range.end = run.step_ms * 1.02
        self.gantt_figure.title.text = (f"one step, overlap {'on' if overlap else 'off'}: "
                                        f"{run.step_ms:,.2f} ms")
        self.breakdown.data = dict(case=["overlap off", "overlap on"],
                                   compute=[runs[k].compute_ms for k in (False, True)],
                                   sharing=[runs[k].slowdown_ms for k in (False, True)],
                                   exposed=[runs[k].exposed_comm_ms for k in (False, True)])
        self.set_readout(
            f"Step <b>{run.step_ms:,.2f} ms</b> = compute {run.compute_ms:,.2f} ms + slowed by "
            f"SM sharing {run.slowdown_ms:,.2f} ms + <b>exposed communication "
            f"{run.exposed_comm_ms:,.2f} ms</b>. All-reduce: {len(run.buckets)} buckets, "
            f"{run.comm_ms:,.2f} ms in all, {run.hidden_comm_ms:,.2f} ms of it "
            f"({run.hidden_fraction:.0%}) hidden behind backward.<br>Overlap off: "
            f"{runs[False].step_ms:,.2f} ms; overlap on: "
            f"{runs[True].step_ms:,.2f} ms."
            + ("" if self.measured is None else
               "<br>" + self.measured.update(self.controls["comm_sm_percent"].value / 100)))


def overlap_explorer(**kwargs) -> OverlapExplorer:
    """Layers, link bandwidth, overlap on/off and the SMs communication takes: step time,
    exposed communication and a Gantt chart of the compute and communication streams.

    Keyword arguments (all optional): ``n_layers``, ``forward_ms``, ``grad_mib``, ``gpus``,
    ``link`` (a ``system.LINKS`` name), ``overlap``, ``comm_sm_percent`` (default 10, or the
    measured share with ``measured``), ``bucket_mib`` (``None`` = one all-reduce per layer, or
    25/100/400), ``measured``: a run of :func:`gpu_lessons.measure.overlap.measure_overlap`
    (or its saved record's path) to plot beside the model — exposed communication against
    bucket size, the model's line using the run's own compute, gradients and fitted
    all-reduce (:mod:`gpu_lessons.views.overlap_measured`).
    """
    return OverlapExplorer(**kwargs)


# -- allocator -------------------------------------------------------------------------------------

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


def _bytes_text(nbytes) -> str:
    """Bytes in GiB, MiB or KiB, whichever reads best, with two decimals."""
    return binary_bytes(nbytes, ",.2f")


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
            size=[_bytes_text(e.size) for e in entries],
            where=[f"{e.start * scale:,.3f}–{(e.start + e.size) * scale:,.3f} {unit}"
                   for e in entries])
        segs = run.segments[k]
        self.segments.data = dict(start=[s * scale for s, _ in segs],
                                  end=[(s + z) * scale for s, z in segs],
                                  row=["reserved segments"] * len(segs),
                                  size=[_bytes_text(z) for _, z in segs])
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
        b = _bytes_text
        rows = []
        for r in cmp.runs:
            oom = ("no request failed" if r.first_oom is None else
                   f"{len(r.failed)} failed, first at event {r.first_oom.event}")
            line = (f"{r.allocator.replace('_', ' ')}: peak used {b(r.peak_used)}, reserved "
                    f"{b(r.peak_reserved)} ({r.used_fraction_at_peak:.1%} used), fragmentation "
                    f"at peak {r.fragmentation_at_peak:.1%}, waste {b(r.peak_waste)}; {oom}")
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
            f"{b(run.largest_free[k])}: fragmentation <b>{run.fragmentation[k]:.1%}</b> "
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
