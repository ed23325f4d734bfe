"""Chapter 01 (CPU vs GPU) exercise questions.

References come from :mod:`gpu_lessons.hardware` (datasheet figures with their sources) and
:mod:`gpu_lessons.latency` (Little's law: bytes in flight = bandwidth x latency, J. D. C.
Little, Operations Research 9(3), 1961).
"""

from __future__ import annotations

from ..hardware import catalog, compute_peak
from ..hardware import gpu as lookup
from ..latency import bytes_in_flight, littles_law
from ._common import gpus, max_threads_per_sm, tbs
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- 01.fp32_peak_capped: the FP32 peak at a clock below boost ----------------------------------

#: GPUs whose CUDA-core boost clock the catalog has (the H200 would repeat the H100's numbers).
_PEAK_GPUS = ("h100", "a100", "v100", "h100 pcie", "rtx 4090", "rtx 3090", "l40s", "l4", "t4",
              "quadro rtx 5000")


def _capped_mhz(gpu, clock_pct) -> int:
    """The sustained clock: ``clock_pct`` % of the boost clock, to the nearest MHz."""
    return round(lookup(gpu).boost_mhz * clock_pct / 100)


def _capped_peak(gpu, clock_pct) -> float:
    """FP32 peak in TFLOP/s at the sustained clock: SMs x FP32 lanes x clock x 2 FLOPs per FMA
    (an FMA is a multiply and an add).  H100 SXM5 at 90 % of 1980 MHz: 132 x 128 x 1782 MHz x 2
    = 60.2 TFLOP/s.  Lane counts and clocks: the catalog (whitepapers and datasheets)."""
    g = lookup(gpu)
    return compute_peak(g.fp32_cores, _capped_mhz(gpu, clock_pct) * 1e6, 2) / 1e12


def _capped_fields(gpu, clock_pct) -> dict:
    g = lookup(gpu)
    return {"key": gpu, "boost": f"{g.boost_mhz:,.0f}", "clock": f"{_capped_mhz(gpu, clock_pct):,}"}


def _near_tensor_peak(answer: float, _ref: float, gpu, clock_pct) -> bool:
    """True when the answer is one of the GPU's tensor-core peaks (dense or 2:4 sparse)."""
    g = lookup(gpu)
    peaks = [t for p, t in g.peak_tflops.items() if p not in ("fp32", "fp64")]
    return any(abs(answer - p) <= 0.01 * p for peak in peaks for p in (peak, 2 * peak))


def _peak_flops_reference(sms, cores_per_sm, clock_mhz):
    """pi = N_cores x f x 2 (an FMA is 2 FLOPs), in FLOP/s."""
    return compute_peak(sms * cores_per_sm, clock_mhz * 1e6, 2)


def _peak_flops_inputs(rng) -> dict:
    return {"sms": int(rng.integers(1, 201)),
            "cores_per_sm": int(rng.choice([32, 64, 128])),
            "clock_mhz": round(float(rng.uniform(300.0, 3000.0)), 1)}


def _peak_flops_edges() -> list[dict]:
    """Every catalog GPU's own numbers, then the smallest legal inputs."""
    real = [{"sms": g.sms, "cores_per_sm": g.fp32_cores_per_sm, "clock_mhz": g.boost_mhz}
            for g in catalog().values() if g.boost_mhz is not None]
    return [*real, {"sms": 1, "cores_per_sm": 1, "clock_mhz": 1.0}]


# -- 01.loads_per_thread: Little's law against the threads an SM can hold ------------------------

_LAW_GPUS = ("h200", "h100", "a100", "b200", "v100", "l40s", "rtx 4090", "h100 pcie")


def _loads_per_thread(gpu, latency_ns, load_bytes) -> float:
    """Loads each resident thread must keep in flight to keep DRAM busy: bytes in flight per
    SM (bandwidth x latency / SMs, Little's law) / bytes per load / the most threads an SM
    holds.  H200: 4.8 TB/s x 600 ns / 132 SMs = 21,818 B per SM; / 4 B = 5,455 loads; / 2,048
    threads = 2.66 loads per thread."""
    law = littles_law(gpu, latency_ns=latency_ns, bytes_per_thread=load_bytes)
    return law.threads_per_sm / max_threads_per_sm(gpu)


def _law_fields(gpu, latency_ns, load_bytes) -> dict:
    g = lookup(gpu)
    return {"key": gpu, "sms": g.sms, "bandwidth": tbs(g.bandwidth),
            "max_threads": f"{max_threads_per_sm(gpu):,}"}


# -- 01.threads_needed: Little's law as a function ------------------------------------------------

#: The loaded DRAM latency of the function's edge cases: the course's round figure for HBM.
_LATENCY_NS = 600.0


def _threads_needed_reference(bandwidth_gbs, latency_ns, bytes_per_thread):
    """threads = bandwidth x latency / bytes per thread (Little's law), no rounding."""
    return bytes_in_flight(bandwidth_gbs * 1e9, latency_ns * 1e-9) / bytes_per_thread


