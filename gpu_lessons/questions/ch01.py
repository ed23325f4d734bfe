"""Chapter 01 (CPU vs GPU) exercise questions.

References come from :mod:`gpu_lessons.hardware` (datasheet figures with their sources) and
:mod:`gpu_lessons.latency` (Little's law: bytes in flight = bandwidth x latency, J. D. C.
Little, Operations Research 9(3), 1961); they are imported inside each function so that
listing questions costs nothing.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question


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


# -- Little's law: warps in flight on an H200 ----------------------------------------------------

#: The loaded DRAM latency the prompts state: the course's round figure for HBM under load
#: (:data:`gpu_lessons.latency.DEFAULT_LATENCY_NS`), fixed here because the prompts print it.
_LATENCY_NS = 600.0


def _warps_per_sm(name: str = "h200", bytes_per_thread: int = 4) -> float:
    """Warps per SM that keep ``name``'s DRAM busy, each thread with one load in flight.

    warps/SM = bandwidth x latency / SMs / bytes per thread / 32 (Little's law).  H200:
    4.8 TB/s (datasheet) x 600 ns / 132 SMs / 4 B / 32 = 170.5 warps.
    """
    from ..latency import littles_law

    return littles_law(name, latency_ns=_LATENCY_NS,
                       bytes_per_thread=bytes_per_thread).warps_per_sm


def _max_warps_cc90(_ref: float) -> float:
    """The most warps one CC 9.0 SM can hold (CUDA Programming Guide, compute capabilities)."""
    from ..occupancy import compute_capability

    return compute_capability("9.0").max_warps_per_sm


def _sms(name: str) -> int:
    from ..hardware import gpu

    return gpu(name).sms


# -- Little's law as a function -----------------------------------------------------------------

def _threads_needed_reference(bandwidth_gbs, latency_ns, bytes_per_thread):
    """threads = bandwidth x latency / bytes per thread (Little's law), no rounding."""
    from ..latency import bytes_in_flight

    return bytes_in_flight(bandwidth_gbs * 1e9, latency_ns * 1e-9) / bytes_per_thread


def _threads_needed_inputs(rng) -> dict:
    """Bandwidths from a laptop's DDR to a B200's HBM3e, latencies from an L2 hit to loaded
    DRAM, and the load widths a thread can have in flight."""
    return {"bandwidth_gbs": round(float(10 ** rng.uniform(1.5, 4.0)), 1),
            "latency_ns": round(float(rng.uniform(50.0, 2000.0)), 1),
            "bytes_per_thread": int(rng.choice([1, 2, 4, 8, 16, 32, 64]))}


def _threads_needed_edges() -> list[dict]:
    """Every catalog GPU's datasheet bandwidth at 600 ns, one float per thread."""
    from ..hardware import catalog

    return [{"bandwidth_gbs": g.bandwidth_gbs, "latency_ns": _LATENCY_NS,
             "bytes_per_thread": 4} for g in catalog().values()]


# -- which workload fits a GPU --------------------------------------------------------------------

#: 01.gpu_workload's options: how many independent pieces of work each offers at once.
#: A: a linked-list walk (each node's address is in the previous node: one at a time);
#: B: c = a + b over 10^8 floats (every element independent); C: the sum of 1,000 floats.
_WORKLOAD_PARALLELISM = {"A": 1, "B": 10**8, "C": 1_000}


def _gpu_workload() -> str:
    """The one option with enough independent work to cover an H100's memory latency.

    Little's law: an H100 SXM5 needs 3.35 TB/s x 600 ns / 4 B = 502,500 four-byte loads in
    flight; only a workload with at least that many independent elements can supply them.
    """
    from ..latency import littles_law

    law = littles_law("h100", latency_ns=_LATENCY_NS, bytes_per_thread=4)
    needed = law.bytes_in_flight / law.bytes_per_thread
    fits = [k for k, n in _WORKLOAD_PARALLELISM.items() if n >= needed]
    if len(fits) != 1:
        raise AssertionError(f"01.gpu_workload should have one answer, the model gives {fits}")
    return fits[0]


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
    Question(
        id="01.warps_per_sm_h200",
        name="warps_per_sm",
        points=2,
        prompt="An H200 SXM (4.8 TB/s HBM3e, 132 SMs); a DRAM access under load takes 600 ns. "
               "If every thread keeps one 4-byte load in flight, how many warps per SM must be "
               "waiting on memory at any moment to keep the HBM busy?",
        hint="Bytes in flight = bandwidth x latency (Little's law); share them among the SMs, "
             "then count 4-byte loads, 32 threads to a warp.",
        answer=Number(
            reference=_warps_per_sm,
            units="warps per SM",
            rtol=0.01,
            mistakes=(
                Mistake("threads", "that is threads per SM; a warp is 32 threads.",
                        value=lambda ref: ref * 32),
                Mistake("whole_gpu", "that is warps on the whole GPU; the question asks per "
                        "SM (share the bytes in flight among the SMs).",
                        value=lambda ref: ref * _sms("h200")),
                Mistake("whole_gpu_threads", "that is threads on the whole GPU; the question "
                        "asks for warps per SM.", value=lambda ref: ref * 32 * _sms("h200")),
                Mistake("h100_bandwidth", "3.35 TB/s is the H100 SXM5's HBM3; the H200 has "
                        "faster HBM3e.", value=lambda ref: _warps_per_sm("h100")),
                Mistake("wide_loads", "that assumes 16-byte loads; here each thread has one "
                        "4-byte load in flight.",
                        value=lambda ref: _warps_per_sm("h200", bytes_per_thread=16)),
                Mistake("max_warps", "that is how many warps an SM *can hold* (compute "
                        "capability 9.0), not how many the bandwidth x latency product asks "
                        "for: compute the product and compare.", value=_max_warps_cc90),
            ),
        ),
    ),
    Question(
        id="01.threads_needed",
        name="threads_needed",
        points=2,
        prompt="Write threads_needed(bandwidth_gbs, latency_ns, bytes_per_thread) returning how "
               "many threads must each have one load of bytes_per_thread bytes in flight to "
               "keep a memory of that bandwidth (GB/s) and latency (ns) busy. Return the exact "
               "quotient, without rounding.",
        answer=Function(
            reference=_threads_needed_reference,
            inputs=_threads_needed_inputs,
            edge_cases=_threads_needed_edges,
            signature="threads_needed(bandwidth_gbs, latency_ns, bytes_per_thread)",
            units="threads",
            rtol=1e-9,
            mistakes=(
                Mistake("bytes", "that is the number of bytes in flight; each thread supplies "
                        "bytes_per_thread of them.",
                        value=lambda e, bytes_per_thread, **kw: e * bytes_per_thread),
                Mistake("times_bytes", "bytes_per_thread multiplies where it should divide: "
                        "wider loads mean fewer threads.",
                        value=lambda e, bytes_per_thread, **kw: e * bytes_per_thread ** 2),
                Mistake("warps", "that counts warps (32 threads each); return threads.",
                        value=lambda e, **kw: e / 32),
                Mistake("gbs_only", "mixed units: GB/s is 10⁹ bytes per second and ns is 10⁻⁹ s "
                        "— converted together, or not at all, their product is bytes.",
                        value=lambda e, **kw: e * 1e-9),
                Mistake("ns_only", "mixed units: ns is 10⁻⁹ s and GB/s is 10⁹ bytes per second "
                        "— converted together, or not at all, their product is bytes.",
                        value=lambda e, **kw: e * 1e9),
                Mistake("rounded", "return the exact quotient; rounding up to whole threads is "
                        "not asked for here.",
                        when=lambda got, e, case: isinstance(got, (int, float))
                        and got != e and abs(got - e) < 1 and float(got).is_integer()),
            ),
        ),
    ),
    Question(
        id="01.gpu_workload",
        name="gpu_workload",
        points=1,
        prompt="Which workload can keep an H100 busy? A: walk a linked list of 10^6 nodes "
               "(each node holds the address of the next); B: c = a + b over two arrays of "
               "10^8 floats; C: the sum of 1,000 floats.",
        answer=Choice(
            reference=_gpu_workload,
            options=("A", "B", "C"),
            mistakes=(
                Mistake("linked_list", "each step of a list walk needs the address the "
                        "previous step loaded: one access at a time, each paying the whole "
                        "memory latency. Extra threads have nothing to do.", value="A"),
                Mistake("too_small", "1,000 floats are far too few: by Little's law an H100 "
                        "needs hundreds of thousands of loads in flight to keep its memory "
                        "busy, and a kernel launch alone takes microseconds.", value="C"),
            ),
        ),
    ),
)
