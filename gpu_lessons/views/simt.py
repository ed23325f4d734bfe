"""SIMT explorer: a warp's lanes × issue slots, coloured by instruction kind or branch path.

Each column is one warp instruction as :func:`gpu_lessons.kernels.simt.examples.simulate` recorded it;
each row is a lane.  A coloured cell is a lane that ran the instruction, a grey cell a lane the
active mask switched off: divergence shows as columns that are partly grey, one path after the
other.  The readout gives the run's totals straight from the simulator (``SimResult.stats``).

:func:`lane_cells` and :func:`lanes_figure` draw that picture for any
:class:`~gpu_lessons.kernels.simt.SimResult`; :mod:`gpu_lessons.views.kernel_picture` reuses them for
a learner's own kernel.
"""

from __future__ import annotations

import html
from collections import OrderedDict

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from .._format import percent
from ..kernels.simt import WARP_SIZE
from ..kernels.simt.examples import BRANCHES, KERNELS, TRANSPOSES, simulate
from ._base import PALETTE, Explorer, dropdown, slider

#: Block sizes offered; the reductions need a power of two.  1024 is left out: simulating its
#: 32 warps takes longer than a slider should (about 0.1 s for a reduction).  The transposes always run
#: 32 × 8 threads (Harris's tiles), so the control is switched off for them.
BLOCK_SIZES = (32, 64, 128, 256, 512)
#: Warp orders offered: the two fixed ones and a few random seeds (the missing-sync reduction
#: gives different answers under different orders).
ORDERS = (("ascending", "ascending"), ("descending", "descending"),
          ("random, seed 0", 0), ("random, seed 1", 1), ("random, seed 2", 2))
COLOUR_BY = ("instruction kind", "branch path")

INACTIVE = "#DDDDDD"
#: Colour and hatch of each instruction kind: the eight Okabe–Ito colours, and hatching for
#: the kinds that share a colour with their plain cousin (an atomic is a store that also
#: reads; ``__syncwarp`` is a barrier for one warp; cp.async's commit and wait wait too).
KIND_STYLE = {
    "alu": (PALETTE[0], " "), "branch": (PALETTE[1], " "),
    "ld.global": (PALETTE[2], " "), "st.global": (PALETTE[3], " "),
    "atom.global": (PALETTE[3], "/"),
    "ld.shared": (PALETTE[4], " "), "st.shared": (PALETTE[5], " "),
    "atom.shared": (PALETTE[5], "/"),
    "bar.sync": (PALETTE[6], " "), "bar.warp": (PALETTE[6], "."),
    "shfl": (PALETTE[7], " "), "cp.async": (PALETTE[6], "x"), "mma": (PALETTE[0], "x"),
}
KIND_COLOURS = {k: c for k, (c, _) in KIND_STYLE.items()}
NO_BRANCH = "outside any branch"
#: Simulated runs kept, so moving the warp/block sliders only redraws.
_CACHE_SIZE = 24


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _memory_note(e) -> str:
    """What the memory model said about one instruction, in words with units."""
    parts = []
    if e.sectors is not None:
        parts.append(f"{e.array}: {e.sectors} sectors (32 B) for {e.requests} request")
    if e.wavefronts is not None:
        parts.append(f"{e.array}: {e.wavefronts} wavefronts, {e.bank_conflicts} bank conflicts")
    if e.serialisation is not None:
        parts.append(f"atomic: up to {e.serialisation} lanes on one address")
    if e.inactive_reads:
        parts.append(f"read {e.inactive_reads} inactive lanes (undefined values)")
    if e.kind == "bar.sync":
        parts.append(f"waited {e.wait or 0} issue slots for slower warps")
    return "; ".join(parts)


