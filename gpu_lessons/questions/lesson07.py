"""Chapter 07 (bottlenecks and the optimisation playbook) exercise questions.

References come from the diagnosis rule of :func:`gpu_lessons.capstone.classify` (Nsight
Compute's Speed Of Light rule: a unit at 60 % of its peak or more is the bottleneck; all below
60 % "typically indicate latency issues"), the kernel cost models of :mod:`gpu_lessons.costs`
(tiled GEMM traffic from Kirk & Hwu, *Programming Massively Parallel Processors*, 4th ed.,
ch. 5) and the roofline (:mod:`gpu_lessons.roofline`).
"""

from __future__ import annotations

import math

from .._format import percent
from .._math import cdiv
from ..capstone import classify
from ..costs import elementwise, gemm_tiled
from ..hardware import gpu as lookup
from ..memory import WAVEFRONT_BYTES
from ..roofline import Roofline, attainable
from ._common import gpus
from .types import Choice, Function, Mistake, Number, Question, Vary

_VERDICTS = ("memory-bound", "compute-bound", "latency-bound")

# -- 07.symptom: which kind of bottleneck ----------------------------------------------------------

#: Profiles as Nsight Compute's Speed Of Light and its warp statistics show them: the fraction
#: of peak of each unit, whether few warps are resident, and the words of the report.
_PROFILES = {
    "starved": ({"compute": 0.18, "DRAM": 0.22, "L2": 0.15, "shared memory": 0.15}, True,
                "achieved occupancy 12 %, and most warp cycles are stalled waiting for global "
                "loads"),
    "streaming": ({"compute": 0.09, "DRAM": 0.83, "L2": 0.61, "shared memory": 0.0}, False,
                  "achieved occupancy 88 %, warps mostly stalled on long-scoreboard (global "
                  "memory) dependencies"),
    "gemm": ({"compute": 0.81, "DRAM": 0.21, "L2": 0.34, "shared memory": 0.52}, False,
             "achieved occupancy 31 %, warps mostly stalled waiting for the FMA pipe"),
    "tiles": ({"compute": 0.27, "DRAM": 0.18, "L2": 0.22, "shared memory": 0.74}, False,
              "achieved occupancy 62 %, warps mostly stalled on shared-memory (MIO) throttling"),
    "lonely": ({"compute": 0.33, "DRAM": 0.41, "L2": 0.28, "shared memory": 0.05}, True,
               "achieved occupancy 19 % with 4 blocks launched on 132 SMs"),
    "l2_hot": ({"compute": 0.14, "DRAM": 0.24, "L2": 0.77, "shared memory": 0.0}, False,
               "achieved occupancy 70 %; the working set fits in L2"),
}


def _symptom(profile) -> str:
    """The Speed Of Light rule (:func:`gpu_lessons.capstone.classify`): a unit at 60 % of its
    peak or more is the bottleneck; every unit below 60 % with few warps is latency-bound."""
    fractions, few_warps, _ = _PROFILES[profile]
    return classify(dict(fractions), too_few_warps=few_warps)[0]


def _symptom_fields(profile) -> dict:
    fractions, _, words = _PROFILES[profile]
    units = ", ".join(f"{name} {percent(f)}" for name, f in fractions.items())
    return {"units": units, "words": words}


def _not(question_ref, wanted):
    """A mistake value: option ``wanted`` when it is wrong for these parameters."""
    def value(**params):
        return None if question_ref(**params) == wanted else wanted
    return value


# -- 07.fusion_bytes_saved: three elementwise kernels fused into one ------------------------------

def _fusion(tokens, features, dtype) -> tuple[float, float]:
    """DRAM bytes of ``t = x*s; u = t + r; y = gelu(u)`` as three kernels and as one.

    Three kernels read x, write t; read t and r, write u; read u, write y: 7 accesses per
    element.  Fused: read x and r, write y: 3.  Each kernel's traffic is compulsory
    (:func:`gpu_lessons.costs.elementwise`).
    """
    n = tokens * features
    three = [elementwise(n, reads=1, writes=1, dtype=dtype),
             elementwise(n, reads=2, writes=1, dtype=dtype),
             elementwise(n, reads=1, writes=1, dtype=dtype)]
    fused = elementwise(n, flops_per_element=3, reads=2, writes=1, dtype=dtype)
    return float(sum(k.bytes for k in three)), float(fused.bytes)


