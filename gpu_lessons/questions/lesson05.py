"""Chapter 05 (roofline) exercise questions.

References come from the GPU catalog (:mod:`gpu_lessons.hardware`), the roofline model
(:mod:`gpu_lessons.roofline`: Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model", CACM 2009) and the kernel cost models (:mod:`gpu_lessons.costs`: GEMM and
tiled GEMM after Kirk & Hwu, PMPP ch. 5; convolution FLOPs as ``torch.utils.flop_counter``
counts them; attention at decode time).
"""

from __future__ import annotations

from ..costs import attention, conv2d, conv_output_size, gemm, gemm_tiled
from ..hardware import catalog
from ..hardware import gpu as lookup
from ..roofline import Roofline, kernel_time
from ._common import gpus
from .types import Choice, Function, Mistake, Number, Question, Vary

#: How the prompts name a precision's roof.
_ROOF_TEXT = {"fp16": "dense **FP16 tensor-core** math (FP32 accumulate)",
              "tf32": "dense **TF32 tensor-core** math",
              "fp8": "dense **FP8 tensor-core** math",
              "fp32": "**FP32** math on the CUDA cores (no tensor cores)",
              "fp64": "**FP64** math on the CUDA cores (no tensor cores)"}


# -- 05.ridge_h100: the ridge point of an H100 ----------------------------------------------------

_OTHER_H100 = {"h100": "h100 pcie", "h100 pcie": "h100"}


def _ridge(gpu, precision) -> float:
    """I_max = pi / beta: the dense peak of ``precision`` over the DRAM bandwidth.  H100 SXM5,
    TF32: 494.7 TFLOP/s / 3.35 TB/s = 147.7 FLOP/byte (H100 whitepaper v1.04, Table 3).  The
    default asks for TF32 because the lessons work out the FP16 and FP32 ridges themselves."""
    return lookup(gpu).ridge_point(precision)


def _h200_bandwidth_ridge(ref, gpu, precision) -> float | None:
    if gpu != "h100":
        return None
    return lookup(gpu).peak_flops(precision) / lookup("h200").bandwidth


def _ridge_fields(gpu, precision) -> dict:
    g = lookup(gpu)
    return {"roof": _ROOF_TEXT[precision], "memory": g.memory_type,
            "other": lookup(_OTHER_H100[gpu]).name}


# -- 05.axpy_bound: which roof caps an elementwise kernel -------------------------------------------

def _axpy_bound(gpu, fmas) -> str:
    """FP32, per element: read x and y, write y (12 bytes), ``fmas`` FMAs (2 FLOPs each):
    I = fmas / 6 FLOP/byte, against the GPU's FP32 ridge (H100 SXM5: 66.9 / 3.35 = 20
    FLOP/byte, so axpy, one FMA, is far left of it)."""
    intensity = 2 * fmas / 12
    return "memory-bound" if intensity < lookup(gpu).ridge_point("fp32") else "compute-bound"


def _axpy_other(wanted: str):
    """A mistake value: the wrong roof ``wanted``, when it is wrong for these parameters."""
    def value(gpu, fmas):
        return wanted if _axpy_bound(gpu, fmas) != wanted else None
    return value


def _kernel_time_reference(flops, bytes_moved, peak_flops, bandwidth):
    """Roofline time ``max(F / pi, B / beta)`` in seconds, from :mod:`gpu_lessons.roofline`."""
    return kernel_time(flops, bytes_moved, peak_flops, bandwidth)


def _kernel_time_inputs(rng) -> dict:
    """A catalog GPU and precision, and a kernel whose intensity spans 0.01..10^4 FLOP/byte,
    so both sides of every ridge point (about 5 to 600 FLOP/byte) come up."""
    choices = list(catalog().values())
    g = choices[int(rng.integers(len(choices)))]
    precision = sorted(g.peak_tflops)[int(rng.integers(len(g.peak_tflops)))]
    bytes_moved = float(round(10 ** rng.uniform(3, 11)))
    intensity = 10 ** rng.uniform(-2, 4)
    return {"flops": float(round(bytes_moved * intensity)), "bytes_moved": bytes_moved,
            "peak_flops": g.peak_flops(precision), "bandwidth": g.bandwidth}


