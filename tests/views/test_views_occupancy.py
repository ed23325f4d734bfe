"""Occupancy explorer: the readout and the three curves show the occupancy model's numbers.

References: the CUDA runtime on an H200 (``cuOccupancyMaxActiveBlocksPerMultiprocessor``,
tests/data/h200_occupancy.json), the CUDA C++ Best Practices Guide §11.1.1 example (CC 7.0,
37 registers: 128 threads → 75 %, 320 threads → 63 %), hand derivations from the compute-capability rules, and
direct calls of :mod:`gpu_lessons.occupancy`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.occupancy import (
    compute_capabilities,
    occupancy,
    occupancy_vs_block_size,
    occupancy_vs_registers,
    occupancy_vs_shared_mem,
)
from gpu_lessons.views.occupancy import CARVEOUTS, occupancy_explorer

H200_DATA = Path(__file__).parents[1] / "data" / "h200_occupancy.json"
SLIDERS = ("threads_per_block", "registers_per_thread", "shared_mem_per_block")


DEFAULTS = dict(target="cc:9.0", threads_per_block=256, registers_per_thread=40,
                shared_mem_per_block=4096, carveout=-1, opt_in=True)


@pytest.fixture(scope="module")
def shared():
    """One explorer reused by the tests (building one serialises three bokeh figures)."""
    return occupancy_explorer()


@pytest.fixture
def ex(shared):
    """The shared explorer, back in the factory's default state."""
    _set(shared, **DEFAULTS)
    return shared


def _set(ex, **values):
    for k, v in values.items():
        ex.controls[k].value = v


def _marker(ex, parameter):
    d = ex.marker_sources[parameter].data
    return d["x"][0], d["occupancy"][0]


# -- published and measured references ----------------------------------------------------------

def test_default_is_the_65536_over_64_example_corrected():
    ex = occupancy_explorer()
    assert ex.warning.value == ""
    # docs/misconceptions.md M19 (CUDA C++ Programming Guide, "Compute Capabilities"; the
    # CC 9.0 register file is 4 sub-partitions of 16,384): 40 regs × 32 = 1280 per warp;
    # 4 × ⌊16384 / 1280⌋ = 48 warps/SM;
    # 256-thread blocks are 8 warps -> 6 blocks, 48 of 64 warps = 75 %, registers bind.
    r = ex.result
    assert (r.blocks_per_sm, r.warps_per_sm, r.limiter) == (6, 48, "registers")
    text = ex.readout.value
    assert "6 blocks/SM" in text and "48 of 64 warps/SM" in text and "75 %" in text
    assert "limited by <b>registers</b>" in text
    # Each limit's block count: warps 64/8 = 8; shared (4096 + 1024) -> 5120 B,
    # 233472 // 5120 = 45; blocks 32.
    for name, blocks in (("warps", 8), ("registers", 6), ("shared memory", 45), ("blocks", 32)):
        row = (f"■</span> {name}</b></td><td><b>{blocks}</b></td>" if name == "registers"
               else f"■</span> {name}</td><td>{blocks}</td>")   # the binding limit is bold
        assert row in text
    assert _marker(ex, "threads_per_block") == (256, 75.0)
    assert _marker(ex, "registers_per_thread") == (40, 75.0)
    assert _marker(ex, "shared_mem_per_block") == (4.0, 75.0)   # 4096 B shown as 4 KiB


@pytest.mark.parametrize("threads,blocks,percent", [(128, 12, 75.0), (320, 4, 62.5)])
def test_best_practices_guide_example(ex, threads, blocks, percent):
    # CUDA C++ Best Practices Guide §11.1.1: CC 7.0, 37 registers/thread.
    _set(ex, target="cc:7.0", threads_per_block=threads, registers_per_thread=37,
         shared_mem_per_block=0)
    assert ex.result.blocks_per_sm == blocks
    assert _marker(ex, "threads_per_block")[1] == pytest.approx(percent)
    assert ex.result.limiter == "registers"


