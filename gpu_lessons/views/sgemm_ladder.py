"""The matrix-multiply ladder drawn from its H200 record (:mod:`gpu_lessons.sgemm_record`): a
bar per rung (TFLOP/s), cuBLAS's rate and the dense FP32 peak as lines, and, when a learner
passes them, their own kernels' rates beside the worked ones."""

from __future__ import annotations

from collections.abc import Mapping

from bokeh.models import ColumnDataSource, LabelSet, Range1d, Span
from bokeh.plotting import figure

from .._format import flop_rate, percent
from .._validate import real
from ..sgemm_record import measured_ladder
from ._base import PALETTE
from .figures import Drawing


def ladder_chart(n: int = 4096, mine: Mapping[str, float] | None = None):
    """The recorded ladder at ``n``; ``mine``: ``{label: TFLOP/s}`` of the learner's own
    kernels (from their GPU), drawn after the worked rungs in another colour."""
    rec = measured_ladder(n)
    mine = dict(mine or {})
    for label, rate in mine.items():
        if not isinstance(label, str):
            raise TypeError(f"mine's labels must be str, got {type(label).__name__}")
        real(f"mine[{label!r}]", rate, low=0)
    names = [k.name for k in rec.rungs] + list(mine)
    rates = [k.tflops for k in rec.rungs] + [float(v) for v in mine.values()]
    data = {
        "kernel": names, "tflops": rates,
        "text": [f"{flop_rate(r * 1e12)} · {percent(rec.of_cublas(r))} of cuBLAS"
                 for r in rates],
        "colour": [PALETTE[0]] * len(rec.rungs) + [PALETTE[1]] * len(mine),
    }
    src = ColumnDataSource(data)
    p = figure(y_range=names[::-1], width=720, height=34 * len(names) + 90,
               toolbar_location=None, x_range=Range1d(0, rec.peak_tflops * 1.45),
               title=f"{rec.gpu}, n = {n:,}: the ladder's kernels against cuBLAS "
                     f"({flop_rate(rec.cublas_tflops * 1e12)}) and the FP32 peak "
                     f"({flop_rate(rec.peak_tflops * 1e12)})")
    p.hbar(y="kernel", right="tflops", height=0.6, source=src, color="colour")
    p.add_layout(LabelSet(x="tflops", y="kernel", text="text", source=src, x_offset=6,
                          y_offset=-7, text_font_size="9pt"))
    for rate, colour in ((rec.cublas_tflops, PALETTE[3]), (rec.peak_tflops, PALETTE[7])):
        p.add_layout(Span(location=rate, dimension="height", line_color=colour,
                          line_dash="dashed", line_width=2))
    p.xaxis.axis_label = "TFLOP/s (2 n³ / time); dashed: cuBLAS SGEMM (red), FP32 peak (black)"
    p.ygrid.visible = False
    return Drawing(p)