def _kernel_time_edges() -> list[dict]:
    """A pure copy (no FLOPs), pure arithmetic (no bytes), and a kernel exactly at the ridge."""
    h100 = lookup("h100")
    pi, beta = h100.peak_flops("fp16"), h100.bandwidth
    return [
        {"flops": 0.0, "bytes_moved": 8e9, "peak_flops": pi, "bandwidth": beta},
        {"flops": 1e12, "bytes_moved": 0.0, "peak_flops": pi, "bandwidth": beta},
        {"flops": pi, "bytes_moved": beta, "peak_flops": pi, "bandwidth": beta},
    ]


# -- 05.gemm_ridge_size: how large a GEMM reaches the ridge -------------------------------------------

#: Precision of the math -> (element type in memory, bytes per element).  TF32 tensor cores
#: read FP32 data.
_GEMM_DTYPE = {"fp16": ("FP16", 2), "tf32": ("FP32", 4), "fp8": ("FP8", 1), "fp32": ("FP32", 4)}
_GEMM_GPUS = ("h100", "h200", "b200", "l40s", "rtx 4090", "h100 pcie", "l4")


def _smallest_n(ridge: float, intensity) -> int:
    """The smallest N >= 1 with ``intensity(N) >= ridge`` (intensity grows with N)."""
    high = 1
    while intensity(high) < ridge:
        high *= 2
    low = high // 2
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (low, mid) if intensity(mid) >= ridge else (mid, high)
    return high


def _gemm_ridge_size(gpu, precision, *, size=None, flops_per_mac=2, write_c=True) -> int:
    """Smallest square N whose GEMM, each matrix moved once, reaches the ridge of ``gpu`` at
    ``precision``: 2N³ / (3N²·s) = 2N/(3s) >= pi / beta (:func:`gpu_lessons.costs.gemm`).
    H100 SXM5, FP16: 2N/6 >= 295.3, so N = 886.03 -> 887."""
    s = size or _GEMM_DTYPE[precision][1]
    dtype = {1: "fp8", 2: "fp16", 4: "fp32"}[s]
    ridge = lookup(gpu).ridge_point(precision)

    def intensity(n):
        cost = gemm(n, n, n, dtype=dtype)
        moved = cost.bytes if write_c else cost.bytes * 2 / 3
        return cost.flops * flops_per_mac / 2 / moved

    return _smallest_n(ridge, intensity)


def _gemm_fields(gpu, precision) -> dict:
    dtype, size = _GEMM_DTYPE[precision]
    # "1 byte", "2 bytes": the phrase the prompt and a mistake print
    return {"roof": _ROOF_TEXT[precision], "dtype": dtype,
            "bytes": f"{size} byte" + ("s" if size != 1 else "")}


# -- 05.conv_flops: convolution FLOPs ----------------------------------------------------------------

def _conv_flops_reference(x, k, c_in, c_out, padding, stride):
    """2 x multiply-adds of a square conv layer, one image: :func:`gpu_lessons.costs.conv2d`."""
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


def _conv_macs(e, x, k, c_in, c_out, padding, stride):
    """M²·K²·Cin·Cout: multiply-adds, not FLOPs."""
    side = conv_output_size(x, k, padding=padding, stride=stride)
    return side * side * k * k * c_in * c_out


def _conv_no_floor(e, x, k, c_in, c_out, padding, stride):
    side = (x + 2 * padding - k) / stride + 1
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


def _conv_input_side(e, x, k, c_in, c_out, padding, stride):
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=x)


def _conv_no_padding(e, x, k, c_in, c_out, padding, stride):
    side = conv_output_size(x, k, padding=0, stride=stride)
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


def _conv_no_stride(e, x, k, c_in, c_out, padding, stride):
    side = conv_output_size(x, k, padding=padding, stride=1)
    return _conv_with(e, x, k, c_in, c_out, padding, stride, side=side)


# -- 05.tile_for_ridge: tile size to reach the ridge ----------------------------------------------

#: 05.tile_for_ridge's options: square tile edges T of a shared-memory tiled GEMM.
_TILES = ("16", "32", "64", "128", "256")
_TILE_N = 8192
#: GPUs whose FP32 ridge one of the tiles reaches (the L40S's and RTX 4090's need more).
_TILE_GPUS = ("h100", "a100", "h200", "b200", "v100", "t4", "h100 pcie", "rtx 3090")


