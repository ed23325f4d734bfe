"""Chapter 10 (capstone) exercise questions: more mystery kernels to diagnose.

Notebook 10 works through the seven kernels of :data:`gpu_lessons.capstone.MYSTERIES`; these
questions bring new ones, built here as :class:`gpu_lessons.capstone.MysteryKernel` so that the
references are what the course's diagnosis tools say about them (:func:`capstone.evidence`,
:func:`capstone.diagnose`: Nsight Compute's Speed Of Light rule, a unit at 60 % of its peak or
more is the bottleneck).  Each kernel's time says where it comes from:

* ``float4_x``: *measured* — the H200 strided-copy run with the same warp access pattern and
  size (62,914,560 floats at stride 4: ``hardware.measured("h200.strided_copy.float_stride4_us")``
  and its useful bandwidth, ``...float_stride4_useful_gbs``; docs/measured/h200.md, "4-byte
  elements by stride");
* ``staged``: *model-derived* — :func:`gpu_lessons.latency.compare` (600 ns loaded latency)
  gives the rate at which the resident warps *load*; the kernel's time is its bytes read at that
  rate (its stores come after a barrier and do not wait for DRAM);
* the decode step: *model-derived* — :func:`gpu_lessons.system.compare_modes` with the H200's
  measured launch costs.
"""

from __future__ import annotations

from functools import cache

from .. import capstone, costs, latency, memory
from .._format import bandwidth
from .._math import cdiv
from ..capstone import diagnose, evidence
from ..hardware import catalog, measured
from ..hardware import gpu as lookup
from ..occupancy import compute_capability, occupancy
from ..roofline import Roofline
from ..system import compare_modes, launch_figures
from ._common import fraction_as_percent, percent_as_fraction
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- mystery A: one component of an array of float4 ------------------------------------------------

_N = 62_914_560


def _float4_bandwidth() -> float:
    """Useful bandwidth of strided_copy_4 at stride 4 on an H200, B/s (the recorded run)."""
    return measured("h200.strided_copy.float_stride4_useful_gbs").value * 1e9

_FLOAT4_CODE = r"""
__global__ void get_x(const float4* __restrict__ p, float* __restrict__ x) {
    // 256 threads per block, 8 points per thread, all loads issued before the stores
    long base = blockIdx.x * 256L * 8 + threadIdx.x;
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = p[base + 256 * j].x;   // lanes 16 bytes apart
    for (int j = 0; j < 8; ++j) x[base + 256 * j] = v[j];
}"""


@cache
def _float4_kernel():
    """x of 62,914,560 float4 points: 503 MB useful (x read, x written) in the time the H200
    measured for the same pattern and size (296.72 µs: 1,696 GB/s useful)."""
    cost = costs.elementwise(_N, flops_per_element=0, reads=1, writes=1, name="copy x")
    return capstone.MysteryKernel(
        key="float4_x", title="Read the x of every float4 point", code=_FLOAT4_CODE,
        gpu="H200 SXM", precision="fp32", sizes=f"{_N:,} float4 points (x: 240 MiB out)",
        cost=cost, seconds=measured("h200.strided_copy.float_stride4_us").si, measured=True,
        time_source=f"measured: strided_copy_4 at stride 4, {bandwidth(_float4_bandwidth())} "
                    f"useful, the same warp access pattern (docs/measured/h200.md, '4-byte "
                    f"elements by stride')",
        accesses=(capstone.WarpAccess("load p[i].x", tuple(memory.aos_field(16, 0))),
                  capstone.WarpAccess("store x[i]", tuple(memory.strided(1)))),
        fix="structure of arrays: keep x in its own float array, so a warp reads 128 "
            "consecutive bytes (4 sectors instead of 16)")


def _float4_prompt_fields() -> dict:
    k = _float4_kernel()
    return {"mb": f"{k.cost.bytes / 1e6:,.0f}", "us": f"{k.seconds * 1e6:.1f}",
            "useful": f"{_float4_bandwidth() / 1e9:,.0f}"}


