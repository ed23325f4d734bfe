"""Tests for the latency-hiding model: closed form, cycle simulation, Little's law, ILP.

References: hand derivations (in comments), the catalog's datasheet figures, and the
cycle-by-cycle simulation as an independent check of the closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import latency as L

GRID = [(n, a, j, lat)
        for lat in (1, 7, 100, 400)
        for a in (0, 1, 4)
        for j in (1, 2, 4)
        for n in (1, 2, 3, 6, 13, 40)]


# -- closed form by hand -------------------------------------------------------------------------

def test_one_warp_by_hand():
    # 4 ALU + 1 load per iteration: I = 5 instructions; the load issues at cycle 4, its data is
    # back at 4 + 400, so an iteration is T = 404 cycles: 5/404 instructions per cycle.
    assert L.issue_rate(1, alu_per_load=4, latency=400) == pytest.approx(5 / 404, rel=1e-12)
    assert L.warps_to_saturate(alu_per_load=4, latency=400) == pytest.approx(404 / 5)
    # ILP 2 with 4 ALU per load: I = 2*(4+1) = 10, T = 9 + 400 = 409
    assert L.issue_rate(3, alu_per_load=4, latency=400, ilp=2) == pytest.approx(30 / 409)


def test_saturation_is_one_instruction_per_cycle():
    # n* = 404/5 = 80.8 warps: 80 warps give 400/404, 81 warps give the full rate.
    assert L.issue_rate(80, alu_per_load=4, latency=400) == pytest.approx(400 / 404)
    assert L.issue_rate(81, alu_per_load=4, latency=400) == 1.0
    assert L.issue_rate(1000, alu_per_load=4, latency=400) == 1.0
    # latency 1 (no waiting at all): one warp already issues every cycle
    assert L.issue_rate(1, alu_per_load=0, latency=1) == 1.0


def test_curve_is_linear_then_flat():
    c = L.curve(64, alu_per_load=1, latency=60)
    # I = 2, T = 61: rate n*2/61 until n = 30.5
    assert np.allclose(c.issue_rate[:30], np.arange(1, 31) * 2 / 61)
    assert np.all(c.issue_rate[30:] == 1.0)
    assert np.allclose(c.loads_per_cycle, c.issue_rate / 2)
    assert c.saturation == pytest.approx(30.5)


# -- closed form vs simulation --------------------------------------------------------------------

@pytest.mark.parametrize("n, a, j, lat", GRID)
def test_greedy_scheduler_reaches_the_bound(n, a, j, lat):
    run = L.simulate(n, alu_per_load=a, latency=lat, ilp=j, policy="gto")
    expected = min(1.0, n * j * (a + 1) / (j * (a + 1) - 1 + lat))   # written out again
    assert run.issue_rate == pytest.approx(expected, abs=1e-9)
    assert run.loads_per_cycle == pytest.approx(expected * j / (j * (a + 1)), abs=1e-9)


def test_round_robin_bunches_warps():
    worst = 0.0
    for n, a, j, lat in GRID:
        rr = L.simulate(n, alu_per_load=a, latency=lat, ilp=j, policy="lrr")
        bound = L.issue_rate(n, alu_per_load=a, latency=lat, ilp=j)
        assert rr.issue_rate <= bound + 1e-9          # never beats the bound
        worst = max(worst, abs(rr.issue_rate - rr.closed_form) / rr.closed_form)
    assert worst < 0.12                               # the documented approximation
    # a clear case of bunching: 13 warps, 4 ALU + 1 load... I=10 with ILP 2, L=100:
    # bound min(1, 130/109) = 1, round robin about 130/(13*9 + 100) = 0.60
    rr = L.simulate(13, alu_per_load=4, ilp=2, latency=100, policy="lrr")
    assert 0.55 < rr.issue_rate < 0.65


def test_simulation_timeline():
    # 2 warps, 1 ALU + 1 load, latency 10, greedy: warp 0 issues cycles 0-1, warp 1 cycles
    # 2-3, then both wait: warp 0 is back at 1 + 10 = 11, warp 1 at 13.
    r = L.simulate(2, alu_per_load=1, latency=10, trace_cycles=16)
    assert r.timeline.tolist() == [0, 0, 1, 1] + [-1] * 7 + [0, 0, 1, 1, -1]
    assert r.timeline_load.tolist()[:4] == [False, True, False, True]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 64), a=st.integers(0, 8), j=st.integers(1, 6),
       lat=st.integers(1, 800))
def test_closed_form_properties(n, a, j, lat):
    r = L.issue_rate(n, alu_per_load=a, latency=lat, ilp=j)
    assert 0 < r <= 1
    # more warps never hurt, more latency never helps
    assert L.issue_rate(n + 1, alu_per_load=a, latency=lat, ilp=j) >= r
    assert L.issue_rate(n, alu_per_load=a, latency=lat + 1, ilp=j) <= r
    # more loads in flight per warp (same work per load) never hurts
    assert L.issue_rate(n, alu_per_load=a, latency=lat, ilp=j + 1) >= r - 1e-12
    # Little's law: below saturation, instructions in flight = rate x iteration time
    if r < 1:
        per_iter = j * (a + 1)
        assert r * (per_iter - 1 + lat) == pytest.approx(n * per_iter)


# -- a whole SM ----------------------------------------------------------------------------------

def test_sm_spreads_warps_over_four_schedulers():
    # 6 warps -> schedulers get 2, 2, 1, 1; with a=0, latency 9: I = 1, T = 9
    sm = L.sm_throughput(6, alu_per_load=0, latency=9)
    assert sm.issue_rate == pytest.approx(2 * 2 / 9 + 2 * 1 / 9)
    assert sm.limiter == "latency"
    full = L.sm_throughput(64, alu_per_load=0, latency=9)
    assert full.issue_rate == 4.0 and full.limiter == "issue"
    capped = L.sm_throughput(64, alu_per_load=0, latency=9, bandwidth_per_cycle=100.0)
    assert capped.bytes_per_cycle == 100.0 and capped.limiter == "bandwidth"


# -- Little's law --------------------------------------------------------------------------------

def test_littles_law_h100_by_hand():
    # 3350 GB/s x 600 ns = 2.01 MB; / 132 SMs = 15 227 B per SM; / 4 B = 3807 threads
    # = 119 warps per SM, but an SM holds 64 -> at least 2 loads in flight per thread.
    r = L.littles_law("H100", latency_ns=600)
    assert r.bytes_in_flight == pytest.approx(3350e9 * 600e-9)
    assert r.bytes_in_flight == pytest.approx(2.01e6)
    assert r.bytes_per_sm == pytest.approx(2.01e6 / 132)
    assert r.warps_per_sm == pytest.approx(2.01e6 / 132 / 4 / 32)
    assert r.max_warps_per_sm == 64
    assert r.max_warps_per_scheduler == 16          # 64 warps over 4 schedulers
    assert not r.enough_warps and r.ilp_needed == 2
    assert r.latency_cycles == pytest.approx(600 * 1.98)


def test_littles_law_other_gpus():
    # V100: 900 GB/s x 600 ns / 80 SMs = 6750 B per SM = 52.7 warps of 4 B: 64 warps suffice
    v = L.littles_law("V100", latency_ns=600)
    assert v.bytes_per_sm == pytest.approx(6750)
    assert v.enough_warps and v.ilp_needed == 1
    # 16-byte loads (float4) cut the warps needed by 4 on an H200: 4800e9*600e-9/132/16/32
    h = L.littles_law("H200", latency_ns=600, bytes_per_thread=16)
    assert h.warps_per_sm == pytest.approx(4800e9 * 600e-9 / 132 / 16 / 32)
    assert L.bytes_in_flight(1e12, 1e-6) == pytest.approx(1e6)


@pytest.mark.parametrize(("name", "per_scheduler"), [
    ("V100", 16),        # CC 7.0: 64 warps per SM, 4 schedulers
    ("T4", 8),           # CC 7.5: 32 warps per SM
    ("RTX 4090", 12),    # CC 8.9: 48 warps per SM
    ("H200", 16),        # CC 9.0: 64 warps per SM
])
def test_max_warps_per_scheduler(name, per_scheduler):
    # Programming Guide table (max warps/SM) / 4 warp schedulers per SM (architecture whitepapers)
    assert L.littles_law(name).max_warps_per_scheduler == per_scheduler


def test_every_catalog_gpu_spreads_its_warps_evenly_over_4_schedulers():
    from gpu_lessons.hardware import catalog

    for name in catalog():
        law = L.littles_law(name)
        assert 4 * law.max_warps_per_scheduler == law.max_warps_per_sm, name


# -- occupancy vs ILP ----------------------------------------------------------------------------

def test_register_blocked_kernel_at_lower_occupancy_wins():
    # H100: 1980 MHz, latency 600 ns = 1188 cycles, SM share = 3.35e12 / 132 / 1.98e9 B/cycle.
    # 32 regs -> 64 warps/SM (16 per scheduler), 2 ALU + 1 load: I = 3, T = 1190:
    #   loads/cycle/SM = 4 * 16/1190 ; bytes = x 128 -> 6.88 B/cycle -> 1.80 TB/s (54 %).
    # 64 regs -> 32 warps (2048 regs per warp, 8 per sub-partition), ILP 4: I = 12,
    #   T = 1199, loads = 4 * 8*4/1199 -> 13.7 B/cycle > 12.8: bandwidth-bound, 3.35 TB/s.
    # 128 regs -> 16 warps, ILP 4: 4 * 4*4/1199 * 128 = 6.83 B/cycle -> 1.79 TB/s.
    c = L.occupancy_vs_ilp("H100")
    a, b, d = c.results
    assert (a.warps_per_sm, b.warps_per_sm, d.warps_per_sm) == (64, 32, 16)
    per_cycle = 1.98e9 * 132
    assert a.bandwidth == pytest.approx(4 * 16 / 1190 * 128 * per_cycle, rel=1e-9)
    assert b.bandwidth == pytest.approx(3.35e12, rel=1e-9) and b.limiter == "bandwidth"
    assert d.bandwidth == pytest.approx(4 * 16 / 1199 * 128 * per_cycle, rel=1e-9)
    assert c.best is b            # 50 % occupancy beats 100 %
    assert a.limiter == "latency"
    text = repr(c)
    assert "GB/s" in text and "occupancy" in text and "<table>" in c._repr_html_()


def test_compare_accepts_one_config():
    c = L.compare(L.Config("x", 128, 40), "A100", latency_ns=500)
    assert len(c.results) == 1 and 0 < c.results[0].fraction_of_peak <= 1


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(warps=-1, alu_per_load=1, latency=10), ValueError, "warps"),
    (dict(warps="8", alu_per_load=1, latency=10), TypeError, "warps"),
    (dict(warps=4, alu_per_load=-1, latency=10), ValueError, "alu_per_load"),
    (dict(warps=4, alu_per_load=1.5, latency=10), TypeError, "alu_per_load"),
    (dict(warps=4, alu_per_load=1, latency=0), ValueError, "latency"),
    (dict(warps=4, alu_per_load=1, latency=10, ilp=0), ValueError, "ilp"),
    (dict(warps=4, alu_per_load=1, latency=10, policy="fifo"), ValueError, "policy"),
])
def test_bad_input_closed_form(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        L.issue_rate(**kwargs)


def test_bad_input_elsewhere():
    with pytest.raises(ValueError, match="warps must be >= 1"):
        L.simulate(0, alu_per_load=1, latency=10)
    with pytest.raises(TypeError, match="latency must be an integer"):
        L.simulate(2, alu_per_load=1, latency=10.5)
    with pytest.raises(ValueError, match="not in the GPU catalog"):
        L.littles_law("H900")
    with pytest.raises(ValueError, match="latency_ns"):
        L.littles_law("H100", latency_ns=-3)
    with pytest.raises(TypeError, match="Config"):
        L.compare([], "H100")
    with pytest.raises(ValueError, match="max_warps"):
        L.curve(0, alu_per_load=1, latency=10)
    assert math.isfinite(L.DEFAULT_LATENCY_NS) and L.LATENCY_SOURCE


def test_h200_latencies_match_the_recorded_pointer_chase():
    import json
    from pathlib import Path

    from gpu_lessons.latency import H200_UNLOADED_LATENCY_NS

    rows = json.loads((Path(__file__).parents[1] / "data" / "h200_pointer_chase.json")
                      .read_text())["rows"]
    by_size = {r["footprint_bytes"]: r["ns_per_hop"] for r in rows}
    assert H200_UNLOADED_LATENCY_NS["L1"] == pytest.approx(by_size[16 << 10], rel=0.05)
    assert H200_UNLOADED_LATENCY_NS["L2"] == pytest.approx(by_size[8 << 20], rel=0.05)
    assert H200_UNLOADED_LATENCY_NS["HBM"] == pytest.approx(by_size[4 << 30], rel=0.05)
