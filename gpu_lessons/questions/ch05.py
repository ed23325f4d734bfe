"""Chapter 05 (roofline) exercise questions.

References come from the GPU catalog (:mod:`gpu_lessons.hardware`), the roofline model
(:mod:`gpu_lessons.roofline`: Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model", CACM 2009) and the kernel cost models (:mod:`gpu_lessons.costs`: GEMM and
tiled GEMM after Kirk & Hwu, PMPP ch. 5; convolution FLOPs as ``torch.utils.flop_counter``
counts them; decode attention, erratum E12), imported inside each function.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question


def _ridge_h100_fp16() -> float:
    """I_max = pi / beta for the H100 SXM5: 989.4 TFLOP/s dense FP16 / 3.35 TB/s HBM3.

    Source: NVIDIA H100 whitepaper v1.04, Table 3 (via the catalog).
    """
    from ..hardware import gpu

    return gpu("h100").ridge_point("fp16")


def _ridge(name: str, precision: str) -> float:
    from ..hardware import gpu

    return gpu(name).ridge_point(precision)


def _h200_bandwidth_ridge(_ref: float) -> float:
    from ..hardware import gpu

    return gpu("h100").peak_flops("fp16") / gpu("h200").bandwidth


def _axpy_bound() -> str:
    """FP32 axpy moves 12 bytes (read x, read y, write y) per 2 FLOPs: I = 1/6 FLOP/byte.

    Below the H100's FP32 ridge point (66.9 TFLOP/s / 3.35 TB/s ~ 20 FLOP/byte) the
    bandwidth roof caps it.
    """
    from ..hardware import gpu

    intensity = 2 / 12
    return "memory-bound" if intensity < gpu("h100").ridge_point("fp32") else "compute-bound"


def _kernel_time_reference(flops, bytes_moved, peak_flops, bandwidth):
    """Roofline time ``max(F / pi, B / beta)`` in seconds, from :mod:`gpu_lessons.roofline`."""
    from ..roofline import kernel_time

    return kernel_time(flops, bytes_moved, peak_flops, bandwidth)


def _kernel_time_inputs(rng) -> dict:
    """A catalog GPU and precision, and a kernel whose intensity spans 0.01..10^4 FLOP/byte,
    so both sides of every ridge point (about 5 to 600 FLOP/byte) come up."""
    from ..hardware import catalog

    gpus = list(catalog().values())
    g = gpus[int(rng.integers(len(gpus)))]
    precision = sorted(g.peak_tflops)[int(rng.integers(len(g.peak_tflops)))]
    bytes_moved = float(round(10 ** rng.uniform(3, 11)))
    intensity = 10 ** rng.uniform(-2, 4)
    return {"flops": float(round(bytes_moved * intensity)), "bytes_moved": bytes_moved,
            "peak_flops": g.peak_flops(precision), "bandwidth": g.bandwidth}


def _kernel_time_edges() -> list[dict]:
    """A pure copy (no FLOPs), pure arithmetic (no bytes), and a kernel exactly at the ridge."""
    from ..hardware import gpu

    h100 = gpu("h100")
    pi, beta = h100.peak_flops("fp16"), h100.bandwidth
    return [
        {"flops": 0.0, "bytes_moved": 8e9, "peak_flops": pi, "bandwidth": beta},
        {"flops": 1e12, "bytes_moved": 0.0, "peak_flops": pi, "bandwidth": beta},
        {"flops": pi, "bytes_moved": beta, "peak_flops": pi, "bandwidth": beta},
    ]


# -- GEMM intensity ---------------------------------------------------------------------------------

_GEMM_N = 4096


def _gemm_intensity() -> float:
    """Square FP16 GEMM, every matrix moved once: 2N³ / (3N² · 2 B) = N/3 FLOP/byte
    (:func:`gpu_lessons.costs.gemm`); N = 4096 gives 1365.3."""
    from ..costs import gemm

    return gemm(_GEMM_N, _GEMM_N, _GEMM_N, dtype="fp16").intensity


def _gemm_no_c(_ref: float) -> float:
    """C's write left out: FLOPs over the A and B reads alone."""
    from ..costs import gemm

    cost = gemm(_GEMM_N, _GEMM_N, _GEMM_N, dtype="fp16")
    read_ab = sum(b for label, _f, b in cost.parts if label in ("read A", "read B"))
    return cost.flops / read_ab


def _gemm_naive_intensity(_ref: float) -> float:
    from ..costs import gemm_naive

    return gemm_naive(_GEMM_N, _GEMM_N, _GEMM_N, dtype="fp16").intensity


