"""The picture of a kernel run: one warp's lanes × issue slots, and a memory access map.

``kernel_picture(result, array, block, warp)`` builds a static bokeh layout (no widgets) from
a :class:`~gpu_lessons.kernels.simt.SimResult`:

(a) the lanes × issue-slots grid of one warp, coloured by instruction kind, inactive lanes
    grey -- the same drawing as the SIMT explorer (:func:`gpu_lessons.views.simt.lane_cells`);
(b) a memory access map of one array: its elements as a grid (a 1-D array wraps every 128
    bytes, so a row is one 128-byte line of global memory, or one pass over the 32 banks of
    shared memory), coloured by how many lane accesses each element got -- or, for one
    instruction, by the lane that touched it.  Global arrays have the touched 32-byte
    sectors outlined; for shared arrays ``colour_by="bank"`` colours every element by its
    bank, so a bank conflict shows as one colour down a column of touched cells.

Every number comes from the simulator: :meth:`SimResult.access_map` gives per-element
counts, sectors and banks; the view only lays them out.  The map needs a run made with
``simt.run(..., record_indices=True)``.
"""

from __future__ import annotations

import numpy as np
from bokeh.layouts import column
from bokeh.models import ColorBar, ColumnDataSource, Div, HoverTool, LinearColorMapper, Range1d
from bokeh.palettes import Cividis256
from bokeh.plotting import figure

from .. import _validate
from .._math import cdiv
from ..kernels.simt import WARP_SIZE, SimResult
from ._base import PALETTE, Picture
from .simt import fit_steps, lane_cells, lanes_figure

#: Cells drawn at most in an access map (a 128 x 128 matrix); larger arrays show their start.
MAX_CELLS = 16384
COLOUR_BY = ("accesses", "lane", "warp", "bank")
UNTOUCHED = "#F2F2F2"
_CELL_PX = 16


def kernel_picture(result: SimResult, array: str | None = None, block: int = 0, warp: int = 0,
                   *, step: int | None = None, colour_by: str | None = None,
                   row_elements: int | None = None):
    """A bokeh layout: warp ``warp`` of block ``block`` (lanes × issue slots), then the access
    map of ``array`` over the whole run, or only the instruction that warp issued at ``step``.

    ``array``: a kernel argument's or shared array's name; ``None`` picks the array with the
    most lane accesses.  ``colour_by``: ``"accesses"`` (default for a whole run), ``"lane"``
    (default for one instruction), ``"warp"`` (first warp to touch it) or ``"bank"`` (shared
    arrays).  ``row_elements``: elements per drawn row of a 1-D array (e.g. ``n`` for a
    flattened n × n matrix; default: 128 bytes' worth).  Without recorded indices the layout
    has the lanes figure and a note.
    """
    if not isinstance(result, SimResult):
        raise TypeError(f"result must be the SimResult of simt.run(...), "
                        f"got {type(result).__name__}")
    g = result.grid
    block = _validate.integer("block", block, low=0, high=g.x * g.y * g.z - 1)
    warp = _validate.integer("warp", warp, low=0, high=result.warps_per_block - 1)
    if colour_by is not None:
        _validate.choice("colour_by", colour_by, COLOUR_BY)
    if row_elements is not None:
        row_elements = _validate.integer("row_elements", row_elements, low=1)

    source = ColumnDataSource(lane_cells(result, block, warp))
    lanes = lanes_figure(source, width=820, height=380)
    steps = len(source.data["step"]) // WARP_SIZE
    fit_steps(lanes, steps)
    lanes.title.text = (f"{result.kernel}: block {block}, warp {warp} — {steps} warp "
                        f"instructions (grey: lane switched off)")

    recorded = any(e.indices is not None for e in result.events)
    if array is None:
        array = _busiest_array(result)
        if array is None or not recorded:
            why = ("the kernel touched no array" if array is None else
                   "run the kernel with simt.run(..., record_indices=True) to see which "
                   "elements each lane touched")
            return column(lanes, Div(text=f"<i>No memory access map: {why}.</i>"))
    if step is None:
        amap = result.access_map(array)
        scope = "whole run"
    else:
        amap = result.access_map(array, block=block, warp=warp, step=step)
        line = next(e.line for e in result.warp_events(block, warp) if e.step == step)
        scope = f"block {block}, warp {warp}, step {step}, line {line}"
    if colour_by is None:
        colour_by = "accesses" if step is None else "lane"
    if colour_by == "bank" and amap.space != "shared":
        raise ValueError(f"colour_by='bank' is for shared arrays; {array} is in global memory "
                         f"(use 'accesses', 'lane' or 'warp')")
    return column(lanes, access_figure(amap, colour_by, scope, result.warps_per_block,
                                       row_elements))


