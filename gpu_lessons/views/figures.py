"""Static figures the lessons draw from the course's own data: no widgets, one bokeh figure each.

* :func:`execution_hierarchy` -- a catalog GPU's SMs, each holding the blocks (and warps) of a
  launch that the occupancy model says fit on it at once;
* :func:`memory_hierarchy` -- the memory ladder of a catalog GPU: each level's size (bar
  length, log scale), bandwidth and latency, as :func:`gpu_lessons.ladder.memory_ladder`
  gives them, with a menu of other catalog GPUs;
* :func:`copy_staircase` -- copy bandwidth against working-set size as
  :func:`gpu_lessons.measure.cache_staircase` measured it on this machine, a dashed line at
  each cache size the CPU reports;
* :func:`intensity_by_size` -- arithmetic intensity against problem size for a matrix product,
  an elementwise add and a reduction, from :mod:`gpu_lessons.costs`;
* :func:`tile_reuse` -- a shared-memory tiled matrix product's DRAM intensity against its tile
  width, from :func:`gpu_lessons.costs.gemm_tiled`;
* :func:`flops_per_token` -- a transformer's training FLOPs per token against sequence length:
  the exact count, 6N and 6N + 12·L·H·Q·T, from :func:`gpu_lessons.transformer.compare_estimates`;
* :func:`scan_tree` -- the data flow of a kernel between barriers, read from the simulator's
  record of a run: every shared-memory store joined to the shared values its thread read
  since its previous store.  A scan's up-sweep and down-sweep (or a reduction's tree) show as
  the learner's own kernel ran them.

Every number drawn is a model's, the catalog's or the simulator's; :data:`FIGURES` lists the
figures for the browser test, as :data:`gpu_lessons.views.EXPLORERS` lists the explorers.
"""

from __future__ import annotations

import math

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, CustomJS, CustomJSTickFormatter, HoverTool, LabelSet, Range1d, Span
from bokeh.plotting import figure

from .. import _validate, costs
from .._format import bandwidth, binary_bytes, intensity, memory_size, percent, ratio, si
from .._math import cdiv
from ..hardware import gpu as catalog_gpu
from ..kernels.simt import SimResult
from ..ladder import memory_ladder
from ..measure.cpu import Staircase, cache_staircase
from ..occupancy import occupancy
from ..transformer import PRESETS, compare_estimates
from ._base import PALETTE, Picture

#: Each figure as "module:factory", called with no arguments for its default drawing.
FIGURES = {
    "execution_hierarchy": "gpu_lessons.views.figures:execution_hierarchy",
    "memory_hierarchy": "gpu_lessons.views.figures:memory_hierarchy",
    "copy_staircase": "gpu_lessons.views.figures:copy_staircase",
    "reduction_tree": "gpu_lessons.views.figures:reduction_tree_example",
    "intensity_by_size": "gpu_lessons.views.figures:intensity_by_size",
    "tile_reuse": "gpu_lessons.views.figures:tile_reuse",
    "flops_per_token": "gpu_lessons.views.figures:flops_per_token",
    "sgemm_ladder": "gpu_lessons.views.sgemm_ladder:ladder_chart",
}

_SM_COLUMNS = 12


class Drawing(Picture):
    """One figure, drawn as a notebook cell's value (a :class:`~gpu_lessons.views._base.Picture`
    whose widget has class ``gpu-lessons-figure``, so it needs no setup call and shows in the
    book too); ``.figure`` is the bokeh figure, ``.layout`` what is shown (the figure, or a menu
    above it)."""

    widget_class = "gpu-lessons-figure"

    def __init__(self, fig, layout=None):
        super().__init__(fig if layout is None else layout)
        self.figure = fig

    def __repr__(self) -> str:
        return f"Drawing({self.figure.title.text})"