# -- convolution FLOPs (erratum E7) -------------------------------------------------------------

def _conv_flops_reference(x, k, c_in, c_out, padding, stride):
    """2 x multiply-adds of a square conv layer, one image: :func:`gpu_lessons.costs.conv2d`."""
    from ..costs import conv2d

    return conv2d(x, k, c_in, c_out, padding=padding, stride=stride).flops


def _conv_flops_inputs(rng) -> dict:
    k = int(rng.choice([1, 3, 5, 7]))
    padding = int(rng.integers(0, k // 2 + 1))
    x = int(rng.integers(max(1, k - 2 * padding), 231))
    channels = [1, 3, 16, 32, 64, 96, 128, 256, 512]
    return {"x": x, "k": k, "c_in": int(rng.choice(channels)), "c_out": int(rng.choice(channels)),
            "padding": padding, "stride": int(rng.choice([1, 1, 2, 3, 4]))}


def _conv_flops_edges() -> list[dict]:
    """ResNet-50 layers (He et al. 2016, Table 1): the 7x7 stem, a 3x3 and a 1x1 of conv2_x,
    a strided 3x3 of conv3_x; then a layer whose stride does not divide evenly."""
    return [{"x": 224, "k": 7, "c_in": 3, "c_out": 64, "padding": 3, "stride": 2},
            {"x": 56, "k": 3, "c_in": 64, "c_out": 64, "padding": 1, "stride": 1},
            {"x": 56, "k": 1, "c_in": 64, "c_out": 256, "padding": 0, "stride": 1},
            {"x": 56, "k": 3, "c_in": 128, "c_out": 128, "padding": 1, "stride": 2},
            {"x": 10, "k": 3, "c_in": 8, "c_out": 8, "padding": 0, "stride": 3}]


def _conv_with(e, x, k, c_in, c_out, padding, stride, *, side):
    return 2 * side * side * k * k * c_in * c_out


def _conv_seed_macs(e, x, k, c_in, c_out, padding, stride):
    """The seed's M²·K²·Cin·Cout: multiply-adds, from :func:`gpu_lessons.costs.conv2d_macs_no_input`."""
    from ..costs import conv2d_macs_no_input

    return conv2d_macs_no_input(x, k, c_in, c_out, padding=padding, stride=stride).flops


def _conv_no_floor(e, x, k, c_in, c_out, padding, stride):
    side = (x + 2 * padding - k) / stride + 1
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


def _conv_input_side(e, x, k, c_in, c_out, padding, stride):
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=x)


def _conv_no_padding(e, x, k, c_in, c_out, padding, stride):
    from ..costs import conv_output_size

    side = conv_output_size(x, k, padding=0, stride=stride)
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


def _conv_no_stride(e, x, k, c_in, c_out, padding, stride):
    from ..costs import conv_output_size

    side = conv_output_size(x, k, padding=padding, stride=1)
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


# -- tile size to reach the ridge -----------------------------------------------------------------

#: 05.tile_for_ridge's options: square tile edges T of a shared-memory tiled GEMM.
_TILES = ("16", "32", "64", "128", "256")
_TILE_N = 8192


def _tile_for_ridge() -> str:
    """Smallest tile whose tiled FP32 GEMM (N = 8192) reaches the H100 SXM5's FP32 ridge.

    Tiled traffic s·(2N³/T + N²) gives I ≈ T/4 FLOP/byte in FP32 (PMPP ch. 5); the ridge is
    66.9 TFLOP/s / 3.35 TB/s ≈ 20 FLOP/byte.
    """
    from ..costs import gemm_tiled
    from ..hardware import gpu

    ridge = gpu("h100").ridge_point("fp32")
    for t in sorted(_TILES, key=int):
        if gemm_tiled(_TILE_N, _TILE_N, _TILE_N, tile=int(t)).intensity >= ridge:
            return t
    raise AssertionError("no tile in 05.tile_for_ridge reaches the ridge")


# -- decode attention (erratum E12) ---------------------------------------------------------------

def _decode_bound() -> str:
    """Decode attention (batch 16, 32 heads x 128, 4096 cached tokens, FP16) on an H100 SXM5's
    FP16 tensor roofline: about 1 FLOP/byte, far below the ridge (~295), so memory-bound."""
    from ..costs import attention_decode
    from ..roofline import Roofline

    cost = attention_decode(4096, n_heads=32, head_dim=128, batch=16)
    return Roofline.from_gpu("h100", "fp16").classify(cost.intensity).bound


QUESTIONS = (
    Question(
        id="05.ridge_h100",
        name="ridge_h100",
        points=2,
        prompt="The ridge point of an H100 SXM5 for dense FP16 tensor-core math (FP32 "
               "accumulate) against HBM3, in FLOP/byte.",
        hint="Ridge point = peak FLOP/s / memory bandwidth in B/s, both from the H100 SXM5 "
             "datasheet.",
        answer=Number(
            reference=_ridge_h100_fp16,
            units="FLOP/byte",
            rtol=0.01,
            mistakes=(
                Mistake("sparse_peak", "looks like the sparse (2:4) peak, which vendors print "
                        "at 2× the dense figure (or the FP8 peak). Rooflines use the dense "
                        "peak of the precision the kernel runs in.", value=lambda ref: 2 * ref),
                Mistake("tf32_or_macs", "that is the TF32 tensor-core roof, or a peak counted "
                        "in multiply-adds (half the FLOPs); the question asks for FP16.",
                        value=lambda ref: ref / 2),
                Mistake("fp32_peak", "that is the FP32 CUDA-core roof; the question asks for "
                        "the FP16 tensor-core roof.", value=lambda ref: _ridge("h100", "fp32")),
                Mistake("h200_bandwidth", "4.8 TB/s is the H200's HBM3e; the H100 SXM5 has "
                        "HBM3.", value=_h200_bandwidth_ridge),
                Mistake("h100_pcie", "that is the H100 PCIe (HBM2e); the question is about the "
                        "SXM5.", value=lambda ref: _ridge("h100 pcie", "fp16")),
                Mistake("gib", "mixed units: a datasheet's GB/s and TB/s are powers of 10, "
                        "not of 2 (GiB).", value=lambda ref: ref * 1e9 / 2**30),
                Mistake("inverted", "that is bandwidth / peak (bytes per FLOP), the inverse "
                        "of the ridge point.", value=lambda ref: 1 / ref),
            ),
        ),
    ),
    Question(
        id="05.axpy_bound",
        name="axpy_bound",
        points=1,
        prompt="A large FP32 axpy (y = a*x + y over 10^8 elements: 2 FLOPs and 12 bytes per "
               "element) on an H100 SXM5: which limit sets its speed?",
        answer=Choice(
            reference=_axpy_bound,
            options=("memory-bound", "compute-bound", "latency-bound"),
            mistakes=(
                Mistake("compute", "axpy does 2 FLOPs for every 12 bytes it moves; put that "
                        "intensity next to the H100's FP32 ridge point (peak / bandwidth) and "
                        "see which side it falls on.", value="compute-bound"),
                Mistake("latency", "10^8 independent elements give every SM thousands of "
                        "threads to hide latency with; ask instead which roof caps it.",
                        value="latency-bound"),
            ),
        ),
    ),
    Question(
        id="05.kernel_time",
        name="kernel_time",
        points=2,
        prompt="Write kernel_time(flops, bytes_moved, peak_flops, bandwidth) returning the "
               "roofline estimate of a kernel's run time in seconds (FLOP/s and B/s in).",
        answer=Function(
            reference=_kernel_time_reference,
            inputs=_kernel_time_inputs,
            edge_cases=_kernel_time_edges,
            signature="kernel_time(flops, bytes_moved, peak_flops, bandwidth)",
            units="seconds",
            rtol=1e-9,
            mistakes=(
                Mistake("sum", "that adds the compute time and the memory time; the roofline "
                        "model lets them overlap, so the slower of the two sets the time.",
                        value=lambda e, flops, bytes_moved, peak_flops, bandwidth:
                        flops / peak_flops + bytes_moved / bandwidth),
                Mistake("memory_only", "this kernel is compute-bound, and your function only "
                        "looks at the memory time.",
                        value=lambda e, flops, bytes_moved, peak_flops, bandwidth:
                        bytes_moved / bandwidth),
                Mistake("compute_only", "this kernel is memory-bound, and your function only "
                        "looks at the compute time.",
                        value=lambda e, flops, bytes_moved, peak_flops, bandwidth:
                        flops / peak_flops),
                Mistake("min", "that is the shorter of the two times; the slower limit sets "
                        "the kernel's time.",
                        value=lambda e, flops, bytes_moved, peak_flops, bandwidth:
                        min(flops / peak_flops, bytes_moved / bandwidth)),
                Mistake("microseconds", "return seconds, not µs.",
                        value=lambda e, **kw: e * 1e6),
                Mistake("milliseconds", "return seconds, not ms.",
                        value=lambda e, **kw: e * 1e3),
            ),
        ),
    ),
    Question(
        id="05.gemm_intensity",
        name="gemm_intensity",
        points=1,
        prompt="C = A @ B with A, B and C all 4096 x 4096 in FP16 (2 bytes per element). If "
               "every matrix crosses DRAM exactly once (A and B read, C written), what is the "
               "arithmetic intensity, in FLOP/byte?",
        hint="FLOPs = 2·m·n·k (a multiply-add is 2 FLOPs); bytes = (elements of A, B and C) x "
             "2 bytes.",
        answer=Number(
            reference=_gemm_intensity,
            units="FLOP/byte",
            rtol=0.01,
            mistakes=(
                Mistake("macs_or_fp32", "half the intensity: either each multiply-add was "
                        "counted as one FLOP (it is two), or the elements were taken as 4 "
                        "bytes (FP16 is 2).", value=lambda ref: ref / 2),
                Mistake("no_c", "C has to be written back to DRAM too: count its bytes.",
                        value=_gemm_no_c),
                Mistake("naive", "that is a naive kernel that re-reads A and B for every "
                        "multiply-add; here each matrix moves once.",
                        value=_gemm_naive_intensity),
                Mistake("fp8", "FP16 elements are 2 bytes, not 1.", value=lambda ref: ref * 2),
            ),
        ),
    ),
    Question(
        id="05.conv_flops",
        name="conv_flops",
        points=2,
        prompt="Write conv_flops(x, k, c_in, c_out, padding, stride): the FLOPs of one 2-D "
               "convolution layer on one image (x by x input with c_in channels, c_out filters "
               "of k by k, no bias), counting a multiply-add as 2 FLOPs. The output side is "
               "floor((x + 2·padding - k) / stride) + 1, as PyTorch computes it.",
        answer=Function(
            reference=_conv_flops_reference,
            inputs=_conv_flops_inputs,
            edge_cases=_conv_flops_edges,
            signature="conv_flops(x, k, c_in, c_out, padding, stride)",
            units="FLOPs",
            rtol=1e-9,
            mistakes=(
                Mistake("macs", "M²·K²·Cin·Cout counts multiply-adds (the seed notes' formula); "
                        "a multiply-add is 2 FLOPs.", value=_conv_seed_macs),
                Mistake("input_side", "the layer computes an M x M output, not x by x: use the "
                        "output side.", value=_conv_input_side),
                Mistake("no_floor", "the output side is a whole number: floor the division "
                        "when the stride does not divide evenly.", value=_conv_no_floor),
                Mistake("no_padding", "the padding enlarges the input the filter slides over: "
                        "include 2·padding in the output side.", value=_conv_no_padding),
                Mistake("no_stride", "a stride s moves the filter s pixels at a time: divide "
                        "by the stride.", value=_conv_no_stride),
            ),
        ),
    ),
    Question(
        id="05.tile_for_ridge",
        name="tile_for_ridge",
        points=2,
        prompt="A shared-memory tiled FP32 GEMM (8192 x 8192 x 8192, square T x T tiles, each "
               "block reading its strips of A and B once) runs on an H100 SXM5's FP32 CUDA "
               "cores. What is the smallest tile edge T that brings its intensity up to the "
               "ridge point? One of '16', '32', '64', '128', '256'.",
        hint="Tiled traffic is about 4·(2N³/T + N²) bytes for 2N³ FLOPs; the ridge point is "
             "peak FP32 FLOP/s / HBM bandwidth.",
        answer=Choice(
            reference=_tile_for_ridge,
            options=_TILES,
            mistakes=(
                *(Mistake(f"too_small_{t}", "with that tile the kernel stays left of the "
                          "ridge: compute its intensity (≈ T/4 FLOP/byte in FP32) and compare "
                          "it with the H100's FP32 peak / HBM bandwidth.", value=t)
                  for t in ("16", "32", "64")),
                Mistake("too_large", "that tile reaches the ridge, but so does a smaller one; "
                        "larger tiles cost more shared memory and registers per block.",
                        value="256"),
            ),
        ),
    ),
    Question(
        id="05.decode_bound",
        name="decode_bound",
        points=1,
        prompt="LLM decode: each of 16 sequences adds one token, and attention reads its KV cache "
               "of 4096 tokens (32 heads x 128 dims, FP16) once. On an H100 SXM5, which limit "
               "sets the speed of this attention step?",
        answer=Choice(
            reference=_decode_bound,
            options=("memory-bound", "compute-bound"),
            mistakes=(
                Mistake("compute", "that holds for prefill, where every token of the prompt "
                        "reuses each K and V. In decode each cached element is read once for "
                        "one multiply-add per new token: count FLOPs per byte and compare with "
                        "the ridge point.", value="compute-bound"),
            ),
        ),
    ),
)