class KernelPicture(Picture):
    """A :func:`kernel_picture` layout that draws itself as a notebook cell's value.

    A bare bokeh layout shows only its name there ("Column(id = ...)") unless
    ``bokeh.io.output_notebook()`` ran first; wrapped in a ``jupyter_bokeh`` widget, as the
    explorers' figures are, it draws in JupyterLab without any setup call, and its static HTML
    (:class:`~gpu_lessons.views._base.Picture`) draws in the book.
    """

    @property
    def children(self):
        """The layout's parts: the lanes figure, then the access map (or a note)."""
        return self.layout.children

    def __repr__(self) -> str:
        return f"KernelPicture({self.layout.children[0].title.text})"


def _busiest_array(result: SimResult) -> str | None:
    busy = {name: s.load_elements + s.store_elements + s.atomic_elements
            for name, s in result.arrays.items()}
    busy = {k: v for k, v in busy.items() if v}
    return max(busy, key=busy.get) if busy else None


def grid_shape(shape: tuple[int, ...], itemsize: int,
               row_elements: int | None = None) -> tuple[int, int]:
    """(rows, columns) of the drawing: a matrix keeps its last dimension as columns; a 1-D
    array wraps every ``row_elements`` elements, by default every 128 bytes (one cache
    line, one pass over the 32 banks)."""
    if len(shape) == 1:
        cols = row_elements or max(1, 128 // itemsize)
        return cdiv(shape[0], cols), cols
    return int(np.prod(shape[:-1])), shape[-1]


def access_figure(amap, colour_by: str = "accesses", scope: str = "whole run",
                  warps_per_block: int = 1, row_elements: int | None = None):
    """The access map of :meth:`SimResult.access_map` as a bokeh figure (see the module
    docstring)."""
    _validate.choice("colour_by", colour_by, COLOUR_BY)
    rows, cols = grid_shape(amap.shape, amap.itemsize, row_elements)
    n = min(amap.size, MAX_CELLS, rows * cols)
    rows = cdiv(n, cols)
    k = np.arange(n)
    touched = amap.accesses[:n] > 0
    sector, bank = amap.sector[:n], amap.bank[:n]
    index = (np.array([str(i) for i in k], dtype=object) if len(amap.shape) == 1 else
             np.array([str(list(map(int, t))) for t in zip(*np.unravel_index(k, amap.shape),
                                                            strict=True)], dtype=object))
    first = np.where(touched, [f"block {b}, warp {w}, lane {lane}" for b, w, lane in
                               zip(amap.first_block[:n], amap.first_warp[:n],
                                   amap.first_lane[:n], strict=True)], "not touched")
    data = dict(x=k % cols, y=k // cols, element=list(index), accesses=amap.accesses[:n],
                loads=amap.loads[:n], stores=amap.stores[:n], atomics=amap.atomics[:n],
                offset=amap.byte_offset[:n], sector=sector, bank=bank, first=list(first),
                alpha=np.where(touched, 1.0, 0.25))

    bar_title = {"accesses": "lane accesses", "lane": "first lane", "bank": "bank",
                 "warp": None}[colour_by]
    mapper = None
    if colour_by == "warp":
        warp_id = amap.first_block[:n] * warps_per_block + amap.first_warp[:n]
        colours = np.array(PALETTE, dtype=object)[warp_id % len(PALETTE)]
        data["color"] = list(np.where(touched, colours, UNTOUCHED))
        fill = "color"
    else:
        if colour_by == "accesses":
            value, low, high = amap.accesses[:n].astype(float), 1, max(1, amap.accesses.max())
            value[~touched] = np.nan
        elif colour_by == "lane":
            value, low, high = amap.first_lane[:n].astype(float), 0, WARP_SIZE - 1
            value[~touched] = np.nan
        else:
            value, low, high = bank.astype(float), 0, WARP_SIZE - 1
        data["value"] = value
        mapper = LinearColorMapper(palette=Cividis256, low=low, high=high, nan_color=UNTOUCHED)
        fill = {"field": "value", "transform": mapper}
    source = ColumnDataSource(data)

    # square cells of 6 to 16 px, so a 64 x 64 matrix fits and a small array is not tiny
    cell = max(6, min(_CELL_PX, 760 // max(cols, 1), 760 // max(rows, 1)))
    count = f"{amap.instructions} instruction" + ("" if amap.instructions == 1 else "s")
    title = (f"{amap.space} {amap.array}{list(amap.shape)}: {count} ({scope})"
             + ("" if n == amap.size else f", first {n} of {amap.size} elements"))
    # wide enough for the cells and for the title (about 7 px a character at 13 px), which
    # bokeh clips rather than wraps
    width = int(max(360, cols * cell + 150, min(len(title) * 7 + 40, 900)))
    height = int(max(180, rows * cell + 90))
    fig = figure(width=width, height=height, toolbar_location="above",
                 tools="pan,wheel_zoom,reset", x_range=Range1d(-0.6, cols - 0.4),
                 y_range=Range1d(rows - 0.4, -0.6),
                 x_axis_label=("column" if len(amap.shape) > 1 or row_elements
                               else "element within the 128-byte row"),
                 y_axis_label="row", title=title)
    cells = fig.rect("x", "y", width=0.9, height=0.9, source=source, fill_color=fill,
                     fill_alpha="alpha", line_color=None)
    fig.xgrid.visible = fig.ygrid.visible = False
    tips = [("element", "@element"), ("lane accesses", "@accesses (@loads loads, @stores "
                                                         "stores, @atomics atomics)"),
            ("first touched by", "@first"), ("byte offset", "@offset B")]
    tips.append(("sector (32 B)", "@sector") if amap.space == "global" else ("bank", "@bank"))
    fig.add_tools(HoverTool(renderers=[cells], tooltips=tips))
    if mapper is not None:
        fig.add_layout(ColorBar(color_mapper=mapper, title=bar_title, width=10), "right")

    outlines = sector_outlines(sector, touched, cols) if amap.space == "global" else {}
    fig.rect("x", "y", width="width", height=1.0, source=ColumnDataSource(
        outlines or dict(x=[], y=[], width=[], sector=[])), fill_color=None,
        line_color=PALETTE[7], line_width=1.0, line_alpha=0.7, name="sectors")
    return fig


def sector_outlines(sector: np.ndarray, touched: np.ndarray, cols: int) -> dict:
    """One rectangle per (row, touched sector): the run of cells of that sector in that row
    (a sector can wrap onto the next row when a row is not a whole number of sectors)."""
    k = np.flatnonzero(np.isin(sector, np.unique(sector[touched])))
    if not k.size:
        return dict(x=[], y=[], width=[], sector=[])
    row, col = k // cols, k % cols
    key = row * (int(sector.max()) + 1) + sector[k]
    _, start = np.unique(key, return_index=True)
    last = np.r_[start[1:], k.size] - 1
    # cells of one (row, sector) are consecutive in k, so the run is start..last
    c0, c1 = col[start], col[last]
    return dict(x=(c0 + c1) / 2, y=row[start], width=c1 - c0 + 1.0,
                sector=sector[k][start])
