"""The picture of a tensor-core operand: :func:`gpu_lessons.kernels.mma_layout` as the PTX
ISA's figure, each element coloured by the lane that holds it and labelled with that lane and
its index into the per-thread array; ``lane=`` outlines one lane's elements.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from .. import _validate
from ..kernels.fragments import mma_layout
from ..kernels.simt import WARP_SIZE
from ._base import PALETTE, Picture

_CELL_PX = 44


def fragment_picture(operand: str = "a", lane: int | None = None):
    """A bokeh figure of one operand's layout; ``lane``: outline that lane's elements."""
    lay = mma_layout(operand)
    if lane is not None:
        lane = _validate.integer("lane", lane, low=0, high=WARP_SIZE - 1)
    rows, cols = lay.shape
    xs, ys, colours, labels, alphas = [], [], [], [], []
    for r in range(rows):
        for c in range(cols):
            ln = int(lay.lane[r, c])
            xs.append(c)
            ys.append(r)
            # lanes of one group of four share a colour family; the group's rows differ
            colours.append(PALETTE[ln % 4])
            alphas.append(1.0 if lane is None or ln == lane else 0.25)
            labels.append(f"L{ln}\n{operand}[{int(lay.element[r, c])}]")
    src = ColumnDataSource({"x": xs, "y": ys, "colour": colours, "label": labels,
                            "alpha": alphas})
    title = (f"mma.m16n8k16 operand {operand} ({rows} × {cols}): lane and register element"
             + (f", lane {lane} outlined" if lane is not None else ""))
    fig = figure(width=cols * _CELL_PX + 60, height=rows * _CELL_PX + 60, title=title,
                 x_range=Range1d(-0.5, cols - 0.5), y_range=Range1d(rows - 0.5, -0.5),
                 tools="", toolbar_location=None, x_axis_label="column",
                 y_axis_label="row")
    fig.rect("x", "y", 0.95, 0.95, source=src, fill_color="colour", fill_alpha="alpha",
             line_color=None)
    fig.text("x", "y", text="label", source=src, text_align="center",
             text_baseline="middle", text_font_size="8pt", text_alpha="alpha")
    if lane is not None:
        mine = [(x, y) for x, y, a in zip(xs, ys, alphas, strict=True) if a == 1.0]
        fig.rect([x for x, _ in mine], [y for _, y in mine], 0.95, 0.95, fill_alpha=0,
                 line_color="#000000", line_width=2)
    fig.xaxis.ticker = list(range(cols))
    fig.yaxis.ticker = list(range(rows))
    fig.grid.visible = False
    return fig


class FragmentPicture(Picture):
    """A :func:`fragment_picture` that draws itself as a notebook cell's value."""

    def __repr__(self) -> str:
        return f"FragmentPicture({self.layout.title.text})"