def execution_hierarchy(gpu="H100", threads_per_block: int = 256,
                        registers_per_thread: int = 32):
    """Grid → block → warp → thread on ``gpu``'s SMs: one square per SM (the catalog's count),
    filled with the blocks of ``threads_per_block`` threads the occupancy model lets one SM
    hold at ``registers_per_thread``; each block is a column of its warps."""
    g = catalog_gpu(gpu)
    r = occupancy(g.cc, threads_per_block=threads_per_block,
                  registers_per_thread=registers_per_thread)
    warps = cdiv(threads_per_block, 32)
    sm = {"x": [], "y": [], "label": []}
    blk = {"x": [], "y": [], "w": [], "h": [], "sm": [], "block": []}
    rows = cdiv(g.sms, _SM_COLUMNS)
    for s in range(g.sms):
        x, y = s % _SM_COLUMNS, rows - 1 - s // _SM_COLUMNS
        sm["x"].append(x + 0.5)
        sm["y"].append(y + 0.5)
        sm["label"].append(f"SM {s}")
        for b in range(r.blocks_per_sm):
            w = 0.84 / r.blocks_per_sm
            blk["x"].append(x + 0.08 + w * (b + 0.5))
            blk["y"].append(y + 0.5)
            blk["w"].append(w * 0.85)
            blk["h"].append(0.84 * r.warps_per_sm / 64)   # the SM's share of warp slots
            blk["sm"].append(s)
            blk["block"].append(s + g.sms * b)
    p = figure(width=720, height=60 * rows + 80, toolbar_location=None,
               title=(f"{g.name}: {g.sms} SMs × {r.blocks_per_sm} blocks of "
                      f"{threads_per_block} threads ({warps} warps of 32) resident on each: "
                      f"{r.warps_per_sm} of 64 warps per SM, "
                      f"{g.sms * r.blocks_per_sm * threads_per_block:,} threads at once"),
               x_range=Range1d(0, _SM_COLUMNS), y_range=Range1d(0, rows))
    p.rect("x", "y", 0.92, 0.92, source=ColumnDataSource(sm), fill_color="#F2F2F2",
           line_color="#999999")
    src = ColumnDataSource(blk)
    p.rect("x", "y", "w", "h", source=src, fill_color=PALETTE[0], line_color="white")
    p.add_tools(HoverTool(tooltips=[("SM", "@sm"), ("block", "@block")]))
    p.axis.visible = False
    p.grid.visible = False
    p.title.text_font_size = "11pt"
    return Drawing(p)


def _ladder_data(gpu) -> tuple[str, dict]:
    """The ladder of ``gpu`` as the figure draws it: the GPU's name and one column per field."""
    lad = memory_ladder(gpu)
    levels = [lv for lv in lad.levels if lv.total_bytes]
    return lad.gpu, {
        "level": [lv.name for lv in levels],
        "size": [lv.total_bytes for lv in levels],
        "log_size": [math.log2(lv.total_bytes) for lv in levels],
        "bandwidth": [lv.bandwidth for lv in levels],
        "text": [f"{memory_size(lv.total_bytes)} · "
                 + ("–" if lv.bandwidth is None else si(lv.bandwidth, "B/s"))
                 + f" · {_short(lv.latency)}" for lv in levels],
        "colour": [PALETTE[i % len(PALETTE)] for i in range(len(levels))],
    }


_SWITCH_JS = """
const picked = menu.selected.indices;
if (!picked.length) return;
const name = menu.data.name[picked[0]];
const d = ladders[name];
src.data = d;
fig.y_range.factors = d.level.slice().reverse();
fig.title.text = titles[name];
const m = Object.assign({}, menu.data);
m.fill = m.name.map((n) => (n === name ? on : off));
menu.data = m;
"""

#: The GPU menu's colours: the GPU drawn, the others.
_PICKED, _OTHER = PALETTE[5], "#F2F2F2"

#: The GPUs lesson 03's memory ladder offers in its menu.
LADDER_GPUS = ("V100", "A100", "H100", "H200", "B200", "RTX 4090", "L4")


