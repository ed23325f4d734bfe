"""Tests for the memory ladder.

References: NVIDIA whitepaper tables (register file and L1/shared per SM and per GPU), the
gpumembench tool's printed P100 shared-memory peak, the CUDA Programming Guide's constants,
and hand arithmetic (in comments).  None of the expected values is produced by the code.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import ladder as L
from gpu_lessons.hardware import catalog, gpu


@pytest.mark.parametrize(("name", "kib"), [
    ("V100", 20480),        # Volta whitepaper Table 1: register file size / GPU 20480 KB
    ("A100", 27648),        # A100 whitepaper Table 1: 27648 KB
    ("H100", 33792),        # H100 whitepaper v1.04 Table 3: 33792 KB (SXM5)
    ("H100 PCIe", 29184),   # same table: 29184 KB (PCIe, 114 SMs)
])
def test_register_file_per_gpu_matches_whitepapers(name, kib):
    regs = L.memory_ladder(name).level("registers")
    assert regs.per_sm_bytes == 256 * 1024   # every whitepaper: 256 KB per SM
    assert regs.total_bytes == kib * 1024


@pytest.mark.parametrize(("name", "sm_kib", "shared_kib"), [
    ("V100", 128, 96),     # Volta whitepaper: 128 KB L1/shared per SM, shared up to 96 KB
    ("A100", 192, 164),    # A100 whitepaper: 192 KB combined, shared up to 164 KB
    ("H100", 256, 228),    # H100 whitepaper: 256 KB combined, shared up to 228 KB
    ("T4", 96, 64),        # Turing whitepaper: 96 KB L1/shared, shared up to 64 KB
])
def test_unified_l1_and_shared_carveout(name, sm_kib, shared_kib):
    lv = L.memory_ladder(name).level("L1 / shared")
    assert lv.per_sm_bytes == sm_kib * 1024
    assert lv.total_bytes == sm_kib * 1024 * gpu(name).sms
    assert f"up to {shared_kib} KiB per SM" in lv.holds


def test_shared_bandwidth_reproduces_gpumembench_p100_peak():
    # gpumembench prints "peak bandwidth is: 9519.104 GB/s" for a P100 (56 SMs, 1328 MHz):
    # 32 banks x 4 B x 56 x 1.328e9 = 9.519104e12 B/s.
    assert L.shared_bandwidth(56, 1328e6) == pytest.approx(9519.104e9, rel=1e-12)


def test_register_operand_bandwidth_by_hand():
    # H100 SXM5: 16,896 FP32 lanes x 3 operands x 4 B x 1.98e9 Hz = 401.46 TB/s
    assert L.register_operand_bandwidth(16896, 1.98e9) == pytest.approx(401.46e12, rel=1e-4)
    lad = L.memory_ladder("H100")
    assert lad.level("registers").bandwidth == pytest.approx(16896 * 12 * 1.98e9)


def test_l2_and_dram_come_from_the_catalog():
    lad = L.memory_ladder("V100")
    # V100: 6 MB L2 (Volta whitepaper), 2048 B/clk x 1530 MHz = 3.13 TB/s, HBM2 900 GB/s
    assert lad.level("L2").total_bytes == 6 * 2**20
    assert lad.level("L2").bandwidth == pytest.approx(2048 * 1530e6)
    assert lad.level("DRAM").bandwidth == pytest.approx(900e9)
    assert lad.level("DRAM").total_bytes == 32 * 10**9
    assert "HBM2" in lad.level("DRAM").holds
    assert L.memory_ladder("H100").level("L2").bandwidth is None   # no source gives it


def test_constant_memory_figures():
    # Programming Guide: 64 KB constant memory, 8 KB constant-cache working set per SM
    lv = L.memory_ladder("A100").level("constant cache")
    assert lv.per_sm_bytes == 8192
    assert lv.total_bytes == 8192 * 108
    assert "64 KiB" in lv.holds


def test_latencies_quote_the_v100_measurements():
    lad = L.memory_ladder("H100")
    # Jia et al. 2018: shared 19, L1 28, L2 193 cycles on a V100
    assert "19 cycles" in lad.level("L1 / shared").latency
    assert "28 cycles" in lad.level("L1 / shared").latency
    assert "193 cycles" in lad.level("L2").latency
    # 600 ns at 1980 MHz = 1188 cycles
    assert "1,188 cycles" in lad.level("DRAM").latency


def test_ladder_order_and_repr_have_units():
    lad = L.memory_ladder("H200")
    assert [lv.name for lv in lad.levels] == ["registers", "L1 / shared", "constant cache",
                                              "L2", "DRAM"]
    text = repr(lad)
    assert "H200" in text and "KiB" in text and "TB/s" in text
    assert "<table>" in lad._repr_html_()
    # capacity grows down the ladder (per GPU) for every catalog GPU that has all sizes
    for name in catalog():
        sizes = [lv.total_bytes for lv in L.memory_ladder(name).levels
                 if lv.name != "constant cache"]
        sizes = [s for s in sizes if s is not None]
        assert sizes[-1] == max(sizes)


def test_unknown_gpu_level_and_values_raise_clear_errors():
    with pytest.raises(ValueError, match="not in the GPU catalog"):
        L.memory_ladder("H900")
    with pytest.raises(ValueError, match="name must be one of"):
        L.memory_ladder("H100").level("L3")
    with pytest.raises(ValueError, match="sms must be >= 1"):
        L.shared_bandwidth(0, 1e9)
    with pytest.raises(TypeError, match="sms must be an integer"):
        L.shared_bandwidth(1.5, 1e9)
    with pytest.raises(ValueError, match="clock_hz must be > 0"):
        L.register_operand_bandwidth(128, -1.0)
    with pytest.raises(ValueError, match="cc="):
        L.unified_l1_bytes("1.0")


@settings(max_examples=50, deadline=None)
@given(sms=st.integers(1, 512), mhz=st.floats(100, 4000))
def test_bandwidths_scale_linearly(sms, mhz):
    one = L.shared_bandwidth(1, mhz * 1e6)
    assert L.shared_bandwidth(sms, mhz * 1e6) == pytest.approx(sms * one)
    assert one == pytest.approx(128 * mhz * 1e6)
    assert L.register_operand_bandwidth(sms * 64, mhz * 1e6) == pytest.approx(
        sms * 64 * 12 * mhz * 1e6)
