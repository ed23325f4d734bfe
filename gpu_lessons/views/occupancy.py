"""Occupancy calculator: blocks and warps per SM, the binding limit, and the three classic curves.

Every number comes from :mod:`gpu_lessons.occupancy`: the readout from :func:`occupancy` (and its
``explain()`` rows), the curves from :func:`occupancy_vs_block_size`,
:func:`occupancy_vs_registers` and :func:`occupancy_vs_shared_mem`.  Those follow
``cuda_occupancy.h`` and agree with the CUDA runtime on an H200 for 104,652 configurations.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
from bokeh.models import ColumnDataSource, HoverTool, Legend, Range1d, Span
from bokeh.plotting import figure
from bokeh.transform import factor_cmap

from .. import _validate
from .. import occupancy as _occ
from .._format import binary_bytes, html_table, percent
from ..hardware import catalog
from ._base import LAYOUT, PALETTE, STYLE, Explorer, dropdown, slider

#: Carveout choices (percent of the SM's largest shared-memory size), -1 = driver default.
CARVEOUTS = (-1, *sorted({*range(0, 101, 10), 25, 75}))

#: One colour per limit, in the order of ``occupancy.LIMITS``.
LIMIT_COLORS = dict(zip(_occ.LIMITS, (PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[4]),
                        strict=True))

_CURVES = (
    ("threads_per_block", "block size (threads)", "threads", "vs block size"),
    ("registers_per_thread", "registers per thread", "registers/thread", "vs registers"),
    ("shared_mem_per_block", "shared memory per block (KiB)", "KiB", "vs shared memory"),
)


class OccupancyExplorer(Explorer):
    title = "Occupancy calculator: resident warps per SM and what limits them"

    def __init__(self, cc="9.0", threads_per_block=256, registers_per_thread=40,
                 shared_mem_per_block=4096, *, gpu=None, carveout=None, opt_in=True):
        target = _target_key(cc, gpu)
        spec = _spec(target)
        threads = _validate.integer("threads_per_block", threads_per_block, low=32,
                                    high=spec.max_threads_per_block)
        regs = _validate.integer("registers_per_thread", registers_per_thread, low=1,
                                 high=spec.max_registers_per_thread)
        smem = _validate.integer("shared_mem_per_block", shared_mem_per_block, low=0,
                                 high=spec.shared_per_block_optin)
        if carveout is None:
            carveout = _occ.CARVEOUT_DEFAULT
        carveout = _validate.integer("carveout", carveout, low=_occ.CARVEOUT_DEFAULT, high=100)
        if not isinstance(opt_in, bool):
            raise TypeError(f"opt_in must be True or False, got {opt_in!r}")

        carveouts = sorted({*CARVEOUTS, carveout})
        controls = {
            "target": dropdown("GPU or compute capability", _target_options(), target),
            "threads_per_block": slider("block size", threads, 32, spec.max_threads_per_block,
                                        32, unit="threads"),
            "registers_per_thread": slider("registers per thread", regs, 1,
                                           spec.max_registers_per_thread, 1,
                                           unit="registers"),
            "shared_mem_per_block": slider("shared memory per block", smem, 0,
                                           spec.shared_per_block_optin, 128, unit="bytes"),
            "carveout": dropdown("shared-memory carveout (% of max)",
                                 [("driver default" if c == -1 else percent(c / 100), c)
                                  for c in carveouts], carveout),
            "opt_in": widgets.Checkbox(value=opt_in, style=STYLE, layout=LAYOUT,
                                       description="opted in to > 48 KB shared memory/block"),
        }

        self.curve_sources = {}
        self.marker_sources = {}
        self.spans = {}
        figs = []
        for parameter, xlabel, unit, title in _CURVES:
            src = ColumnDataSource(dict(x=[], occupancy=[], blocks=[], warps=[], limiter=[]))
            dot = ColumnDataSource(dict(x=[], occupancy=[]))
            fig = figure(width=340, height=300, x_axis_label=xlabel,
                         y_axis_label="occupancy (%)", y_range=Range1d(-3, 105),
                         toolbar_location=None, title=title)
            fig.title.text_font_size = "10pt"
            fig.add_layout(Legend(orientation="horizontal", label_text_font_size="7pt",
                                  spacing=2, padding=2, margin=2), "below")
            fig.line("x", "occupancy", source=src, color="#999999", line_width=1)
            pts = fig.scatter("x", "occupancy", source=src, size=4, legend_field="limiter",
                              color=factor_cmap("limiter", list(LIMIT_COLORS.values()),
                                                list(LIMIT_COLORS)))
            span = Span(location=0, dimension="height", line_color=PALETTE[3],
                        line_dash="dashed", line_width=1.5)
            fig.add_layout(span)
            fig.scatter("x", "occupancy", source=dot, size=12, fill_color=PALETTE[3],
                        line_color="black")
            fig.add_tools(HoverTool(renderers=[pts], tooltips=[
                (xlabel, f"@x{{0,0.[000]}} {unit}"), ("occupancy", "@occupancy{0.0} %"),
                ("blocks/SM", "@blocks"), ("warps/SM", "@warps"), ("limited by", "@limiter")]))
            self.curve_sources[parameter] = src
            self.marker_sources[parameter] = dot
            self.spans[parameter] = span
            figs.append(fig)
        self.result = None
        notes = ("Dots: occupancy at each value with the other two inputs fixed, coloured by the "
                 "binding limit; the orange marker is the current configuration. Shared memory is "
                 "what the kernel asks for (static + dynamic); the 1 KB per-block reservation "
                 "(CC ≥ 8.0) is added by the calculator.")
        super().__init__(controls, figs, notes=notes)

    def _args(self) -> dict:
        target = self.controls["target"].value
        kind, _, name = target.partition(":")
        return {kind: name}

    def _update(self):
        c = self.controls
        spec = _spec(c["target"].value)
        smem_ctl = c["shared_mem_per_block"]
        if smem_ctl.max != spec.shared_per_block_optin:
            # A smaller SM (CC 7.5: 64 KB) clamps the slider; that is the intended behaviour.
            with self.quietly():
                smem_ctl.max = spec.shared_per_block_optin
        where = self._args()
        carveout = c["carveout"].value
        common = dict(carveout=carveout, opt_in=c["opt_in"].value)
        threads = c["threads_per_block"].value
        regs = c["registers_per_thread"].value
        smem = smem_ctl.value
        r = _occ.occupancy(**where, threads_per_block=threads, registers_per_thread=regs,
                           shared_mem_per_block=smem, **common)
        curves = {
            "threads_per_block": _occ.occupancy_vs_block_size(
                **where, registers_per_thread=regs, shared_mem_per_block=smem, **common),
            "registers_per_thread": _occ.occupancy_vs_registers(
                **where, threads_per_block=threads, shared_mem_per_block=smem, **common),
            "shared_mem_per_block": _occ.occupancy_vs_shared_mem(
                **where, threads_per_block=threads, registers_per_thread=regs, **common),
        }
        current = {"threads_per_block": threads, "registers_per_thread": regs,
                   "shared_mem_per_block": smem}
        for parameter, curve in curves.items():
            # Shared memory is plotted in KiB; bytes / 1024 is only a change of unit.
            scale = 1 / 1024 if parameter == "shared_mem_per_block" else 1
            self.curve_sources[parameter].data = dict(
                x=curve.x * scale, occupancy=curve.occupancy * 100, blocks=curve.blocks_per_sm,
                warps=curve.warps_per_sm, limiter=curve.limiter.tolist())
            x = current[parameter] * scale
            self.marker_sources[parameter].data = dict(x=[x], occupancy=[r.occupancy * 100])
            self.spans[parameter].location = x
        self.result = r
        self.set_readout(_readout(r))


def occupancy_explorer(cc="9.0", threads_per_block=256, registers_per_thread=40,
                       shared_mem_per_block=4096, *, gpu=None, carveout=None,
                       opt_in=True) -> OccupancyExplorer:
    """The occupancy calculator for ``cc`` (or a catalog ``gpu``), starting from one kernel
    configuration: block size 32..1024 threads, 1..255 registers/thread, shared memory in bytes
    (static + dynamic), ``carveout`` None (driver default) or 0..100 %."""
    return OccupancyExplorer(cc, threads_per_block, registers_per_thread, shared_mem_per_block,
                             gpu=gpu, carveout=carveout, opt_in=opt_in)


# -- helpers ------------------------------------------------------------------------------------

def _target_options() -> list[tuple[str, str]]:
    ccs = [(f"CC {cc} ({spec.architecture})", f"cc:{cc}")
           for cc, spec in _occ.compute_capabilities().items()]
    gpus = [(f"{g.name} (CC {g.cc})", f"gpu:{g.name}") for g in catalog().values()]
    return ccs + gpus


def _target_key(cc, gpu) -> str:
    """The dropdown value for the factory's ``cc``/``gpu`` arguments (checked by the model)."""
    if gpu is not None:
        _, name = _occ.resolve(gpu=gpu)
        return f"gpu:{name}"
    spec, _ = _occ.resolve(cc)
    return f"cc:{spec.cc}"