def _threads_needed_inputs(rng) -> dict:
    """Bandwidths from a laptop's DDR to a B200's HBM3e, latencies from an L2 hit to loaded
    DRAM, and the load widths a thread can have in flight."""
    return {"bandwidth_gbs": round(float(10 ** rng.uniform(1.5, 4.0)), 1),
            "latency_ns": round(float(rng.uniform(50.0, 2000.0)), 1),
            "bytes_per_thread": int(rng.choice([1, 2, 4, 8, 16, 32, 64]))}


def _threads_needed_edges() -> list[dict]:
    """Every catalog GPU's datasheet bandwidth at 600 ns, one float per thread."""
    return [{"bandwidth_gbs": g.bandwidth_gbs, "latency_ns": _LATENCY_NS,
             "bytes_per_thread": 4} for g in catalog().values()]


# -- 01.gpu_workload: which workload fits a GPU ----------------------------------------------------

#: The three workloads and how many independent pieces of work each offers at once.
_WORKLOADS = {
    "list": ("walk a linked list of 10⁶ nodes (each node holds the address of the next)", 1),
    "add": ("`c = a + b` over two arrays of {big} floats", None),
    "sum": ("the sum of {small} floats", None),
}
#: Orders in which the options are lettered A, B, C.
_ORDERS = ("list add sum", "add sum list", "sum list add", "list sum add", "add list sum",
           "sum add list")


def _pieces(name, big, small) -> int:
    return {"list": 1, "add": big, "sum": small}[name]


def _letter(order, name) -> str:
    return "ABC"[order.split().index(name)]


def _gpu_workload(gpu, order, big, small) -> str:
    """The option with enough independent work to cover the GPU's memory latency: by Little's
    law an H100 SXM5 needs 3.35 TB/s x 600 ns / 4 B = 502,500 four-byte loads in flight, and
    only a workload with at least that many independent elements supplies them."""
    law = littles_law(gpu, latency_ns=_LATENCY_NS, bytes_per_thread=4)
    needed = law.bytes_in_flight / law.bytes_per_thread
    fits = [n for n in order.split() if _pieces(n, big, small) >= needed]
    if len(fits) != 1:
        raise AssertionError(f"01.gpu_workload should have one answer, the model gives {fits}")
    return _letter(order, fits[0])


def _workload_fields(gpu, order, big, small) -> dict:
    lines = []
    for letter, name in zip("ABC", order.split(), strict=True):
        text = _WORKLOADS[name][0].format(big=f"{big:,}", small=f"{small:,}")
        lines.append(f"- **{letter}**: {text};")
    lines[-1] = lines[-1][:-1] + "."
    return {"options": "\n".join(lines), "bandwidth": tbs(lookup(gpu).bandwidth)}