def _tile_for_ridge(gpu) -> str:
    """Smallest tile whose tiled FP32 GEMM (N = 8192) reaches the GPU's FP32 ridge.

    Tiled traffic s·(2N³/T + N²) gives I ≈ T/4 FLOP/byte in FP32 (PMPP ch. 5); the H100
    SXM5's ridge is 66.9 TFLOP/s / 3.35 TB/s ≈ 20 FLOP/byte: T = 128.
    """
    ridge = lookup(gpu).ridge_point("fp32")
    for t in sorted(_TILES, key=int):
        if gemm_tiled(_TILE_N, _TILE_N, _TILE_N, tile=int(t)).intensity >= ridge:
            return t
    raise AssertionError(f"no tile in 05.tile_for_ridge reaches the ridge of {gpu}")


def _tile_mistakes() -> tuple[Mistake, ...]:
    """One mistake per option: too small (left of the ridge) or larger than needed."""
    out = []
    for t in _TILES:
        out.append(Mistake(f"too_small_{t}", "with that tile the kernel stays left of the "
                           "ridge: compute its intensity (≈ T/4 FLOP/byte in FP32) and compare "
                           "it with the {gpu}'s FP32 peak / DRAM bandwidth.",
                           value=lambda gpu, t=t: t if int(t) < int(_tile_for_ridge(gpu))
                           else None))
        out.append(Mistake(f"too_large_{t}", "that tile reaches the ridge, but so does a "
                           "smaller one; larger tiles cost more shared memory and registers "
                           "per block.", value=lambda gpu, t=t: t if int(t) > int(
                               _tile_for_ridge(gpu)) else None))
    return tuple(out)


# -- 05.decode_bound: attention while decoding ------------------------------------------------------

_DECODE_GPUS = ("h100", "a100", "h200", "b200", "l40s", "rtx 4090")


def _decode_cost(new_tokens, kv_heads):
    """Attention of 16 sequences, each with ``new_tokens`` new tokens over a 4,096-token KV
    cache, 32 query heads of 128, ``kv_heads`` key/value heads, FP16
    (:func:`gpu_lessons.costs.attention`)."""
    return attention(new_tokens, 4096, n_heads=32, head_dim=128, batch=16, n_kv_heads=kv_heads,
                     dtype="fp16")


def _decode_bound(gpu, new_tokens, kv_heads) -> str:
    """On the GPU's FP16 tensor roofline.  One new token, 32 K/V heads: about 1 FLOP/byte, far
    below the H100's ridge (~295), so memory-bound; each new token and each query head sharing
    a K/V head multiplies the reuse."""
    return Roofline.from_gpu(gpu, "fp16").classify(
        _decode_cost(new_tokens, kv_heads).intensity).bound


def _decode_other(wanted: str):
    def value(gpu, new_tokens, kv_heads):
        return wanted if _decode_bound(gpu, new_tokens, kv_heads) != wanted else None
    return value


def _decode_fields(gpu, new_tokens, kv_heads) -> dict:
    group = 32 // kv_heads
    heads = ("each K/V head serves one query head (plain multi-head attention)" if group == 1
             else f"each K/V head is shared by {group} query heads (grouped-query attention)")
    tokens = ("adds one token (plain decode)" if new_tokens == 1 else
              f"checks {new_tokens} new tokens at once (speculative decoding)")
    return {"tokens": tokens, "heads": heads, "reuse": new_tokens * group}


