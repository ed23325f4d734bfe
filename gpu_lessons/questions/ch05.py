"""Chapter 05 (roofline) exercise questions.

References come from the GPU catalog (:mod:`gpu_lessons.hardware`) and the roofline model
(:mod:`gpu_lessons.roofline`: Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model", CACM 2009), imported inside each function.
"""

from __future__ import annotations

from ..checks import Choice, Function, Mistake, Number, Question


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
)
