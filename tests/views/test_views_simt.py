"""SIMT explorer: the picture and readout show the simulator's numbers, and hand-derived ones."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons.kernels.simt.examples import KERNELS, simulate
from gpu_lessons.views import simt as view
from gpu_lessons.views.simt import INACTIVE, simt_explorer


@pytest.fixture(scope="module")
def ex():
    return simt_explorer()


def _active_grid(ex):
    """The cell picture back as bool[32, steps] (lane-major, as the view lays it out)."""
    d = ex.cells.data
    steps = max(d["step"]) + 1
    grid = np.zeros((32, steps), dtype=bool)
    active = np.array(d["color"], dtype=object) != INACTIVE
    grid[np.asarray(d["lane"]), np.asarray(d["step"])] = active
    return grid


def test_default_state_matches_hand_count():
    e = simt_explorer()
    assert e.warning.value == ""
    # branch_by_parity, iters=4, per warp: `+ thread_idx.x`, `>=`, return test, load, `%`, `==`,
    # if test = 7 instructions on 32 lanes; each path has 4 × (mul, add) + store = 9
    # instructions on 16 lanes.  25 instructions; (7·32 + 18·16) / (25·32) = 512/800 = 64 %.
    grid = _active_grid(e)
    assert grid.shape == (32, 25)
    assert grid.sum() == 7 * 32 + 18 * 16
    assert grid[:, :7].all()
    # then-path: even lanes; else-path: odd lanes
    assert grid[0::2, 7:16].all() and not grid[1::2, 7:16].any()
    assert grid[1::2, 16:].all() and not grid[0::2, 16:].any()
    assert "64 %" in e.readout.value
    assert "200 warp instructions" in e.readout.value  # 8 warps × 25
    assert "4.00 sectors/request" in e.readout.value    # 32 aligned floats: 4 sectors


def test_picture_is_the_models_lane_matrix(ex):
    ex.controls["kernel"].value = "reduce_interleaved"
    ex.controls["warp"].value = 2
    direct = simulate("reduce_interleaved", block=ex.controls["block_size"].value,
                      iters=ex.controls["iters"].value).sim
    assert np.array_equal(_active_grid(ex), direct.lane_matrix(0, 2))
    kinds = [e.kind for e in direct.warp_events(0, 2)]
    d = ex.cells.data
    first_lane = [k for k, lane in enumerate(d["lane"]) if lane == 0]
    assert [d["kind"][k] for k in first_lane] == kinds
    ex.controls["warp"].value = 0


def test_branch_by_warp_does_not_diverge():
    e = simt_explorer("branch_by_warp", iters=1)
    # each warp takes one path whole: 8 instructions before the paths + (mul, add, store)
    assert _active_grid(e).shape == (32, 11)
    assert _active_grid(e).all()
    assert "100 %" in e.readout.value


def test_colour_by_path_labels():
    e = simt_explorer(colour_by="branch path")
    assert set(e.cells.data["label"]) == {"outside any branch", "parity:then", "parity:else",
                                          "inactive lane"}
    e.controls["colour_by"].value = "instruction kind"
    assert set(e.cells.data["label"]) == {"alu", "branch", "ld.global", "st.global",
                                          "inactive lane"}


def test_transposes_set_block_and_warp_ranges_and_counts():
    e = simt_explorer("transpose_tiled")
    # 64 × 64 matrix in 32 × 32 tiles: 2 × 2 blocks; 32 × 8 threads = 8 warps per block
    assert e.controls["block"].max == 3 and e.controls["warp"].max == 7
    assert e.controls["block_size"].disabled and e.controls["iters"].disabled
    # reading a tile column: 32-way conflict (31 extra wavefronts) per request; 4 blocks ×
    # 8 warps × 4 column reads = 128 requests → 3968 conflicts (Harris 2013)
    assert "3968 bank conflicts" in e.readout.value
    e.controls["kernel"].value = "transpose_tiled_padded"
    assert "0 bank conflicts" in e.readout.value
    e.controls["kernel"].value = "transpose_naive"
    # 128 coalesced loads (4 sectors) + 128 column stores (32 sectors): 18 per request
    assert "18.00 sectors/request" in e.readout.value
    e.controls["block"].value = 3
    e.controls["warp"].value = 7
    assert "block 3, warp 7" in e.figures[0].title.text


def test_block_size_shrinks_warp_slider():
    e = simt_explorer("reduce_sequential", warp=7)
    e.controls["block_size"].value = 64           # 64 threads = 2 warps
    assert e.controls["warp"].max == 1
    assert e.controls["warp"].value == 1          # clamped, no error
    assert e.warning.value == ""


def test_missing_sync_reports_races():
    e = simt_explorer("reduce_missing_sync")
    races = simulate("reduce_missing_sync").sim.races
    assert races
    assert f"{len(races)} races" in e.readout.value
    assert "differs from NumPy" in e.readout.value
    e.controls["kernel"].value = "reduce_sequential"
    assert "No races found" in e.readout.value and "matches NumPy" in e.readout.value


def test_extreme_controls_never_raise():
    e = simt_explorer()
    for name in ("branch_by_parity", "reduce_interleaved_strided", "transpose_tiled_padded"):
        e.controls["kernel"].value = name
        for key in ("block_size", "iters", "order", "block", "warp"):
            w = e.controls[key]
            values = (list(w.options[i] for i in (0, -1)) if hasattr(w, "options")
                      else [w.min, w.max])
            for v in values:
                w.value = v[1] if isinstance(v, tuple) else v
                assert e.warning.value == "", (name, key, v, e.warning.value)


def test_model_refusal_is_shown_not_raised(monkeypatch):
    e = simt_explorer()

    def refuse(*a, **k):
        raise ValueError("n=3 must be a multiple of block=256")

    monkeypatch.setattr(view, "simulate", refuse)
    e.controls["iters"].value = 9
    assert "multiple of block" in e.warning.value


_shared = {}


@settings(max_examples=12)
@given(kernel=st.sampled_from(sorted(KERNELS)), block_size=st.sampled_from([32, 128, 256]),
       warp=st.integers(0, 7), block=st.integers(0, 3))
def test_cells_always_cover_32_lanes_of_the_model(kernel, block_size, warp, block):
    e = _shared.setdefault("ex", simt_explorer())
    c = e.controls
    c["kernel"].value, c["block_size"].value = kernel, block_size
    c["block"].value, c["warp"].value = block, warp
    b, w = c["block"].value, c["warp"].value   # after clamping to the run's shape
    assert 0 <= b <= c["block"].max and 0 <= w <= c["warp"].max
    direct = e.run.sim.lane_matrix(b, w)
    d = e.cells.data
    assert len(d["lane"]) == 32 * direct.shape[1]
    if direct.shape[1]:
        assert np.array_equal(_active_grid(e), direct)
    assert e.warning.value == ""

