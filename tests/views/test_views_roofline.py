"""Roofline explorer: the plot shows the roofline model's numbers, and every control moves them.

References: datasheet peaks and bandwidths (H100 SXM5 FP16 dense 989.4 TFLOP/s, 3.35 TB/s HBM3;
A100 FP32 19.5 TFLOP/s, 2.039 TB/s; NVIDIA whitepapers, see docs/sources.md), hand-derived
kernel intensities (derivations in the comments), and direct calls of the models
(:mod:`gpu_lessons.costs`, :mod:`gpu_lessons.roofline`) built independently of the view.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import costs
from gpu_lessons.hardware import catalog
from gpu_lessons.roofline import Roofline
from gpu_lessons.views.roofline import (
    CHANNELS,
    CONTEXTS,
    GEMM_SIZES,
    INTENSITY_RANGE,
    KERNELS,
    TILES,
    roofline_explorer,
)

H100_FP16 = 989.4e12   # dense FP16 tensor, FP32 accumulate (H100 whitepaper v1.04)
H100_BW = 3.35e12      # HBM3, bytes/s (H100 SXM5 datasheet)

SLIDERS = {"n": GEMM_SIZES, "tile": TILES, "channels": CHANNELS, "context": CONTEXTS}


@pytest.fixture(scope="module")
def shared():
    """One explorer for tests that set every control they rely on."""
    return roofline_explorer()


def _points(ex, gpu_name=None) -> dict[str, dict]:
    """The plotted points of one GPU, by the cost model's name."""
    d = ex.source.data
    rows = {}
    for i, name in enumerate(d["model"]):
        if gpu_name is None or d["gpu"][i] == gpu_name:
            rows[name] = {k: d[k][i] for k in d}
    return rows


def _expected(n, tile, channels, context, dtype) -> list[costs.KernelCost]:
    """The default kernel set, built straight from the cost models (not from the view)."""
    return [costs.axpy(2**24, dtype=dtype), costs.reduction(2**24, dtype=dtype),
            costs.gemm_naive(n, n, n, dtype=dtype), costs.gemm_tiled(n, n, n, tile=tile, dtype=dtype),
            costs.gemm(n, n, n, dtype=dtype),
            costs.conv2d(56, 3, channels, channels, padding=1, dtype=dtype),
            costs.conv2d_macs_no_input(56, 3, channels, channels, padding=1),
            costs.attention_prefill(context, n_heads=32, head_dim=128, dtype=dtype),
            costs.attention_decode(context, n_heads=32, head_dim=128, dtype=dtype)]


def _set(ex, **values):
    for k, v in values.items():
        ex.controls[k].value = v


# -- default state, against published figures and hand derivations --------------------------------

def test_default_state():
    ex = roofline_explorer()
    assert ex.warning.value == ""
    pts = _points(ex, "H100 SXM5")
    assert len(pts) == len(KERNELS)
    # axpy in FP16: 2 FLOPs per element, 3 elements × 2 bytes moved -> 1/3 FLOP/byte;
    # memory-bound on H100 at 3.35 TB/s × 1/3 = 1.117 TFLOP/s.
    axpy = pts["axpy"]
    assert axpy["x"] == pytest.approx(1 / 3)
    assert axpy["y"] == pytest.approx(H100_BW / 3 * 1e-12)
    assert axpy["bound"] == "memory-bound"
    # GEMM with every operand moved once, N = 4096 in FP16: 2N³ / (3N² × 2 B) = N/3 = 1365.3
    # FLOP/byte, far above the ridge 989.4/3.35 = 295 -> on the compute roof.
    gemm = pts["GEMM (each operand moved once)"]
    assert gemm["x"] == pytest.approx(4096 / 3)
    assert gemm["y"] == pytest.approx(989.4)
    assert gemm["bound"] == "compute-bound"
    # Decode attention over 4096 cached tokens: 4·L·d FLOPs per head over (2·L·d + 2·d)·2 bytes
    # = 16384 / 16388 FLOP/byte ≈ 1 (M17: memory-bound).
    dec = pts["attention decode"]
    assert dec["x"] == pytest.approx(16384 / 16388)
    assert dec["bound"] == "memory-bound"
    assert pts["attention prefill"]["bound"] == "compute-bound"
    # The readout names the ridge point: 989.4 / 3.35 = 295.3 FLOP/byte.
    assert "295 FLOP/byte" in ex.readout.value


