"""Chapter 07 (bottlenecks and the optimisation playbook) exercise questions.

References come from the diagnosis rule of :func:`gpu_lessons.capstone.classify` (Nsight
Compute's Speed Of Light rule: a unit at 60 % of its peak or more is the bottleneck; all below
60 % "typically indicate latency issues"), the kernel cost models of :mod:`gpu_lessons.costs`
(tiled GEMM traffic from Kirk & Hwu, *Programming Massively Parallel Processors*, 4th ed.,
ch. 5) and the roofline (:mod:`gpu_lessons.roofline`), imported inside each function.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question

# -- 07.symptom: which kind of bottleneck ----------------------------------------------------------

#: 07.symptom's profile: fraction of peak per unit, as Nsight Compute's Speed Of Light shows it.
_SYMPTOM = {"compute": 0.18, "DRAM": 0.22, "L2": 0.15, "shared memory": 0.15}


def _symptom() -> str:
    """Every unit below 60 % of its peak, few eligible warps: latency-bound (too few warps)."""
    from ..capstone import classify

    return classify(dict(_SYMPTOM), too_few_warps=True)[0]


# -- 07.fusion_bytes_saved: three elementwise kernels fused into one ------------------------------

#: 8,192 tokens x 4,096 features of BF16 activations.
_FUSION_N = 8192 * 4096


def _fusion(dtype: str = "bf16") -> tuple[float, float]:
    """DRAM bytes of ``t = x*s; u = t + r; y = gelu(u)`` as three kernels and as one.

    Three kernels read x, write t; read t and r, write u; read u, write y: 7 accesses per
    element.  Fused: read x and r, write y: 3.  Each kernel's traffic is compulsory
    (:func:`gpu_lessons.costs.elementwise`).
    """
    from ..costs import elementwise

    n = _FUSION_N
    three = [elementwise(n, reads=1, writes=1, dtype=dtype),
             elementwise(n, reads=2, writes=1, dtype=dtype),
             elementwise(n, reads=1, writes=1, dtype=dtype)]
    fused = elementwise(n, flops_per_element=3, reads=2, writes=1, dtype=dtype)
    return float(sum(k.bytes for k in three)), float(fused.bytes)


def _fusion_saved_mb(dtype: str = "bf16") -> float:
    unfused, fused = _fusion(dtype)
    return (unfused - fused) / 1e6


# -- 07.tiled_gemm_bytes: the traffic model of a tiled GEMM --------------------------------------

_DTYPES = {1: "fp8", 2: "fp16", 4: "fp32", 8: "fp64"}


def _tiled_reference(m, n, k, tile, dtype_bytes):
    """``s · (m·k·⌈n/T⌉ + k·n·⌈m/T⌉ + m·n)`` (:func:`gpu_lessons.costs.gemm_tiled`)."""
    from ..costs import gemm_tiled

    return gemm_tiled(m, n, k, tile=tile, dtype=_DTYPES[dtype_bytes]).bytes


def _log_int(rng, lo: int, hi: int) -> int:
    import math

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


def _ceil(a, b):
    return -(-a // b)


# -- 07.tile_for_ridge: how big a tile puts a GEMM past the ridge -------------------------------

_RIDGE_N = 8192


def _smallest_tile(gpu: str = "a100", precision: str = "fp32", dtype: str = "fp32") -> float:
    """The smallest square tile T for which an 8192³ tiled GEMM's DRAM intensity reaches the
    ridge point of ``gpu`` at ``precision`` (intensity ≈ T / s for element size s)."""
    from ..costs import gemm_tiled
    from ..roofline import Roofline

    roof = Roofline.from_gpu(gpu, precision)
    n = _RIDGE_N
    for tile in range(1, 4097):
        if roof.classify(gemm_tiled(n, n, n, tile=tile, dtype=dtype).intensity).bound \
                == "compute-bound":
            return float(tile)
    raise AssertionError("no tile up to 4096 reaches the ridge")


def _next_power_of_two(ref: float) -> float:
    p = 1
    while p < ref:
        p *= 2
    return float(p)


# -- 07.register_block: register blocking against the shared-memory roof ------------------------

def _register_block(gpu: str = "a100") -> float:
    """Smallest r for which an r x r register patch per thread lifts the shared-memory cap off
    the FP32 units: per step along k a thread loads r + r floats (8r bytes) from shared memory
    and does r² FMAs (2r² FLOPs), r/4 FLOP per byte, against a per-SM roof of FP32 lanes x 2
    FLOP/cycle and 32 banks x 4 B = 128 B/cycle (the roofline of :mod:`gpu_lessons.roofline`
    applied to one SM; notebook 07, section 3.2).  A100: 128 FLOP/cycle / 128 B/cycle -> r = 4.
    """
    from ..hardware import gpu as lookup
    from ..memory import WAVEFRONT_BYTES
    from ..roofline import attainable

    peak = lookup(gpu).fp32_cores_per_sm * 2
    for r in range(1, 257):
        if attainable(r / 4, peak, WAVEFRONT_BYTES) >= peak:
            return float(r)
    raise AssertionError("no register patch up to 256 reaches the FP32 peak")


# -- 07.which_fix: the fix that matches the bottleneck ------------------------------------------

#: 07.which_fix: an FP32 GEMM's Speed Of Light on an H100.
_GEMM_PROFILE = {"compute": 0.78, "DRAM": 0.12, "shared memory": 0.35}

#: 07.which_fix's options, by the route (notebook 07, sections 3-5) each belongs to.
_FIX_FOR = {"latency-bound": "A", "memory-bound": "B", "compute-bound": "C"}


def _which_fix() -> str:
    """The option on the route of the kernel's verdict: 78 % of the FP32 roof is compute-bound,
    and the compute-bound route's biggest step is a higher roof (tensor cores)."""
    from ..capstone import classify

    return _FIX_FOR[classify(dict(_GEMM_PROFILE))[0]]