QUESTIONS = (
    Question(
        id="01.fp32_peak_capped",
        name="fp32_peak_tflops",
        points=1,
        title="Peak FP32 at a sustained clock",
        prompt="A processor's peak arithmetic rate is π = units × clock × FLOPs per cycle per "
               "unit. A GPU's FP32 units are its FP32 lanes (\"CUDA cores\"), spread over its "
               "SMs; each lane completes one fused multiply-add (FMA) per cycle.\n\n"
               "The datasheet peak of the **{gpu}** assumes its boost clock of {boost} MHz. "
               "Under a long, heavy load its power limit holds the clock at **{clock} MHz**. "
               "What FP32 peak does that sustained clock allow, in **TFLOP/s**? Take the SM "
               "count and the lanes per SM from the catalog (`gpu(\"{key}\")`) and store the "
               "answer in `fp32_peak_tflops`. (Count the FLOPs in an FMA carefully.)",
        hint="SMs × FP32 lanes per SM × the sustained clock in Hz × FLOPs per FMA.",
        vary=(gpus(*_PEAK_GPUS),
              Vary("clock_pct", (90, 80, 85, 95), "the sustained clock, % of the boost clock")),
        derive=_capped_fields,
        answer=Number(
            reference=_capped_peak,
            units="TFLOP/s",
            rtol=0.01,
            mistakes=(
                Mistake("fma", "looks like one FLOP per lane per clock: a fused multiply-add "
                        "counts as 2 FLOPs (×2).", value=lambda ref, **p: ref / 2),
                Mistake("boost_clock", "that is the peak at the {boost} MHz boost clock (the "
                        "datasheet figure); the question asks what {clock} MHz allows.",
                        value=lambda ref, gpu, clock_pct: ref * 100 / clock_pct),
                Mistake("tensor_peak", "that is a tensor-core peak; the question asks for the "
                        "FP32 CUDA-core peak.", when=_near_tensor_peak),
                Mistake("per_sm_lanes", "looks like the FP32 lanes per SM were left out (SMs × "
                        "clock × 2 counts one lane per SM).",
                        value=lambda ref, gpu, clock_pct: ref / lookup(gpu).fp32_cores_per_sm),
            ),
        ),
    ),
    Question(
        id="01.peak_flops",
        name="peak_flops",
        points=2,
        title="The peak formula as a function",
        prompt="Write `peak_flops(sms, cores_per_sm, clock_mhz)` that returns the FP32 peak of "
               "*any* GPU in **FLOP/s** (not TFLOP/s), assuming one FMA per core per clock. "
               "`clock_mhz` is in MHz.\n\n"
               "The check calls your function on every GPU in the catalog and on 100 random "
               "inputs.",
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
        id="01.loads_per_thread",
        name="loads_per_thread",
        points=2,
        title="Little's law against the threads an SM holds",
        prompt="**Little's law**: items in flight = throughput × latency. For memory, *bytes in "
               "flight = bandwidth × latency*: that many bytes must be requested and not yet "
               "returned at every moment, or the memory sits idle part of the time.\n\n"
               "The **{gpu}** has {sms} SMs and {bandwidth} of DRAM bandwidth "
               "(`gpu(\"{key}\").bandwidth` is in bytes/s); take **{latency_ns} ns** for a DRAM "
               "access under load. One SM holds at most {max_threads} threads at a time. If "
               "every SM is full, how many independent **{load_bytes}-byte loads** must each "
               "thread keep in flight to keep the memory busy? Store the exact quotient (do not "
               "round) in `loads_per_thread`. Is one load per thread enough?",
        hint="Bytes in flight = bandwidth × latency; share them among the SMs, count loads of "
             "{load_bytes} bytes, then share those among the threads one SM holds.",
        vary=(gpus(*_LAW_GPUS),
              Vary("latency_ns", (600, 500, 700, 800), "loaded DRAM latency, ns"),
              Vary("load_bytes", (4, 8, 16), "bytes per load (float, double, float4)")),
        derive=_law_fields,
        answer=Number(
            reference=_loads_per_thread,
            units="loads per thread",
            rtol=0.01,
            mistakes=(
                Mistake("threads", "that is how many loads one SM needs in flight: share them "
                        "among the {max_threads} threads it holds.",
                        value=lambda ref, gpu, **p: ref * max_threads_per_sm(gpu)),
                Mistake("whole_gpu", "that shares the bytes in flight among the threads of one "
                        "SM only; share them among all {sms} SMs first.",
                        value=lambda ref, gpu, **p: ref * lookup(gpu).sms),
                Mistake("load_size", "each load brings {load_bytes} bytes, not 4: count loads "
                        "of the size the question gives.",
                        value=lambda ref, gpu, latency_ns, load_bytes:
                        None if load_bytes == 4 else ref * load_bytes / 4),
                Mistake("per_32_threads", "that is 32 times too many: it shares the loads "
                        "among groups of 32 threads (lesson 02's warps); the question counts "
                        "loads per thread.", value=lambda ref, **p: ref * 32),
                Mistake("rounded", "store the exact quotient; rounding to whole loads comes "
                        "after.", when=lambda x, ref, **p: float(x).is_integer()
                        and x != ref and abs(x - ref) < 1),
            ),
        ),
    ),
    Question(
        id="01.threads_needed",
        name="threads_needed",
        points=2,
        title="Threads needed to cover latency",
        prompt="Write `threads_needed(bandwidth_gbs, latency_ns, bytes_per_thread)` that returns "
               "how many threads must each have one load of `bytes_per_thread` bytes in flight "
               "to keep a memory with that bandwidth (in **GB/s**) and latency (in **ns**) busy. "
               "Return the exact quotient — do not round to whole threads.\n\n"
               "(Look at the units: what is GB/s × ns?)",
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
                Mistake("per_32_threads", "that is 32 times too few: it counts groups of 32 "
                        "threads (lesson 02's warps); return threads.",
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
        title="Which workload keeps a GPU busy?",
        prompt="Three workloads:\n\n{options}\n\n"
               "Which one can keep {a_gpu} **{gpu}** busy? Think about how many *independent* pieces "
               "of work each offers at once, and compare with the number of 4-byte loads the "
               "GPU needs in flight (Little's law, {bandwidth} × 600 ns). Answer `\"A\"`, "
               "`\"B\"` or `\"C\"` in `gpu_workload`.",
        vary=(gpus("h100", "h200", "a100", "b200", "v100"),
              Vary("order", _ORDERS, "which workload is lettered A, B and C"),
              Vary("big", (10**8, 3 * 10**7, 5 * 10**8), "floats per array of the vector add"),
              Vary("small", (1_000, 4_096, 20_000), "floats in the small sum")),
        derive=_workload_fields,
        answer=Choice(
            reference=_gpu_workload,
            options=("A", "B", "C"),
            mistakes=(
                Mistake("linked_list", "each step of a list walk needs the address the "
                        "previous step loaded: one access at a time, each paying the whole "
                        "memory latency. Extra threads have nothing to do.",
                        value=lambda order, **p: _letter(order, "list")),
                Mistake("too_small", "that sum is far too small: by Little's law the GPU needs "
                        "hundreds of thousands of loads in flight to keep its memory busy, and "
                        "a kernel launch alone takes microseconds.",
                        value=lambda order, **p: _letter(order, "sum")),
            ),
        ),
    ),
)