def test_roof_lines_have_their_corner_at_the_ridge():
    ex = roofline_explorer(gpus="H100 SXM5", precision="fp16")
    main = ex.line_sources["main"].data
    assert main["label"] == ["H100 SXM5: FP16 tensor / HBM3 (DRAM)"]
    xs, ys = list(main["xs"][0]), list(main["ys"][0])
    assert xs[0] == INTENSITY_RANGE[0] and xs[-1] == INTENSITY_RANGE[1]
    ridge = H100_FP16 / H100_BW
    assert any(math.isclose(x, ridge) for x in xs)
    assert ys[0] == pytest.approx(H100_BW * 1e-2 * 1e-12)     # 0.0335 TFLOP/s at 0.01 FLOP/byte
    assert ys[-1] == pytest.approx(989.4)
    assert main["ridge"][0] == pytest.approx(ridge)
    # The dashed FP32 CUDA-core roof: 66.9 TFLOP/s on H100 (whitepaper).
    fp32 = ex.line_sources["fp32"].data
    assert fp32["ys"][0][-1] == pytest.approx(66.9)
    # The catalog has no L2 bandwidth for H100: no dotted roof.
    assert ex.line_sources["l2"].data["xs"] == []


def test_several_gpus_and_l2_roofs():
    ex = roofline_explorer(gpus=("V100", "a100"), precision="fp32")
    assert ex.controls["gpus"].value == ("V100 SXM2", "A100 SXM4 80GB")
    main = ex.line_sources["main"].data
    assert [ys[-1] for ys in main["ys"]] == pytest.approx([15.7, 19.5])  # datasheet FP32
    assert main["color"][0] != main["color"][1]
    # precision fp32: the FP32 reference roof would duplicate the main one, so it is not drawn.
    assert ex.line_sources["fp32"].data["xs"] == []
    # L2: A100 5120 B/clk × 1410 MHz = 7.22 TB/s (GA100 whitepaper: 5120 bytes/clk).
    l2 = ex.line_sources["l2"].data
    a100 = l2["label"].index("A100 SXM4 80GB: FP32 (CUDA cores) / L2")
    assert l2["bandwidth"][a100] == pytest.approx(5120 * 1410e6 * 1e-9)
    # A100 FP32 / HBM2e: axpy at 1/6 FLOP/byte gets 2039 GB/s / 6 = 0.34 TFLOP/s.
    pts = _points(ex, "A100 SXM4 80GB")
    assert pts["axpy"]["y"] == pytest.approx(2.039e12 / 6 * 1e-12)
    _set(ex, l2_roof=False)
    assert ex.line_sources["l2"].data["xs"] == []
    _set(ex, precision="fp16", fp32_roof=False)
    assert ex.line_sources["fp32"].data["xs"] == []
    _set(ex, fp32_roof=True)
    assert len(ex.line_sources["fp32"].data["xs"]) == 2


# -- every control moves the points the way the models say ----------------------------------------

@pytest.mark.parametrize("control,value", [("n", 1024), ("tile", 128), ("channels", 512),
                                           ("context", 32768), ("precision", "fp8"),
                                           ("precision", "tf32")])
def test_each_control_matches_a_direct_model_call(control, value):
    ex = roofline_explorer(gpus=("H100 SXM5",), precision="fp16")
    before = dict(ex.source.data)
    _set(ex, **{control: value})
    c = ex.controls
    dtype = {"fp8": "fp8", "tf32": "fp32"}.get(c["precision"].value, "fp16")
    rf = Roofline.from_gpu("H100 SXM5", c["precision"].value)
    expected = _expected(c["n"].value, c["tile"].value, c["channels"].value,
                         c["context"].value, dtype)
    pts = _points(ex, "H100 SXM5")
    for cost in expected:
        kt = rf.point(cost)
        p = pts[cost.name]
        assert p["x"] == pytest.approx(cost.intensity)
        assert p["flops"] == cost.flops and p["bytes"] == cost.bytes
        assert p["y"] == pytest.approx(kt.flops_per_s * 1e-12)
        assert p["bound"] == kt.bound.bound
    assert ex.source.data != before