def _spec(target: str) -> _occ.ComputeCapability:
    kind, _, name = target.partition(":")
    if kind == "gpu":
        return _occ.compute_capability(catalog()[name].cc)
    return _occ.compute_capability(name)


def _blocks(n: int) -> str:
    return "no limit" if n >= _occ.UNLIMITED else f"{n}"


def _readout(r: _occ.Occupancy) -> str:
    where = f"{r.gpu} (CC {r.cc})" if r.gpu else f"CC {r.cc}"
    binding = " = ".join(r.limiters)
    head = (f"<b>{html.escape(where)}: {r.blocks_per_sm} blocks/SM, {r.warps_per_sm} of "
            f"{r.max_warps_per_sm} warps/SM → occupancy {percent(r.occupancy)}</b>, "
            f"limited by <b>{html.escape(binding)}</b>")
    rows = []
    for name, how, blocks in r.explain():
        cells = (f"<span style='color:{LIMIT_COLORS[name]}'>■</span> {name}", _blocks(blocks),
                 f"<small>{html.escape(how)}</small>")
        rows.append([f"<b>{c}</b>" for c in cells] if name in r.limiters else cells)
    alloc = (f"<small>allocated: {r.registers_per_warp:,} registers/warp, "
             f"{r.registers_per_block:,} registers/block, {binary_bytes(r.shared_mem_allocated)} "
             f"shared memory/block; SM shared-memory capacity "
             f"{binary_bytes(r.sm_shared_mem)}</small>")
    note = (f"<br><span style='color:{PALETTE[3]}'>{html.escape(r.note)}</span>"
            if r.note else "")
    return (head + html_table("", ("limit", "blocks/SM", "how it is computed"), rows, escape=False)
            + alloc + note)
