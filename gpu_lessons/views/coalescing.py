"""Coalescing visualiser: one warp's 32 lanes, the addresses they load, and the sectors that move.

The picture is the one in the CUDA C++ Best Practices Guide §10.2.1: a row of 32 lanes, a line
from each lane to the 32-byte sector holding its data, and the sectors grouped four to a
128-byte line.  Touched sectors are highlighted; the rest of each touched line stays grey,
because since Maxwell/Pascal only the touched sectors move (docs/misconceptions.md, M14).  Every count comes
from :func:`gpu_lessons.memory.global_load`; the view only lays the sectors out.

A second plot sweeps the stride for the chosen element size and offset, so the current pattern
can be compared with the strided family (measured on an H200 in
``tests/data/h200_ncu_memory.json``: 4, 8, 12, 16, then 32 sectors for stride 1, 2, 3, 4, 8).
"""

from __future__ import annotations

import functools

from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from .. import _validate, memory
from .._format import binary_bytes, percent
from ._base import PALETTE, Explorer, dropdown, lane_ranges, slider

#: Access patterns: key -> label shown in the dropdown.
PATTERNS = {
    "stride": "strided: lane i reads element i × stride",
    "offset": "misaligned: lane i reads element i, offset bytes in",
    "aos": "AoS: lane i reads one field of struct i",
    "soa": "SoA: lane i reads element i of one field array",
    "row": "matrix row: lane i reads A[0, i]",
    "column": "matrix column: lane i reads A[i, 0]",
}

#: Which controls each pattern reads (the others are greyed out).
USES = {
    "stride": {"stride", "offset"},
    "offset": {"offset"},
    "aos": {"struct_bytes", "field"},
    "soa": {"field"},
    "row": {"ld"},
    "column": {"ld"},
}

#: Elements in each SoA field array (any length >= 32 that keeps arrays aligned will do).
SOA_LENGTH = 1024
#: Strides swept by the second plot (elements); stride >= 8 floats already costs 32 sectors.
SWEEP_STRIDES = tuple(range(0, 33))

_UNTOUCHED = "#DDDDDD"
_LANE_Y, _SECTOR_Y, _BOX_H = 1.0, 0.0, 0.5


def addresses_for(pattern: str, *, element_bytes: int = 4, stride: int = 1, offset: int = 0,
                  struct_bytes: int = 12, field: int = 0, ld: int = 256) -> list[int]:
    """The 32 byte addresses of ``pattern``, built with the pattern helpers of
    :mod:`gpu_lessons.memory` (AoS: field ``k`` sits ``k x element_bytes`` bytes into the struct)."""
    pattern = _validate.choice("pattern", pattern, PATTERNS)
    if pattern == "stride":
        return memory.strided(stride, element_bytes=element_bytes, offset=offset)
    if pattern == "offset":
        return memory.strided(1, element_bytes=element_bytes, offset=offset)
    if pattern == "aos":
        return memory.aos_field(struct_bytes, field * element_bytes)
    if pattern == "soa":
        return memory.soa_field(field, length=SOA_LENGTH, element_bytes=element_bytes)
    if pattern == "row":
        return memory.matrix_row(0, ld=ld, element_bytes=element_bytes)
    return memory.matrix_column(0, ld=ld, element_bytes=element_bytes)