def _float4_dram_fraction() -> float:
    """Percent of the 4.8 TB/s DRAM roof the kernel's sectors move: per warp 16 sectors for
    the load and 4 for the store, 640 B for 256 B useful: 2.5 x the useful bandwidth (2.5 x
    1,696 = 4,240 GB/s = 88.3 %)."""
    return 100 * evidence(_float4_kernel()).dram_fraction


def _float4_useful_fraction(_ref: float) -> float:
    e = evidence(_float4_kernel())
    return 100 * e.useful_bandwidth / e.bandwidth


def _float4_moved(load_sectors: int, store_sectors: int) -> float:
    """Percent of the DRAM roof for a given sector count per warp (load, store)."""
    e = evidence(_float4_kernel())
    factor = (load_sectors + store_sectors) * 32 / 256
    return 100 * e.useful_bandwidth * factor / e.bandwidth


#: 10.float4_fix's options: what each changes, and the verdict and limiter it addresses.
_FLOAT4_TEXT = {"threads": "more threads per block",
                "soa": "store x, y, z and w as four separate float arrays",
                "tensor": "compute on the tensor cores",
                "stage": "copy each block's points into shared memory first, then read x from "
                         "there"}
_FLOAT4_ORDERS = ("threads soa tensor stage", "soa stage threads tensor",
                  "tensor threads stage soa", "stage tensor soa threads",
                  "threads stage soa tensor", "tensor soa threads stage")


def _float4_needed() -> str:
    """The fix on the route :func:`capstone.diagnose` picks: memory-bound with most sectors
    unused (traffic factor > 1.5) is the access-pattern step: structure of arrays."""
    d = diagnose(_float4_kernel())
    if d.verdict == "memory-bound" and d.evidence.traffic_factor > 1.5:
        return "soa"
    return "threads" if d.verdict == "latency-bound" else "tensor"


def _float4_fix(order) -> str:
    return "ABCD"[order.split().index(_float4_needed())]


def _float4_fields(order) -> dict:
    return {"options": "; ".join(f"{letter}: {_FLOAT4_TEXT[name]}"
                                 for letter, name in zip("ABCD", order.split(), strict=True))}


def _float4_other(name: str):
    def value(order):
        return None if name == _float4_needed() else "ABCD"[order.split().index(name)]
    return value


# -- mystery B: a copy staged through too much shared memory --------------------------------------

_STAGED_N = 1 << 26
_STAGED_FLOATS = 14_592           # floats per block: 58,368 B = 57 KiB
_STAGED_SMEM = 4 * _STAGED_FLOATS

_STAGED_CODE = r"""
// ptxas -v: 30 registers; 57 KiB of dynamic shared memory per block (58,368 B)
__global__ void scale_staged(const float* __restrict__ x, float* __restrict__ y, float s,
                             long n) {
    extern __shared__ float buf[];                      // 14,592 floats
    long base = blockIdx.x * 14592L;
    int count = (int)min(14592L, n - base);
    #pragma unroll 1
    for (int j = threadIdx.x; j < count; j += 256) buf[j] = x[base + j];   // one load in flight
    __syncthreads();
    for (int j = threadIdx.x; j < count; j += 256) y[base + j] = s * buf[j];
}"""


