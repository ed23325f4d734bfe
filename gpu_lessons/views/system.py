"""System explorers: launch overhead and communication/computation overlap.

* :func:`launch_explorer` — :func:`gpu_lessons.system.batch_sweep` (GPU utilisation against
  batch size, one line per launch mode) and :func:`gpu_lessons.system.kernel_sequence` (the
  CPU/GPU timeline of one step as a Gantt chart).
* :func:`overlap_explorer` — :func:`gpu_lessons.system.training_step` with overlap off and on:
  the step's breakdown and the compute/communication streams as a Gantt chart.

Every bar and number comes from those models; the views only lay them out.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure

from .. import system
from .._format import bandwidth, duration, percent
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown, slider
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
        self.gantt_figure.title.text = (f"one step: {n} kernels of {duration(d * 1e-6)}, "
                                        f"{MODE_LABELS[mode]}")
        others = system.compare_modes(n, d, **kw)
        self.modes = others
        knee_text = (f"kernel time equals the launch overhead at batch {knee:,.0f}"
                     if np.isfinite(knee) and knee > 0 else
                     "kernels are longer than a launch at every batch" if knee == 0 else
                     "kernels are shorter than a launch at every batch")
        self.set_readout(
            f"Batch {batch}: kernel <b>{duration(d * 1e-6)}</b>, launch "
            f"{duration(run.launch_us * 1e-6)}. Step of {n} kernels: "
            f"<b>{duration(run.step_us * 1e-6)}</b> ({duration(run.per_kernel_us * 1e-6)} per "
            f"kernel), "
            f"GPU busy <b>{percent(run.utilisation)}</b>; {knee_text}.<br>"
            + "; ".join(f"{MODE_LABELS[r.mode].split(':')[0]}: {duration(r.step_us * 1e-6)} "
                        f"({duration(r.per_kernel_us * 1e-6)} per kernel), busy "
                        f"{percent(r.utilisation)}" for r in others.runs)
            + f" (sync round trip {duration(run.sync_us * 1e-6)}, graph node "
              f"{duration(run.graph_node_us * 1e-6)}).")


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
    return f"{name} ({bandwidth(system.LINKS[name][0])} per direction)"


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
                                        f"{duration(run.step_ms * 1e-3)}")
        self.breakdown.data = dict(case=["overlap off", "overlap on"],
                                   compute=[runs[k].compute_ms for k in (False, True)],
                                   sharing=[runs[k].slowdown_ms for k in (False, True)],
                                   exposed=[runs[k].exposed_comm_ms for k in (False, True)])

        def ms(milliseconds: float) -> str:
            return duration(milliseconds * 1e-3)

        self.set_readout(
            f"Step <b>{ms(run.step_ms)}</b> = compute {ms(run.compute_ms)} + slowed by "
            f"SM sharing {ms(run.slowdown_ms)} + <b>exposed communication "
            f"{ms(run.exposed_comm_ms)}</b>. All-reduce: {len(run.buckets)} buckets, "
            f"{ms(run.comm_ms)} in all, {ms(run.hidden_comm_ms)} of it "
            f"({percent(run.hidden_fraction)}) hidden behind backward.<br>Overlap off: "
            f"{ms(runs[False].step_ms)}; overlap on: "
            f"{ms(runs[True].step_ms)}."
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
