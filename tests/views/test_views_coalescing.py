"""The coalescing explorer shows what one warp's global load really costs.

Independent references:
* ``tests/data/h200_ncu_memory.json``: Nsight Compute sector counts of one-warp loads on an H200
  (``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum``); every pattern the explorer can produce is
  checked against it, addresses included.
* hand-derived cases (derivations in comments).
* direct calls of :func:`gpu_lessons.memory.global_load`: the picture and the readout must show
  the model's numbers, not numbers of their own.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from explorers import set_controls
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import memory
from gpu_lessons._format import binary_bytes
from gpu_lessons.views._base import PALETTE
from gpu_lessons.views.coalescing import (
    PATTERNS,
    SWEEP_STRIDES,
    USES,
    CoalescingExplorer,
    coalescing_explorer,
)

HW = json.loads((Path(__file__).parents[1] / "data" / "h200_ncu_memory.json").read_text())


def _hw_settings(name: str, b: int) -> dict | None:
    """Explorer settings that reproduce a measured pattern (None: not an explorer pattern).
    The test below also checks that the addresses match, so a wrong mapping cannot pass."""
    if name.startswith("stride"):
        return dict(pattern="stride", stride=int(name[6:]), element_bytes=b)
    if name == "broadcast":
        return dict(pattern="stride", stride=0, element_bytes=b)
    if name.endswith(("_offset1", "_offset2", "_offset3", "_offset4", "_offset8", "_offset16",
                      "_offset31", "_offset32")) or name == "offset1":
        elements = int(name.rsplit("offset", 1)[1])
        return dict(pattern="offset", offset=elements * b, element_bytes=b)
    if name == "aos_12B_field1":
        return dict(pattern="aos", struct_bytes=12, field=1, element_bytes=b)
    if name == "aos_16B_field0":
        return dict(pattern="aos", struct_bytes=16, field=0, element_bytes=b)
    if name == "column_ld33":
        return dict(pattern="column", ld=33, element_bytes=b)
    return None


HW_CASES = [(e["name"], e["bytes_per_thread"], e["addresses"], e["sectors"])
            for e in HW["global"] if _hw_settings(e["name"], e["bytes_per_thread"])]


@pytest.fixture(scope="module")
def ex() -> CoalescingExplorer:
    return coalescing_explorer()


_set = set_controls


def _reset(ex):
    _set(ex, pattern="stride", element_bytes=4, stride=1, offset=0, struct_bytes=12, field=0,
         ld=256)


def _touched(ex) -> list[int]:
    d = ex.sectors.data
    return [s for s, c in zip(d["sector"], d["color"], strict=True) if c == PALETTE[1]]


# -- hardware ------------------------------------------------------------------------------------

def test_every_measured_pattern_the_explorer_offers_is_covered():
    # 8 strides x 3 sizes, 4 strides x 2 sizes (1 and 2 bytes), 3 broadcasts, 13 offsets
    # (7 float, 3 double, 1 float4, 1 byte, 1 half), 2 AoS, 1 matrix column
    assert len(HW_CASES) == 24 + 8 + 3 + 13 + 2 + 1


@pytest.mark.parametrize(("name", "b", "addresses", "sectors"), HW_CASES,
                         ids=[f"{n}-{b}B" for n, b, _, _ in HW_CASES])
def test_matches_h200_nsight_compute(ex, name, b, addresses, sectors):
    _reset(ex)
    _set(ex, **_hw_settings(name, b))
    assert ex.warning.value == ""
    assert ex.lanes.data["address"] == addresses          # the explorer built that very pattern
    assert len(_touched(ex)) == sectors                    # orange boxes = measured sectors
    assert f"<b>{sectors} sector" in ex.readout.value
    assert sum(ex.sectors.data["n_lanes"]) == memory.WARP_SIZE  # every lane lands somewhere


# -- hand-derived --------------------------------------------------------------------------------

def test_default_is_one_full_line():
    # lane i reads bytes 4i..4i+3: 128 consecutive bytes = sectors 0-3 of line 0, 8 lanes each,
    # requested 128 B = moved 128 B -> 100 %
    ex = coalescing_explorer()
    assert _touched(ex) == [0, 1, 2, 3]
    assert ex.sectors.data["n_lanes"] == [8, 8, 8, 8]
    assert ex.lines.data["line"] == [0]
    assert "requested 128 B" in ex.readout.value and "128 B moved" in ex.readout.value
    assert "100 %" in ex.readout.value


def test_misaligned_by_one_float():
    # offset 4: lanes read bytes 4..131 -> sector 0 has lanes 0-6 (bytes 4..31), sectors 1-3 have
    # 8 each, sector 4 (line 1) has lane 31 alone; 5 sectors = 160 B moved for 128 B -> 80 %
    ex = coalescing_explorer("offset", offset=4)
    assert _touched(ex) == [0, 1, 2, 3, 4]
    touched_lanes = [n for n in ex.sectors.data["n_lanes"] if n]
    assert touched_lanes == [7, 8, 8, 8, 1]
    assert ex.lines.data["line"] == [0, 1]
    # line 1's other three sectors are drawn but not moved
    assert ex.sectors.data["color"][5:] == ["#DDDDDD"] * 3
    assert "80 %" in ex.readout.value


def test_broadcast_efficiency_above_100():
    # stride 0: 32 lanes x 4 B = 128 B requested from one 32 B sector -> 400 %
    ex = coalescing_explorer(stride=0)
    assert _touched(ex) == [0]
    assert "400 %" in ex.readout.value and "lanes share bytes" in ex.readout.value


def test_far_apart_lines_are_drawn_with_gaps():
    # stride 64 floats = 256 B: every lane its own line, lines 0, 2, 4, ... -> 32 lines, each
    # followed by a blank slot, all inside the lane row's width
    ex = coalescing_explorer(stride=64)
    assert ex.lines.data["line"] == list(range(0, 64, 2))
    xs = ex.lines.data["x"]
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(xs)}
    assert len(gaps) == 1  # evenly spaced: 4 sectors + 1 blank slot each
    assert min(ex.sectors.data["x"]) > -0.5 and max(ex.sectors.data["x"]) < memory.WARP_SIZE + 0.5


def test_links_end_at_each_lanes_sector():
    ex = coalescing_explorer(stride=3)
    sector_x = dict(zip(ex.sectors.data["sector"], ex.sectors.data["x"], strict=True))
    for lane, x1 in enumerate(ex.links.data["x1"]):
        # lane i reads byte 12 i, in sector 12 i // 32
        assert x1 == sector_x[12 * lane // 32]


# -- the view shows the model's numbers ------------------------------------------------------------

@pytest.mark.parametrize(("control", "value", "addresses"), [
    ("stride", 5, memory.strided(5)),
    ("offset", 64, memory.strided(1, offset=64)),
    ("element_bytes", 8, memory.strided(1, element_bytes=8)),
    ("element_bytes", 1, memory.strided(1, element_bytes=1)),
])
def test_each_control_moves_the_picture_as_the_model_says(ex, control, value, addresses):
    _reset(ex)
    before = _touched(ex)
    ex.controls[control].value = value
    g = memory.global_load(addresses, ex.controls["element_bytes"].value)
    assert tuple(_touched(ex)) == g.sector_ids
    assert len(set(ex.lines.data["line"])) == g.lines
    assert _touched(ex) != before
    assert ex.result == g


@pytest.mark.parametrize(("pattern", "extra", "addresses"), [
    ("aos", dict(struct_bytes=16, field=2), memory.aos_field(16, 8)),
    ("soa", dict(field=3), memory.soa_field(3, length=1024)),
    ("row", dict(ld=100), memory.matrix_row(0, ld=100)),
    ("column", dict(ld=40), memory.matrix_column(0, ld=40)),
])
def test_patterns_use_the_models_helpers(ex, pattern, extra, addresses):
    _reset(ex)
    _set(ex, pattern=pattern, **extra)
    g = memory.global_load(addresses, 4)
    assert ex.lanes.data["address"] == addresses
    assert tuple(_touched(ex)) == g.sector_ids
    assert f"requested {binary_bytes(g.requested_bytes)}" in ex.readout.value
    assert f"({binary_bytes(g.moved_bytes)} moved" in ex.readout.value
    assert f"efficiency <b>{100 * g.efficiency:.3g} %</b>" in ex.readout.value


def test_sweep_is_the_model_over_strides(ex):
    _reset(ex)
    _set(ex, element_bytes=8, stride=3)
    expected = [memory.global_load(memory.strided(s, element_bytes=8), 8).sectors
                for s in SWEEP_STRIDES]
    assert ex.sweep.data["sectors"] == expected
    assert ex.current.data == {"stride": [3], "sectors": [24]}  # H200: stride3, 8 B -> 24
    assert ex.level.data["sectors"] == [24, 24]
    _set(ex, pattern="column")  # not on the strided curve: no dot, only the dashed level
    assert ex.current.data["stride"] == []
    assert ex.level.data["sectors"] == [32, 32]


def test_irrelevant_controls_are_greyed_out(ex):
    for pattern, used in USES.items():
        _set(ex, pattern=pattern)
        for name in ("stride", "offset", "struct_bytes", "field", "ld"):
            assert ex.controls[name].disabled == (name not in used), (pattern, name)
    _reset(ex)


# -- robustness ---------------------------------------------------------------------------------

def test_extreme_control_values_never_raise(ex):
    for name, c in ex.controls.items():
        if hasattr(c, "min"):
            for v in (c.min, c.max):
                for pattern in [p for p in PATTERNS if name in USES[p]]:
                    _reset(ex)
                    _set(ex, pattern=pattern, **{name: v})
                    assert ex.readout.value or ex.warning.value
    _reset(ex)


@pytest.mark.parametrize(("settings", "says"), [
    (dict(offset=2), "not aligned"),                              # a float 2 bytes in
    (dict(element_bytes=16, pattern="aos", struct_bytes=12), "not aligned"),
    (dict(pattern="aos", struct_bytes=4, field=1), "field_offset"),  # field past the struct
])
def test_model_refusals_show_as_warning(ex, settings, says):
    _reset(ex)
    _set(ex, **settings)
    assert says in ex.warning.value
    assert ex.readout.value == ""  # no stale numbers next to the warning
    _reset(ex)
    assert ex.warning.value == "" and "sector" in ex.readout.value


@pytest.mark.parametrize(("kwargs", "error", "names"), [
    (dict(pattern="diagonal"), ValueError, "pattern"),
    (dict(stride=-1), ValueError, "stride"),
    (dict(stride=65), ValueError, "stride"),
    (dict(stride=1.5), TypeError, "stride"),
    (dict(element_bytes=3), ValueError, "element_bytes"),
    (dict(offset=1000), ValueError, "offset"),
    (dict(ld=8), ValueError, "ld"),
])
def test_bad_factory_arguments(kwargs, error, names):
    with pytest.raises(error, match=names):
        coalescing_explorer(**kwargs)


@settings(max_examples=25)
@given(b=st.sampled_from(memory.ACCESS_SIZES), stride=st.integers(0, 64),
       offset_elements=st.integers(0, 128 // 16))
def test_picture_always_agrees_with_the_model(ex, b, stride, offset_elements):
    _reset(ex)
    _set(ex, element_bytes=b, stride=stride, offset=offset_elements * b)
    g = memory.global_load(memory.strided(stride, element_bytes=b, offset=offset_elements * b), b)
    assert tuple(_touched(ex)) == g.sector_ids
    # every drawn line is whole (4 sectors) and contains a touched sector
    assert len(ex.sectors.data["sector"]) == 4 * len(ex.lines.data["line"]) == 4 * g.lines
    assert sum(ex.sectors.data["n_lanes"]) == g.active_lanes
    assert len(ex.links.data["x0"]) == g.active_lanes