@cache
def _staged_kernel():
    """2^26 floats scaled through 57 KiB shared-memory buffers, 256-thread blocks.

    Time = bytes *read* / the load rate :func:`latency.compare` predicts.  That rate counts
    loads only: 3 blocks (24 warps) per SM, each warp with one 128-byte load in flight per
    round of 2 + 1,188 cycles (600 ns at 1,980 MHz) = 24 × 128 B / 1,190 cycles per SM =
    674.7 GB/s over 132 SMs, so 2^26 × 4 B read take 397.9 µs.  The stores add no time: they
    come after the barrier, when the block's data is already in shared memory, and a store
    does not wait for DRAM; the store loop issues about 300 instructions per warp against the
    load loop's 57 rounds of ~1,190 cycles.  (Dividing the bytes read *and* written by the load
    rate counts the writes as if they were loads waited for: twice the time.)"""
    cfg = latency.Config("staged", 256, 30, shared_mem_per_block=_STAGED_SMEM, ilp=1)
    load_rate = latency.compare([cfg], "h200").results[0].bandwidth    # bytes loaded per s
    cost = costs.elementwise(_STAGED_N, flops_per_element=1, reads=1, writes=1,
                             name="scale through shared memory")
    bytes_read = _STAGED_N * 4
    return capstone.MysteryKernel(
        key="staged", title="Scale an array, staged through shared memory", code=_STAGED_CODE,
        gpu="H200 SXM", precision="fp32", sizes=f"{_STAGED_N:,} floats in and out (256 MiB each)",
        cost=cost, seconds=bytes_read / load_rate, measured=False,
        time_source="model-derived: the bytes read at the load rate gpu_lessons.latency.compare "
                    "predicts (600 ns loaded latency) for the resident warps the occupancy "
                    "calculator allows, one 4-byte load in flight per thread; the stores, after "
                    "the barrier, wait for nothing",
        launch=capstone.Launch(blocks=cdiv(_STAGED_N, _STAGED_FLOATS), threads_per_block=256,
                               registers_per_thread=30, shared_mem_per_block=_STAGED_SMEM),
        accesses=(capstone.WarpAccess("load x", tuple(memory.strided(1))),
                  capstone.WarpAccess("store y", tuple(memory.strided(1)))),
        fix="drop the staging (it reuses nothing) or shrink the buffer so more blocks fit, "
            "and give each thread several independent loads (unrolled, or float4)")


def _staged_fields() -> dict:
    return {"us": f"{_staged_kernel().seconds * 1e6:.0f}"}


def _staged_verdict() -> str:
    return diagnose(_staged_kernel()).verdict


def _staged_buffer(blocks, *, reserve: bool = True, unit: int = 256) -> float:
    """The largest buffer, in floats per block (a multiple of ``unit``), that lets ``blocks``
    blocks of mystery B (256 threads, 30 registers) reside on an H200 SM: the calculator's
    answer, searched from the top.  4 blocks: 233,472 / 4 = 58,368 B each, minus the 1 KB
    the driver reserves per block = 57,344 B = 14,336 floats (the kernel's 14,592 floats
    leave room for only 3)."""
    spec = compute_capability("9.0")
    reserved = 0 if reserve else spec.reserved_shared_per_block

    def fits(units: int) -> bool:  # fewer blocks fit as the buffer grows: bisect
        smem = max(4 * units * unit - reserved, 0)
        return occupancy(cc="9.0", threads_per_block=256, registers_per_thread=30,
                         shared_mem_per_block=smem).blocks_per_sm >= blocks

    low, high = 0, spec.shared_per_block_optin // 4 // unit + 1
    if not fits(1):
        raise AssertionError(f"10.staged_buffer: no buffer lets {blocks} blocks reside")
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return float(low * unit)


# -- mystery C: a decode step of many small kernels ---------------------------------------------------

def _decode_speedup(kernels, kernel_us, **kw) -> float:
    """Step time launched one by one / as a CUDA graph (:func:`system.compare_modes` with the
    H200's measured launch costs).  144 kernels of 2 µs: 683.9 µs / 395.7 µs."""
    runs = compare_modes(kernels, kernel_us, **kw)
    return runs["async"].step_us / runs["graph"].step_us


def _decode_vs_sync(ref, kernels, kernel_us) -> float:
    runs = compare_modes(kernels, kernel_us)
    return runs["sync"].step_us / runs["graph"].step_us


def _decode_fields(kernels, kernel_us) -> dict:
    h200 = launch_figures("H200")
    return {"launch": f"{h200.launch_us:g}", "sync": f"{h200.sync_us:g}",
            "node": f"{h200.graph_node_us:g}", "graph_launch": f"{h200.graph_launch_us:g}"}


# -- roofline_fraction: how close a run is to its roofline --------------------------------------------