QUESTIONS = (
    Question(
        id="05.ridge_h100",
        name="ridge_h100",
        points=2,
        title="The ridge point of an H100",
        prompt="The ridge point I_max = π / β is the intensity a kernel needs to be "
               "compute-bound. What is it for {a_gpu} **{gpu}** running {roof} against its "
               "{memory}, in **FLOP/byte**? Store it in `ridge_h100`.",
        hint="Ridge point = peak FLOP/s / memory bandwidth in B/s, both from the {gpu} "
             "datasheet (the catalog has them).",
        vary=(gpus("h100", "h100 pcie"),
              Vary("precision", ("tf32", "fp8", "fp64"), "the math's precision")),
        derive=_ridge_fields,
        answer=Number(
            reference=_ridge,
            units="FLOP/byte",
            rtol=0.01,
            mistakes=(
                Mistake("sparse_peak", "looks like the sparse (2:4) peak, which vendors print "
                        "at 2× the dense figure (or the peak of a precision twice as fast). "
                        "Rooflines use the dense peak of the precision the kernel runs in (M18).",
                        value=lambda ref, **p: 2 * ref),
                Mistake("half", "that is half the ridge: the roof of a precision half as fast, "
                        "or a peak counted in multiply-adds (half the FLOPs). The question asks "
                        "for {roof}.", value=lambda ref, **p: ref / 2),
                Mistake("fp32_peak", "that is the FP32 CUDA-core roof; the question asks for "
                        "{roof}.", value=lambda ref, gpu, precision:
                        None if precision == "fp32" else _ridge(gpu, "fp32")),
                Mistake("h200_bandwidth", "4.8 TB/s is the H200's HBM3e; the H100 SXM5 has "
                        "HBM3.", value=_h200_bandwidth_ridge),
                Mistake("other_h100", "that is the {other}; the question is about the {gpu}.",
                        value=lambda ref, gpu, precision: _ridge(_OTHER_H100[gpu], precision)),
                Mistake("gib", "mixed units: a datasheet's GB/s and TB/s are powers of 10, "
                        "not of 2 (GiB).", value=lambda ref, **p: ref * 1e9 / 2**30),
                Mistake("inverted", "that is bandwidth / peak (bytes per FLOP), the inverse "
                        "of the ridge point.", value=lambda ref, **p: 1 / ref),
            ),
        ),
    ),
    Question(
        id="05.axpy_bound",
        name="axpy_bound",
        points=1,
        title="Memory- or compute-bound?",
        prompt="A large FP32 kernel runs over 10⁸ elements. Each element reads `x[i]` and "
               "`y[i]`, does **{fmas}** fused multiply-add{plural} (FMA) with them and writes "
               "`y[i]`: {flops} FLOPs and 12 bytes per element. (With one FMA it is axpy, "
               "`y = a*x + y`; more FMAs evaluate a polynomial in Horner form.) On {a_gpu} **{gpu}**, "
               "which limit sets its speed? Answer `\"memory-bound\"`, `\"compute-bound\"` or "
               "`\"latency-bound\"` in `axpy_bound`.",
        vary=(gpus("h100", "a100", "v100", "b200", "t4", "l40s", "h100 pcie"),
              Vary("fmas", (1, 64, 128, 200, 16), "FMAs per element")),
        derive=lambda gpu, fmas: {"plural": "" if fmas == 1 else "s", "flops": 2 * fmas},
        answer=Choice(
            reference=_axpy_bound,
            options=("memory-bound", "compute-bound", "latency-bound"),
            mistakes=(
                Mistake("compute", "put the kernel's intensity (FLOPs per byte) next to the "
                        "{gpu}'s FP32 ridge point (peak / bandwidth) and see which side it "
                        "falls on.", value=_axpy_other("compute-bound")),
                Mistake("memory", "put the kernel's intensity (FLOPs per byte) next to the "
                        "{gpu}'s FP32 ridge point (peak / bandwidth) and see which side it "
                        "falls on.", value=_axpy_other("memory-bound")),
                Mistake("latency", "10⁸ independent elements give every SM thousands of "
                        "threads to hide latency with; ask instead which roof caps it.",
                        value="latency-bound"),
            ),
        ),
    ),
    Question(
        id="05.kernel_time",
        name="kernel_time",
        points=2,
        title="The roofline as a time",
        prompt="Write `kernel_time(flops, bytes_moved, peak_flops, bandwidth)` that returns the "
               "roofline estimate of a kernel's run time in **seconds**, given its FLOPs, the "
               "bytes it moves, the peak in FLOP/s and the bandwidth in B/s.",
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
        id="05.gemm_ridge_size",
        name="gemm_ridge_size",
        points=2,
        title="How large must a GEMM be?",
        prompt="C = A @ B with all three matrices N × N in **{dtype}** ({bytes} per "
               "element). If every matrix crosses DRAM exactly once (A and B read, C written), "
               "the arithmetic intensity grows with N. What is the **smallest N** for which it "
               "reaches the ridge point of {a_gpu} **{gpu}** running {roof}? Store the whole number "
               "in `gemm_ridge_size`.",
        hint="Intensity = 2·N³ FLOPs (a multiply-add is 2 FLOPs) over the bytes of A, B and C; "
             "set it equal to peak / bandwidth and solve for N, then round up.",
        vary=(gpus(*_GEMM_GPUS),
              Vary("precision", ("fp16", "tf32", "fp8", "fp32"), "the math's precision")),
        derive=_gemm_fields,
        answer=Number(
            reference=_gemm_ridge_size,
            units="elements per side (N)",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("just_below", "at that N the intensity is still just below the ridge "
                        "point: round up.",
                        value=lambda ref, **p: ref - 1),
                Mistake("macs", "that counts each multiply-add as one FLOP; it is two, so a "
                        "smaller matrix reaches the ridge (M16).",
                        value=lambda ref, gpu, precision: _gemm_ridge_size(
                            gpu, precision, flops_per_mac=1)),
                Mistake("no_c", "C has to be written back to DRAM too: count its bytes.",
                        value=lambda ref, gpu, precision: _gemm_ridge_size(
                            gpu, precision, write_c=False)),
                Mistake("four_bytes", "{dtype} elements are {bytes}, not 4.",
                        value=lambda ref, gpu, precision: None if _GEMM_DTYPE[precision][1] == 4
                        else _gemm_ridge_size(gpu, precision, size=4)),
                Mistake("ridge_itself", "that is the ridge point (FLOP/byte); the question "
                        "asks for the matrix size that reaches it.",
                        value=lambda ref, gpu, precision: round(
                            lookup(gpu).ridge_point(precision))),
            ),
        ),
    ),
    Question(
        id="05.conv_flops",
        name="conv_flops",
        points=2,
        title="FLOPs of a convolution layer",
        prompt="A common shortcut counts a convolution layer as M²·K²·C_in·C_out \"FLOPS\". "
               "Write `conv_flops(x, k, c_in, c_out, padding, stride)` returning the **FLOPs** "
               "of one 2-D convolution layer on one image (an x × x input with c_in channels, "
               "c_out filters of k × k, no bias), counting a multiply-add as 2 FLOPs. The "
               "output side is M = ⌊(x + 2·padding − k) / stride⌋ + 1, as PyTorch computes "
               "it.",
        answer=Function(
            reference=_conv_flops_reference,
            inputs=_conv_flops_inputs,
            edge_cases=_conv_flops_edges,
            signature="conv_flops(x, k, c_in, c_out, padding, stride)",
            units="FLOPs",
            rtol=1e-9,
            mistakes=(
                Mistake("macs", "M²·K²·Cin·Cout counts multiply-adds (the shortcut's formula); "
                        "a multiply-add is 2 FLOPs (M16).", value=_conv_macs),
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
        title="Tile size to reach the ridge",
        prompt="A shared-memory tiled FP32 GEMM (8192 × 8192 × 8192, square T × T tiles, each "
               "block reading its strips of A and B once, C written once) runs on the FP32 CUDA "
               "cores of {a_gpu} **{gpu}**. Each element of A and B is then read 8192/T times. What "
               "is the smallest tile edge T that brings the kernel's intensity up to the FP32 "
               "ridge point? One of `\"16\"`, `\"32\"`, `\"64\"`, `\"128\"`, `\"256\"`, in "
               "`tile_for_ridge`.",
        hint="Tiled traffic is about 4·(2N³/T + N²) bytes for 2N³ FLOPs; the ridge point is "
             "peak FP32 FLOP/s / DRAM bandwidth.",
        vary=(gpus(*_TILE_GPUS),),
        answer=Choice(
            reference=_tile_for_ridge,
            options=_TILES,
            mistakes=_tile_mistakes(),
        ),
    ),
    Question(
        id="05.decode_bound",
        name="decode_bound",
        points=1,
        title="Attention during LLM decode",
        prompt="An LLM serves 16 sequences, each with a KV cache of 4096 tokens; the model has "
               "32 query heads of 128 dimensions, FP16, and {heads}. In this step each sequence "
               "{tokens}, and attention reads the sequence's cached K and V once: the scores "
               "q·Kᵀ and the weighted sum A·V cost one multiply-add per cached element, per new "
               "token and per query head that uses it. On {a_gpu} **{gpu}** (FP16 tensor cores), is "
               "this attention step `\"memory-bound\"` or `\"compute-bound\"`? Store the "
               "answer in `decode_bound`.",
        vary=(gpus(*_DECODE_GPUS),
              Vary("new_tokens", (1, 4, 16, 64), "new tokens per sequence in the step"),
              Vary("kv_heads", (32, 8, 4), "key/value heads (32 = plain multi-head)")),
        derive=_decode_fields,
        answer=Choice(
            reference=_decode_bound,
            options=("memory-bound", "compute-bound"),
            mistakes=(
                Mistake("compute", "each cached element is read once and used only {reuse} "
                        "time(s) in this step: count FLOPs per byte and compare with the ridge "
                        "point.", value=_decode_other("compute-bound")),
                Mistake("memory", "each cached element is read once but used {reuse} times in "
                        "this step (new tokens × query heads per K/V head): count FLOPs per "
                        "byte and compare with the ridge point.",
                        value=_decode_other("memory-bound")),
            ),
        ),
    ),
)
