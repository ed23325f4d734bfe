"""Roofline model against published ratios, hand arithmetic and hardware measurements.

References (none is this package's own output):
* datasheet ratios worked by hand: H100 SXM5 FP16 989.4 TFLOP/s / 3.35 TB/s = 295.3 FLOP/byte,
  A100 FP32 19.5 / 2.039 = 9.56, H200 FP16 989 / 4.8 = 206.0;
* NVIDIA "GPU Performance Background User's Guide": V100 FP16 ops:byte ratio 125 / 0.9 = 138.9;
* A100 whitepaper: L2 bandwidth 5120 bytes/clk (V100: 2048) at the 1410 MHz (1530 MHz) boost;
* hardware measurements (H200 GEMM and copy rates: docs/measured/h200.md; V100 copy: CUDA C++
  Best Practices Guide §10.2.1.3):
  every measured run must sit on or under its roofline.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import costs
from gpu_lessons.roofline import (
    Roofline,
    attainable,
    compute_roofs,
    curves,
    kernel_time,
    log_intensities,
    memory_roofs,
    ridge_point,
    roofs,
)

PEAK = st.floats(1e9, 1e16)          # FLOP/s
BW = st.floats(1e8, 1e14)            # bytes/s
INTENSITY = st.floats(0, 1e6)        # FLOP/byte


# -- ridge points and roofs from the catalog ---------------------------------------------------------

def test_h100_fp16_ridge():
    # 989.4e12 FLOP/s / 3.35e12 B/s = 295.34 FLOP/byte
    assert Roofline.from_gpu("h100", "fp16").ridge_point == pytest.approx(295.34, abs=0.01)
    assert ridge_point(989.4e12, 3.35e12) == pytest.approx(295.34, abs=0.01)


def test_a100_fp32_ridge():
    # 19.5e12 / 2.039e12 = 9.56 ≈ 9.6 FLOP/byte
    assert Roofline.from_gpu("a100").ridge_point == pytest.approx(9.56, abs=0.01)


def test_v100_fp16_ridge_matches_nvidia_guide():
    # NVIDIA GPU Performance Background guide: V100 125 FP16 TFLOPS / 900 GB/s → 138.9
    assert Roofline.from_gpu("v100", "fp16").ridge_point == pytest.approx(138.9, abs=0.05)


def test_h200_fp16_ridge():
    # 989e12 / 4.8e12 = 206.04 FLOP/byte: more bandwidth than H100, same compute → lower ridge
    assert Roofline.from_gpu("h200", "fp16").ridge_point == pytest.approx(206.04, abs=0.01)


def test_h100_compute_roofs_are_the_dense_whitepaper_peaks():
    # H100 SXM5 whitepaper v1.04 Table 3, dense TFLOP/s
    want = {"fp64": 33.5, "fp64_tensor": 66.9, "fp32": 66.9, "tf32": 494.7, "fp16": 989.4,
            "bf16": 989.4, "fp8": 1978.9}
    got = {r.key: r.value / 1e12 for r in compute_roofs("h100")}
    assert got == pytest.approx(want)
    assert all(r.kind == "compute" and r.source for r in compute_roofs("h100"))


def test_memory_roofs_dram_and_l2():
    # A100: HBM2e 2039 GB/s; L2 5120 B/clk × 1410 MHz = 7.2192 TB/s
    a100 = {r.key: r.value for r in memory_roofs("a100")}
    assert a100 == pytest.approx({"dram": 2039e9, "l2": 7.2192e12})
    # V100: 2048 B/clk × 1530 MHz = 3.13344 TB/s
    assert {r.key: r.value for r in memory_roofs("v100")}["l2"] == pytest.approx(3.13344e12)
    # the catalog has no L2 bandwidth for H100: only the DRAM roof, and asking for L2 says so
    assert [r.key for r in memory_roofs("h100")] == ["dram"]
    with pytest.raises(ValueError, match=r"memory='l2'.*H100"):
        Roofline.from_gpu("h100", "fp16", "l2")
    assert all(r.source for r in memory_roofs("a100"))


def test_l2_roofline_has_a_lower_ridge():
    # A100 FP32 over L2: 19.5e12 / 7.2192e12 = 2.70 FLOP/byte
    assert Roofline.from_gpu("a100", "fp32", "l2").ridge_point == pytest.approx(2.701, abs=1e-3)


def test_rtx4090_accumulate_choice():
    # Ada whitepaper App. A: FP16 tensor 165.2 TFLOP/s with FP32 accumulate, 330.3 with FP16 (M18)
    assert Roofline.from_gpu("4090", "fp16").peak_flops == pytest.approx(165.2e12)
    fast = Roofline.from_gpu("4090", "fp16", accumulate="fp16")
    assert fast.peak_flops == pytest.approx(330.3e12)
    assert "FP16 accumulate" in fast.compute


def test_roofs_lists_compute_then_memory():
    rs = roofs("a100")
    kinds = [r.kind for r in rs]
    assert kinds == sorted(kinds)  # "compute" < "memory"
    assert "fp8" not in {r.key for r in rs}  # A100 has no FP8 tensor cores


# -- the model ---------------------------------------------------------------------------------------

def test_attainable_hand_cases():
    # π = 10 TFLOP/s, β = 1 TB/s → ridge 10 FLOP/byte
    pi, beta = 10e12, 1e12
    assert attainable(0, pi, beta) == 0
    assert attainable(1, pi, beta) == pytest.approx(1e12)     # β·I
    assert attainable(10, pi, beta) == pytest.approx(10e12)   # the ridge: both roofs meet
    assert attainable(100, pi, beta) == pytest.approx(10e12)  # flat roof
    assert attainable(math.inf, pi, beta) == pi               # no bytes: compute only
    out = attainable([0.5, 2, 20], pi, beta)
    assert isinstance(out, np.ndarray) and out == pytest.approx([0.5e12, 2e12, 10e12])
    assert isinstance(attainable(np.float64(2.0), pi, beta), float)


def test_classify_hand_cases():
    r = Roofline(peak_flops=10e12, bandwidth=1e12)
    low = r.classify(0.5)  # 20× below the ridge of 10
    assert low.bound == "memory-bound" and low.margin == pytest.approx(20)
    assert low.fraction_of_peak == pytest.approx(0.05)
    at = r.classify(10)  # the usual rule: I ≥ I_max is compute-bound
    assert at.bound == "compute-bound" and at.margin == pytest.approx(1)
    high = r.classify(40)
    assert high.bound == "compute-bound" and high.margin == pytest.approx(4)
    assert high.fraction_of_peak == 1
    assert r.classify(0).margin == math.inf


def test_kernel_time_hand_cases():
    # 1 GFLOP and 1 GB on π = 10 TFLOP/s, β = 1 TB/s: compute 0.1 ms, memory 1 ms → 1 ms,
    # memory-bound, 1 GFLOP / 1 ms = 1 TFLOP/s = 10 % of peak
    r = Roofline(10e12, 1e12)
    t = r.time(1e9, 1e9)
    assert t.seconds == pytest.approx(1e-3) and t.compute_seconds == pytest.approx(1e-4)
    assert t.bound.bound == "memory-bound" and t.fraction_of_peak == pytest.approx(0.1)
    assert kernel_time(1e9, 1e9, 10e12, 1e12) == pytest.approx(1e-3)
    # 1 TFLOP and 1 GB: compute 0.1 s, memory 1 ms → 0.1 s, compute-bound, 100 %
    t = r.time(1e12, 1e9)
    assert t.seconds == pytest.approx(0.1) and t.bound.bound == "compute-bound"
    assert t.fraction_of_peak == 1
    # a register-only loop moves no bytes: time is compute only
    assert r.time(1e9, 0).seconds == pytest.approx(1e-4)


def test_axpy_on_a100_hand_case():
    # axpy over 2^20 floats: 12 · 2^20 = 12,582,912 B at 2.039e12 B/s = 6.171 µs;
    # 2^21 FLOPs / 6.171 µs = 0.3398 TFLOP/s = 1.74 % of 19.5 TFLOP/s
    t = Roofline.from_gpu("a100", "fp32").point(costs.axpy(1 << 20))
    assert t.name == "axpy" and t.bound.bound == "memory-bound"
    assert t.seconds == pytest.approx(6.171e-6, rel=1e-3)
    assert t.fraction_of_peak == pytest.approx(0.01743, rel=1e-3)


def test_decode_attention_is_memory_bound_and_prefill_compute_bound_on_every_gpu():
    # M17: decode ≈ 1 FLOP/byte in FP16, prefill of 4096 tokens = 2048 FLOP/byte; every catalog
    # GPU's FP16 ridge lies between them (V100 139 … RTX 4090 164, H100 295)
    decode = costs.attention_decode(4096, n_heads=32, head_dim=128)
    prefill = costs.attention_prefill(4096, n_heads=32, head_dim=128)
    for name in ("v100", "a100", "h100", "h200", "b200", "4090", "l4", "t4"):
        r = Roofline.from_gpu(name, "fp16")
        assert r.point(decode).bound.bound == "memory-bound"
        assert r.point(prefill).bound.bound == "compute-bound"
    # on H100 decode (I = 4096/4097) is (989.4 / 3.35) · 4097/4096 = 295.4× below the ridge;
    # attainable = 3.35 TB/s × 4096/4097 FLOP/byte ≈ 3.35 TFLOP/s of 989.4
    b = Roofline.from_gpu("h100", "fp16").point(decode).bound
    assert b.margin == pytest.approx(989.4 / 3.35 * 4097 / 4096, rel=1e-9)
    assert b.attainable == pytest.approx(3.35e12 * 4096 / 4097)


# -- measurements sit under the roof (docs/measured/h200.md; Best Practices Guide) --------------

def test_h200_fp16_gemm_measurement():
    # cuBLAS FP16 GEMM 8192³ on an H200 ran at ≈ 800 TFLOP/s of 989 (81 %)
    r = Roofline.from_gpu("h200", "fp16")
    g = costs.gemm(8192, 8192, 8192, "fp16")
    a = r.achieved(g.flops, g.bytes, g.flops / 800e12, name="gemm 8192³")
    assert r.point(g).bound.bound == "compute-bound"
    assert a.fraction_of_peak == pytest.approx(0.81, abs=0.005)
    assert a.fraction_of_roofline == pytest.approx(0.81, abs=0.005) and a.fraction_of_roofline <= 1


def test_measured_rates_never_beat_the_roofline():
    # (gpu, precision, kernel, measured rate, which rate): docs/measured/h200.md, Best Practices Guide
    n = 1 << 28
    copy = costs.elementwise(n, flops_per_element=0, reads=1, writes=1)
    gemm16 = costs.gemm(8192, 8192, 8192, "fp16")
    gemm32 = costs.gemm(8192, 8192, 8192, "fp32")
    runs = [("h200", "fp32", copy, copy.bytes / 4.2e12, (0.83, 0.88)),    # 4.0–4.2 of 4.8 TB/s
            ("h200", "fp32", copy, copy.bytes / 4.0e12, (0.83, 0.88)),
            ("v100", "fp32", copy, copy.bytes / 790e9, (0.87, 0.89)),    # 790 of 898–900 GB/s
            ("h200", "fp16", gemm16, gemm16.flops / 800e12, (0.80, 0.82)),
            ("h200", "fp32", gemm32, gemm32.flops / 51e12, (0.75, 0.77))]  # 51 of 66.9
    for name, prec, k, seconds, (lo, hi) in runs:
        a = Roofline.from_gpu(name, prec).achieved(k.flops, k.bytes, seconds, name=k.name)
        assert lo <= a.fraction_of_roofline <= hi <= 1, (name, k.name, a)
    copy_run = Roofline.from_gpu("h200").achieved(copy.flops, copy.bytes, copy.bytes / 4.1e12)
    assert copy_run.fraction_of_bandwidth == pytest.approx(4.1 / 4.8)
    assert copy_run.fraction_of_peak == 0


# -- properties ----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(pi=PEAK, beta=BW, i=INTENSITY)
def test_attainable_is_under_both_roofs(pi, beta, i):
    p = attainable(i, pi, beta)
    assert p <= pi and p <= beta * i
    assert p == pytest.approx(min(pi, beta * i))  # one of the roofs is touched


@settings(max_examples=200, deadline=None)
@given(pi=PEAK, beta=BW, a=INTENSITY, b=INTENSITY)
def test_attainable_is_monotone_in_intensity(pi, beta, a, b):
    lo, hi = sorted((a, b))
    assert attainable(lo, pi, beta) <= attainable(hi, pi, beta)
    xs = log_intensities(1e-3, 1e5, 50)
    ys = attainable(xs, pi, beta)
    assert np.all(np.diff(ys) >= 0)


@settings(max_examples=200, deadline=None)
@given(pi=PEAK, beta=BW, i=st.floats(1e-6, 1e6))
def test_classification_agrees_with_the_ridge(pi, beta, i):
    r = Roofline(pi, beta)
    b = r.classify(i)
    assert (b.bound == "compute-bound") == (i >= pi / beta)
    assert b.margin >= 1
    assert b.attainable == pytest.approx(r.attainable(i))


@settings(max_examples=200, deadline=None)
@given(pi=PEAK, beta=BW, flops=st.floats(1, 1e18), nbytes=st.floats(1, 1e15))
def test_time_is_the_slower_of_compute_and_memory(pi, beta, flops, nbytes):
    t = Roofline(pi, beta).time(flops, nbytes)
    assert t.seconds >= flops / pi * (1 - 1e-12) and t.seconds >= nbytes / beta * (1 - 1e-12)
    assert t.seconds == pytest.approx(max(flops / pi, nbytes / beta))
    # running flops in that time is exactly the attainable rate: F / t = min(π, β·I)
    assert flops / t.seconds == pytest.approx(t.flops_per_s)
    assert 0 < t.fraction_of_peak <= 1


# -- plottable curves ----------------------------------------------------------------------------------

def test_curves_for_every_roof_pair():
    c = curves("a100")
    assert len(c.lines) == 6 * 2  # six precisions × (HBM, L2)
    xs = c.intensity
    assert xs[0] == pytest.approx(1e-2) and xs[-1] == pytest.approx(1e4)
    assert np.allclose(xs[1:] / xs[:-1], xs[1] / xs[0])  # log-spaced
    fp16 = c.line("fp16", "dram")
    # below the ridge 312/2.039 = 153 the line is β·I, above it the 312 TFLOP/s roof
    assert fp16.ridge_point == pytest.approx(153.02, abs=0.01)
    assert fp16.attainable[0] == pytest.approx(2039e9 * 1e-2)
    assert fp16.attainable[-1] == pytest.approx(312e12)
    assert fp16.label == "FP16 tensor / HBM2e (DRAM)"
    for ln in c.lines:
        assert np.all(ln.attainable <= ln.compute.value)
        assert np.all(ln.attainable <= ln.memory.value * xs * (1 + 1e-12))
    with pytest.raises(ValueError):
        xs[0] = 5  # read-only: a view cannot change the model's numbers


def test_curves_selection_and_custom_intensities():
    c = curves("h100", precisions=["fp32", "fp8"], intensity=[1, 100, 1000])
    assert [ln.compute.key for ln in c.lines] == ["fp32", "fp8"]
    # FP8 roof 1978.9 TFLOP/s over 3.35 TB/s: at I = 100 → 335 TFLOP/s, at 1000 → the roof
    assert c.line("fp8").attainable == pytest.approx([3.35e12, 335e12, 1978.9e12])
    with pytest.raises(ValueError, match="precision='fp16'"):
        c.line("fp16")


def test_single_roofline_curve():
    xs, ys = Roofline(10e12, 1e12).curve(n=5)  # 1e-2 … 1e4, one point per 1.5 decades
    assert xs == pytest.approx([1e-2, 10**-0.5, 10, 10**2.5, 1e4])
    assert ys == pytest.approx([1e10, 1e12 * 10**-0.5, 10e12, 10e12, 10e12])


def test_roofline_from_the_catalog_names_its_source():
    r = Roofline.from_gpu("h100", "fp16")
    assert "whitepaper" in r.source


# -- bad input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, exc, name", [
    (lambda: Roofline(-1, 1e12), ValueError, "peak_flops"),
    (lambda: Roofline(1e12, 0), ValueError, "bandwidth"),
    (lambda: Roofline("fast", 1e12), TypeError, "peak_flops"),
    (lambda: Roofline(1e12, float("inf")), ValueError, "bandwidth"),
    (lambda: Roofline(1e12, 1e12, name=3), TypeError, "name"),
    (lambda: attainable(-1, 1e12, 1e12), ValueError, "intensity"),
    (lambda: attainable(float("nan"), 1e12, 1e12), ValueError, "intensity"),
    (lambda: attainable([1, -2], 1e12, 1e12), ValueError, "intensity"),
    (lambda: attainable("high", 1e12, 1e12), TypeError, "intensity"),
    (lambda: attainable(True, 1e12, 1e12), TypeError, "intensity"),
    (lambda: attainable([], 1e12, 1e12), ValueError, "intensity"),   # an empty list
    (lambda: Roofline(1, 1).classify([1, 2]), TypeError, "intensity"),
    (lambda: ridge_point(1e12, -3), ValueError, "bandwidth"),
    (lambda: kernel_time(0, 0, 1e12, 1e12), ValueError, "flops and bytes"),
    (lambda: kernel_time(-1, 10, 1e12, 1e12), ValueError, "flops"),
    (lambda: Roofline(1, 1).time(1, -1), ValueError, "bytes"),
    (lambda: Roofline(1, 1).achieved(1, 1, 0), ValueError, "seconds"),
    (lambda: Roofline(1, 1).point(3.0), TypeError, "cost"),
    (lambda: Roofline.from_gpu("h9000"), ValueError, "not in the GPU catalog"),
    (lambda: Roofline.from_gpu("a100", "fp8"), ValueError, "precision='fp8'"),
    (lambda: Roofline.from_gpu("a100", "fp128"), ValueError, "precision"),
    (lambda: Roofline.from_gpu("a100", "fp32", "sram"), ValueError, "memory"),
    (lambda: log_intensities(10, 1), ValueError, "hi"),
    (lambda: log_intensities(0, 1), ValueError, "lo"),
    (lambda: log_intensities(1, 10, 1), ValueError, "n"),
    (lambda: curves("a100", precisions=["fp8"]), ValueError, "precisions"),
    (lambda: curves("a100", memories=[]), ValueError, "memories"),
])
def test_bad_input_names_the_parameter(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
