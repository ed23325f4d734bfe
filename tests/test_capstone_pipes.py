"""The SM-throughput model of the capstone (``gpu_lessons.capstone.pipes``).

References, none of them the model's own output:
* the CUDA C++ Programming Guide, "Arithmetic Instructions", table "Throughput of Native
  Arithmetic Instructions (Number of Results per Clock Cycle per Multiprocessor)": 32-bit
  floating-point add/multiply/multiply-add 64 (CC 7.x, 8.0) or 128 (8.6, 8.9, 9.0); 32-bit
  integer add, compare, bitwise: 64; reciprocal/rsqrt/log2/exp2/sin/cos: 16;
* four warp schedulers per SM, each issuing one warp instruction per clock (Volta, Ampere and
  Hopper whitepapers);
* hand arithmetic for kernels whose one pipe is the limit (FADD, integer, LDC, MUFU), and the
  H200 datasheet (132 SMs, 1,980 MHz, 66.9 TFLOP/s FP32).
"""

from dataclasses import replace

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
    # 16 LDC per thread at 32 per clock: 16 x 524,288 x 32 / (32 x 132) = 63,550 cycles
    # 4 MUFU per thread at 16 per clock: 4 x 524,288 x 32 / (16 x 132) = 31,775 cycles
    t = 63_550.06 / CLOCK
    th = sm_throughput(InstructionMix.per_thread(THREADS, {"constant": 16, "xu": 4}),
                       "h200", t)
    assert th.busiest == "constant"
    assert th.fraction("constant") == pytest.approx(16 * 524_288 * 32 / (32 * SMS) / 63_550.06)
    assert th.fraction("xu") == pytest.approx(0.5, rel=1e-5)
    assert th.fraction("issue") == pytest.approx(20 * 524_288 / (4 * SMS) / 63_550.06)


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


def test_reprs():
    th = evidence("register_hog").sm
    assert "%" in repr(th) and "instruction issue" in repr(th)
    assert th._repr_html_().startswith("<table><caption>SM throughput")
    assert "busy" in th._repr_html_()


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


def test_the_fixed_filters_mix_is_its_recorded_sass():
    # tests/data/h200_capstone_fir.json records the SASS of fir40_v4 opcode by opcode
    import json
    import re
    from pathlib import Path

    meta = json.loads((Path(__file__).parent / "data" / "h200_capstone_fir.json")
                      .read_text("utf-8"))["meta"]
    ops = {op: int(n) for n, op in re.findall(r"(\d+) ([A-Z][A-Z0-9.]*)", meta["sass"])}
    assert sum(ops.values()) == 382 == int(re.search(r"(\d+) instructions executed",
                                                     meta["sass"]).group(1))
    mix = mystery("register_hog").after.instructions
    per_thread = {p: n * 32 / (1 << 24) for p, n in mix.counts}
    assert per_thread["fp32"] == ops["FADD"] + ops["FFMA"] + ops["HFMA2"] == 321
    assert per_thread["uniform"] == ops["ULDC"] + ops["S2UR"]
    assert per_thread["lsu"] == ops["LDG.128"] + ops["STG.128"] + ops["S2R"]
    assert sum(per_thread.values()) == 382
