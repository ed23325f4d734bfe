"""Roofline explorer: GPUs from the catalog side by side, kernels as points that move with sliders.

Every line comes from :func:`gpu_lessons.roofline.curves`, every point from a cost model in
:mod:`gpu_lessons.costs` placed with :meth:`gpu_lessons.roofline.Roofline.point`.  A kernel sits
on each selected GPU's roof at its intensity: the same kernel can be memory-bound on one GPU and
compute-bound on another.  Measured runs go beside the model with :meth:`RooflineExplorer.add_points`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass

import ipywidgets as widgets
from bokeh.models import ColumnDataSource, HoverTool, Legend, Range1d
from bokeh.plotting import figure

from .. import _validate, costs
from .. import roofline as _roofline
from .._format import flop_rate, html_table, intensity, si
from ..hardware import PRECISIONS, catalog, gpu
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown

#: Measured points: black, then vermillion, reddish purple, sky blue (Okabe-Ito, as PALETTE).
MEASURED_COLOURS = (PALETTE[7], PALETTE[3], PALETTE[4], PALETTE[5])

#: The x axis: from a streaming FP64 kernel (0.08 FLOP/byte) past FP8 prefill attention at 64 K
#: tokens (≈ 6.5e4 FLOP/byte).
INTENSITY_RANGE = (1e-2, 1e5)

#: Bytes per element that a kernel run at each compute precision moves (TF32 is a tensor-core
#: mode on FP32 data; FP16-accumulate still stores FP16).  Keys are ``hardware.PRECISIONS``.
PRECISION_DTYPE = {"fp64": "fp64", "fp64_tensor": "fp64", "fp32": "fp32", "tf32": "fp32",
                   "fp16": "fp16", "bf16": "bf16", "fp16_acc16": "fp16", "fp8": "fp8"}

#: Vector length of the streaming kernels.  Their intensity does not depend on it (axpy is
#: 2 FLOPs per 3 elements moved at any n), so it is not a slider.
VECTOR_N = 2**24

#: Convolution layer shape: ResNet-50's conv2_x stage, 56×56 input, 3×3 filters, padding 1, one
#: image (He et al. 2016, "Deep Residual Learning", Table 1).  The channel count is a slider.
CONV_X, CONV_K, CONV_PADDING = 56, 3, 1

#: Attention heads: Llama-2-7B's 32 heads of 128 (Touvron et al. 2023, arXiv 2307.09288), one
#: sequence.  The context length is a slider.
ATTN_HEADS, ATTN_HEAD_DIM = 32, 128

GEMM_SIZES = tuple(2**k for k in range(6, 15))        # 64 .. 16384
TILES = tuple(2**k for k in range(0, 9))              # 1 (naive) .. 256
CHANNELS = tuple(2**k for k in range(3, 12))          # 8 .. 2048
CONTEXTS = tuple(2**k for k in range(7, 17))          # 128 .. 65536


@dataclass(frozen=True)
class _Kernel:
    label: str
    marker: str
    build: object  # (params: dict, dtype: str) -> costs.KernelCost


#: The kernels the explorer can show, by key (the ``kernels=`` argument).
KERNELS = {
    "axpy": _Kernel("axpy", "circle", lambda p, dt: costs.axpy(VECTOR_N, dtype=dt)),
    "reduction": _Kernel("reduction (sum)", "square",
                         lambda p, dt: costs.reduction(VECTOR_N, dtype=dt)),
    "gemm_naive": _Kernel("GEMM naive", "triangle",
                          lambda p, dt: costs.gemm_naive(p["n"], p["n"], p["n"], dtype=dt)),
    "gemm_tiled": _Kernel("GEMM tiled", "inverted_triangle",
                          lambda p, dt: costs.gemm_tiled(p["n"], p["n"], p["n"], tile=p["tile"],
                                                         dtype=dt)),
    "gemm": _Kernel("GEMM, operands moved once", "diamond",
                    lambda p, dt: costs.gemm(p["n"], p["n"], p["n"], dtype=dt)),
    "conv2d": _Kernel("conv2d", "hex",
                      lambda p, dt: costs.conv2d(CONV_X, CONV_K, p["channels"], p["channels"],
                                                 padding=CONV_PADDING, dtype=dt)),
    # The often-quoted formulas are FP32 by construction (4-byte elements), whatever the precision.
    "conv2d_macs_no_input": _Kernel("conv2d, often-quoted formulas (FP32)", "square_pin",
                           lambda p, dt: costs.conv2d_macs_no_input(CONV_X, CONV_K, p["channels"],
                                                           p["channels"], padding=CONV_PADDING)),
    "attention_prefill": _Kernel(
        "attention prefill", "star",
        lambda p, dt: costs.attention_prefill(p["context"], n_heads=ATTN_HEADS,
                                              head_dim=ATTN_HEAD_DIM, dtype=dt)),
    "attention_decode": _Kernel(
        "attention decode", "triangle_pin",
        lambda p, dt: costs.attention_decode(p["context"], n_heads=ATTN_HEADS,
                                             head_dim=ATTN_HEAD_DIM, dtype=dt)),
}

#: Line style of each roof: (dash, width).  main = the chosen precision on DRAM, fp32 = FP32 CUDA
#: cores on DRAM, l2 / l2_fp32 = the same on L2.
_LINE_STYLES = {"main": ("solid", 2.5), "fp32": ("dashed", 1.5), "l2": ("dotted", 2.0),
                "l2_fp32": ("dotdash", 1.2)}

_CUSTOM_MARKER = "circle_cross"
_MEASURED_MARKER = "asterisk"

_POINT_COLUMNS = ("x", "y", "kernel", "model", "gpu", "color", "marker", "flops", "bytes",
                  "flops_text", "bytes_text", "intensity", "tflops", "bound", "fraction")


class RooflineExplorer(Explorer):
    title = "Roofline: attainable FLOP/s = min(peak, bandwidth × intensity)"

    def __init__(self, gpus=("H100 SXM5",), precision="fp16", kernels=None):
        names = _gpu_names(gpus)
        _validate.choice("precision", precision, PRECISIONS)
        self._kernels = _kernel_list(kernels)

        # One source per line style, so each keeps its own dash (solid: the chosen precision on
        # DRAM; dashed: FP32 CUDA cores on DRAM; dotted: the same two on L2).
        # Each source also carries its labels under its own column name: bokeh merges legend
        # items that share a field name, and refuses one item spanning several sources.
        self.line_sources = {style: ColumnDataSource({"xs": [], "ys": [], "color": [],
                                                      "label": [], f"legend_{style}": [],
                                                      "ridge": [], "peak": [], "bandwidth": []})
                             for style in _LINE_STYLES}
        self.source = ColumnDataSource({c: [] for c in _POINT_COLUMNS})
        self.measured = ColumnDataSource(dict(x=[], y=[], name=[], color=[], tflops=[]))

        fig = figure(x_axis_type="log", y_axis_type="log", width=1000, height=500,
                     x_range=Range1d(*INTENSITY_RANGE),
                     x_axis_label="arithmetic intensity (FLOP/byte, log scale)",
                     y_axis_label="attainable performance (TFLOP/s, log scale)",
                     toolbar_location="above", tools="pan,wheel_zoom,box_zoom,reset,save")
        # A legend added before the glyphs collects their legend_field items, outside the plot.
        fig.add_layout(Legend(label_text_font_size="8pt", spacing=0, padding=4), "right")
        line_renderers = [
            fig.multi_line(xs="xs", ys="ys", color="color", line_dash=dash, line_width=width,
                           source=self.line_sources[style], legend_field=f"legend_{style}")
            for style, (dash, width) in _LINE_STYLES.items()]
        fig.add_tools(HoverTool(renderers=line_renderers, tooltips=[
            ("roof", "@label"), ("peak", "@peak{0,0.0} TFLOP/s"),
            ("bandwidth", "@bandwidth{0,0} GB/s"), ("ridge point", "@ridge{0,0.0} FLOP/byte")]))
        points = fig.scatter(x="x", y="y", marker="marker", fill_color="color", line_color="black",
                             size=11, source=self.source, legend_field="kernel")
        fig.add_tools(HoverTool(renderers=[points], tooltips=[
            ("kernel", "@model"), ("GPU", "@gpu"), ("FLOPs", "@flops_text"),
            ("bytes", "@bytes_text"), ("intensity", "@intensity{0,0.000} FLOP/byte"),
            ("attainable", "@tflops{0,0.00} TFLOP/s (@fraction{0.0%} of peak)"),
            ("bound", "@bound")]))
        measured = fig.scatter(x="x", y="y", marker=_MEASURED_MARKER, color="color", size=16,
                               line_width=2, source=self.measured, legend_field="name")
        fig.add_tools(HoverTool(renderers=[measured], tooltips=[
            ("measured", "@name"), ("intensity", "@x{0,0.000} FLOP/byte"),
            ("achieved", "@tflops{0,0.000} TFLOP/s")]))
        self.figure = fig

        options = list(catalog())
        controls = {
            "gpus": widgets.SelectMultiple(options=options, value=tuple(names), rows=5,
                                           description="GPUs (ctrl-click: several)",
                                           style=STYLE, layout=LAYOUT),
            "precision": dropdown("kernel precision",
                                  [(_roofline.COMPUTE_LABELS[p], p) for p in PRECISIONS],
                                  precision),
            "fp32_roof": widgets.Checkbox(value=True, description="FP32 CUDA-core roof (dashed)",
                                          style=STYLE, layout=LAYOUT),
            "l2_roof": widgets.Checkbox(value=True, description="L2 roof where the catalog has "
                                        "it (dotted)", style=STYLE, layout=LAYOUT),
            "n": _selection_slider("GEMM size N (N×N×N, elements)", GEMM_SIZES, 4096),
            "tile": _selection_slider("GEMM tile T (T×T elements/block)", TILES, 32),
            "channels": _selection_slider("conv channels (Cin = Cout)", CHANNELS, 64),
            "context": _selection_slider("attention context length (tokens)", CONTEXTS, 4096),
        }
        notes = (f"Points sit on each GPU's roof for the chosen precision and DRAM. axpy and "
                 f"reduction over {VECTOR_N:,} elements (their intensity does not depend on n); "
                 f"conv2d {CONV_X}×{CONV_X} input, {CONV_K}×{CONV_K} filters, one image; "
                 f"attention {ATTN_HEADS} heads × {ATTN_HEAD_DIM}, one sequence (decode: one new "
                 "token over the KV cache). Bytes are compulsory DRAM traffic (costs module).")
        super().__init__(controls, [fig], notes=notes)

    # -- measured points ----------------------------------------------------------------------
    def add_points(self, name, intensity, flops_per_s, color=None) -> None:
        """Plot measured kernels beside the model's: ``intensity`` in FLOP/byte and achieved
        ``flops_per_s`` in FLOP/s (numbers, or equal-length sequences with ``name`` a string or
        a sequence of strings)."""
        xs = _validate.real_array("intensity", intensity, low=0.0, low_open=True, max_ndim=1,
                                  nonempty=True).reshape(-1)
        ys = _validate.real_array("flops_per_s", flops_per_s, low=0.0, low_open=True, max_ndim=1,
                                  nonempty=True).reshape(-1)
        if xs.size != ys.size:
            raise ValueError(f"intensity has {xs.size} values but flops_per_s has {ys.size}; "
                             "give one of each per point")
        if isinstance(name, str):
            labels = [name] * xs.size
        else:
            labels = [str(n) for n in name]
            if len(labels) != xs.size:
                raise ValueError(f"name has {len(labels)} entries for {xs.size} points")
        if color is None:  # each call gets its own colour, so two measurements stay apart
            calls = len(dict.fromkeys(self.measured.data["name"]))
            color = MEASURED_COLOURS[calls % len(MEASURED_COLOURS)]
        elif not isinstance(color, str):
            raise TypeError(f"color must be a CSS colour string such as '#D55E00', got {color!r}")
        old = self.measured.data
        self.measured.data = dict(
            x=[*old["x"], *xs.tolist()], y=[*old["y"], *(ys * 1e-12).tolist()],
            name=[*old["name"], *labels], color=[*old["color"], *[color] * xs.size],
            tflops=[*old["tflops"], *(ys * 1e-12).tolist()])

    def clear_points(self) -> None:
        """Remove every measured point."""
        self.measured.data = dict(x=[], y=[], name=[], color=[], tflops=[])

    # -- the model, into the plot ---------------------------------------------------------------
    def kernel_costs(self) -> list[costs.KernelCost]:
        """The cost of every shown kernel at the current slider values and precision."""
        c = self.controls
        params = {"n": c["n"].value, "tile": c["tile"].value, "channels": c["channels"].value,
                  "context": c["context"].value}
        dtype = PRECISION_DTYPE[c["precision"].value]
        return [item.build(params, dtype) if isinstance(item, _Kernel) else item
                for item in self._kernels]

    def _update(self):
        c = self.controls
        precision = c["precision"].value
        names = list(c["gpus"].value)
        if not names:
            self._clear()
            raise ValueError("GPUs: select at least one GPU from the list")
        kernel_costs = self.kernel_costs()
        markers = [item.marker if isinstance(item, _Kernel) else _CUSTOM_MARKER
                   for item in self._kernels]
        labels = [item.label if isinstance(item, _Kernel) else cost.name
                  for item, cost in zip(self._kernels, kernel_costs, strict=True)]
        lines = {style: [] for style in self.line_sources}
        points = {col: [] for col in _POINT_COLUMNS}
        skipped, rows = [], []
        for i, name in enumerate(names):
            color = PALETTE[i % len(PALETTE)]
            g = gpu(name)
            memories = ["dram"]
            if c["l2_roof"].value and any(r.key == "l2" for r in _roofline.memory_roofs(g)):
                memories.append("l2")
            precs = [precision]
            if c["fp32_roof"].value and precision != "fp32":
                precs.append("fp32")
            try:
                coarse = _roofline.curves(g, precisions=precs, memories=memories,
                                          lo=INTENSITY_RANGE[0], hi=INTENSITY_RANGE[1], n=2)
            except ValueError as err:  # this GPU lacks the precision: say so, draw the others
                skipped.append((g.name, str(err)))
                continue
            # Evaluate the roofs at the ends of the axis and at every ridge point, so each
            # corner is drawn exactly where the model puts it.
            grid = sorted({*INTENSITY_RANGE, *(ln.ridge_point for ln in coarse.lines
                                               if INTENSITY_RANGE[0] < ln.ridge_point
                                               < INTENSITY_RANGE[1])})
            every = _roofline.curves(g, precisions=precs, memories=memories, intensity=grid)
            for ln in every.lines:
                if ln.compute.key == precision:
                    style = "l2" if ln.memory.key == "l2" else "main"
                else:
                    style = "l2_fp32" if ln.memory.key == "l2" else "fp32"
                lines[style].append((every.intensity, ln, g.name, color))
            roof_line = every.line(precision, "dram")
            model = _roofline.Roofline(roof_line.compute.value, roof_line.memory.value,
                                       name=g.name, compute=roof_line.compute.label,
                                       memory=roof_line.memory.label)
            row = []
            for cost, marker, label in zip(kernel_costs, markers, labels, strict=True):
                kt = model.point(cost)
                _append(points, x=kt.intensity, y=kt.flops_per_s * 1e-12, kernel=label,
                        model=cost.name,
                        gpu=g.name, color=color, marker=marker, flops=kt.flops,
                        bytes=kt.bytes, flops_text=si(kt.flops, "FLOP"),
                        bytes_text=si(kt.bytes, "B"), intensity=kt.intensity, tflops=kt.flops_per_s * 1e-12,
                        bound=kt.bound.bound, fraction=kt.fraction_of_peak)
                row.append(kt)
            rows.append((g.name, color, model, row))
        if not rows:
            self._clear()
            raise ValueError("; ".join(msg for _, msg in skipped))
        for style, items in lines.items():
            self.line_sources[style].data = dict(
                xs=[x for x, *_ in items],
                ys=[ln.attainable * 1e-12 for _, ln, _, _ in items],
                color=[col for *_, col in items],
                label=[f"{name}: {ln.label}" for _, ln, name, _ in items],
                **{f"legend_{style}": [f"{name}: {ln.label}" for _, ln, name, _ in items]},
                ridge=[ln.ridge_point for _, ln, _, _ in items],
                peak=[ln.compute.value * 1e-12 for _, ln, _, _ in items],
                bandwidth=[ln.memory.value * 1e-9 for _, ln, _, _ in items])
        self.source.data = points
        self.set_readout(_readout(kernel_costs, rows, skipped))

    def _clear(self):
        for src in self.line_sources.values():
            src.data = {k: [] for k in src.data}
        self.source.data = {c: [] for c in _POINT_COLUMNS}


def roofline_explorer(gpus=("H100 SXM5",), precision="fp16", kernels=None) -> RooflineExplorer:
    """Rooflines of one or more catalog GPUs with kernels as points.

    ``gpus``: a name or names from the catalog; ``precision``: the compute roof the kernels run
    against (a ``hardware.PRECISIONS`` key; it also sets their element size); ``kernels``: keys
    of :data:`KERNELS` and/or your own ``costs.KernelCost`` objects (default: every kernel).
    """
    return RooflineExplorer(gpus, precision, kernels)


# -- helpers ------------------------------------------------------------------------------------

def _selection_slider(label: str, options, value) -> widgets.SelectionSlider:
    return widgets.SelectionSlider(options=list(options), value=value, description=label,
                                   style=STYLE, layout=LAYOUT, continuous_update=False)


def _gpu_names(gpus) -> list[str]:
    if isinstance(gpus, str):
        gpus = (gpus,)
    if not isinstance(gpus, Iterable):
        raise TypeError(f"gpus must be a GPU name or a list of names, got {gpus!r}")
    names = []
    for name in gpus:
        canonical = gpu(name).name
        if canonical not in names:
            names.append(canonical)
    if not names:
        raise ValueError(f"gpus must name at least one GPU; known: {', '.join(catalog())}")
    return names


def _kernel_list(kernels) -> list:
    if kernels is None:
        return list(KERNELS.values())
    if isinstance(kernels, (str, costs.KernelCost)):
        kernels = (kernels,)
    out = []
    for k in kernels:
        if isinstance(k, costs.KernelCost):
            out.append(k)
        elif isinstance(k, str):
            out.append(KERNELS[_validate.choice("kernels", k, KERNELS)])
        else:
            raise TypeError(f"kernels must hold names from {', '.join(KERNELS)} or "
                            f"costs.KernelCost objects, got {k!r}")
    return out


def _append(columns: dict, **values) -> None:
    for key, v in values.items():
        columns[key].append(v)


def _readout(kernel_costs, rows, skipped) -> str:
    head = ["kernel", "intensity", *(f"<span style='color:{color}'>{html.escape(name)}</span>"
                                     for name, color, _, _ in rows)]
    table = [(f"<i>ridge point ({html.escape(rows[0][2].compute)} / DRAM)</i>", "",
              *(intensity(model.ridge_point) for _, _, model, _ in rows))]
    table += [(html.escape(cost.name), intensity(cost.intensity),
               *(f"{flop_rate(row[k].flops_per_s)}, {row[k].bound.bound}" for _, _, _, row in rows))
              for k, cost in enumerate(kernel_costs)]
    text = html_table("", head, table, escape=False)
    if skipped:
        text += "<small>Not drawn: " + "; ".join(html.escape(msg) for _, msg in skipped) + \
                "</small>"
    return text

