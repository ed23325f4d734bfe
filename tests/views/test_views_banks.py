"""The bank-conflict explorer shows the wavefronts one warp's shared load costs.

Independent references:
* ``tests/data/h200_ncu_memory.json``: Nsight Compute wavefronts and bank conflicts of one-warp
  shared loads on an H200 (``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum``,
  ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum``); every measured pattern the
  explorer can produce is checked, addresses included, against both the readout and the bars
  (sum over phases of the tallest bar = wavefronts).
* hand-derived cases (derivations in comments).
* direct calls of :func:`gpu_lessons.memory.shared_load`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from explorers import set_controls
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import memory
from gpu_lessons.views._base import PALETTE
from gpu_lessons.views.banks import (
    ELEMENT_SIZES,
    PATTERNS,
    USES,
    BankExplorer,
    bank_explorer,
    nway_colour,
)

HW = json.loads((Path(__file__).parents[1] / "data" / "h200_ncu_memory.json").read_text())


def _hw_settings(name: str, b: int) -> dict | None:
    """Explorer settings for a measured pattern (None: not one the explorer offers).  The test
    also compares the addresses, so a wrong mapping cannot pass."""
    if b not in ELEMENT_SIZES:
        return None
    if name.startswith("stride"):
        return dict(pattern="stride", stride=int(name[6:]), element_bytes=b)
    if name == "broadcast":
        return dict(pattern="broadcast", element_bytes=b)
    if name == "column_tile32":
        return dict(pattern="column", width=32, padding=0, column=0, element_bytes=b)
    if name == "column_tile33":
        return dict(pattern="column", width=32, padding=1, column=0, element_bytes=b)
    return None


HW_CASES = [(e["name"], e["bytes_per_thread"], e["addresses"], e["wavefronts"],
             e["bank_conflicts"])
            for e in HW["shared"] if _hw_settings(e["name"], e["bytes_per_thread"])]


@pytest.fixture(scope="module")
def ex() -> BankExplorer:
    return bank_explorer()


_set = set_controls


def _reset(ex):
    _set(ex, pattern="stride", element_bytes=4, stride=1, width=32, padding=0, column=0)


def _wavefronts_from_bars(ex) -> int:
    tallest: dict[str, int] = {}
    for phase, words in zip(ex.bars.data["phase"], ex.bars.data["words"], strict=True):
        tallest[phase] = max(tallest.get(phase, 0), words)
    return sum(tallest.values())


# -- hardware ------------------------------------------------------------------------------------

def test_every_measured_pattern_the_explorer_offers_is_covered():
    # 4 B: 12 strides + broadcast + 2 tile columns; 8 B and 16 B: 7 strides + broadcast each
    assert len(HW_CASES) == 15 + 8 + 8


@pytest.mark.parametrize(("name", "b", "addresses", "wavefronts", "conflicts"), HW_CASES,
                         ids=[f"{c[0]}-{c[1]}B" for c in HW_CASES])
def test_matches_h200_nsight_compute(ex, name, b, addresses, wavefronts, conflicts):
    _reset(ex)
    _set(ex, **_hw_settings(name, b))
    assert ex.warning.value == ""
    assert ex.lanes.data["address"] == addresses
    plural = "s" if wavefronts != 1 else ""
    assert f"<b>{wavefronts} wavefront{plural}</b>" in ex.readout.value
    assert f"<b>{conflicts} bank conflict" in ex.readout.value
    assert _wavefronts_from_bars(ex) == wavefronts


# -- hand-derived --------------------------------------------------------------------------------

def test_stride_two_is_two_way():
    # lane i reads word 2i -> bank 2i mod 32: lanes i and i+16 share a bank with different words,
    # so every used bank serves 2 words: 2 wavefronts, 1 conflict, banks 0, 2, ..., 30 only
    ex = bank_explorer(2)
    assert ex.controls["pattern"].value == "stride"  # no padding given: the strided pattern
    assert sorted(set(ex.words.data["bank"])) == list(range(0, 32, 2))
    assert set(ex.words.data["ways"]) == {2}
    assert set(ex.words.data["color"]) == {PALETTE[6]}
    assert len(set(ex.words.data["y"])) == 2      # words 0..62 span two 128-byte rows
    assert ex.figures[0].yaxis.major_label_overrides == {0: "0 B", 1: "128 B"}
    assert "<b>2-way</b>" in ex.readout.value


def test_tile_column_and_padding():
    # T[32][32] floats: row i starts at 128 i bytes, so T[i][0] is in bank 0 for every i:
    # 32 rows of the grid, one cell each, all bank 0, 32-way
    ex = bank_explorer(pattern="column")
    assert ex.words.data["bank"] == [0] * 32
    assert len(set(ex.words.data["y"])) == 32
    assert set(ex.words.data["ways"]) == {32}
    assert "32 wavefronts" in ex.readout.value
    # T[32][33]: row i starts at 132 i bytes = word 33 i, bank i: one word per bank
    ex.controls["padding"].value = 1
    assert sorted(ex.words.data["bank"]) == list(range(32))
    assert set(ex.words.data["ways"]) == {1}
    assert set(ex.words.data["color"]) == {PALETTE[2]}
    assert "1 wavefront</b>" in ex.readout.value


def test_padding_alone_selects_the_tile_column():
    assert bank_explorer(padding=1).controls["pattern"].value == "column"


def test_eight_byte_loads_run_in_half_warps():
    # 32 consecutive doubles = 256 B: lanes 0-15 and 16-31 are two phases of 128 B, each
    # conflict-free -> 2 wavefronts, 0 conflicts; each lane reads two words (two cells, two links)
    ex = bank_explorer(element_bytes=8)
    assert len(ex.words.data["bank"]) == 64
    assert len(ex.links.data["x0"]) == 64
    assert sorted(set(ex.bars.data["phase"])) == ["phase 0 (lanes 0–15)", "phase 1 (lanes 16–31)"]
    assert set(ex.bars.data["words"]) == {1}
    assert "(lanes 0–15, 16–31)" in ex.readout.value


def test_broadcast_shares_one_word():
    ex = bank_explorer(pattern="broadcast")
    assert ex.words.data["label"] == ["32×"]
    assert ex.words.data["lanes"] == ["0–31"]


def test_nway_colours():
    assert nway_colour(1)[0] == PALETTE[2]
    assert nway_colour(2)[0] == PALETTE[6]
    assert nway_colour(3)[0] == nway_colour(4)[0] == PALETTE[1]
    assert nway_colour(8)[0] == PALETTE[3]
    assert nway_colour(32)[0] == PALETTE[4]


# -- the view shows the model's numbers ------------------------------------------------------------

@pytest.mark.parametrize(("settings", "addresses", "b"), [
    (dict(stride=4), memory.strided(4), 4),
    (dict(element_bytes=16, stride=3), memory.strided(3, element_bytes=16), 16),
    (dict(pattern="column", width=16, padding=3, column=5),
     memory.tile_column(5, width=16, padding=3), 4),
    (dict(pattern="column", element_bytes=8, padding=1),
     memory.tile_column(0, width=32, padding=1, element_bytes=8), 8),
    (dict(pattern="broadcast", element_bytes=16), memory.broadcast(0), 16),
])
def test_each_control_shows_the_model(ex, settings, addresses, b):
    _reset(ex)
    _set(ex, **settings)
    s = memory.shared_load(addresses, b)
    assert ex.result == s
    assert ex.lanes.data["banks"] == [", ".join(map(str, banks)) for banks in s.lane_banks]
    bars = {(p, bank): w for p, bank, w in zip(ex.bars.data["phase"], ex.bars.data["bank"],
                                               ex.bars.data["words"], strict=True)}
    phases = sorted({p for p, _ in bars})
    expected = {(phases[p], bank): w for p, row in enumerate(s.bank_words)
                for bank, w in enumerate(row) if w}
    assert bars == expected
    assert f"worst bank <b>{s.ways}-way</b>" in ex.readout.value


def test_irrelevant_controls_are_greyed_out(ex):
    for pattern, used in USES.items():
        _set(ex, pattern=pattern)
        for name in ("stride", "width", "padding", "column"):
            assert ex.controls[name].disabled == (name not in used)
    _reset(ex)


# -- robustness ---------------------------------------------------------------------------------

def test_extreme_control_values_never_raise(ex):
    for name, c in ex.controls.items():
        if hasattr(c, "min"):
            for v in (c.min, c.max):
                for pattern in [p for p in PATTERNS if name in USES[p]]:
                    for b in ELEMENT_SIZES:
                        _reset(ex)
                        _set(ex, pattern=pattern, element_bytes=b, **{name: v})
                        assert ex.readout.value or ex.warning.value
    _reset(ex)


def test_model_refusal_shows_as_warning(ex):
    _reset(ex)
    _set(ex, pattern="column", width=8, column=20)  # column 20 of an 8-wide tile
    assert "col must be &lt;= 7" in ex.warning.value  # the model's message, HTML-escaped
    assert ex.readout.value == ""
    _set(ex, column=7)
    assert ex.warning.value == "" and "wavefront" in ex.readout.value
    _reset(ex)


@pytest.mark.parametrize(("kwargs", "error", "names"), [
    (dict(pattern="zigzag"), ValueError, "pattern"),
    (dict(stride=-2), ValueError, "stride"),
    (dict(padding=33), ValueError, "padding"),
    (dict(element_bytes=2), ValueError, "element_bytes"),
    (dict(width="32"), TypeError, "width"),
    (dict(column=64), ValueError, "column"),
])
def test_bad_factory_arguments(kwargs, error, names):
    with pytest.raises(error, match=names):
        bank_explorer(**kwargs)


@settings(max_examples=25)
@given(b=st.sampled_from(ELEMENT_SIZES), stride=st.integers(0, 64))
def test_picture_always_agrees_with_the_model(ex, b, stride):
    _reset(ex)
    _set(ex, element_bytes=b, stride=stride)
    s = memory.shared_load(memory.strided(stride, element_bytes=b), b)
    assert _wavefronts_from_bars(ex) == s.wavefronts
    assert len(ex.links.data["x0"]) == sum(len(banks) for banks in s.lane_banks)
    assert set(ex.words.data["bank"]) == {bank for banks in s.lane_banks for bank in banks}
    for ways, colour in zip(ex.words.data["ways"], ex.words.data["color"], strict=True):
        assert colour == nway_colour(ways)[0]
    assert max(ex.words.data["ways"]) == s.ways
