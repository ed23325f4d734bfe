"""The SM-throughput model of the capstone (``gpu_lessons.capstone.pipes``).

References, none of them the model's own output:
* the CUDA C++ Programming Guide, "Arithmetic Instructions", table "Throughput of Native
  Arithmetic Instructions (Number of Results per Clock Cycle per Multiprocessor)": 32-bit
  floating-point add/multiply/multiply-add 64 (CC 7.x, 8.0) or 128 (8.6, 8.9, 9.0); 32-bit
  integer add, compare, bitwise: 64; reciprocal/rsqrt/log2/exp2/sin/cos: 16;
* four warp schedulers per SM, each issuing one warp instruction per clock (Volta, Ampere and
  Hopper whitepapers);
* hand arithmetic for kernels whose one pipe is the limit (FADD, integer, LDC, MUFU), and the
  H200 datasheet (132 SMs, 1,980 MHz, 66.9 TFLOP/s FP32);
* the H200 record of the capstone's filter (``tests/data/h200_capstone_fir.json``): its SASS,
  Nsight Compute's SM throughput and the constant-load probe.
"""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import costs
from gpu_lessons.capstone import (
    InstructionMix,
    MysteryKernel,
    diagnose,
    evidence,
    mystery,
    pipe_rates,
    sm_throughput,
)
from gpu_lessons.capstone.mysteries import FIR_SASS
from gpu_lessons.hardware import measured

DATA = Path(__file__).resolve().parents[1] / "data"

SMS, CLOCK, PI_FP32 = 132, 1.98e9, 66.9e12
THREADS = 1 << 24                 # 524,288 warps


@pytest.mark.parametrize("cc, fp32, integer, xu", [
    ("7.0", 64, 64, 16), ("7.5", 64, 64, 16), ("8.0", 64, 64, 16), ("8.6", 128, 64, 16),
    ("8.9", 128, 64, 16), ("9.0", 128, 64, 16),
])
def test_rates_are_the_programming_guides(cc, fp32, integer, xu):
    r = pipe_rates(cc)
    assert (r.fp32, r.int, r.xu, r.issue) == (fp32, integer, xu, 4)
    assert "Arithmetic Instructions" in r.source


def _kernel(counts, seconds, flops_per_element=0.0):
    """A made-up kernel of 2^24 threads, one element each, with ``counts`` per thread."""
    cost = costs.elementwise(THREADS, flops_per_element=flops_per_element, reads=1, writes=1)
    return MysteryKernel(
        key="made-up", title="made-up", code="", gpu="H200 SXM", precision="fp32",
        sizes="2^24 floats", cost=cost, seconds=seconds, measured=False,
        time_source="model-derived: a test", instructions=InstructionMix.per_thread(
            THREADS, counts, source="by hand"))


def test_an_fadd_bound_kernel_is_compute_bound_at_half_the_flop_peak():
    # 64 FADD per thread: 64 x 524,288 warp instructions x 32 lanes / (128 per clock x 132)
    # = 63,550 cycles = 32.10 µs at 1.98 GHz.  Run it in exactly that time: FP32 pipe and
    # issue 100 %, but 64 x 2^24 FLOP / 32.10 µs = 33.45 TFLOP/s = 50 % of 66.9.
    t = 64 * 524_288 * 32 / (128 * SMS) / CLOCK
    ev = evidence(_kernel({"fp32": 64}, t, flops_per_element=64))
    assert ev.sm.fraction("fp32") == pytest.approx(1.0)
    assert ev.sm.fraction("issue") == pytest.approx(1.0)
    assert ev.flop_fraction == pytest.approx(0.5, rel=2e-3)
    d = diagnose(_kernel({"fp32": 64}, t, flops_per_element=64))
    assert d.verdict == "compute-bound"
    # with FFMAs instead (128 FLOPs per thread) the same instructions reach the FLOP peak
    assert evidence(_kernel({"fp32": 64}, t, flops_per_element=128)).flop_fraction == \
        pytest.approx(1.0, rel=2e-3)