def lane_cells(result, block: int = 0, warp: int = 0,
               colour_by: str = "instruction kind") -> dict:
    """The lanes × issue-slots picture of one warp as ColumnDataSource columns: one cell per
    (lane, step), coloured by kind (or branch path) where the lane was active, grey where not.
    Every number comes from ``result`` (:meth:`SimResult.warp_events` / ``lane_matrix``)."""
    events = result.warp_events(block, warp)
    lanes = result.lane_matrix(block, warp)  # bool[32, steps]
    steps = lanes.shape[1]
    if colour_by == "instruction kind":
        cats = [e.kind for e in events]
        styles = KIND_STYLE
    else:
        cats = [e.path[-1] if e.path else NO_BRANCH for e in events]
        seen = list(dict.fromkeys(cats))
        styles = {p: (PALETTE[k % len(PALETTE)], " ") for k, p in enumerate(seen)}
    active = lanes.ravel()  # lane-major, matching the repeat/tile below
    step = np.tile(np.arange(steps), WARP_SIZE)
    lane = np.repeat(np.arange(WARP_SIZE), steps)
    cat = np.array(cats, dtype=object)[step] if steps else np.array([], dtype=object)
    label = np.where(active, cat, "inactive lane")
    color = np.where(active, np.array([styles[x][0] for x in cat], dtype=object), INACTIVE)
    hatch = np.where(active, np.array([styles[x][1] for x in cat], dtype=object), " ")
    per_step = dict(kind=[e.kind for e in events],
                    path=[" › ".join(e.path) if e.path else NO_BRANCH for e in events],
                    line=[str(e.line) if e.line is not None else "–" for e in events],
                    active=[e.active for e in events],
                    memory=[_memory_note(e) for e in events])
    data = dict(step=step, lane=lane, color=list(color), hatch=list(hatch), label=list(label))
    for k, v in per_step.items():
        data[k] = list(np.array(v, dtype=object)[step]) if steps else []
    return data


def empty_cells() -> dict:
    return dict(step=[], lane=[], color=[], hatch=[], label=[], kind=[], path=[], line=[],
                active=[], memory=[])


def lanes_figure(source: ColumnDataSource, *, width: int = 900, height: int = 420):
    """The bokeh figure for :func:`lane_cells` data: lanes down, issue slots across, a legend
    of kinds and a hover tooltip per cell."""
    fig = figure(height=height, width=width, x_axis_label="issue slot of this warp (step)",
                 y_axis_label="lane", toolbar_location="above",
                 tools="xpan,xwheel_zoom,reset", y_range=Range1d(WARP_SIZE - 0.4, -0.6),
                 x_range=Range1d(-0.6, 10))
    # legend_field groups the cells by label in the browser, so the legend follows the data
    cells = fig.rect(x="step", y="lane", width=0.92, height=0.86, fill_color="color",
                     hatch_pattern="hatch", hatch_color="white", hatch_alpha=0.8,
                     line_color=None, source=source, legend_field="label")
    legend = fig.legend[0]
    fig.center.remove(legend)
    fig.add_layout(legend, "right")
    fig.ygrid.visible = False
    fig.xgrid.visible = False
    fig.add_tools(HoverTool(renderers=[cells], tooltips=[
        ("lane, step", "@lane, @step"), ("instruction", "@kind"), ("branch path", "@path"),
        ("source line", "@line"), ("active lanes", "@active of 32"), ("memory", "@memory")]))
    return fig


def fit_steps(fig, steps: int) -> None:
    """Show every issue slot of the warp drawn."""
    fig.x_range.start = -0.6
    fig.x_range.end = max(steps, 1) - 0.4


