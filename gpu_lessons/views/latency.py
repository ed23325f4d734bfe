"""Latency-hiding explorer: issue rate and memory throughput of one warp scheduler vs warps.

Lines are the closed form of :func:`gpu_lessons.latency.curve` (the bound
``R(n) = min(1, n·I/T)``, or the loose-round-robin curve); dots are
:func:`gpu_lessons.latency.simulate` run cycle by cycle at a few warp counts, so a learner sees
the formula and the machine agree (GTO) or part near the knee (LRR).  The readout adds Little's
law for a catalog GPU (:func:`gpu_lessons.latency.littles_law`): how many bytes, and so how many
warps, must be in flight to keep its DRAM busy.
"""

from __future__ import annotations

import math
import time

from bokeh.layouts import row
from bokeh.models import ColumnDataSource, HoverTool, Span
from bokeh.plotting import figure

from .._format import bandwidth as _bandwidth
from .._format import binary_bytes, duration, si
from ..hardware import catalog, gpu
from ..latency import (
    SCHEDULERS_PER_SM,
    curve,
    littles_law,
    simulate,
    sm_throughput,
    warps_to_saturate,
)
from ._base import PALETTE, Explorer, dropdown, slider

POLICY_LABELS = {"gto": "greedy-then-oldest (GTO)", "lrr": "loose round robin (LRR)"}
#: Warp counts at which the cycle-level simulation is run for comparison (plus the current one).
SIM_WARPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: Time the extra simulated points may take per update; the current point is always simulated.
SIM_BUDGET_S = 0.04
#: Bytes one warp-wide 4-byte load brings (32 lanes × 4 B), for the SM-level readout.
WARP_LOAD_BYTES = 128
MAX_WARPS = 32  # per scheduler on the slider: twice what Hopper can hold (64 per SM / 4)