def test_integer_work_binds_at_half_the_issue_rate():
    # 32 IADD3 per thread: 32 x 524,288 x 32 / (64 per clock x 132) = 63,550 cycles: the
    # integer pipe is full in 32.10 µs while issue (4 warp instructions per clock) is at half
    t = 32 * 524_288 * 32 / (64 * SMS) / CLOCK
    ev = evidence(_kernel({"int": 32}, t))
    assert ev.sm.busiest == "int"
    assert ev.sm.fraction("int") == pytest.approx(1.0)
    assert ev.sm.fraction("issue") == pytest.approx(0.5)
    assert ev.flop_fraction == 0
    d = diagnose(_kernel({"int": 32}, 2 * t))        # half as fast: still 50 % -> not bound
    assert d.verdict == "latency-bound"
    d = diagnose(_kernel({"int": 32}, t / 0.7))      # at 70 % of the integer pipe
    assert (d.verdict, d.limiter) == ("compute-bound", "SM: integer pipe (IADD3, IMAD, LOP3, "
                                                       "ISETP, SHF)")


def test_constant_loads_and_the_sfu_bind_at_their_own_rates():
    # LDC: measured on the H200 (tests/data/h200_capstone_fir.json, ldc_probe): 0.444 warp-wide
    # LDC per SM per clock = 14 results per clock.  7 LDC per thread: 7 x 524,288 x 32 /
    # (14 x 132) = 63,550 cycles; 4 MUFU per thread at 16 per clock: 4 x 524,288 x 32 /
    # (16 x 132) = 31,775 cycles
    assert pipe_rates("9.0").constant == 14
    t = 63_550.06 / CLOCK
    th = sm_throughput(InstructionMix.per_thread(THREADS, {"constant": 7, "xu": 4}),
                       "h200", t)
    assert th.busiest == "constant"
    assert th.fraction("constant") == pytest.approx(7 * 524_288 * 32 / (14 * SMS) / 63_550.06)
    assert th.fraction("constant") == pytest.approx(1.0, rel=1e-5)
    assert th.fraction("xu") == pytest.approx(0.5, rel=1e-5)
    assert th.fraction("issue") == pytest.approx(11 * 524_288 / (4 * SMS) / 63_550.06)


def test_the_ldc_rate_is_the_h200_measurement():
    # ldc_probe: 2,051 LDC per warp (its SASS: 2 + 256 trips x 8 LDC.64 + 1) over 2^21 warps
    # and 132 SMs in 37,140,768 ns at 1,975,886,730 Hz (Nsight Compute) = 73,385,870 cycles:
    # 0.4440 warp-wide LDC per SM per clock, x 32 = 14.2 results per clock
    fir = json.loads((DATA / "h200_capstone_fir.json").read_text("utf-8"))
    raw = fir["kernels"]["ldc_probe"]["ncu_raw"]
    cycles = raw["gpu__time_duration.sum"] * 1e-9 * raw["sm__cycles_elapsed.avg.per_second"]
    rate = 2051 * 2**21 / 132 / cycles
    assert rate == pytest.approx(0.4440, abs=1e-4)
    assert measured("h200.capstone_fir.ldc_per_clock").value == round(rate, 3)
    # the constant pipe (Nsight Compute's ADU) was the limit: ~99 % of its peak
    assert raw["sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active"] > 98
    assert round(32 * rate) == pipe_rates("9.0").constant == 14
    assert "capstone_fir" in pipe_rates("9.0").source