def _roofline_fraction_reference(flops, bytes_moved, seconds, peak_flops, bandwidth):
    """``max(F/π, B/β) / t`` (:attr:`gpu_lessons.roofline.Achieved.fraction_of_roofline`)."""
    roof = Roofline(peak_flops=peak_flops, bandwidth=bandwidth)
    return roof.achieved(flops, bytes_moved, seconds).fraction_of_roofline


def _roofline_fraction_inputs(rng) -> dict:
    """A catalog GPU and precision, a kernel of intensity 0.01..10^4 FLOP/byte, and a run
    between its roofline time and 100x slower."""
    choices = list(catalog().values())
    g = choices[int(rng.integers(len(choices)))]
    precision = sorted(g.peak_tflops)[int(rng.integers(len(g.peak_tflops)))]
    nbytes = float(round(10 ** rng.uniform(4, 11)))
    flops = float(round(nbytes * 10 ** rng.uniform(-2, 4)))
    pi, beta = g.peak_flops(precision), g.bandwidth
    best = max(flops / pi, nbytes / beta)
    return {"flops": flops, "bytes_moved": nbytes,
            "seconds": float(f"{best * 10 ** rng.uniform(0, 2):.6g}"),
            "peak_flops": pi, "bandwidth": beta}


def _roofline_fraction_edges() -> list[dict]:
    """Measured H200 runs (the recorded figures, docs/measured/h200.md): cuBLAS FP16 8192³ and
    1024³, the copy."""
    h200 = lookup("h200")
    fp16, fp32, bw = h200.peak_flops("fp16"), h200.peak_flops("fp32"), h200.bandwidth
    n, m = 8192, 1024
    copy = 2 * 1006632960
    return [
        {"flops": 2.0 * n**3, "bytes_moved": 3.0 * n * n * 2,
         "seconds": measured("h200.gemm.fp16_8192_ms").value * 1e-3, "peak_flops": fp16,
         "bandwidth": bw},
        {"flops": 2.0 * m**3, "bytes_moved": 3.0 * m * m * 2,
         "seconds": measured("h200.gemm.fp16_1024_ms").value * 1e-3, "peak_flops": fp16,
         "bandwidth": bw},
        {"flops": 0.0, "bytes_moved": float(copy),
         "seconds": copy / (measured("h200.copy.bandwidth_gbs").value * 1e9), "peak_flops": fp32,
         "bandwidth": bw},
    ]


def _min_fraction(e, flops, bytes_moved, seconds, peak_flops, bandwidth):
    return min(flops / peak_flops, bytes_moved / bandwidth) / seconds


def _code(source: str) -> str:
    """A CUDA listing as a markdown block, its braces doubled for the prompt template."""
    return "```cuda" + source.replace("{", "{{").replace("}", "}}") + "\n```"