def test_tile_moves_only_the_tiled_gemm():
    ex = roofline_explorer()
    old = _points(ex)
    _set(ex, tile=256)
    new = _points(ex)
    moved = {k for k in new if k in old and new[k]["x"] != old[k]["x"]}
    assert moved == set()  # the tiled GEMM's name carries its tile, so it is a new entry
    assert "GEMM tiled 256×256" in new and "GEMM tiled 32×32" not in new
    # Tiled GEMM, N = 4096, T = 256, FP16: bytes = 2·(2N³/T + N²), FLOPs = 2N³ ->
    # intensity = N³ / (2N³/T + N²) = 4096 / (32 + 1) = 124.1 FLOP/byte.
    assert new["GEMM tiled 256×256"]["x"] == pytest.approx(4096 / 33)


def test_often_quoted_conv_point_beside_the_corrected_one():
    # docs/misconceptions.md, M16
    ex = roofline_explorer(precision="fp32")
    pts = _points(ex)
    quoted = next(v for k, v in pts.items() if k.startswith("conv2d (often-quoted"))
    fixed = pts["conv2d"]
    # C = 64, 56×56 input, 3×3, padding 1 -> 56×56 output.  Quoted: MACs 56²·9·64² = 115,605,504
    # counted as "FLOPs"; corrected: 2× that.  The quoted bytes omit the 56²·64·4 B input map.
    assert quoted["flops"] == 56 * 56 * 9 * 64 * 64
    assert fixed["flops"] == 2 * 56 * 56 * 9 * 64 * 64
    assert fixed["bytes"] - quoted["bytes"] == 56 * 56 * 64 * 4


# -- measured points -----------------------------------------------------------------------------------

def test_add_points_and_clear():
    ex = roofline_explorer()
    ex.add_points("cuBLAS FP16 8192³ (H200)", 2730.7, 800e12)
    ex.add_points(["copy", "strided copy"], [1 / 8, 1 / 64], [0.5e12, 0.06e12], color="#D55E00")
    d = ex.measured.data
    assert d["name"] == ["cuBLAS FP16 8192³ (H200)", "copy", "strided copy"]
    assert d["x"] == pytest.approx([2730.7, 0.125, 1 / 64])
    assert d["y"] == pytest.approx([800.0, 0.5, 0.06])
    assert d["color"][1:] == ["#D55E00", "#D55E00"]
    ex.update()  # recomputing the model keeps measured points
    assert len(ex.measured.data["x"]) == 3
    ex.clear_points()
    assert ex.measured.data["x"] == []


@pytest.mark.parametrize("args,err,word", [
    (("k", -1.0, 1e12), ValueError, "intensity"), (("k", 1.0, 0.0), ValueError, "flops_per_s"),
    (("k", float("nan"), 1e12), ValueError, "intensity"),
    (("k", [1.0, 2.0], [1e12]), ValueError, "flops_per_s"),
    ((["a"], [1.0, 2.0], [1e12, 2e12]), ValueError, "name"),
    (("k", "1", 1e12), TypeError, "intensity"),
])
def test_add_points_rejects_bad_input(shared, args, err, word):
    ex = shared
    ex.clear_points()
    with pytest.raises(err, match=word):
        ex.add_points(*args)
    with pytest.raises(TypeError, match="color"):
        ex.add_points("k", 1.0, 1e12, color=3)
    assert ex.measured.data["x"] == []


# -- arguments and refusals ---------------------------------------------------------------------------