class SimtExplorer(Explorer):
    title = "SIMT: which lanes of a warp run each instruction"

    def __init__(self, kernel: str = "branch_by_parity", *, block_size: int = 256,
                 iters: int = 4, order="ascending", block: int = 0, warp: int = 0,
                 colour_by: str = "instruction kind"):
        self._runs: OrderedDict = OrderedDict()
        self.run = None  # the KernelRun on screen
        self.cells = ColumnDataSource(empty_cells())
        fig = lanes_figure(self.cells)
        self.figure = fig

        controls = {
            "kernel": dropdown("teaching kernel", list(KERNELS), kernel),
            "block_size": dropdown("block size (threads)", list(BLOCK_SIZES), block_size),
            "iters": slider("path length", iters, 0, 16, unit="multiply-adds per branch"),
            "order": dropdown("warp order (between barriers)", list(ORDERS), order),
            # generous ranges until the first run says how many blocks and warps there are
            "block": slider("block", block, 0, max(block, 3), unit="linear index"),
            "warp": slider("warp", warp, 0, max(warp, 31), unit="index in the block"),
            "colour_by": dropdown("colour cells by", list(COLOUR_BY), colour_by),
        }
        super().__init__(controls, [fig], notes=(
            "Each column is one warp instruction; grey cells are lanes masked off by a branch. "
            "Both paths of a divergent branch run one after the other, then the lanes "
            "reconverge. Counts are the simulator's own instruction set, not SASS."))

    # -- state ----------------------------------------------------------------------------------

    def _kernel_run(self, kernel, block_size, iters, order):
        key = (kernel, block_size, iters, order)
        if key in self._runs:
            self._runs.move_to_end(key)
        else:
            self._runs[key] = simulate(kernel, block=block_size, iters=iters, order=order)
            while len(self._runs) > _CACHE_SIZE:
                self._runs.popitem(last=False)
        return self._runs[key]

    def _update(self):
        c = self.controls
        kernel = c["kernel"].value
        c["block_size"].disabled = kernel in TRANSPOSES
        c["iters"].disabled = kernel not in BRANCHES
        # The reductions sum one block of `block_size` values: their n follows the block.
        r = self._kernel_run(kernel, c["block_size"].value, c["iters"].value, c["order"].value)
        sim = r.sim
        n_blocks = sim.grid.x * sim.grid.y * sim.grid.z
        with self.quietly():  # slider ranges adjusted here must not start another update
            c["block"].max = n_blocks - 1
            c["warp"].max = sim.warps_per_block - 1
        block, warp = c["block"].value, c["warp"].value
        self.run = r
        self._draw(sim, block, warp, c["colour_by"].value)
        self._readout(r, block, warp)

    def _draw(self, sim, block, warp, colour_by):
        data = lane_cells(sim, block, warp, colour_by)
        steps = len(data["step"]) // WARP_SIZE
        self.cells.data = data
        fit_steps(self.figure, steps)
        self.figure.title.text = (f"{sim.kernel}: block {block}, warp {warp} — "
                                  f"{steps} warp instructions")

    def _readout(self, r, block, warp):
        sim = r.sim
        here = sim.stats(block=block, warp=warp)
        t = sim.totals
        g, b = sim.grid, sim.block
        spr = (f"{t.sectors_per_request:.2f} sectors/request" if t.global_requests
               else "no global loads or stores")
        races = (f"<b>{len(sim.races)} races</b> (e.g. {html.escape(str(sim.races[0]))})"
                 if sim.races else "No races found")
        verdict = "output matches NumPy" if r.correct else "<b>output differs from NumPy</b>"
        self.set_readout(
            f"{sim.kernel}&lt;&lt;&lt;({g.x}, {g.y}, {g.z}), ({b.x}, {b.y}, {b.z})"
            f"&gt;&gt;&gt;: SIMT efficiency <b>{percent(t.simt_efficiency)}</b> over "
            f"{t.instructions} warp instructions issued ({_count(g.x * g.y * g.z, 'block')}"
            f" × {_count(sim.warps_per_block, 'warp')}); this warp "
            f"{percent(here.simt_efficiency)} over {here.instructions}.<br>"
            f"Global memory: {spr}. Shared memory: {t.shared_requests} requests, "
            f"{t.bank_conflicts} bank conflicts ({t.shared_wavefronts} wavefronts). "
            f"Barriers: {sim.barriers}. {races}; {verdict}.")


def simt_explorer(kernel: str = "branch_by_parity", **kwargs) -> SimtExplorer:
    """Pick a teaching kernel (``simt_kernels.KERNELS``), a block and a warp; see which lanes
    ran each instruction.  Keyword arguments: ``block_size``, ``iters``, ``order``, ``block``,
    ``warp``, ``colour_by`` (``"instruction kind"`` or ``"branch path"``)."""
    return SimtExplorer(kernel, **kwargs)