def test_an_a100_needs_twice_the_cycles_for_the_same_ffmas():
    # CC 8.0: 64 FP32 results per clock per SM.  8192³ FFMA on 108 SMs at 1,410 MHz:
    # 8192³ / (64 x 108) = 79,536,431 cycles = 56.41 ms for a full FP32 pipe
    mix = InstructionMix({"fp32": 8192**3 / 32})
    t = 8192**3 / (64 * 108) / 1.41e9
    assert sm_throughput(mix, "a100", t).fraction("fp32") == pytest.approx(1.0)
    assert sm_throughput(mix, "h200", t).fraction("fp32") == pytest.approx(
        8192**3 / (128 * SMS) / (t * CLOCK))


@settings(max_examples=100, deadline=None)
@given(counts=st.dictionaries(st.sampled_from(["fp32", "int", "lsu", "constant", "uniform",
                                               "xu", "other"]),
                              st.floats(min_value=0, max_value=1e9), min_size=1),
       seconds=st.floats(min_value=1e-6, max_value=1.0))
def test_issue_bounds_every_full_width_pipe_and_time_scales(counts, seconds):
    # on CC 9.0 the FP32 and uniform pipes take 4 warp instructions per clock, as many as issue,
    # so issue is at least as busy as either; doubling the time halves every fraction
    th = sm_throughput(InstructionMix(counts), "h200", seconds)
    assert th.fraction("issue") >= th.fraction("fp32") - 1e-12
    assert th.fraction("issue") >= th.fraction("uniform") - 1e-12
    slow = sm_throughput(InstructionMix(counts), "h200", 2 * seconds)
    for unit, f in th.fractions:
        assert slow.fraction(unit) == pytest.approx(f / 2)
    assert th.throughput == max(f for _, f in th.fractions)


def test_what_a_gpu_lacks_is_refused():
    # Volta has no uniform datapath; the L4's tensor rate is not in the catalog
    with pytest.raises(ValueError, match=r"uniform pipe.*7\.0"):
        sm_throughput(InstructionMix({"uniform": 1}), "v100", 1e-3)
    with pytest.raises(ValueError, match="tensor"):
        sm_throughput(InstructionMix((), tensor_flops=1e9), "l4", 1e-3)


def test_bad_input():
    with pytest.raises(ValueError, match="pipe must be one of"):
        InstructionMix({"fp64": 3})
    with pytest.raises(ValueError, match=r"counts\['fp32'\] must be >= 0"):
        InstructionMix({"fp32": -1})
    with pytest.raises(TypeError, match="threads must be an integer"):
        InstructionMix.per_thread(2.5, {"fp32": 1})
    with pytest.raises(TypeError, match="mix must be an InstructionMix"):
        sm_throughput({"fp32": 1}, "h200", 1e-3)
    with pytest.raises(ValueError, match="seconds must be > 0"):
        sm_throughput(InstructionMix({"fp32": 1}), "h200", 0)
    with pytest.raises(ValueError, match="cc must be one of"):
        pipe_rates("6.1")


def test_a_kernel_without_a_mix_falls_back_to_the_flop_fraction():
    # the lower bound: each FP32 instruction does at most 2 FLOPs, so FLOP/s over the peak
    # can only understate how busy the FP32 pipe is
    k = replace(mystery("sgemm"), instructions=None, after=None)
    ev = evidence(k)
    assert ev.sm is None
    assert ev.compute_fraction == ev.flop_fraction == pytest.approx(
        2 * 8192**3 / 21.678544e-3 / PI_FP32)
    assert "no instruction mix" in repr(ev)
    assert diagnose(k).limiter == "FP32 (CUDA cores)"
    assert evidence("sgemm").compute_fraction >= ev.compute_fraction


def test_every_compute_capability_has_pipe_rates():
    from gpu_lessons.occupancy import compute_capabilities

    for cc in compute_capabilities():
        r = pipe_rates(cc)
        assert r.source and r.issue == 4 and r.fp32 in (64, 128)


# -- the filter's SASS and Nsight Compute (tests/data/h200_capstone_fir.json) ---------------------

FIR = json.loads((DATA / "h200_capstone_fir.json").read_text("utf-8"))["kernels"]