QUESTIONS = (
    Question(
        id="07.symptom",
        name="symptom",
        points=1,
        prompt="Nsight Compute reports for a kernel on an H100: compute (SM) throughput 18 % "
               "of peak, DRAM throughput 22 %, L2 and shared memory 15 % each; achieved "
               "occupancy 12 %, and most warp cycles are stalled waiting for global loads. "
               "Which kind of bottleneck is this?",
        answer=Choice(
            reference=_symptom,
            options=("memory-bound", "compute-bound", "latency-bound"),
            mistakes=(
                Mistake("memory", "the warps do wait on loads, but DRAM delivers barely a "
                        "fifth of its peak: no memory level is anywhere near saturated. Ask "
                        "why so little is in flight.", value="memory-bound"),
                Mistake("compute", "18 % of the compute peak is far from a compute roof: the "
                        "arithmetic units idle most of the time.", value="compute-bound"),
            ),
        ),
    ),
    Question(
        id="07.fusion_bytes_saved",
        name="fusion_bytes_saved",
        points=2,
        prompt="Three elementwise kernels run over 8,192 x 4,096 BF16 activations: "
               "t = x * scale (a scalar), u = t + residual, y = gelu(u). Each kernel reads its "
               "inputs from DRAM and writes its output there. Fusing them into one kernel keeps "
               "t and u in registers. How many megabytes (10^6 bytes) of DRAM traffic does the "
               "fusion save?",
        hint="Count the arrays each kernel reads and writes, before and after; BF16 is 2 bytes "
             "per element.",
        answer=Number(
            reference=_fusion_saved_mb,
            units="MB",
            rtol=0.01,
            mistakes=(
                Mistake("fused_total", "that is the fused kernel's own traffic; the question "
                        "asks how much less it moves than the three kernels.",
                        value=lambda ref: _fusion()[1] / 1e6),
                Mistake("unfused_total", "that is the three kernels' total traffic; subtract "
                        "what the fused kernel still moves.",
                        value=lambda ref: _fusion()[0] / 1e6),
                Mistake("one_direction", "that counts each intermediate once; t and u are each "
                        "written by one kernel and read back by the next.",
                        value=lambda ref: ref / 2),
                Mistake("fp32", "BF16 elements are 2 bytes, not 4.",
                        value=lambda ref: _fusion_saved_mb("fp32")),
                Mistake("mib", "that is in MiB (2^20 bytes); the question asks for MB "
                        "(10^6 bytes).", value=lambda ref: ref * 1e6 / 2**20),
            ),
        ),
    ),
    Question(
        id="07.tiled_gemm_bytes",
        name="tiled_gemm_bytes",
        points=3,
        prompt="Write tiled_gemm_bytes(m, n, k, tile, dtype_bytes) returning the DRAM bytes of "
               "C = A @ B (A is m x k, B is k x n) computed by a shared-memory tiled kernel in "
               "which each thread block computes one tile x tile tile of C (edge blocks compute "
               "the part inside C), reading its strips of A and B from DRAM and writing its "
               "tile of C once. Ignore caches.",
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
                        * (m * k * _ceil(m, tile) + k * n * _ceil(n, tile) + m * n)),
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
        prompt="An 8192 x 8192 x 8192 FP32 GEMM runs on an A100 SXM4 80GB (CUDA cores: 19.5 "
               "TFLOP/s FP32, 2,039 GB/s) with square tiles, DRAM traffic as in "
               "07.tiled_gemm_bytes. What is the smallest tile width T (any whole number) for "
               "which the kernel's arithmetic intensity reaches the FP32 ridge point, so that "
               "the roofline calls it compute-bound?",
        hint="Intensity = 2·m·n·k FLOPs / bytes; compare it with peak / bandwidth and try "
             "tile widths around where the two meet.",
        answer=Number(
            reference=_smallest_tile,
            units="elements (tile width)",
            rtol=0.01,
            mistakes=(
                Mistake("power_of_two", "that is a power of two; the question asks for the "
                        "smallest whole number, which may be smaller.",
                        value=lambda ref: _next_power_of_two(ref)),
                Mistake("just_below", "at that width the intensity is still just below the "
                        "ridge point.", value=lambda ref: ref - 1),
                Mistake("h100_ridge", "that is where the tile crosses the H100's FP32 ridge; "
                        "the question is about the A100.",
                        value=lambda ref: _smallest_tile("h100")),
                Mistake("fp16_elements", "FP32 elements are 4 bytes; with 2-byte elements the "
                        "intensity would double.",
                        value=lambda ref: _smallest_tile(dtype="fp16")),
                Mistake("tensor_ridge", "that is the ridge of the TF32 tensor cores; this "
                        "kernel runs on the FP32 CUDA cores.",
                        value=lambda ref: _smallest_tile(precision="tf32")),
            ),
        ),
    ),
    Question(
        id="07.register_block",
        name="register_block",
        points=1,
        prompt="An FP32 GEMM kernel on an A100 (64 FP32 lanes per SM, one FMA each per cycle; "
               "shared memory serves 32 banks x 4 bytes per cycle per SM) gives each thread an "
               "r x r patch of C. Per step along k a thread loads r values of A and r of B from "
               "shared memory and does r² FMAs. What is the smallest r for which shared-memory "
               "bandwidth no longer holds the FP32 units below their peak?",
        hint="Apply the roofline to one SM: FLOPs per shared-memory byte against the SM's FLOPs "
             "per cycle divided by its shared-memory bytes per cycle.",
        answer=Number(
            reference=_register_block,
            units="outputs per side of the patch",
            rtol=0.01,
            mistakes=(
                Mistake("h100_or_fma", "that is the patch an SM with twice the FP32 throughput "
                        "per shared-memory byte would need: the H100's 128 FP32 lanes, or an FMA "
                        "counted as 1 FLOP while the peak counts it as 2.",
                        value=lambda ref: _register_block("h100")),
                Mistake("outputs", "that is the number of outputs per thread, r²; the question "
                        "asks for the side r.", value=lambda ref: ref**2),
            ),
        ),
    ),
    Question(
        id="07.which_fix",
        name="which_fix",
        points=1,
        prompt="A hand-written FP32 GEMM on an H100 runs at 78 % of the FP32 (CUDA-core) peak, "
               "with DRAM at 12 % and shared memory at 35 % of their peaks. Which change can "
               "make it substantially faster? A: raise occupancy (fewer registers per "
               "thread); B: pad the shared-memory tiles against bank conflicts; C: run the "
               "product on tensor cores (TF32 or BF16 inputs, FP32 accumulate); D: capture its "
               "launches in a CUDA graph.",
        answer=Choice(
            reference=_which_fix,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("occupancy", "more warps help a kernel that cannot hide its latency; "
                        "this one already keeps one unit near its peak.", value="A"),
                Mistake("banks", "shared memory runs at 35 % of its peak: it is not what "
                        "limits this kernel.", value="B"),
                Mistake("graph", "a GEMM of this size runs for milliseconds; launch overhead "
                        "is microseconds.", value="D"),
            ),
        ),
    ),
)