def _runtime_rows():
    data = json.loads(H200_DATA.read_text())
    cols = data["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in data["rows"]]
    keep = [r for r in rows if r["blocks_per_sm"] >= 0 and r["threads_per_block"] % 32 == 0
            and (-1 if r["carveout"] is None else r["carveout"]) in CARVEOUTS]
    return keep[:: max(1, len(keep) // 40)]  # ~40 rows spread over the whole grid


def test_matches_the_cuda_runtime_on_an_h200(shared):
    ex = shared
    _set(ex, target="gpu:H200 SXM", opt_in=True)
    rows = _runtime_rows()
    assert len(rows) >= 30
    for rec in rows:
        smem = rec["static_smem"] + rec["dynamic_smem"]
        _set(ex, threads_per_block=rec["threads_per_block"],
             registers_per_thread=rec["registers_per_thread"], shared_mem_per_block=smem,
             carveout=-1 if rec["carveout"] is None else rec["carveout"])
        assert ex.controls["shared_mem_per_block"].value == smem
        assert ex.result.blocks_per_sm == rec["blocks_per_sm"], rec
        assert f"{rec['blocks_per_sm']} blocks/SM" in ex.readout.value


# -- each control, against direct model calls ----------------------------------------------------

def _check_against_model(ex):
    c = ex.controls
    kind, _, name = c["target"].value.partition(":")
    where = {kind: name}
    common = dict(carveout=c["carveout"].value, opt_in=c["opt_in"].value)
    t, r, s = (c[k].value for k in SLIDERS)
    want = occupancy(**where, threads_per_block=t, registers_per_thread=r,
                     shared_mem_per_block=s, **common)
    assert ex.result == want
    curves = {
        "threads_per_block": occupancy_vs_block_size(**where, registers_per_thread=r,
                                                     shared_mem_per_block=s, **common),
        "registers_per_thread": occupancy_vs_registers(**where, threads_per_block=t,
                                                       shared_mem_per_block=s, **common),
        "shared_mem_per_block": occupancy_vs_shared_mem(**where, threads_per_block=t,
                                                        registers_per_thread=r, **common),
    }
    for parameter, curve in curves.items():
        d = ex.curve_sources[parameter].data
        scale = 1024 if parameter == "shared_mem_per_block" else 1
        np.testing.assert_allclose(np.asarray(d["x"]) * scale, curve.x)
        np.testing.assert_allclose(d["occupancy"], curve.occupancy * 100)
        assert list(d["limiter"]) == list(curve.limiter)
        assert _marker(ex, parameter)[1] == pytest.approx(want.occupancy * 100)
    return want


@pytest.mark.parametrize("control,value", [
    ("threads_per_block", 1024), ("registers_per_thread", 128),
    ("shared_mem_per_block", 100 * 1024), ("carveout", 0), ("carveout", 50),
    ("opt_in", False), ("target", "cc:8.6"), ("target", "gpu:RTX 4090"), ("target", "cc:7.5"),
])
def test_each_control_matches_the_model(ex, control, value):
    before = (ex.result, dict(ex.curve_sources["threads_per_block"].data))
    _set(ex, **{control: value})
    want = _check_against_model(ex)
    assert (want, dict(ex.curve_sources["threads_per_block"].data)) != before


def test_hand_derived_cases(ex):
    # 64 registers: 2048 per warp -> 4 × ⌊16384 / 2048⌋ = 32 warps; 1024 threads = 32 warps
    # -> 1 block, 50 %.
    _set(ex, registers_per_thread=64, threads_per_block=1024, shared_mem_per_block=0)
    assert (ex.result.blocks_per_sm, ex.result.occupancy) == (1, 0.5)
    # Carveout 50 % of 228 KB = 114 KB -> next legal size 132 KB = 135168 B; 30000 + 1024 B
    # -> 31104 B/block -> 4 blocks (16 regs, 256 threads: warps allow 8).
    _set(ex, registers_per_thread=32, threads_per_block=256, shared_mem_per_block=30000,
         carveout=50)
    assert ex.result.blocks_per_sm == 4 and ex.result.sm_shared_mem == 135168
    assert ex.result.limiter == "shared memory"
    assert "132 KiB" in ex.readout.value   # 135,168 B / 1,024
    # Without opting in, a block may have 48 KB: 60000 B cannot launch; the reason is shown.
    _set(ex, carveout=-1, shared_mem_per_block=60032, opt_in=False)
    assert ex.result.blocks_per_sm == 0
    assert "cannot launch" in ex.readout.value and ex.warning.value == ""


def test_switching_to_a_smaller_sm_clamps_shared_memory(ex):
    _set(ex, shared_mem_per_block=200_000)
    _set(ex, target="cc:7.5")   # Turing: at most 64 KB per block
    assert ex.controls["shared_mem_per_block"].max == 65536
    assert ex.controls["shared_mem_per_block"].value == 65536
    assert ex.warning.value == ""
    _check_against_model(ex)
    _set(ex, target="cc:9.0")
    assert ex.controls["shared_mem_per_block"].max == 232448
    _check_against_model(ex)


def test_extreme_values_never_raise(ex):
    targets = [v for _, v in ex.controls["target"].options if v.startswith("cc:")]
    for target in [*targets, "gpu:RTX 4090"]:
        _set(ex, target=target)
        for name in SLIDERS:
            ctl = ex.controls[name]
            for v in (ctl.min, ctl.max):
                _set(ex, **{name: v})
                assert ex.warning.value == "", (target, name, v)
                assert 0 <= ex.result.occupancy <= 1
        for carveout in (CARVEOUTS[0], CARVEOUTS[1], CARVEOUTS[-1]):
            _set(ex, carveout=carveout)
            assert ex.warning.value == ""


@pytest.mark.parametrize("kwargs,err,word", [
    ({"cc": "5.0"}, ValueError, "cc"), ({"cc": None}, TypeError, "cc"),
    ({"gpu": "Z9000", "cc": None}, ValueError, "gpu"),
    ({"threads_per_block": 2000}, ValueError, "threads_per_block"),
    ({"threads_per_block": 16}, ValueError, "threads_per_block"),
    ({"threads_per_block": 100.5}, TypeError, "threads_per_block"),
    ({"registers_per_thread": 300}, ValueError, "registers_per_thread"),
    ({"shared_mem_per_block": -1}, ValueError, "shared_mem_per_block"),
    ({"shared_mem_per_block": 10**6}, ValueError, "shared_mem_per_block"),
    ({"carveout": 150}, ValueError, "carveout"), ({"opt_in": "yes"}, TypeError, "opt_in"),
])
def test_bad_arguments_raise_clearly(kwargs, err, word):
    with pytest.raises(err, match=word):
        occupancy_explorer(**kwargs)


def test_other_arguments():
    ex = occupancy_explorer(gpu="h100", cc=None, threads_per_block=128, registers_per_thread=32,
                            shared_mem_per_block=0, carveout=25, opt_in=True)
    assert ex.controls["target"].value == "gpu:H100 SXM5"
    assert ex.controls["carveout"].value == 25
    assert ex.result.gpu == "H100 SXM5"
    _check_against_model(ex)
    assert occupancy_explorer(carveout=33).controls["carveout"].value == 33  # added to the list


# -- properties ----------------------------------------------------------------------------------

@settings(max_examples=30)
@given(cc=st.sampled_from(sorted(compute_capabilities())),
       threads=st.integers(1, 32).map(lambda w: 32 * w), regs=st.integers(1, 255),
       smem_units=st.integers(0, 1816), carveout=st.sampled_from(CARVEOUTS),
       opt_in=st.booleans())
def test_view_equals_model_and_curves_agree(shared, cc, threads, regs, smem_units, carveout,
                                            opt_in):
    ex = shared
    _set(ex, target=f"cc:{cc}")
    smem = min(128 * smem_units, ex.controls["shared_mem_per_block"].max)
    _set(ex, threads_per_block=threads, registers_per_thread=regs, shared_mem_per_block=smem,
         carveout=carveout, opt_in=opt_in)
    assert ex.warning.value == ""
    want = _check_against_model(ex)
    # The current configuration lies on each curve (all three are multiples of the grid here).
    for parameter, x in (("threads_per_block", threads), ("registers_per_thread", regs)):
        d = ex.curve_sources[parameter].data
        i = list(d["x"]).index(x)
        assert d["occupancy"][i] == pytest.approx(want.occupancy * 100)
        assert d["blocks"][i] == want.blocks_per_sm