class CoalescingExplorer(Explorer):
    title = "Coalescing: which 32-byte sectors does one warp's load touch?"

    def __init__(self, pattern="stride", stride=1, *, offset=0, element_bytes=4,
                 struct_bytes=12, field=0, ld=256):
        _validate.choice("pattern", pattern, PATTERNS)
        _validate.choice("element_bytes", element_bytes, memory.ACCESS_SIZES)
        # The sliders would silently clamp a value outside their range: refuse it instead.
        stride = _validate.integer("stride", stride, low=0, high=64)
        offset = _validate.integer("offset", offset, low=0, high=128)
        struct_bytes = _validate.integer("struct_bytes", struct_bytes, low=1, high=64)
        field = _validate.integer("field", field, low=0, high=15)
        ld = _validate.integer("ld", ld, low=memory.WARP_SIZE, high=512)
        self.result: memory.GlobalLoad | None = None

        self.lanes = ColumnDataSource(dict(x=[], lane=[], address=[], sector=[]))
        self.sectors = ColumnDataSource(dict(x=[], width=[], color=[], sector=[], first=[],
                                             last=[], lanes=[], n_lanes=[], label=[]))
        self.lines = ColumnDataSource(dict(x=[], width=[], line=[], first=[], label=[]))
        self.links = ColumnDataSource(dict(x0=[], y0=[], x1=[], y1=[]))
        self.sweep = ColumnDataSource(dict(stride=[], sectors=[], efficiency=[]))
        self.current = ColumnDataSource(dict(stride=[], sectors=[]))
        self.level = ColumnDataSource(dict(stride=[], sectors=[]))

        pic = figure(height=300, width=640, toolbar_location=None,
                     x_range=Range1d(-0.5, memory.WARP_SIZE + 0.5), y_range=Range1d(-0.9, 1.5),
                     title="lanes (top) → 32-byte sectors in 128-byte lines (bottom)")
        pic.axis.visible = False
        pic.grid.visible = False
        pic.segment("x0", "y0", "x1", "y1", source=self.links, color=PALETTE[0], alpha=0.45)
        lanes = pic.rect("x", _LANE_Y, width=0.9, height=_BOX_H, source=self.lanes,
                         fill_color=PALETTE[0], line_color="white")
        pic.text("x", _LANE_Y, text="lane", source=self.lanes, text_align="center",
                 text_baseline="middle", text_color="white", text_font_size="7pt")
        pic.rect("x", _SECTOR_Y, width="width", height=0.75, source=self.lines,
                 fill_alpha=0, line_color=PALETTE[7], line_width=1.5)
        sectors = pic.rect("x", _SECTOR_Y, width="width", height=_BOX_H, source=self.sectors,
                           fill_color="color", line_color="white")
        pic.text("x", _SECTOR_Y, text="label", source=self.sectors, text_align="center",
                 text_baseline="middle", text_font_size="8pt")
        pic.text("x", -0.6, text="label", source=self.lines, text_align="center",
                 text_baseline="middle", text_font_size="8pt")
        pic.add_tools(HoverTool(renderers=[lanes], tooltips=[
            ("lane", "@lane"), ("address", "@address B"), ("sector", "@sector")]))
        pic.add_tools(HoverTool(renderers=[sectors], tooltips=[
            ("sector", "@sector (bytes @first–@last)"), ("lanes reading it", "@lanes"),
            ("lanes", "@n_lanes")]))

        curve = figure(height=300, width=380, toolbar_location=None,
                       x_axis_label="stride (elements)", y_axis_label="sectors per request",
                       y_range=Range1d(0, memory.WARP_SIZE + 2),
                       title="sectors per request vs stride")
        curve.line("stride", "sectors", source=self.sweep, color=PALETTE[0], line_width=2,
                   legend_label="strided, this element size")
        dots = curve.scatter("stride", "sectors", source=self.sweep, color=PALETTE[0], size=4)
        curve.line("stride", "sectors", source=self.level, color=PALETTE[3], line_width=1.5,
                   line_dash="dashed", legend_label="this pattern")
        curve.scatter("stride", "sectors", source=self.current, color=PALETTE[3], size=11)
        curve.legend.location = "bottom_right"
        curve.add_tools(HoverTool(renderers=[dots], tooltips=[
            ("stride", "@stride elements"), ("sectors", "@sectors per request"),
            ("efficiency", "@efficiency{0.0} %")]))

        controls = {
            "pattern": dropdown("access pattern", [(v, k) for k, v in PATTERNS.items()],
                                pattern),
            "element_bytes": dropdown("element size (bytes)", list(memory.ACCESS_SIZES),
                                      element_bytes),
            "stride": slider("stride", stride, 0, 64, unit="elements"),
            "offset": slider("offset", offset, 0, 128, unit="bytes"),
            "struct_bytes": slider("AoS struct size", struct_bytes, 1, 64, unit="bytes"),
            "field": slider("field", field, 0, 15, unit="number, 0 = first"),
            "ld": slider("matrix row length ld", ld, memory.WARP_SIZE, 512, unit="elements"),
        }
        super().__init__(controls, [pic, curve], notes=(
            "Orange: sectors the load moves (the number is how many lanes read it); grey: "
            "sectors of the same 128-byte line that stay put.  Right: sectors per request of "
            "strided loads; the dashed line is the current pattern."))

    def _update(self):
        self.set_readout("")  # a refused state shows only the warning, not stale numbers
        v = self.control_values()
        pattern, e = v["pattern"], v["element_bytes"]
        self.use_only(USES[pattern], always=("pattern", "element_bytes"))
        g = memory.global_load(
            addresses_for(pattern, element_bytes=e, stride=v["stride"], offset=v["offset"],
                          struct_bytes=v["struct_bytes"], field=v["field"], ld=v["ld"]), e)
        self.result = g
        self._draw(g)

        sweep = _stride_sweep(e, v["offset"] if "offset" in USES[pattern] else 0)
        self.sweep.data = dict(stride=list(SWEEP_STRIDES), sectors=[r.sectors for r in sweep],
                               efficiency=[100 * r.efficiency for r in sweep])
        on_curve = pattern == "stride" and v["stride"] <= SWEEP_STRIDES[-1]
        self.current.data = dict(stride=[v["stride"]] if on_curve else [],
                                 sectors=[g.sectors] if on_curve else [])
        self.level.data = dict(stride=[SWEEP_STRIDES[0], SWEEP_STRIDES[-1]],
                               sectors=[g.sectors, g.sectors])

        share = " (above 100 %: lanes share bytes)" if g.efficiency > 1 else ""
        plural = "s" if g.sectors != 1 else ""
        self.set_readout(
            f"<b>{g.sectors} sector{plural}/request</b> ({binary_bytes(g.moved_bytes)} moved in "
            f"32-byte "
            f"sectors) "
            f"from {g.lines} × 128-byte line{'s' if g.lines != 1 else ''}; requested "
            f"{binary_bytes(g.requested_bytes)} ({g.active_lanes} lanes × "
            f"{binary_bytes(g.bytes_per_thread)}) → "
            f"efficiency <b>{percent(g.efficiency)}</b>{share}")

    def _draw(self, g: memory.GlobalLoad) -> None:
        """Lay the touched lines side by side (a gap marks skipped addresses) under the lanes."""
        readers: dict[int, list[int]] = {}
        for lane, s in enumerate(g.lane_sector):
            if s is not None:
                readers.setdefault(s, []).append(lane)
        line_ids = g.line_ids
        slot, slots, prev = {}, 0, None
        for line in line_ids:
            if prev is not None and line != prev + 1:
                slots += 1  # a blank slot: the lines are not adjacent in memory
            slot[line] = slots
            slots += memory.SECTORS_PER_LINE
            prev = line
        w = min(2.0, memory.WARP_SIZE / max(slots, 1))
        x0 = (memory.WARP_SIZE - slots * w) / 2 + w / 2

        sec = {k: [] for k in self.sectors.data}
        for line in line_ids:
            for i, s in enumerate(memory.line_sectors(line)):
                lanes = readers.get(s, [])
                sec["x"].append(x0 + (slot[line] + i) * w)
                sec["width"].append(0.92 * w)
                sec["color"].append(PALETTE[1] if lanes else _UNTOUCHED)
                sec["sector"].append(s)
                sec["first"].append(s * memory.SECTOR_BYTES)
                sec["last"].append((s + 1) * memory.SECTOR_BYTES - 1)
                sec["lanes"].append(lane_ranges(lanes) if lanes else "none")
                sec["n_lanes"].append(len(lanes))
                sec["label"].append(str(len(lanes)) if lanes and w >= 0.6 else "")
        self.sectors.data = sec

        few = len(line_ids) <= 8
        self.lines.data = dict(
            x=[x0 + (slot[ln] + (memory.SECTORS_PER_LINE - 1) / 2) * w for ln in line_ids],
            width=[memory.SECTORS_PER_LINE * w] * len(line_ids),
            line=list(line_ids), first=[ln * memory.LINE_BYTES for ln in line_ids],
            label=[f"@{binary_bytes(ln * memory.LINE_BYTES)}" if few else "" for ln in line_ids])

        sector_x = dict(zip(sec["sector"], sec["x"], strict=True))
        active = [(lane, a, s) for lane, (a, s) in enumerate(
            zip(g.addresses, g.lane_sector, strict=True)) if a is not None]
        self.lanes.data = dict(x=[lane + 0.5 for lane, _, _ in active],
                               lane=[str(lane) for lane, _, _ in active],
                               address=[a for _, a, _ in active],
                               sector=[s for _, _, s in active])
        self.links.data = dict(
            x0=[lane + 0.5 for lane, _, _ in active],
            y0=[_LANE_Y - _BOX_H / 2] * len(active),
            x1=[sector_x[s] for _, _, s in active],
            y1=[_SECTOR_Y + _BOX_H / 2] * len(active))


@functools.lru_cache(maxsize=64)
def _stride_sweep(element_bytes: int, offset: int) -> tuple[memory.GlobalLoad, ...]:
    """global_load of every stride in SWEEP_STRIDES (kept: it only depends on these two)."""
    return tuple(memory.global_load(memory.strided(s, element_bytes=element_bytes,
                                                   offset=offset), element_bytes)
                 for s in SWEEP_STRIDES)


def coalescing_explorer(pattern: str = "stride", stride: int = 1, **kwargs) -> CoalescingExplorer:
    """Explore one warp's global load: ``pattern`` is one of :data:`PATTERNS`; keyword
    arguments ``offset`` (bytes), ``element_bytes`` (1/2/4/8/16), ``struct_bytes``, ``field``
    and ``ld`` (elements per matrix row) set the other controls."""
    return CoalescingExplorer(pattern, stride, **kwargs)
