"""Latency-hiding explorer: curves and readout are the model's numbers and hand-derived ones."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import latency
from gpu_lessons.views import latency as view
from gpu_lessons.views.latency import latency_explorer


@pytest.fixture(scope="module")
def ex():
    return latency_explorer()


def test_default_state_hand_derived():
    e = latency_explorer()
    assert e.warning.value == ""
    # 8 ALU per load, ILP 4: I = 4·(8+1) = 36 instructions per round; latency 400 cycles:
    # T = I − 1 + L = 435 cycles; n* = T/I = 12.08 warps; 8 warps: R = 8·36/435 = 0.6621
    # instructions/cycle and loads/cycle = R·4/36 = 0.07356.
    cur = e.current.data
    assert cur["warps"] == [8]
    assert cur["rate"][0] == pytest.approx(8 * 36 / 435)
    assert cur["loads"][0] == pytest.approx(8 * 36 / 435 * 4 / 36)
    assert e.saturation_spans[0].location == pytest.approx(435 / 36)
    assert "0.662" in e.readout.value and "12.1 warps" in e.readout.value
    # H100 SXM5: 3350 GB/s × 600 ns = 2.01 MB; / 132 SMs = 15,227 B = 14.87 KiB per SM;
    # / 4 B = 3,807 threads = 119 warps per SM, more than 64 → 2 loads per thread
    assert "2.01 MB in flight" in e.readout.value
    assert "14.87 KiB per SM" in e.readout.value
    assert "119 warps/SM" in e.readout.value
    assert "needs 2 loads in flight" in e.readout.value
    # Hopper: 64 warps per SM over 4 schedulers
    assert e.limit_spans[0].location == 16


def test_line_is_the_models_curve(ex):
    c = ex.controls
    c["alu_per_load"].value, c["ilp"].value, c["latency"].value = 2, 1, 300
    c["policy"].value = "lrr"
    span = len(ex.line.data["warps"])
    direct = latency.curve(span, alu_per_load=2, latency=300, ilp=1, policy="lrr")
    assert np.allclose(ex.line.data["rate"], direct.issue_rate)
    assert np.allclose(ex.line.data["loads"], direct.loads_per_cycle)
    # LRR by hand: I = 3, R(n) = n·3 / (n·2 + 300); n = 10 → 30 / 320
    assert ex.line.data["rate"][9] == pytest.approx(30 / 320)
    # GTO bound: n* = (3 − 1 + 300) / 3 = 100.7 warps → the line reaches past 130 warps
    assert span >= 131
    c["policy"].value = "gto"
    assert ex.line.data["rate"][9] == pytest.approx(30 / 302)


def test_simulated_points_are_the_simulators(ex):
    c = ex.controls
    c["alu_per_load"].value, c["ilp"].value, c["latency"].value = 4, 2, 200
    c["warps"].value = 5
    d = ex.points.data
    assert 5 in d["warps"] and 1 in d["warps"]
    for w, rate, loads in zip(d["warps"], d["rate"], d["loads"], strict=True):
        run = latency.simulate(w, alu_per_load=4, latency=200, ilp=2, policy="gto",
                               trace_cycles=0)
        assert rate == run.issue_rate and loads == run.loads_per_cycle
    # and GTO lands on the bound min(1, n·I/T), I = 10, T = 209
    for w, rate in zip(d["warps"], d["rate"], strict=True):
        assert rate == pytest.approx(min(1, w * 10 / 209), rel=0.02)


def test_no_latency_saturates_at_one_warp(ex):
    c = ex.controls
    c["alu_per_load"].value, c["ilp"].value, c["latency"].value = 0, 1, 1
    # I = 1, T = 1: every warp issues every cycle
    assert np.allclose(ex.line.data["rate"], 1.0)
    assert ex.saturation_spans[0].location == pytest.approx(1.0)


def test_littles_law_other_gpus():
    e = latency_explorer(gpu_name="H200 SXM")
    # 4800 GB/s × 600 ns = 2.88 MB; / 132 = 21,818 B = 21.3 KiB; / 4 B / 32 = 170 warps
    assert "2.88 MB in flight" in e.readout.value and "170 warps/SM" in e.readout.value
    e.controls["gpu"].value = "V100 SXM2"
    # 900 GB/s × 600 ns = 540 kB; / 80 SMs / 4 B / 32 = 52.7 warps ≤ 64
    assert "540 kB in flight" in e.readout.value and "53 warps/SM" in e.readout.value
    assert "full occupancy is enough" in e.readout.value
    e.controls["gpu"].value = "RTX 4090"   # CC 8.9: 48 warps per SM / 4 schedulers
    assert e.limit_spans[1].location == 12
    e.controls["latency_ns"].value = 1000
    e.controls["bytes_per_thread"].value = 16
    law = latency.littles_law("RTX 4090", latency_ns=1000, bytes_per_thread=16)
    assert f"{law.warps_per_sm:.0f} warps/SM" in e.readout.value
    # 1008 GB/s × 1 µs / 128 SMs / 16 B / 32 = 15.4 warps
    assert law.warps_per_sm == pytest.approx(1008e9 * 1e-6 / 128 / 16 / 32)


def test_sm_readout_is_sm_throughput():
    e = latency_explorer(warps=2, alu_per_load=1, ilp=1, latency=100)
    sm = latency.sm_throughput(8, alu_per_load=1, latency=100, ilp=1, bytes_per_load=128)
    assert f"{sm.bytes_per_cycle:.1f} B/cycle" in e.readout.value
    # by hand: I = 2, T = 101, 2 warps per scheduler → R = 4/101; 4 schedulers → 16/101
    # instructions/cycle, half of them loads of 128 B: 8/101 × 128 = 10.1 B/cycle
    assert "10.1 B/cycle" in e.readout.value


def test_extreme_controls_never_raise():
    e = latency_explorer()
    for key, w in e.controls.items():
        values = ([o[1] if isinstance(o, tuple) else o for o in (w.options[0], w.options[-1])]
                  if hasattr(w, "options") else [w.min, w.max])
        for v in values:
            w.value = v
            assert e.warning.value == "", (key, v, e.warning.value)
    # every work slider at its maximum together: the slowest state
    c = e.controls
    c["warps"].value, c["alu_per_load"].value = c["warps"].max, c["alu_per_load"].max
    c["ilp"].value, c["latency"].value = c["ilp"].max, c["latency"].max
    assert e.warning.value == ""


def test_model_refusal_is_shown_not_raised(monkeypatch):
    e = latency_explorer()

    def refuse(*a, **k):
        raise ValueError("latency_ns must be > 0, got 0")

    monkeypatch.setattr(view, "littles_law", refuse)
    e.controls["latency_ns"].value = 700
    assert "latency_ns must be" in e.warning.value


_shared = {}


@settings(max_examples=6)
@given(warps=st.integers(1, 32), a=st.integers(0, 32), j=st.integers(1, 8),
       lat=st.integers(1, 2000))
def test_current_point_on_line_and_rates_bounded(warps, a, j, lat):
    e = _shared.setdefault("ex", latency_explorer())
    c = e.controls
    c["warps"].value, c["alu_per_load"].value, c["ilp"].value = warps, a, j
    c["latency"].value = lat
    assert e.warning.value == ""
    rate = e.current.data["rate"][0]
    assert rate == pytest.approx(latency.issue_rate(warps, alu_per_load=a, latency=lat, ilp=j))
    r = np.asarray(e.line.data["rate"])
    assert np.all((r > 0) & (r <= 1)) and np.all(np.diff(r) >= -1e-12)  # never falls
    for p in e.points.data["rate"]:
        assert 0 < p <= 1