def memory_hierarchy(gpu="H100", switch=LADDER_GPUS):
    """The memory ladder of ``gpu``: a bar per level, its length the level's size over the whole
    GPU (log scale), labelled with the size, bandwidth and latency the ladder model gives.

    ``switch``: catalog GPUs to offer in a row of names above the figure (``()``: none); a
    click on a name draws that GPU's ladder.  Every ladder is computed here, so the switch
    works in the browser (JupyterLab or the book) with no kernel running; the size axis stays
    fixed, so GPUs compare by bar length."""
    name, data = _ladder_data(gpu)
    ladders, labels = {name: data}, {name: str(gpu)}
    for g in switch:
        full, ladder = _ladder_data(g)
        ladders.setdefault(full, ladder)
        labels.setdefault(full, str(g))
    titles = {n: f"{n}: each level's size (whole GPU), bandwidth and latency" for n in ladders}
    src = ColumnDataSource(data)
    top = max(max(d["log_size"]) for d in ladders.values())
    p = figure(y_range=data["level"][::-1], width=720, height=60 * len(data["level"]) + 60,
               toolbar_location=None, title=titles[name], x_range=Range1d(0, top * 2.1))
    p.hbar(y="level", right="log_size", height=0.6, source=src, color="colour")
    p.add_layout(LabelSet(x="log_size", y="level", text="text", source=src, x_offset=6,
                          y_offset=-7, text_font_size="9pt"))
    p.xaxis.axis_label = "size, log₂ bytes (bar) — labels: size · bandwidth · latency"
    p.ygrid.visible = False
    if len(ladders) == 1:
        return Drawing(p)
    names = list(ladders)
    menu = ColumnDataSource({"x": list(range(len(names))), "name": names,
                             "label": [labels[n] for n in names],
                             "fill": [_PICKED if n == name else _OTHER for n in names]})
    m = figure(width=720, height=70, toolbar_location=None, tools="tap",
               title="GPU: click a name to draw its ladder",
               x_range=Range1d(-0.5, len(names) - 0.5), y_range=Range1d(0, 1))
    m.rect("x", 0.5, 0.94, 0.8, source=menu, fill_color="fill", line_color="#999999",
           nonselection_fill_alpha=1.0, nonselection_line_alpha=1.0)
    m.text("x", 0.5, text="label", source=menu, text_align="center", text_baseline="middle",
           text_font_size="9pt", nonselection_text_alpha=1.0)
    m.axis.visible = False
    m.grid.visible = False
    m.outline_line_color = None
    menu.selected.js_on_change("indices", CustomJS(
        args={"menu": menu, "src": src, "fig": p, "ladders": ladders, "titles": titles,
              "on": _PICKED, "off": _OTHER}, code=_SWITCH_JS))
    drawing = Drawing(p, column(m, p))
    drawing.ladders = ladders
    return drawing


def copy_staircase(stairs: Staircase | None = None):
    """Copy bandwidth against working-set size (log axis), one dot per size of ``stairs``
    (a :class:`~gpu_lessons.measure.cpu.Staircase`; ``None`` measures one, 0.5 s), and a
    dashed line at each of its cache sizes: the bandwidth steps down where the working set
    outgrows a level."""
    if stairs is None:
        stairs = cache_staircase(budget_s=0.5, progress=False)
    if not isinstance(stairs, Staircase):
        raise TypeError(f"stairs must be the Staircase that measure.cache_staircase() returns, "
                        f"got {type(stairs).__name__}")
    size, gbps = stairs.arrays()
    src = ColumnDataSource({"x": size, "y": gbps,
                            "size": [binary_bytes(int(s)) for s in size],
                            "rate": [bandwidth(g * 1e9) for g in gbps]})
    p = figure(title=f"{stairs.device}: copy bandwidth against working set (dashed: its caches)",
               x_axis_type="log", width=720, height=300, toolbar_location=None,
               x_axis_label="working set (bytes, both arrays)", y_axis_label="copy bandwidth, GB/s")
    p.line("x", "y", source=src, line_width=2, color=PALETTE[0])
    p.scatter("x", "y", source=src, size=5, color=PALETTE[0])
    p.add_tools(HoverTool(tooltips=[("working set", "@size"), ("copy", "@rate")]))
    for nbytes in stairs.caches.values():
        p.add_layout(Span(location=nbytes, dimension="height", line_dash="dashed",
                          line_color="grey"))
    return Drawing(p)


def _lines(p, series, tooltips):
    """One line with dots per ``(label, data)`` of ``series``, in palette order, and a hover."""
    for i, (label, data) in enumerate(series):
        src = ColumnDataSource(data)
        p.line("x", "y", source=src, color=PALETTE[i], line_width=2, legend_label=label)
        p.scatter("x", "y", source=src, color=PALETTE[i], size=6, legend_label=label)
    p.add_tools(HoverTool(tooltips=tooltips))
    p.legend.location = "top_left"
    return p


def _cost_columns(x, ks) -> dict:
    """One line of cost models ``ks`` at ``x``: each one's intensity, and its FLOPs, bytes,
    bytes per FLOP and intensity as the hover writes them."""
    return {"x": list(x), "y": [k.intensity for k in ks],
            "flops": [si(k.flops, "FLOP") for k in ks], "bytes": [si(k.bytes, "B") for k in ks],
            "per_flop": [f"{ratio(k.bytes / k.flops)} B/FLOP" for k in ks],
            "text": [intensity(k.intensity) for k in ks]}


