"""Bank-conflict visualiser: one warp's shared-memory load drawn on the 32-bank grid.

Shared memory is 32 banks of 4-byte words; word ``w`` sits in bank ``w mod 32``, so the grid
has one column per bank and one row per 128 bytes.  Each word the warp reads is a cell,
coloured by how many *distinct* words its bank must deliver in that phase: 1 is
conflict-free, n is an n-way conflict that costs n wavefronts.  Lanes that read the same word
share it (a broadcast costs nothing).  Every count -- banks, phases, words per bank,
wavefronts, conflicts, the words each lane reads -- comes from
:func:`gpu_lessons.memory.shared_load`; the view only lays the words out, 32 to a row (one
column per bank).

The classic case (CUDA C++ Programming Guide, "Compute Capability 5.x → Shared Memory"; measured
on an H200 in ``tests/data/h200_ncu_memory.json``): reading a column of a ``float T[32][32]``
tile is a 32-way conflict (32 wavefronts); ``T[32][33]`` -- one element of padding per row --
is conflict-free (1 wavefront).
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, DataRange1d, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from .. import _validate, memory
from .._format import binary_bytes
from ._base import PALETTE, Explorer, dropdown, lane_ranges, slider

#: Access patterns: key -> label shown in the dropdown.
PATTERNS = {
    "stride": "strided: lane i reads element i × stride",
    "column": "column of a tile T[32][width + padding]: lane i reads T[i][column]",
    "broadcast": "broadcast: every lane reads element 0",
}
#: Which controls each pattern reads (the others are greyed out).
USES = {"stride": {"stride"}, "column": {"width", "padding", "column"}, "broadcast": set()}
#: Element sizes offered: 4-byte words and the 8- and 16-byte vector loads.
ELEMENT_SIZES = (4, 8, 16)

#: Colour for "this bank serves n distinct words in this phase": (largest n, colour, legend).
NWAY_COLOURS = ((1, PALETTE[2], "1 word: no conflict"), (2, PALETTE[6], "2-way"),
                (4, PALETTE[1], "3- to 4-way"), (8, PALETTE[3], "5- to 8-way"),
                (memory.WARP_SIZE * 4, PALETTE[4], "more than 8-way"))
PHASE_COLOURS = (PALETTE[0], PALETTE[5], PALETTE[2], PALETTE[4])

_EMPTY = "#EEEEEE"


def addresses_for(pattern: str, *, element_bytes: int = 4, stride: int = 1, width: int = 32,
                  padding: int = 0, column: int = 0) -> list[int]:
    """The 32 byte addresses of ``pattern``, from the helpers of :mod:`gpu_lessons.memory`."""
    pattern = _validate.choice("pattern", pattern, PATTERNS)
    if pattern == "stride":
        return memory.strided(stride, element_bytes=element_bytes)
    if pattern == "column":
        return memory.tile_column(column, width=width, padding=padding,
                                  element_bytes=element_bytes)
    return memory.broadcast(0)


def nway_colour(n: int) -> tuple[str, str]:
    """(colour, legend label) for a bank that serves ``n`` distinct words in one phase."""
    for top, colour, label in NWAY_COLOURS:
        if n <= top:
            return colour, label
    return NWAY_COLOURS[-1][1:]


class BankExplorer(Explorer):
    title = "Shared-memory banks: which bank serves each lane, and how many words per bank?"

    def __init__(self, stride=1, padding=0, *, pattern=None, element_bytes=4, width=32,
                 column=0):
        pattern = ("column" if padding else "stride") if pattern is None else pattern
        _validate.choice("pattern", pattern, PATTERNS)
        _validate.choice("element_bytes", element_bytes, ELEMENT_SIZES)
        # The sliders would silently clamp a value outside their range: refuse it instead.
        stride = _validate.integer("stride", stride, low=0, high=64)
        padding = _validate.integer("padding", padding, low=0, high=32)
        width = _validate.integer("width", width, low=1, high=64)
        column = _validate.integer("column", column, low=0, high=63)
        self.result: memory.SharedLoad | None = None

        self.grid = ColumnDataSource(dict(bank=[], y=[]))
        self.words = ColumnDataSource(dict(bank=[], y=[], color=[], nway=[], ways=[], label=[],
                                           lanes=[], address=[], phase=[]))
        self.lanes = ColumnDataSource(dict(x=[], y=[], h=[], lane=[], address=[], banks=[],
                                           phase=[]))
        self.links = ColumnDataSource(dict(x0=[], y0=[], x1=[], y1=[]))
        self.bars = ColumnDataSource(dict(x=[], bank=[], words=[], width=[], color=[],
                                          phase=[]))

        self.ticker = FixedTicker(ticks=[])
        pic = figure(height=420, width=620, toolbar_location=None,
                     x_range=Range1d(-0.6, memory.BANKS - 0.4), y_range=Range1d(1, -2),
                     x_axis_label="bank (4-byte words; bank = word mod 32)",
                     y_axis_label="row of 128 bytes (byte address of its first word)",
                     title="lanes (top) → the words they read in the 32-bank grid")
        pic.yaxis.ticker = self.ticker
        pic.xaxis.ticker = FixedTicker(ticks=list(range(0, memory.BANKS, 4)))
        pic.grid.visible = False
        pic.rect("bank", "y", width=0.94, height=0.9, source=self.grid, fill_color=_EMPTY,
                 line_color=None)
        pic.segment("x0", "y0", "x1", "y1", source=self.links, color=PALETTE[0], alpha=0.3)
        cells = pic.rect("bank", "y", width=0.94, height=0.9, source=self.words,
                         fill_color="color", line_color=None, legend_field="nway")
        pic.text("bank", "y", text="label", source=self.words, text_align="center",
                 text_baseline="middle", text_font_size="7pt")
        lanes = pic.rect("x", "y", width=0.9, height="h", source=self.lanes,
                         fill_color=PALETTE[0], line_color="white")
        pic.text("x", "y", text="lane", source=self.lanes, text_align="center",
                 text_baseline="middle", text_color="white", text_font_size="7pt")
        legend = pic.legend[0]
        pic.center.remove(legend)
        pic.add_layout(legend, "below")
        legend.orientation = "horizontal"
        pic.add_tools(HoverTool(renderers=[cells], tooltips=[
            ("bank", "@bank"), ("word at", "@address B"), ("read by lanes", "@lanes"),
            ("phase", "@phase"), ("this bank in this phase", "@ways distinct words")]))
        pic.add_tools(HoverTool(renderers=[lanes], tooltips=[
            ("lane", "@lane"), ("address", "@address B"), ("banks", "@banks"),
            ("phase", "@phase")]))

        per_bank = figure(height=420, width=400, toolbar_location=None,
                          x_range=Range1d(-0.6, memory.BANKS - 0.4),
                          y_range=DataRange1d(start=0, range_padding=0.1),
                          x_axis_label="bank", y_axis_label="distinct words the bank serves",
                          title="distinct words per bank, per phase")
        per_bank.yaxis.ticker.min_interval = 1  # word counts are whole numbers
        bars = per_bank.vbar(x="x", top="words", width="width", source=self.bars,
                             color="color", legend_field="phase")
        bar_legend = per_bank.legend[0]
        per_bank.center.remove(bar_legend)
        per_bank.add_layout(bar_legend, "below")
        per_bank.add_tools(HoverTool(renderers=[bars], tooltips=[
            ("bank", "@bank"), ("phase", "@phase"), ("distinct words", "@words")]))
        self.per_bank = per_bank

        controls = {
            "pattern": dropdown("access pattern", [(v, k) for k, v in PATTERNS.items()],
                                pattern),
            "element_bytes": dropdown("element size (bytes)", list(ELEMENT_SIZES),
                                      element_bytes),
            "stride": slider("stride", stride, 0, 64, unit="elements"),
            "width": slider("tile width", width, 1, 64, unit="elements"),
            "padding": slider("padding per tile row", padding, 0, 32, unit="elements"),
            "column": slider("column read", column, 0, 63, unit="index"),
        }
        super().__init__(controls, [pic, per_bank], notes=(
            "A cell is a 4-byte word; its number is the lane that reads it (or how many "
            "lanes share it).  Colour: how many distinct words that bank serves in the "
            "same phase — an n-way conflict costs n wavefronts.  8- and 16-byte loads are "
            "served in half- and quarter-warp phases of 128 bytes each."))

    def _update(self):
        self.set_readout("")  # a refused state shows only the warning, not stale numbers
        v = self.control_values()
        pattern, e = v["pattern"], v["element_bytes"]
        self.use_only(USES[pattern], always=("pattern", "element_bytes"))
        s = memory.shared_load(
            addresses_for(pattern, element_bytes=e, stride=v["stride"], width=v["width"],
                          padding=v["padding"], column=v["column"]), e)
        self.result = s
        self._draw(s)

        groups = _lanes_by_phase(s)
        phases = ", ".join(lane_ranges(lanes) for lanes in groups.values())
        self.set_readout(
            f"<b>{s.wavefronts} wavefront{'s' if s.wavefronts != 1 else ''}</b> "
            f"(ideal {s.ideal_wavefronts}) → <b>{s.bank_conflicts} bank "
            f"conflict{'s' if s.bank_conflicts != 1 else ''}</b>, worst bank "
            f"<b>{s.ways}-way</b>; {s.phases} phase{'s' if s.phases != 1 else ''} "
            f"(lanes {phases}) of {binary_bytes(s.bytes_per_thread)} per lane")

    def _draw(self, s: memory.SharedLoad) -> None:
        # word -> (bank, lanes reading it, phases it is read in); words and banks are the model's
        words: dict[int, list] = {}
        for lane, (lane_words, banks) in enumerate(zip(s.lane_words, s.lane_banks, strict=True)):
            for w, bank in zip(lane_words, banks, strict=True):
                entry = words.setdefault(w, [bank, [], set()])
                entry[1].append(lane)
                entry[2].add(s.lane_phase[lane])
        rows = sorted({_row(w) for w in words})
        y_of = {r: i for i, r in enumerate(rows)}

        self.grid.data = dict(bank=[b for _ in rows for b in range(memory.BANKS)],
                              y=[y for y in range(len(rows)) for _ in range(memory.BANKS)])
        cols = {k: [] for k in self.words.data}
        cell_y = {}
        for w, (bank, lanes, phases) in sorted(words.items()):
            ways = max(s.bank_words[p][bank] for p in phases)
            colour, label = nway_colour(ways)
            y = y_of[_row(w)]
            cell_y[w] = y
            cols["bank"].append(bank)
            cols["y"].append(y)
            cols["color"].append(colour)
            cols["nway"].append(label)
            cols["ways"].append(ways)
            cols["label"].append(str(lanes[0]) if len(lanes) == 1 else f"{len(lanes)}×")
            cols["lanes"].append(lane_ranges(lanes))
            cols["address"].append(w * memory.BANK_BYTES)
            cols["phase"].append(", ".join(str(p) for p in sorted(phases)))
        self.words.data = cols

        # The lane row keeps a readable height however many grid rows there are.
        n = len(rows)
        lane_h = max(0.8, n / 10)
        lane_y = -0.7 - lane_h / 2
        active = [(lane, a) for lane, a in enumerate(s.addresses) if a is not None]
        self.lanes.data = dict(
            x=[lane for lane, _ in active], y=[lane_y] * len(active),
            h=[lane_h] * len(active), lane=[str(lane) for lane, _ in active],
            address=[a for _, a in active],
            banks=[", ".join(str(b) for b in s.lane_banks[lane]) for lane, _ in active],
            phase=[s.lane_phase[lane] for lane, _ in active])
        x0, y0, x1, y1 = [], [], [], []
        for lane, _ in active:
            for w, bank in zip(s.lane_words[lane], s.lane_banks[lane], strict=True):
                x0.append(lane)
                y0.append(lane_y + lane_h / 2)
                x1.append(bank)
                y1.append(cell_y[w] - 0.45)
        self.links.data = dict(x0=x0, y0=y0, x1=x1, y1=y1)

        self.ticker.ticks = list(range(0, n, 1 if n <= 16 else 4))  # labels must not overlap
        self.figures[0].yaxis.major_label_overrides = {
            i: binary_bytes(r * memory.WAVEFRONT_BYTES) for i, r in enumerate(rows)}
        self.figures[0].y_range.start = n - 0.5
        self.figures[0].y_range.end = lane_y - lane_h / 2 - 0.1

        groups = _lanes_by_phase(s)
        width = 0.9 / max(s.phases, 1)
        bars = {k: [] for k in self.bars.data}
        for p, counts in enumerate(s.bank_words):
            label = f"phase {p}" + (f" (lanes {lane_ranges(groups[p])})" if p in groups else "")
            for bank, n_words in enumerate(counts):
                if not n_words:
                    continue
                bars["x"].append(bank + (p - (s.phases - 1) / 2) * width)
                bars["bank"].append(bank)
                bars["words"].append(n_words)
                bars["width"].append(0.95 * width)
                bars["color"].append(PHASE_COLOURS[p % len(PHASE_COLOURS)])
                bars["phase"].append(label)
        self.bars.data = bars


def _row(word: int) -> int:
    """The grid row of a word: the grid is one column per bank, so a row holds BANKS words
    (128 bytes, one wavefront's worth)."""
    return word // memory.BANKS


def _lanes_by_phase(s: memory.SharedLoad) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for lane, p in enumerate(s.lane_phase):
        if p is not None:
            groups.setdefault(p, []).append(lane)
    return groups


def bank_explorer(stride: int = 1, padding: int = 0, **kwargs) -> BankExplorer:
    """Explore one warp's shared-memory load.  ``padding`` > 0 without a ``pattern`` shows a
    tile column (``T[32][width + padding]``); otherwise lanes read every ``stride``-th element.
    Keyword arguments: ``pattern`` (one of :data:`PATTERNS`), ``element_bytes`` (4/8/16),
    ``width`` (tile width, elements) and ``column``."""
    return BankExplorer(stride, padding, **kwargs)
