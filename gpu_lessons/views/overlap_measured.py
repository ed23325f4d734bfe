"""Measured overlap beside the model: exposed communication against bucket size.

A panel of the overlap explorer (``overlap_explorer(measured=...)``).  Markers: what a run
of :func:`gpu_lessons.measure.overlap.measure_overlap` measured (step − compute alone, per
bucket size).  Lines: :func:`gpu_lessons.overlap.predicted_exposed_us` for the
same layers, gradients and GPUs, with the all-reduce's α and B fitted to the run — solid with
the explorer's "SMs taken by comm kernels" slider, dashed with no SM sharing at all.  The
panel only lays out what those functions return.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from .. import overlap
from .._format import bandwidth, binary_bytes, duration, percent
from ._base import PALETTE

#: Most bucket sizes on the model's line (one per possible number of layers per bucket).
MAX_LINE_POINTS = 64


def as_measurement(measured) -> overlap.OverlapMeasurement:
    """An :class:`~gpu_lessons.overlap.OverlapMeasurement` from itself, a raw record
    (dict) or the path of a saved record."""
    if isinstance(measured, overlap.OverlapMeasurement):
        m = measured
    elif isinstance(measured, dict):
        m = overlap.overlap_from_raw(measured)
    elif isinstance(measured, (str, Path)):
        m = overlap.load_overlap(measured)
    else:
        raise TypeError(f"measured must be an OverlapMeasurement, a raw record (dict) or a path, "
                        f"got {type(measured).__name__}")
    if m.smoke_test or m.world_size < 2:
        raise ValueError("measured is a one-GPU smoke test: it measured no communication, so "
                         "there is nothing to set beside the model")
    return m


class MeasuredOverlapPanel:
    """The figure and readout for one measurement; :meth:`update` redraws the model line."""

    def __init__(self, measured):
        m = self.measurement = as_measurement(measured)
        self.fit = overlap.fit_for(m)
        self._cache: dict = {}
        per, n = m.config.grad_bytes_per_layer, m.config.n_layers
        # the bucket holds k layers for caps in ((k−1)·per, k·per]: the line is a staircase
        ks = (np.arange(1, n + 1) if n <= MAX_LINE_POINTS else
              np.unique(np.geomspace(1, n, MAX_LINE_POINTS).round().astype(int)))
        caps = np.concatenate([[per / 2], ks * per, [n * per * 2]])
        self.caps = caps
        self._x = caps / 2**20
        bare = overlap.predicted_exposed_us(m, caps, fit=self.fit, comm_sm_fraction=0.0)
        self.line = ColumnDataSource(dict(bucket_mib=self._x, model_us=bare, bare_us=bare))
        self.points = ColumnDataSource(dict(
            bucket_mib=[p.bucket_bytes / 2**20 for p in m.points],
            measured_us=[p.exposed_us for p in m.points],
            slowdown_us=[p.slowdown_us for p in m.points],
            tail_us=[p.tail_us for p in m.points],
            n_buckets=[p.n_buckets for p in m.points],
            model_us=[0.0] * len(m.points), error=[""] * len(m.points)))

        fig = figure(x_axis_type="log", height=320, width=980, toolbar_location=None,
                     x_axis_label="bucket size (MiB, log scale)",
                     y_axis_label="exposed communication (µs)",
                     title=f"measured on {m.label}: step − compute alone")
        model = fig.step("bucket_mib", "model_us", source=self.line, mode="before", line_width=3,
                         color=PALETTE[0], legend_label="model, SM share from the slider")
        bare_line = fig.step("bucket_mib", "bare_us", source=self.line, mode="before",
                             line_width=2, line_dash="dashed", color=PALETTE[5],
                             legend_label="model, no SM sharing")
        at = fig.scatter("bucket_mib", "model_us", source=self.points, size=9, marker="circle",
                         fill_color="white", line_color=PALETTE[0], line_width=2,
                         legend_label="model at the measured sizes")
        dots = fig.scatter("bucket_mib", "measured_us", source=self.points, size=13,
                           marker="diamond", color=PALETTE[3], legend_label="measured")
        fig.add_tools(HoverTool(renderers=[dots, at], tooltips=[
            ("bucket", "@bucket_mib{0,0.0} MiB (@n_buckets buckets)"),
            ("measured exposed", "@measured_us{0,0.0} µs"),
            ("of which compute slowed", "@slowdown_us{0,0.0} µs"),
            ("of which comm after compute", "@tail_us{0,0.0} µs"),
            ("model", "@model_us{0,0.0} µs (@error)")]))
        fig.add_tools(HoverTool(renderers=[model, bare_line], tooltips=[
            ("bucket", "@bucket_mib{0,0.0} MiB"), ("model", "@model_us{0,0.0} µs"),
            ("no SM sharing", "@bare_us{0,0.0} µs")]))
        fig.y_range.start = 0
        # bucket sizes are powers of two in MiB: label those (the log axis would skip most)
        lo, hi = np.log2(self._x.min()), np.log2(self._x.max())
        fig.xaxis.ticker = [float(2**k) for k in range(int(np.floor(lo)), int(np.ceil(hi)) + 1)]
        legend = fig.legend[0]          # outside, on the right, as the explorer's other plots
        fig.center.remove(legend)
        fig.add_layout(legend, "right")
        self.figure = fig

    def _model(self, f: float):
        """The model's line and comparison at SM share ``f`` (kept: the slider has 96 stops)."""
        if f not in self._cache:
            m, fit = self.measurement, self.fit
            self._cache[f] = (
                overlap.predicted_exposed_us(m, self.caps, fit=fit, comm_sm_fraction=f),
                overlap.compare_overlap(m, comm_sm_fraction=f, fit=fit))
        return self._cache[f]

    def update(self, comm_sm_fraction: float) -> str:
        """Redraw the model with ``comm_sm_fraction``; return the readout (HTML)."""
        m, fit = self.measurement, self.fit
        line, cmp_ = self._model(float(comm_sm_fraction))
        self.line.data = dict(self.line.data, model_us=line)
        self.comparison = cmp_
        self.points.data = dict(self.points.data, model_us=[r.predicted_us for r in cmp_.rows],
                                error=[overlap.signed_percent(r.error) for r in cmp_.rows])
        worst = max(cmp_.rows, key=lambda r: -1 if r.error is None else abs(r.error))
        c = m.contention
        return html.escape(
            f"Measured on {m.label}: compute {duration(m.compute_us * 1e-6)} alone "
            f"({duration(m.layer_us * 1e-6)} per layer); all-reduce fitted with α = "
            f"{duration(fit.latency_us * 1e-6)}, B = {bandwidth(fit.busbw_gbs * 1e9)}; beside "
            f"NCCL the GEMMs "
            f"ran {percent(c.compute_slowdown, signed=True)} longer "
            f"(SM share {percent(c.comm_sm_fraction)}). "
            f"With {percent(comm_sm_fraction)} of the SMs taken: {cmp_.agreeing} of {len(cmp_.rows)} "
            f"points within {percent(cmp_.tolerance)}; the furthest, buckets of "
            f"{binary_bytes(worst.bucket_bytes)}: measured {duration(worst.measured_us * 1e-6)}, "
            f"model {duration(worst.predicted_us * 1e-6)} ({overlap.signed_percent(worst.error)}).")