def _fusion_saved_mb(tokens, features, dtype) -> float:
    unfused, fused = _fusion(tokens, features, dtype)
    return (unfused - fused) / 1e6


_DTYPE_WORDS = {"bf16": ("BF16", 2), "fp32": ("FP32", 4), "fp8": ("FP8", 1)}


# -- 07.tiled_gemm_bytes: the traffic model of a tiled GEMM --------------------------------------

_DTYPES = {1: "fp8", 2: "fp16", 4: "fp32", 8: "fp64"}


def _tiled_reference(m, n, k, tile, dtype_bytes):
    """``s · (m·k·⌈n/T⌉ + k·n·⌈m/T⌉ + m·n)`` (:func:`gpu_lessons.costs.gemm_tiled`)."""
    return gemm_tiled(m, n, k, tile=tile, dtype=_DTYPES[dtype_bytes]).bytes


def _log_int(rng, lo: int, hi: int) -> int:
    return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _tiled_inputs(rng) -> dict:
    """Matrices from 8 to 8,192 a side (log-uniform, so rarely multiples of the tile), the
    tile sizes real kernels use and now and then an odd one, FP16 or FP32."""
    tile = (int(rng.choice([8, 16, 32, 64, 128, 256])) if rng.random() < 0.8
            else int(rng.integers(1, 301)))
    return {"m": _log_int(rng, 8, 8192), "n": _log_int(rng, 8, 8192), "k": _log_int(rng, 8, 8192),
            "tile": tile, "dtype_bytes": int(rng.choice([2, 4]))}


def _tiled_edges() -> list[dict]:
    def case(m, n, k, tile, s):
        return {"m": m, "n": n, "k": k, "tile": tile, "dtype_bytes": s}

    return [case(4096, 4096, 4096, 16, 4),   # square, divisible: 4·(2·4096³/16 + 4096²)
            case(1000, 3000, 500, 128, 2),   # nothing divides: edge blocks count whole
            case(64, 64, 64, 128, 4),        # tile larger than C: each operand once
            case(512, 512, 512, 1, 4),       # 1 x 1 tiles: the naive kernel
            case(100, 7, 33, 32, 2)]         # tall and skinny


# -- 07.tile_for_ridge: how big a tile puts a GEMM past the ridge -------------------------------

_RIDGE_N = 8192
_RIDGE_GPUS = ("a100", "h100", "v100", "h200", "t4", "rtx 3090", "h100 pcie", "b200")


def _smallest_tile(gpu, precision: str = "fp32", dtype: str = "fp32") -> float:
    """The smallest square tile T for which an 8192³ tiled GEMM's DRAM intensity reaches the
    ridge point of ``gpu`` at ``precision`` (intensity ≈ T / s for element size s).  A100,
    FP32: ridge 19.5 / 2.039 = 9.56 FLOP/byte, reached at T = 39."""
    roof = Roofline.from_gpu(gpu, precision)
    n = _RIDGE_N
    for tile in range(1, 4097):
        if roof.classify(gemm_tiled(n, n, n, tile=tile, dtype=dtype).intensity).bound \
                == "compute-bound":
            return float(tile)
    raise AssertionError("no tile up to 4096 reaches the ridge")


def _next_power_of_two(ref: float, **p) -> float | None:
    power = float(2 ** math.ceil(math.log2(ref)))
    return None if power == ref else power


def _ridge_fields(gpu) -> dict:
    g = lookup(gpu)
    return {"peak": f"{g.peak_tflops['fp32']:g}", "bandwidth": f"{g.bandwidth_gbs:,.0f}"}