def test_custom_and_chosen_kernels():
    mine = costs.KernelCost("my stencil", 8e9, 4e9)
    ex = roofline_explorer(gpus="h100", kernels=["axpy", mine])
    pts = _points(ex)
    assert set(pts) == {"axpy", "my stencil"}
    assert pts["my stencil"]["x"] == pytest.approx(2.0)
    assert pts["my stencil"]["y"] == pytest.approx(2.0 * H100_BW * 1e-12)
    assert _points(roofline_explorer(kernels=[])) == {}


@pytest.mark.parametrize("kwargs,err,word", [
    ({"gpus": "Z9000"}, ValueError, "Z9000"), ({"gpus": 5}, TypeError, "gpus"),
    ({"gpus": []}, ValueError, "gpus"), ({"precision": "fp4"}, ValueError, "precision"),
    ({"kernels": ["gemv"]}, ValueError, "kernels"), ({"kernels": [3]}, TypeError, "kernels"),
])
def test_bad_arguments_raise_clearly(kwargs, err, word):
    with pytest.raises(err, match=word):
        roofline_explorer(**kwargs)


def test_refusals_become_warnings():
    ex = roofline_explorer(gpus=("V100 SXM2", "H100 SXM5"), precision="fp16")
    _set(ex, precision="bf16")  # V100 has no BF16: skipped with a note, H100 still drawn
    assert ex.warning.value == ""
    assert "V100 SXM2" in ex.readout.value and "bf16" in ex.readout.value
    assert set(ex.source.data["gpu"]) == {"H100 SXM5"}
    _set(ex, gpus=("V100 SXM2",))
    assert "bf16" in ex.warning.value and "V100" in ex.warning.value
    assert ex.source.data["x"] == [] and ex.line_sources["main"].data["xs"] == []
    _set(ex, gpus=())
    assert "at least one GPU" in ex.warning.value
    _set(ex, gpus=("V100 SXM2",), precision="fp16")
    assert ex.warning.value == "" and ex.source.data["x"]


def test_extreme_slider_values_never_raise():
    ex = roofline_explorer(gpus=tuple(catalog()), precision="fp32")
    for precision in ("fp8", "fp64", "fp16"):
        _set(ex, precision=precision)
        for name, options in SLIDERS.items():
            for v in (options[0], options[-1]):
                _set(ex, **{name: v})
                assert ex.warning.value == "", (precision, name, v)
                xs = ex.source.data["x"]
                assert all(INTENSITY_RANGE[0] <= x <= INTENSITY_RANGE[1] for x in xs)


# -- properties ----------------------------------------------------------------------------------------

@settings(max_examples=25)
@given(n=st.sampled_from(GEMM_SIZES), tile=st.sampled_from(TILES),
       channels=st.sampled_from(CHANNELS), context=st.sampled_from(CONTEXTS),
       precision=st.sampled_from(["fp32", "fp16", "bf16", "tf32", "fp8"]),
       gpus=st.lists(st.sampled_from(list(catalog())), min_size=1, max_size=3, unique=True))
def test_points_lie_on_their_roof(shared, n, tile, channels, context, precision, gpus):
    ex = shared
    order = [g for g in catalog() if g in gpus]
    _set(ex, gpus=tuple(order), precision=precision, n=n, tile=tile, channels=channels,
         context=context)
    drawn = set(ex.source.data["gpu"])
    have = {g for g in order if precision in catalog()[g].peak_tflops}
    assert drawn == have
    if not have:
        assert precision in ex.warning.value
        return
    d = ex.source.data
    for i, g in enumerate(d["gpu"]):
        peak = catalog()[g].peak_flops(precision) * 1e-12
        bw = catalog()[g].bandwidth * 1e-12
        # attainable = min(peak, bandwidth × intensity): never above either roof, on one of them
        assert d["y"][i] <= peak * (1 + 1e-12)
        assert d["y"][i] <= bw * d["x"][i] * (1 + 1e-12)
        assert math.isclose(d["y"][i], min(peak, bw * d["x"][i]), rel_tol=1e-9)
        assert d["bound"][i] == ("compute-bound" if d["x"][i] >= peak / bw else "memory-bound")