@pytest.mark.parametrize("name", ["fir40_v1", "fir40_v4"])
def test_the_filters_mixes_are_their_recorded_sass(name):
    assert FIR_SASS[name] == {op: n for op, n in FIR[name]["sass_per_thread"].items() if n}


def test_the_filters_mixes_by_pipe():
    # by hand from the recorded opcodes: v1 (one element per thread, 2^26 threads) 119 FFMA +
    # FADD + HFMA2 = 121 FP32; IMAD, ISETP x 2, SHF x 2, IADD3 x 4 = 9 integer; LDG, STG, S2R
    # = 3 LSU; 4 LDC; 4 ULDC + S2UR = 5 uniform; 2 EXIT: 144.  v4 (4 elements, 2^24 threads):
    # 321 FP32, 9 integer, 3 LSU, 2 LDC, 45 uniform, 2 other: 382.
    for key, threads, want in (
            ("fir_filter", 1 << 26, {"fp32": 121, "int": 9, "lsu": 3, "constant": 4,
                                     "uniform": 5, "other": 2}),
            ("fir_filter (fixed)", 1 << 24, {"fp32": 321, "int": 9, "lsu": 3, "constant": 2,
                                             "uniform": 45, "other": 2})):
        k = mystery("fir_filter")
        mix = (k if key == "fir_filter" else k.after).instructions
        per_thread = {p: n * 32 / threads for p, n in mix.counts}
        assert per_thread == want


@pytest.mark.parametrize("name, threads", [("fir40_v1", 1 << 26), ("fir40_v3", 1 << 26),
                                           ("fir40_v4", 1 << 24)])
def test_issue_from_the_sass_is_nsight_computes_sm_throughput(name, threads):
    # straight-line kernels: the listing's instructions are the executed ones, as Nsight
    # Compute's smsp__inst_executed.sum confirms (144, 142 and 382 per warp).  Over the
    # kernel's own duration and SM clock, issue = instructions / (4 x 132 x cycles):
    # v1 19.64 % (Nsight Compute 19.64 %), v3 80.52 % (80.54 %), v4 85.96 % (85.99 %).
    # (fir40_v2 is left out: its listing has 140 instructions, Nsight Compute counted 142.)
    k = FIR[name]
    raw = k["ncu_raw"]
    per_thread = sum(k["sass_per_thread"].values())
    assert raw["smsp__inst_executed.sum"] == per_thread * threads // 32
    mix = InstructionMix.from_sass(threads, k["sass_per_thread"], source="record")
    th = sm_throughput(mix, "h200", raw["gpu__time_duration.sum"] * 1e-9,
                       clock_hz=raw["sm__cycles_elapsed.avg.per_second"])
    assert th.busiest == "issue"
    assert 100 * th.throughput == pytest.approx(k["ncu"]["sm_throughput_pct"], abs=0.05)
    # at the boost clock and the event-timed median the same kernel reads lower (the events
    # also count the gap before the kernel starts)
    assert sm_throughput(mix, "h200", k["median_s"]).throughput < th.throughput


def test_from_sass_and_clock_bad_input():
    with pytest.raises(ValueError, match="'DADD' is not a SASS opcode"):
        InstructionMix.from_sass(32, {"DADD": 1})
    with pytest.raises(TypeError, match="opcodes must be a dict"):
        InstructionMix.from_sass(32, [("FFMA", 1)])
    with pytest.raises(ValueError, match=r"opcodes\['FFMA'\] must be >= 0"):
        InstructionMix.from_sass(32, {"FFMA": -1})
    assert InstructionMix.from_sass(32, {"UIADD3": 2, "S2UR": 1}).counts == (("uniform", 3.0),)
    with pytest.raises(ValueError, match="clock_hz"):
        sm_throughput(InstructionMix({"fp32": 1}), "h200", 1e-3, clock_hz=0)
