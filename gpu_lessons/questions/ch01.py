"""Chapter 01 (CPU vs GPU) exercise questions.

References come from :mod:`gpu_lessons.hardware` (datasheet figures with their sources);
it is imported inside each function so that listing questions costs nothing.
"""

from __future__ import annotations

from ..checks import Function, Mistake, Number, Question


def _h100_fp32_tflops() -> float:
    """H100 SXM5 FP32 peak from first principles: 132 SMs x 128 cores x 1980 MHz x 2 FLOPs.

    Source: NVIDIA H100 whitepaper v1.04, Table 3 (via the catalog); an FMA counts as 2 FLOPs.
    """
    from ..hardware import gpu

    return gpu("h100").pi_from_cores() / 1e12


def _tflops_of(name: str) -> float:
    from ..hardware import gpu

    return gpu(name).pi_from_cores() / 1e12


def _near_tensor_peak(answer: float, _ref: float) -> bool:
    """True when the answer is one of the H100's tensor-core peaks (dense or 2:4 sparse)."""
    from ..hardware import gpu

    h100 = gpu("h100")
    peaks = [h100.peak_flops(p) / 1e12 for p in ("tf32", "fp16", "fp8")]
    return any(abs(answer - p) <= 0.01 * p for peak in peaks for p in (peak, 2 * peak))


def _sm_clock_only(_ref: float) -> float:
    """SMs x clock x 2, i.e. the per-SM core count left out."""
    from ..hardware import gpu

    h100 = gpu("h100")
    return h100.sms * h100.boost_mhz * 1e6 * 2 / 1e12


def _peak_flops_reference(sms, cores_per_sm, clock_mhz):
    """pi = N_cores x f x 2 (the seed's formula; an FMA is 2 FLOPs), in FLOP/s."""
    from ..hardware import compute_peak

    return compute_peak(sms * cores_per_sm, clock_mhz * 1e6, 2)


def _peak_flops_inputs(rng) -> dict:
    return {"sms": int(rng.integers(1, 201)),
            "cores_per_sm": int(rng.choice([32, 64, 128])),
            "clock_mhz": round(float(rng.uniform(300.0, 3000.0)), 1)}


def _peak_flops_edges() -> list[dict]:
    """Every catalog GPU's own numbers, then the smallest legal inputs."""
    from ..hardware import catalog

    real = [{"sms": g.sms, "cores_per_sm": g.fp32_cores_per_sm, "clock_mhz": g.boost_mhz}
            for g in catalog().values() if g.boost_mhz is not None]
    return [*real, {"sms": 1, "cores_per_sm": 1, "clock_mhz": 1.0}]


QUESTIONS = (
    Question(
        id="01.fp32_peak_h100",
        name="fp32_peak_tflops",
        points=1,
        prompt="The FP32 (CUDA-core) peak of an H100 SXM5 from cores x boost clock x FLOPs per "
               "cycle, in TFLOP/s.",
        hint="Use the SXM5's SM count, FP32 cores per SM and CUDA-core boost clock.",
        answer=Number(
            reference=_h100_fp32_tflops,
            units="TFLOP/s",
            rtol=0.01,
            mistakes=(
                Mistake("fma", "looks like one FLOP per core per clock: a fused multiply-add "
                        "counts as 2 FLOPs (×2).", value=lambda ref: ref / 2),
                Mistake("h100_pcie", "that is the H100 PCIe (114 SMs at 1755 MHz), not the "
                        "SXM5.", value=lambda ref: _tflops_of("h100 pcie")),
                Mistake("pcie_sms", "114 SMs is the H100 PCIe; the SXM5 has more.",
                        value=lambda ref: ref * 114 / 132),
                Mistake("tensor_clock", "1830 MHz is the clock NVIDIA quotes for tensor-core "
                        "peaks; the CUDA cores boost to 1980 MHz.",
                        value=lambda ref: ref * 1830 / 1980),
                Mistake("tensor_peak", "that is a tensor-core peak; the question asks for the "
                        "FP32 CUDA-core peak.", when=_near_tensor_peak),
                Mistake("per_sm_cores", "looks like the 128 FP32 cores per SM were left out "
                        "(SMs x clock x 2 is one core per SM).", value=_sm_clock_only),
            ),
        ),
    ),
    Question(
        id="01.peak_flops",
        name="peak_flops",
        points=2,
        prompt="Write peak_flops(sms, cores_per_sm, clock_mhz) returning the FP32 peak in "
               "FLOP/s (one FMA per core per clock).",
        answer=Function(
            reference=_peak_flops_reference,
            inputs=_peak_flops_inputs,
            edge_cases=_peak_flops_edges,
            signature="peak_flops(sms, cores_per_sm, clock_mhz)",
            units="FLOP/s",
            rtol=1e-9,
            mistakes=(
                Mistake("fma", "a fused multiply-add counts as 2 FLOPs (×2).",
                        value=lambda e, **kw: e / 2),
                Mistake("mhz", "clock_mhz is in MHz: multiply by 10⁶ for cycles per second.",
                        value=lambda e, **kw: e / 1e6),
                Mistake("fma_mhz", "two slips: MHz is 10⁶ Hz, and an FMA is 2 FLOPs.",
                        value=lambda e, **kw: e / 2e6),
                Mistake("tflops", "return FLOP/s, not TFLOP/s.", value=lambda e, **kw: e / 1e12),
                Mistake("gflops", "return FLOP/s, not GFLOP/s.", value=lambda e, **kw: e / 1e9),
            ),
        ),
    ),
)