class LatencyExplorer(Explorer):
    title = "Latency hiding: how many warps keep a scheduler busy"

    def __init__(self, *, warps: int = 8, alu_per_load: int = 8, ilp: int = 4,
                 latency: int = 400, policy: str = "gto", gpu_name: str = "H100 SXM5",
                 latency_ns: float = 600, bytes_per_thread: int = 4):
        self.line = ColumnDataSource(dict(warps=[], rate=[], loads=[]))
        self.points = ColumnDataSource(dict(warps=[], rate=[], loads=[], closed=[]))
        self.current = ColumnDataSource(dict(warps=[], rate=[], loads=[]))
        self.figure_issue = self._figure("issue rate (instructions/cycle)", "rate")
        self.figure_memory = self._figure("memory throughput (warp loads/cycle)", "loads")
        self.saturation_spans = [Span(dimension="height", line_dash="dashed",
                                      line_color=PALETTE[2], location=1)
                                 for _ in range(2)]
        self.limit_spans = [Span(dimension="height", line_dash="dotted",
                                 line_color=PALETTE[7], location=16) for _ in range(2)]
        for fig, sat, lim in zip((self.figure_issue, self.figure_memory),
                                 self.saturation_spans, self.limit_spans, strict=True):
            fig.add_layout(sat)
            fig.add_layout(lim)
        controls = {
            "warps": slider("resident warps", warps, 1, MAX_WARPS, unit="per scheduler"),
            "alu_per_load": slider("independent ALU work", alu_per_load, 0, 32,
                                   unit="instructions per load"),
            "ilp": slider("loads in flight", ilp, 1, 8, unit="per warp (ILP)"),
            "latency": slider("load latency", latency, 1, 2000, unit="cycles"),
            "policy": dropdown("scheduler policy", [(v, k) for k, v in POLICY_LABELS.items()],
                               policy),
            "gpu": dropdown("GPU (Little's law)", list(catalog()), gpu(gpu_name).name),
            "latency_ns": slider("DRAM latency", latency_ns, 100, 2000, 50, integer=False,
                                 unit="ns"),
            "bytes_per_thread": dropdown("bytes in flight per thread (B)", [4, 8, 16, 32, 64],
                                         bytes_per_thread),
        }
        # one bokeh layout, so both plots share the sources in one document
        super().__init__(controls, [row(self.figure_issue, self.figure_memory)], notes=(
            "One warp scheduler (an SM has 4). Each warp repeats: ALU work, then its loads; "
            "the next round waits for the data. Lines: closed form; dots: cycle-by-cycle "
            "simulation; large dot: the sliders' state. Dashed: warps needed to saturate; "
            "dotted: most warps one scheduler can hold on the chosen GPU."))

    def _figure(self, y_label, field):
        fig = figure(height=330, width=470, x_axis_label="resident warps per scheduler",
                     y_axis_label=y_label, toolbar_location=None)
        fig.line("warps", field, source=self.line, line_width=2, color=PALETTE[0],
                 legend_label="closed form")
        fig.scatter("warps", field, source=self.points, size=7, color=PALETTE[1],
                    legend_label="simulation")
        cur = fig.scatter("warps", field, source=self.current, size=14, color=PALETTE[3],
                          marker="diamond", legend_label="current")
        fig.legend.location = "bottom_right"
        fig.y_range.start = 0
        unit = "instructions/cycle" if field == "rate" else "loads/cycle"
        fig.add_tools(HoverTool(tooltips=[("warps per scheduler", "@warps"),
                                          (y_label.split(" (")[0], f"@{field}{{0.000}} {unit}")],
                                renderers=[r for r in fig.renderers if r is not cur] + [cur]))
        return fig

    def _update(self):
        c = self.controls
        n, a, j, L = (c["warps"].value, c["alu_per_load"].value, c["ilp"].value,
                      c["latency"].value)
        policy = c["policy"].value
        sat = warps_to_saturate(alu_per_load=a, latency=L, ilp=j)
        # show the knee even when it lies beyond what a scheduler can hold
        span = max(MAX_WARPS, min(256, math.ceil(1.3 * sat)))
        cv = curve(span, alu_per_load=a, latency=L, ilp=j, policy=policy)
        self.line.data = dict(warps=cv.warps, rate=cv.issue_rate, loads=cv.loads_per_cycle)

        here = simulate(n, alu_per_load=a, latency=L, ilp=j, policy=policy, trace_cycles=0)
        runs = {n: here}
        start = time.perf_counter()
        for w in SIM_WARPS:
            if time.perf_counter() - start > SIM_BUDGET_S:
                break  # big per-warp loops cost more to simulate; the line still shows them
            if w not in runs:
                runs[w] = simulate(w, alu_per_load=a, latency=L, ilp=j, policy=policy,
                                   trace_cycles=0)
        ws = sorted(runs)
        self.sim_runs = runs
        self.points.data = dict(warps=ws, rate=[runs[w].issue_rate for w in ws],
                                loads=[runs[w].loads_per_cycle for w in ws],
                                closed=[runs[w].closed_form for w in ws])
        k = n - 1  # cv.warps is 1, 2, ..., span
        self.current.data = dict(warps=[n], rate=[cv.issue_rate[k]],
                                 loads=[cv.loads_per_cycle[k]])

        law = littles_law(c["gpu"].value, latency_ns=c["latency_ns"].value,
                          bytes_per_thread=c["bytes_per_thread"].value)
        self.law = law
        for s in self.saturation_spans:
            s.location = cv.saturation
        for s in self.limit_spans:
            s.location = law.max_warps_per_scheduler
        for fig in (self.figure_issue, self.figure_memory):
            fig.x_range.start = 0
            fig.x_range.end = span + 1
        sm = sm_throughput(SCHEDULERS_PER_SM * n, alu_per_load=a, latency=L, ilp=j,
                           bytes_per_load=WARP_LOAD_BYTES)
        self.sm = sm
        verdict = ("full occupancy is enough" if law.enough_warps else
                   f"more than the {law.max_warps_per_sm} an SM holds: each thread needs "
                   f"{law.ilp_needed} loads in flight (ILP) or wider loads")
        self.set_readout(
            f"<b>{n} warps</b> per scheduler, {POLICY_LABELS[policy]}: closed form "
            f"<b>{here.closed_form:.3f}</b> instructions/cycle, simulated "
            f"{here.issue_rate:.3f}; {here.loads_per_cycle:.4f} loads/cycle simulated. "
            f"Latency hidden (T/I) at <b>{cv.saturation:.1f} warps</b> per scheduler. "
            f"Whole SM, GTO bound ({SCHEDULERS_PER_SM} schedulers): {SCHEDULERS_PER_SM * n} "
            f"warps/SM give "
            f"{sm.issue_rate:.2f} instructions/cycle, {si(sm.bytes_per_cycle, 'B/cycle')} "
            f"with {WARP_LOAD_BYTES}-B warp loads, limited by {sm.limiter}.<br>"
            f"Little's law on {law.gpu}: {_bandwidth(law.bandwidth)} × "
            f"{duration(law.latency_ns * 1e-9)} ({law.latency_cycles:,.0f} cycles at boost "
            f"clock) = <b>{si(law.bytes_in_flight, 'B')} in flight</b>, "
            f"{binary_bytes(law.bytes_per_sm)} per SM → {law.threads_per_sm:,.0f} "
            f"threads/SM at {binary_bytes(law.bytes_per_thread)} each = <b>{law.warps_per_sm:.0f} "
            f"warps/SM</b> needed; {verdict}.")


def latency_explorer(**kwargs) -> LatencyExplorer:
    """Sliders for warps, ALU work per load, ILP and latency; Little's law for a catalog GPU.

    Keyword arguments (all optional): ``warps``, ``alu_per_load``, ``ilp``, ``latency``
    (cycles), ``policy`` (``"gto"``/``"lrr"``), ``gpu_name``, ``latency_ns``,
    ``bytes_per_thread``.
    """
    return LatencyExplorer(**kwargs)