# -- 07.register_block: register blocking against the shared-memory roof ------------------------

_BLOCK_GPUS = ("a100", "h100", "v100", "rtx 4090", "t4", "l40s")


def _register_block(gpu, flops_per_fma: int = 2) -> float:
    """Smallest r for which an r x r register patch per thread lifts the shared-memory cap off
    the FP32 units: per step along k a thread loads r + r floats (8r bytes) from shared memory
    and does r² FMAs (2r² FLOPs), r/4 FLOP per byte, against a per-SM roof of FP32 lanes x 2
    FLOP/cycle and 32 banks x 4 B = 128 B/cycle (the roofline of :mod:`gpu_lessons.roofline`
    applied to one SM; notebook 07, section 3.2).  A100: 128 FLOP/cycle / 128 B/cycle -> r = 4.
    """
    peak = lookup(gpu).fp32_cores_per_sm * 2
    for r in range(1, 257):
        if attainable(r * r * flops_per_fma / (8 * r), peak, WAVEFRONT_BYTES) >= peak:
            return float(r)
    raise AssertionError("no register patch up to 256 reaches the FP32 peak")


# -- 07.which_fix: the fix that matches the bottleneck ------------------------------------------

#: 07.which_fix's kernels: a Speed Of Light profile, whether few warps are resident, whether
#: the GPU idles between launches, the route's step (notebook 07, sections 3-5) and the words.
_FIX_CASES = {
    "fp32_gemm": ({"compute": 0.78, "DRAM": 0.12, "shared memory": 0.35}, False, False,
                  "A hand-written FP32 GEMM runs at 78 % of the FP32 (CUDA-core) peak, with "
                  "DRAM at 12 % and shared memory at 35 % of their peaks."),
    "transpose": ({"compute": 0.06, "DRAM": 0.31, "shared memory": 0.86}, False, False,
                  "A tiled transpose keeps shared memory at 86 % of its peak while DRAM runs at "
                  "31 %; Nsight Compute reports a 32-way bank conflict on the tile's column "
                  "reads."),
    "register_hungry": ({"compute": 0.21, "DRAM": 0.28, "shared memory": 0.10}, True, False,
                        "A stencil kernel reaches 21 % of the compute peak and 28 % of DRAM; it "
                        "uses 168 registers per thread, so only 12 warps per SM are resident, "
                        "and warps mostly wait on global loads."),
    "tiny_kernels": ({"compute": 0.04, "DRAM": 0.07, "shared memory": 0.0}, False, True,
                     "A decode step launches 300 kernels of 2-3 µs each; the timeline shows the "
                     "GPU idle between them, and each kernel alone reaches under 10 % of every "
                     "roof."),
}
#: The fixes, by the bottleneck each addresses.
_FIX_TEXT = {"occupancy": "raise occupancy (cap registers per thread with __launch_bounds__)",
             "padding": "pad the shared-memory tiles against bank conflicts",
             "tensor": "run the product on tensor cores (TF32 or BF16 inputs, FP32 accumulate)",
             "graph": "capture its launches in a CUDA graph"}
_FIX_ORDERS = ("occupancy padding tensor graph", "tensor graph occupancy padding",
               "padding occupancy graph tensor", "graph tensor padding occupancy",
               "occupancy tensor graph padding", "padding graph tensor occupancy")


def _fix_needed(case) -> str:
    """The fix on the route of the kernel's verdict (:func:`gpu_lessons.capstone.classify`):
    compute-bound -> a higher roof (tensor cores); memory-bound on shared memory -> bank
    conflicts (padding); latency-bound by launches -> fewer launches (a graph); latency-bound
    by too few warps -> occupancy."""
    fractions, few_warps, launches, _ = _FIX_CASES[case]
    verdict, limiter = classify(dict(fractions), too_few_warps=few_warps,
                                launch_dominated=launches)
    return {("compute-bound", "compute"): "tensor",
            ("memory-bound", "shared memory"): "padding",
            ("latency-bound", "launch overhead"): "graph",
            ("latency-bound", "too few warps"): "occupancy"}[verdict, limiter]