def _log_log(title: str):
    return figure(width=720, height=380, toolbar_location="right", x_axis_type="log",
                  y_axis_type="log", tools="pan,wheel_zoom,reset", title=title)


def intensity_by_size(sizes=(64, 128, 256, 512, 1024, 2048, 4096, 8192), dtype: str = "fp32"):
    """FLOP per byte of an N × N × N matrix product, an elementwise ``c = a + b`` over N² values
    and a sum of N² values, for each N of ``sizes``, as :mod:`gpu_lessons.costs` counts them
    (each array moved once)."""
    sizes = tuple(_validate.integer("sizes item", n, low=1) for n in sizes)
    kernels = (("matrix product N × N × N", lambda n: costs.gemm(n, n, n, dtype=dtype)),
               ("c = a + b over N² values",
                lambda n: costs.elementwise(n * n, reads=2, writes=1, dtype=dtype)),
               ("sum of N² values", lambda n: costs.reduction(n * n, dtype=dtype)))
    series = [(label, _cost_columns(sizes, [cost(n) for n in sizes])) for label, cost in kernels]
    p = _log_log(f"Arithmetic intensity grows with N only for the matrix product ({dtype})")
    p.xaxis.axis_label = "N"
    p.yaxis.axis_label = "arithmetic intensity, FLOP/byte"
    return Drawing(_lines(p, series, [("N", "@x"), ("FLOPs", "@flops"), ("bytes", "@bytes"),
                                      ("intensity", "@text")]))


def tile_reuse(n: int = 8192, tiles=(1, 2, 4, 8, 16, 32, 64, 128, 256),
               dtypes=("fp32", "fp16")):
    """DRAM intensity of an ``n``-square matrix product tiled in shared memory, for each tile
    width T of ``tiles`` (T = 1 is the naive kernel) and each element type of ``dtypes``, from
    :func:`gpu_lessons.costs.gemm_tiled`: each element a block stages serves T multiply-adds,
    so A and B move from DRAM N/T times, not N times."""
    n = _validate.integer("n", n, low=1)
    tiles = tuple(_validate.integer("tiles item", t, low=1) for t in tiles)
    series = [(f"{dtype}, T × T tiles",
               _cost_columns(tiles, [costs.gemm_tiled(n, n, n, tile=t, dtype=dtype) for t in tiles]))
              for dtype in dtypes]
    p = _log_log(f"Tiled matrix product, N = {n:,}: DRAM intensity against tile width T")
    p.xaxis.axis_label = "tile width T (T = 1: no tiling)"
    p.yaxis.axis_label = "DRAM arithmetic intensity, FLOP/byte"
    return Drawing(_lines(p, series, [("T", "@x"), ("DRAM bytes", "@bytes"),
                                      ("bytes per FLOP", "@per_flop"),
                                      ("intensity", "@text")]))


def flops_per_token(model: str = "gpt2-small",
                    seq_lens=(256, 512, 1024, 2048, 4096, 8192, 16384, 32768)):
    """Training FLOPs per token of preset ``model`` (:data:`gpu_lessons.transformer.PRESETS`)
    against sequence length: the exact count, 6N and 6N + 12·L·H·Q·T, as
    :func:`gpu_lessons.transformer.compare_estimates` gives them (N non-embedding)."""
    if model not in PRESETS:
        raise ValueError(f"model={model!r}: not a preset (choose from {', '.join(PRESETS)})")
    m = PRESETS[model]
    c = compare_estimates(seq_lens, d_model=m.d_model, n_layers=m.n_layers, d_ff=m.d_ff,
                          vocab_size=m.vocab_size, n_heads=m.n_heads, gated_mlp=m.gated_mlp,
                          bias=m.bias, norm=m.norm)
    x = list(c.seq_lens)
    series = [("exact count", {"x": x, "y": list(c.exact), "err": ["–"] * len(x)}),
              (f"6N (N = {c.n_params:,} non-embedding)", {"x": x, "y": list(c.six_n),
                      "err": [percent(e, signed=True) for e in c.six_n_error]}),
              ("6N + 12·L·H·Q·T", {"x": x, "y": list(c.palm),
                                    "err": [percent(e, signed=True) for e in c.palm_error]})]
    for _, data in series:
        data["text"] = [si(v, "FLOP") for v in data["y"]]
    p = figure(width=720, height=380, toolbar_location="right", x_axis_type="log",
               tools="pan,wheel_zoom,reset",
               title=f"{m.label}: training FLOPs per token against sequence length")
    p.xaxis.axis_label = "sequence length, tokens"
    p.yaxis.axis_label = "training FLOPs per token (G = 10⁹)"
    p.yaxis.formatter = CustomJSTickFormatter(code="return (tick / 1e9).toFixed(1) + ' G';")
    return Drawing(_lines(p, series, [("sequence", "@x tokens"), ("FLOPs per token", "@text"),
                                      ("off the exact count by", "@err")]))