QUESTIONS = (
    Question(
        id="10.float4_dram_fraction",
        name="float4_dram_fraction",
        points=2,
        title="Mystery A: how busy is DRAM?",
        prompt="Mystery A (code below) reads the x of 62,914,560 float4 points on an H200 and "
               "writes it to a float array: {mb} MB of useful traffic (x read once, written "
               "once) in {us} µs, i.e. {useful} GB/s of useful bandwidth (measured for this "
               "access pattern). What percentage of the H200's 4.8 TB/s DRAM roof do the "
               "32-byte sectors it moves reach?\n\n" + _code(_FLOAT4_CODE) + "\n\n"
               "Answer in **percent** of the DRAM peak, in `float4_dram_fraction`.",
        hint="Count the sectors of one warp's load of p[i].x and of its store of x[i] "
             "(gpu_lessons.memory.global_load), then scale the useful bytes by moved / useful.",
        derive=_float4_prompt_fields,
        answer=Number(
            reference=_float4_dram_fraction,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("useful_only", "that is the useful bandwidth; DRAM moves whole 32-byte "
                        "sectors, most of which the load does not use.",
                        value=_float4_useful_fraction),
                Mistake("load_factor_everywhere", "only the load is strided; the store of "
                        "x[i] is coalesced.", value=lambda ref: _float4_moved(16, 16)),
                Mistake("store_forgotten", "the store moves sectors too: x is written back "
                        "to DRAM.", value=lambda ref: _float4_moved(16, 0)),
                percent_as_fraction(),
            ),
        ),
    ),
    Question(
        id="10.float4_fix",
        name="float4_fix",
        points=1,
        title="Mystery A: the fix",
        prompt="Which change makes mystery A substantially faster? {options}.\n\n"
               "Answer with one letter, `\"A\"`, `\"B\"`, `\"C\"` or `\"D\"`, in "
               "`float4_fix`.",
        vary=(Vary("order", _FLOAT4_ORDERS, "which change is lettered A, B, C and D"),),
        derive=_float4_fields,
        answer=Choice(
            reference=_float4_fix,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("more_threads", "more warps help a kernel that cannot keep enough "
                        "loads in flight; this one already keeps a memory roof busy.",
                        value=_float4_other("threads")),
                Mistake("tensor_cores", "the kernel does no arithmetic at all.",
                        value=_float4_other("tensor")),
                Mistake("stage_in_shared", "staging still reads every byte of every point "
                        "from DRAM: the same sectors move, plus a trip through shared memory.",
                        value=_float4_other("stage")),
            ),
        ),
    ),
    Question(
        id="10.staged_verdict",
        name="staged_verdict",
        points=1,
        title="Mystery B: what limits it?",
        prompt="Mystery B (code below) scales 2²⁶ floats on an H200, staging each block's "
               "14,592 floats through 58,368 bytes of shared memory; 256-thread blocks, 30 "
               "registers per thread, one 4-byte load in flight per thread. It takes {us} µs "
               "(model-derived). Is it memory-, compute- or latency-bound?\n\n"
               + _code(_STAGED_CODE) + "\n\n"
               "Answer with one of `\"memory-bound\"`, `\"compute-bound\"`, "
               "`\"latency-bound\"` in `staged_verdict`.",
        hint="Compute the fraction of each roof it reaches (FLOP/s against 66.9 TFLOP/s, bytes "
             "moved against 4.8 TB/s) and apply the 60 % rule; then look at its occupancy.",
        derive=_staged_fields,
        answer=Choice(
            reference=_staged_verdict,
            options=("memory-bound", "compute-bound", "latency-bound"),
            mistakes=(
                Mistake("memory", "it only moves data, but count its bytes per second: DRAM "
                        "runs well below 60 % of its roof.", value="memory-bound"),
                Mistake("compute", "one multiply per 8 bytes moved is nowhere near the "
                        "compute roof.", value="compute-bound"),
            ),
        ),
    ),
    Question(
        id="10.staged_buffer",
        name="staged_buffer",
        points=2,
        title="Mystery B: a buffer that lets more blocks in",
        prompt="Mystery B's 58,368-byte buffer lets only a few blocks reside on each SM, too "
               "few warps to keep loads in flight. If the kernel staged fewer floats per block, "
               "more blocks would fit. What is the largest buffer, in **floats per block** (a "
               "multiple of 256, one per thread per pass of the loop), that lets at least "
               "**{blocks} blocks** of 256 threads (30 registers per thread) reside on each SM "
               "of the H200 (compute capability 9.0, the kernel opted in to large shared "
               "memory)? Store it in `staged_buffer`.",
        hint="The SM's shared memory is shared by the resident blocks, and the driver adds its "
             "own reservation to each block before dividing.",
        vary=(Vary("blocks", (4, 5, 6, 7, 8), "blocks per SM wanted"),),
        answer=Number(
            reference=_staged_buffer,
            units="floats per block",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("no_reservation", "the driver reserves 1 KB of shared memory per "
                        "block on CC 9.0, on top of the kernel's own: subtract it first.",
                        value=lambda ref, blocks: _staged_buffer(blocks, reserve=False)),
                Mistake("bytes", "that is bytes; the question asks for floats (4 bytes "
                        "each).", value=lambda ref, blocks: 4 * ref),
                Mistake("not_multiple", "the buffer must be a multiple of 256 floats (one per "
                        "thread per pass): round down.",
                        value=lambda ref, blocks: None if _staged_buffer(blocks, unit=1) == ref
                        else _staged_buffer(blocks, unit=1)),
            ),
        ),
    ),
    Question(
        id="10.decode_graph_speedup",
        name="decode_graph_speedup",
        points=2,
        title="Mystery C: what a CUDA graph buys",
        prompt="Mystery C: one decode step of a small language model launches **{kernels} "
               "kernels of about {kernel_us} µs** of GPU work each, back to back, with one "
               "synchronisation at the end (H200: {launch} µs of CPU time per launch, {sync} µs "
               "sync round trip). Captured in a CUDA graph, the step costs one launch "
               "({graph_launch} µs), then {node} µs of GPU overhead per kernel node, then the "
               "same sync. By what factor does the graph shorten the step?\n\n"
               "Answer with the factor (time one by one ÷ time as a graph), e.g. `2.5`, in "
               "`decode_graph_speedup`.",
        hint="Work out both step times: one by one, the GPU waits for each launch when a "
             "kernel is shorter than a launch.",
        vary=(Vary("kernels", (144, 96, 200, 300), "kernels per step"),
              Vary("kernel_us", (2.0, 1.5, 3.0, 1.0), "GPU time per kernel, µs")),
        derive=_decode_fields,
        answer=Number(
            reference=_decode_speedup,
            units="x (time before / time after)",
            rtol=0.01,
            mistakes=(
                Mistake("no_node_cost", "a graph node is not free: each costs the GPU {node} "
                        "µs on top of its kernel.", value=lambda ref, kernels, kernel_us:
                        _decode_speedup(kernels, kernel_us, graph_node_us=0.0)),
                Mistake("vs_sync", "that compares with a sync after every kernel; this step "
                        "synchronises once, at the end.", value=_decode_vs_sync),
                Mistake("inverted", "that is time after / time before; the factor is before / "
                        "after.", value=lambda ref, **p: 1 / ref),
            ),
        ),
    ),
    Question(
        id="10.roofline_fraction",
        name="roofline_fraction",
        points=2,
        title="How close to the roofline?",
        prompt="Write `roofline_fraction(flops, bytes_moved, seconds, peak_flops, bandwidth)` "
               "returning how close a measured run is to its roofline: the shortest time the "
               "roofline allows for that many FLOPs and bytes, divided by the measured seconds "
               "(1 = on the roof; FLOP/s and bytes/s in).\n\n"
               "Return a fraction (1.0 = on the roofline). The check includes three H200 runs: "
               "cuBLAS FP16 GEMMs of 8192³ and 1024³ and the copy kernel.",
        answer=Function(
            reference=_roofline_fraction_reference,
            inputs=_roofline_fraction_inputs,
            edge_cases=_roofline_fraction_edges,
            signature="roofline_fraction(flops, bytes_moved, seconds, peak_flops, bandwidth)",
            units="fraction of the roofline",
            rtol=1e-9,
            mistakes=(
                Mistake("min", "the roofline's time is set by the slower of compute and memory, "
                        "not the faster.", value=_min_fraction),
                Mistake("inverted", "that is measured / roofline time; the fraction is roofline "
                        "time / measured.", value=lambda e, **kw: 1 / e),
                Mistake("sum", "the roofline lets compute and memory overlap: its time is the "
                        "larger of the two, not their sum.",
                        value=lambda e, flops, bytes_moved, seconds, peak_flops, bandwidth:
                        (flops / peak_flops + bytes_moved / bandwidth) / seconds),
                Mistake("compute_only", "that is the fraction of the compute roof alone; a "
                        "memory-bound run is measured against the memory roof.",
                        value=lambda e, flops, bytes_moved, seconds, peak_flops, bandwidth:
                        flops / peak_flops / seconds),
                fraction_as_percent("return a fraction, not percent."),
            ),
        ),
    ),
)