def _which_fix(case, order) -> str:
    return "ABCD"[order.split().index(_fix_needed(case))]


def _fix_fields(case, order) -> dict:
    text = "; ".join(f"{letter}: {_FIX_TEXT[name]}"
                     for letter, name in zip("ABCD", order.split(), strict=True))
    return {"kernel": _FIX_CASES[case][3], "fixes": text}


def _fix_mistake(name: str):
    def value(case, order):
        return None if _fix_needed(case) == name else "ABCD"[order.split().index(name)]
    return value


QUESTIONS = (
    Question(
        id="07.symptom",
        name="symptom",
        points=1,
        title="Name the bottleneck",
        prompt="Nsight Compute reports for a kernel on an H100: {units} of peak; {words}. Which "
               "kind of bottleneck is this?\n\n"
               "Answer with one of `\"memory-bound\"`, `\"compute-bound\"`, "
               "`\"latency-bound\"` in `symptom`.",
        hint="Apply the 60 % rule to the busiest unit first.",
        vary=(Vary("profile", tuple(_PROFILES), "the profile"),),
        derive=_symptom_fields,
        answer=Choice(
            reference=_symptom,
            options=_VERDICTS,
            mistakes=(
                Mistake("memory", "no memory level is at 60 % of its peak or more: memory does "
                        "not set this kernel's speed. Ask why so little is in flight, or which "
                        "other unit is busy.", value=_not(_symptom, "memory-bound")),
                Mistake("compute", "the arithmetic units are below 60 % of their peak: they "
                        "idle much of the time. Look at the busiest unit.",
                        value=_not(_symptom, "compute-bound")),
                Mistake("latency", "one unit runs at 60 % of its peak or more: that unit is the "
                        "bottleneck, whatever the stalls say.",
                        value=_not(_symptom, "latency-bound")),
            ),
        ),
    ),
    Question(
        id="07.fusion_bytes_saved",
        name="fusion_bytes_saved",
        points=2,
        title="What fusion saves",
        prompt="Three elementwise kernels run over {tokens} × {features} **{dtype_name}** "
               "activations: `t = x * scale` (a scalar), `u = t + residual`, `y = gelu(u)`. "
               "Each kernel reads its inputs from DRAM and writes its output there. Fusing them "
               "into one kernel keeps t and u in registers. How many megabytes (10⁶ bytes) of "
               "DRAM traffic does the fusion save?\n\n"
               "Answer in **MB** (10⁶ bytes) in `fusion_bytes_saved`.",
        hint="Count the arrays each kernel reads and writes, before and after; {dtype_name} is "
             "{size} byte(s) per element.",
        vary=(Vary("tokens", (8192, 6000, 12000, 2560), "rows of activations"),
              Vary("features", (4096, 5120, 2048, 8192, 12288), "features per row"),
              Vary("dtype", ("bf16", "fp32", "fp8"), "the activations' type")),
        derive=lambda tokens, features, dtype: {"dtype_name": _DTYPE_WORDS[dtype][0],
                                                "size": _DTYPE_WORDS[dtype][1]},
        answer=Number(
            reference=_fusion_saved_mb,
            units="MB",
            rtol=0.01,
            mistakes=(
                Mistake("fused_total", "that is the fused kernel's own traffic; the question "
                        "asks how much less it moves than the three kernels.",
                        value=lambda ref, **p: _fusion(**p)[1] / 1e6),
                Mistake("unfused_total", "that is the three kernels' total traffic; subtract "
                        "what the fused kernel still moves.",
                        value=lambda ref, **p: _fusion(**p)[0] / 1e6),
                Mistake("one_direction", "that counts each intermediate once; t and u are each "
                        "written by one kernel and read back by the next.",
                        value=lambda ref, **p: ref / 2),
                Mistake("element_size", "{dtype_name} elements are {size} byte(s), not 2.",
                        value=lambda ref, tokens, features, dtype: None if dtype == "bf16"
                        else _fusion_saved_mb(tokens, features, "bf16")),
                Mistake("mib", "that is in MiB (2²⁰ bytes); the question asks for MB "
                        "(10⁶ bytes).", value=lambda ref, **p: ref * 1e6 / 2**20),
            ),
        ),
    ),
    Question(
        id="07.tiled_gemm_bytes",
        name="tiled_gemm_bytes",
        points=3,
        title="Traffic of a tiled GEMM",
        prompt="Write `tiled_gemm_bytes(m, n, k, tile, dtype_bytes)` returning the DRAM bytes "
               "of C = A @ B (A is m × k, B is k × n) computed by a shared-memory tiled kernel "
               "in which each thread block computes one tile × tile tile of C (edge blocks "
               "compute the part inside C), reading its strips of A and B from DRAM and writing "
               "its tile of C once. Ignore caches.\n\n"
               "Return a number of **bytes**. The check tries square and rectangular products, "
               "tiles that do not divide the matrix, tiles larger than C, and 1 × 1 tiles.",
        hint="Count how many blocks read each element of A (one per block column of C) and of "
             "B (one per block row).",
        answer=Function(
            reference=_tiled_reference,
            inputs=_tiled_inputs,
            edge_cases=_tiled_edges,
            signature="tiled_gemm_bytes(m, n, k, tile, dtype_bytes)",
            units="bytes",
            rtol=1e-9,
            mistakes=(
                Mistake("no_ceil", "a partial block column or row still reads its whole strip "
                        "of A or B: count blocks with a ceiling division.",
                        value=lambda e, m, n, k, tile, dtype_bytes: dtype_bytes
                        * (m * k * n / tile + k * n * m / tile + m * n)),
                Mistake("floor", "floor division drops the edge blocks, which read their strips "
                        "too: round the number of blocks up.",
                        value=lambda e, m, n, k, tile, dtype_bytes: dtype_bytes
                        * (m * k * max(n // tile, 1) + k * n * max(m // tile, 1) + m * n)),
                Mistake("no_c_write", "C is written to DRAM once: add its m x n elements.",
                        value=lambda e, m, n, k, tile, dtype_bytes: e - dtype_bytes * m * n),
                Mistake("swapped", "A (m x k) is re-read once per block *column* of C "
                        "(⌈n/tile⌉ times) and B once per block *row* (⌈m/tile⌉).",
                        value=lambda e, m, n, k, tile, dtype_bytes: dtype_bytes
                        * (m * k * cdiv(m, tile) + k * n * cdiv(n, tile) + m * n)),
                Mistake("elements", "that counts elements; multiply by dtype_bytes for bytes.",
                        value=lambda e, m, n, k, tile, dtype_bytes: e / dtype_bytes),
                Mistake("no_reuse", "that is the naive kernel (every multiply-add loads its "
                        "operands); tiling divides the A and B traffic by the tile size.",
                        value=lambda e, m, n, k, tile, dtype_bytes: dtype_bytes
                        * (2 * m * n * k + m * n)),
            ),
        ),
    ),
    Question(
        id="07.tile_for_ridge",
        name="tile_for_ridge",
        points=2,
        title="The smallest tile past the ridge",
        prompt="An 8192 × 8192 × 8192 FP32 GEMM runs on the CUDA cores of {a_gpu} **{gpu}** "
               "({peak} TFLOP/s FP32, {bandwidth} GB/s) with square tiles, DRAM traffic as in "
               "`07.tiled_gemm_bytes`. What is the smallest tile width T (any whole number) for "
               "which the kernel's arithmetic intensity reaches the FP32 ridge point, so that "
               "the roofline calls it compute-bound?\n\n"
               "Answer with a whole number (the tile width in elements) in `tile_for_ridge`. "
               "Your `tiled_gemm_bytes` from the previous question, or "
               "`gpu_lessons.costs.gemm_tiled`, gives the bytes.",
        hint="Intensity = 2·m·n·k FLOPs / bytes; compare it with peak / bandwidth and try "
             "tile widths around where the two meet.",
        vary=(gpus(*_RIDGE_GPUS),),
        derive=_ridge_fields,
        answer=Number(
            reference=_smallest_tile,
            units="elements (tile width)",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("power_of_two", "that is a power of two; the question asks for the "
                        "smallest whole number, which may be smaller.", value=_next_power_of_two),
                Mistake("just_below", "at that width the intensity is still just below the "
                        "ridge point.", value=lambda ref, gpu: ref - 1),
                Mistake("half_size_elements", "FP32 elements are 4 bytes; with 2-byte elements "
                        "the intensity would double.",
                        value=lambda ref, gpu: _smallest_tile(gpu, dtype="fp16")),
                Mistake("tensor_ridge", "that is the ridge of the TF32 tensor cores; this "
                        "kernel runs on the FP32 CUDA cores.",
                        value=lambda ref, gpu: _smallest_tile(gpu, precision="tf32")
                        if "tf32" in lookup(gpu).peak_tflops and _smallest_tile(
                            gpu, precision="tf32") != ref else None),
            ),
        ),
    ),
    Question(
        id="07.register_block",
        name="register_block",
        points=1,
        title="Register blocking against shared memory",
        prompt="An FP32 GEMM kernel on {a_gpu} **{gpu}** ({lanes} FP32 lanes per SM, one FMA each "
               "per cycle; shared memory serves 32 banks × 4 bytes per cycle per SM) gives each "
               "thread an r × r patch of C. Per step along k a thread loads r values of A and r "
               "of B from shared memory and does r² FMAs. What is the smallest r for which "
               "shared-memory bandwidth no longer holds the FP32 units below their peak?\n\n"
               "Answer with the side **r** of the patch (a whole number) in `register_block`.",
        hint="Apply the roofline to one SM: FLOPs per shared-memory byte against the SM's FLOPs "
             "per cycle divided by its shared-memory bytes per cycle.",
        vary=(gpus(*_BLOCK_GPUS),),
        derive=lambda gpu: {"lanes": lookup(gpu).fp32_cores_per_sm},
        answer=Number(
            reference=_register_block,
            units="outputs per side of the patch",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("fma_one_flop", "that counts an FMA as 1 FLOP while the peak counts it "
                        "as 2 (or assumes twice the lanes): the patch comes out twice too big.",
                        value=lambda ref, gpu: _register_block(gpu, flops_per_fma=1)),
                Mistake("outputs", "that is the number of outputs per thread, r²; the question "
                        "asks for the side r.", value=lambda ref, gpu: ref**2),
            ),
        ),
    ),
    Question(
        id="07.which_fix",
        name="which_fix",
        points=1,
        title="The fix that matches the bottleneck",
        prompt="{kernel} Which change can make it substantially faster? {fixes}.\n\n"
               "Answer with one letter, `\"A\"`, `\"B\"`, `\"C\"` or `\"D\"`, in `which_fix`.",
        hint="Name the bottleneck first (the 60 % rule), then take the first step of its route.",
        vary=(Vary("case", tuple(_FIX_CASES), "the kernel"),
              Vary("order", _FIX_ORDERS, "which fix is lettered A, B, C and D")),
        derive=_fix_fields,
        answer=Choice(
            reference=_which_fix,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("occupancy", "more warps help a kernel that cannot hide its latency; "
                        "check first whether a unit is already near its peak, or whether the GPU "
                        "idles between kernels.", value=_fix_mistake("occupancy")),
                Mistake("banks", "padding helps only when shared-memory bank conflicts are what "
                        "the kernel waits for.", value=_fix_mistake("padding")),
                Mistake("tensor", "a higher compute roof helps only a kernel that is near the "
                        "compute roof it has.", value=_fix_mistake("tensor")),
                Mistake("graph", "a CUDA graph removes launch overhead; it helps only when "
                        "launches, not the kernels themselves, take the time.",
                        value=_fix_mistake("graph")),
            ),
        ),
    ),
)