def _short(latency: str) -> str:
    """The ladder's latency text up to its first qualification: "≈ 19 cycles shared"."""
    for sep in (":", ";", ",", " ("):
        latency = latency.split(sep)[0]
    return latency


def tree_edges(result: SimResult, array: str, block: int = 0, width: int | None = None) -> dict:
    """The data flow of ``array`` in block ``block``: for every lane's shared-memory store,
    one edge from each element of ``array`` the same thread loaded since its previous store.
    Rows are barrier intervals (the phase the load happened in, minus one, to the store's
    phase); an element's column is its index modulo ``width`` (a row of a 2-D buffer).
    Needs a run made with ``record_indices=True``."""
    if not isinstance(result, SimResult):
        raise TypeError(f"result must be the SimResult of simt.run(...), "
                        f"got {type(result).__name__}")
    width = None if width is None else _validate.integer("width", width, low=1)
    edges = {"x0": [], "y0": [], "x1": [], "y1": [], "moved": []}
    pending: dict = {}
    for e in result.events:
        if e.array != array or e.block != block or e.indices is None:
            continue
        if e.kind == "ld.shared":
            for lane, i in enumerate(e.indices):
                if i is not None:
                    pending.setdefault((e.warp, lane), []).append(i)
        elif e.kind == "st.shared":
            for lane, i in enumerate(e.indices):
                if i is None:
                    continue
                col = i % width if width else i
                for j in pending.pop((e.warp, lane), []):
                    src = j % width if width else j
                    edges["x0"].append(src)
                    edges["y0"].append(e.phase - 1)
                    edges["x1"].append(col)
                    edges["y1"].append(e.phase)
                    edges["moved"].append(src != col)
    if not edges["x0"]:
        raise ValueError(f"array={array!r}: no shared-memory store of it in block {block} read "
                         f"a value of it (run with record_indices=True?)")
    return edges


def scan_tree(result: SimResult, array: str, block: int = 0, width: int | None = None,
              title: str = ""):
    """:func:`tree_edges` drawn: element index across, barrier interval down; an edge that
    moves a value sideways (an addition's other operand) in colour, one that keeps a column
    (a thread updating its own element) in grey."""
    edges = tree_edges(result, array, block, width)
    depth = max(edges["y1"])
    flags = edges["moved"]
    moved = {k: [v for v, m in zip(vals, flags, strict=True) if m] for k, vals in edges.items()}
    kept = {k: [v for v, m in zip(vals, flags, strict=True) if not m]
            for k, vals in edges.items()}
    top = max(max(edges["x0"]), max(edges["x1"]))
    p = figure(width=720, height=70 * depth + 90, toolbar_location=None,
               title=title or f"{array}: what each store read, barrier interval by interval",
               x_range=Range1d(-1, top + 1), y_range=Range1d(depth + 0.5, -0.5))
    p.segment("x0", "y0", "x1", "y1", source=ColumnDataSource(kept), color="#BBBBBB")
    p.segment("x0", "y0", "x1", "y1", source=ColumnDataSource(moved), color=PALETTE[3],
              line_width=1.5)
    p.scatter(edges["x1"], edges["y1"], size=4, color=PALETTE[0])
    p.xaxis.axis_label = f"element of {array}" + (f" (index mod {width})" if width else "")
    p.yaxis.axis_label = "barrier interval"
    return Drawing(p)


def reduction_tree_example():
    """The default drawing: the reduction tree of the teaching kernel ``reduce_sequential``
    (:mod:`gpu_lessons.kernels.simt.examples`) on 64 values."""
    from ..kernels.simt import examples, run

    launch = examples.cuda_launch("reduce_sequential", 64, block=64)
    res = run(examples.KERNELS["reduce_sequential"], launch.grid, launch.block, *launch.inputs,
              record_indices=True)
    return scan_tree(res, "sdata", title="reduce_sequential on 64 values: the tree")
