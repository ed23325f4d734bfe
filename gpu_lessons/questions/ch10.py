"""Chapter 10 (capstone) exercise questions: more mystery kernels to diagnose.

Notebook 10 works through the seven kernels of :data:`gpu_lessons.capstone.MYSTERIES`; these
questions bring new ones, built here as :class:`gpu_lessons.capstone.MysteryKernel` so that the
references are what the course's diagnosis tools say about them (:func:`capstone.evidence`,
:func:`capstone.diagnose`: Nsight Compute's Speed Of Light rule, a unit at 60 % of its peak or
more is the bottleneck).  Each kernel's time says where it comes from:

* ``float4_x``: *measured* — the H200 strided-copy run with the same warp access pattern
  (4-byte elements at stride 4: 1,665 GB/s of useful bandwidth; docs/measured/h200.md,
  "4-byte elements by stride", L2 fetch granularity 64 B);
* ``staged``: *model-derived* — :func:`gpu_lessons.latency.compare` (600 ns loaded latency);
* the decode step: *model-derived* — :func:`gpu_lessons.system.compare_modes` with the H200's
  measured launch costs.

Everything is imported inside the functions, so listing questions costs nothing.
"""

from __future__ import annotations

from functools import cache

from .types import Choice, Function, Mistake, Number, Question

# -- mystery A: one component of an array of float4 ------------------------------------------------

_N = 62_914_560
#: Useful bandwidth of strided_copy_4 at stride 4 on an H200 (docs/measured/h200.md).
_FLOAT4_X_BANDWIDTH = 1665e9

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
    """x of 62,914,560 float4 points: 503 MB useful (x read, x written) at the 1,665 GB/s the
    H200 measured for the same pattern: 302 µs."""
    from .. import capstone, costs, memory

    cost = costs.elementwise(_N, flops_per_element=0, reads=1, writes=1, name="copy x")
    return capstone.MysteryKernel(
        key="float4_x", title="Read the x of every float4 point", code=_FLOAT4_CODE,
        gpu="H200 SXM", precision="fp32", sizes=f"{_N:,} float4 points (x: 240 MiB out)",
        cost=cost, seconds=cost.bytes / _FLOAT4_X_BANDWIDTH, measured=True,
        time_source="measured: strided_copy_4 at stride 4, 1,665 GB/s useful, the same warp "
                    "access pattern (docs/measured/h200.md, '4-byte elements by stride')",
        accesses=(capstone.WarpAccess("load p[i].x", tuple(memory.aos_field(16, 0))),
                  capstone.WarpAccess("store x[i]", tuple(memory.strided(1)))),
        fix="structure of arrays: keep x in its own float array, so a warp reads 128 "
            "consecutive bytes (4 sectors instead of 16)")


def _float4_dram_fraction() -> float:
    """Percent of the 4.8 TB/s DRAM roof the kernel's sectors move: per warp 16 sectors for
    the load and 4 for the store, 640 B for 256 B useful: 2.5 x 1,665 = 4,162 GB/s = 86.7 %."""
    from ..capstone import evidence

    return 100 * evidence(_float4_kernel()).dram_fraction


def _float4_useful_fraction(_ref: float) -> float:
    from ..capstone import evidence

    e = evidence(_float4_kernel())
    return 100 * e.useful_bandwidth / e.bandwidth


def _float4_moved(load_sectors: int, store_sectors: int) -> float:
    """Percent of the DRAM roof for a given sector count per warp (load, store)."""
    from ..capstone import evidence

    e = evidence(_float4_kernel())
    factor = (load_sectors + store_sectors) * 32 / 256
    return 100 * e.useful_bandwidth * factor / e.bandwidth


#: 10.float4_fix's options, by the verdict and limiter they fix.
_FLOAT4_OPTIONS = {"latency": "A", "pattern": "B", "compute": "C"}


def _float4_fix() -> str:
    """The fix on the route :func:`capstone.diagnose` picks: memory-bound with most sectors
    unused (traffic factor > 1.5) is the access-pattern step: structure of arrays."""
    from ..capstone import diagnose

    d = diagnose(_float4_kernel())
    if d.verdict == "memory-bound" and d.evidence.traffic_factor > 1.5:
        return _FLOAT4_OPTIONS["pattern"]
    return _FLOAT4_OPTIONS["latency" if d.verdict == "latency-bound" else "compute"]


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
    """2^26 floats scaled through 57 KiB shared-memory buffers, 256-thread blocks."""
    from .. import capstone, costs, latency, memory

    cfg = latency.Config("staged", 256, 30, shared_mem_per_block=_STAGED_SMEM, ilp=1)
    bandwidth = latency.compare([cfg], "h200").results[0].bandwidth
    cost = costs.elementwise(_STAGED_N, flops_per_element=1, reads=1, writes=1,
                             name="scale through shared memory")
    return capstone.MysteryKernel(
        key="staged", title="Scale an array, staged through shared memory", code=_STAGED_CODE,
        gpu="H200 SXM", precision="fp32", sizes=f"{_STAGED_N:,} floats in and out (256 MiB each)",
        cost=cost, seconds=cost.bytes / bandwidth, measured=False,
        time_source="model-derived: gpu_lessons.latency.compare (600 ns loaded latency) for "
                    "the resident warps the occupancy calculator allows, one 4-byte load in "
                    "flight per thread",
        launch=capstone.Launch(blocks=-(-_STAGED_N // _STAGED_FLOATS), threads_per_block=256,
                               registers_per_thread=30, shared_mem_per_block=_STAGED_SMEM),
        accesses=(capstone.WarpAccess("load x", tuple(memory.strided(1))),
                  capstone.WarpAccess("store y", tuple(memory.strided(1)))),
        fix="drop the staging (it reuses nothing) or shrink the buffer so more blocks fit, "
            "and give each thread several independent loads (unrolled, or float4)")


def _staged_verdict() -> str:
    from ..capstone import diagnose

    return diagnose(_staged_kernel()).verdict


def _staged_warps() -> float:
    """Resident warps per SM: (58,368 + 1,024) B per block, 233,472 / 59,392 = 3 blocks of 8."""
    from ..capstone import evidence

    return float(evidence(_staged_kernel()).occupancy.warps_per_sm)


def _staged_warps_no_reservation(_ref: float) -> float:
    from ..occupancy import compute_capability

    cc = compute_capability("9.0")
    return float(cc.max_sm_shared // _STAGED_SMEM * 8)


def _max_warps_cc90(_ref: float) -> float:
    from ..occupancy import compute_capability

    return float(compute_capability("9.0").max_warps_per_sm)


# -- mystery C: a decode step of many small kernels ---------------------------------------------------

_DECODE_KERNELS, _DECODE_KERNEL_US = 144, 2.0
#: The H200 costs the prompt states, µs.
_PROMPT_H200 = {"launch_us": 4.7, "sync_us": 5.1, "graph_launch_us": 4.7, "graph_node_us": 0.68}


def _decode_speedup(**kw) -> float:
    """Step time launched one by one / as a CUDA graph (:func:`system.compare_modes`):
    683.9 µs / 395.7 µs."""
    from ..system import compare_modes

    runs = compare_modes(_DECODE_KERNELS, _DECODE_KERNEL_US, **{**_PROMPT_H200, **kw})
    return runs["async"].step_us / runs["graph"].step_us


def _decode_vs_sync(_ref: float) -> float:
    from ..system import compare_modes

    runs = compare_modes(_DECODE_KERNELS, _DECODE_KERNEL_US, **_PROMPT_H200)
    return runs["sync"].step_us / runs["graph"].step_us


# -- roofline_fraction: how close a run is to its roofline --------------------------------------------

def _roofline_fraction_reference(flops, bytes_moved, seconds, peak_flops, bandwidth):
    """``max(F/π, B/β) / t`` (:attr:`gpu_lessons.roofline.Achieved.fraction_of_roofline`)."""
    from ..roofline import Roofline

    roof = Roofline(peak_flops=peak_flops, bandwidth=bandwidth)
    return roof.achieved(flops, bytes_moved, seconds).fraction_of_roofline


def _roofline_fraction_inputs(rng) -> dict:
    """A catalog GPU and precision, a kernel of intensity 0.01..10^4 FLOP/byte, and a run
    between its roofline time and 100x slower."""
    from ..hardware import catalog

    gpus = list(catalog().values())
    g = gpus[int(rng.integers(len(gpus)))]
    precision = sorted(g.peak_tflops)[int(rng.integers(len(g.peak_tflops)))]
    nbytes = float(round(10 ** rng.uniform(4, 11)))
    flops = float(round(nbytes * 10 ** rng.uniform(-2, 4)))
    pi, beta = g.peak_flops(precision), g.bandwidth
    best = max(flops / pi, nbytes / beta)
    return {"flops": flops, "bytes_moved": nbytes,
            "seconds": float(f"{best * 10 ** rng.uniform(0, 2):.6g}"),
            "peak_flops": pi, "bandwidth": beta}


def _roofline_fraction_edges() -> list[dict]:
    """Measured H200 runs (docs/measured/h200.md): cuBLAS FP16 8192³ and 1024³, the copy."""
    from ..capstone import H200_MEASURED
    from ..hardware import gpu

    h200 = gpu("h200")
    fp16, fp32, bw = h200.peak_flops("fp16"), h200.peak_flops("fp32"), h200.bandwidth
    n, m = 8192, 1024
    copy = 2 * 1006632960
    return [
        {"flops": 2.0 * n**3, "bytes_moved": 3.0 * n * n * 2,
         "seconds": H200_MEASURED["hgemm_8192"][0], "peak_flops": fp16, "bandwidth": bw},
        {"flops": 2.0 * m**3, "bytes_moved": 3.0 * m * m * 2,
         "seconds": H200_MEASURED["hgemm_1024"][0], "peak_flops": fp16, "bandwidth": bw},
        {"flops": 0.0, "bytes_moved": float(copy),
         "seconds": copy / H200_MEASURED["copy_bandwidth"][0], "peak_flops": fp32,
         "bandwidth": bw},
    ]


def _min_fraction(e, flops, bytes_moved, seconds, peak_flops, bandwidth):
    return min(flops / peak_flops, bytes_moved / bandwidth) / seconds


QUESTIONS = (
    Question(
        id="10.float4_dram_fraction",
        name="float4_dram_fraction",
        points=2,
        prompt="Mystery A (code below) reads the x of 62,914,560 float4 points on an H200 and "
               "writes it to a float array: 503 MB of useful traffic (x read once, written "
               "once) in 302.3 µs, i.e. 1,665 GB/s of useful bandwidth (measured for this "
               "access pattern). What percentage of the H200's 4.8 TB/s DRAM roof do the "
               "32-byte sectors it moves reach?",
        hint="Count the sectors of one warp's load of p[i].x and of its store of x[i] "
             "(gpu_lessons.memory.global_load), then scale the useful bytes by moved / useful.",
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
                Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in "
                        "percent.", value=lambda ref: ref / 100),
            ),
        ),
    ),
    Question(
        id="10.float4_fix",
        name="float4_fix",
        points=1,
        prompt="Which change makes mystery A substantially faster? A: more threads per block; "
               "B: store x, y, z and w as four separate float arrays; C: compute on the tensor "
               "cores; D: copy each block's points into shared memory first, then read x from "
               "there.",
        answer=Choice(
            reference=_float4_fix,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("more_threads", "more warps help a kernel that cannot keep enough "
                        "loads in flight; this one already keeps a memory roof busy.",
                        value="A"),
                Mistake("tensor_cores", "the kernel does no arithmetic at all.", value="C"),
                Mistake("stage_in_shared", "staging still reads every byte of every point "
                        "from DRAM: the same sectors move, plus a trip through shared memory.",
                        value="D"),
            ),
        ),
    ),
    Question(
        id="10.staged_verdict",
        name="staged_verdict",
        points=1,
        prompt="Mystery B (code below) scales 2^26 floats on an H200, staging each block's "
               "14,592 floats through 58,368 bytes of shared memory; 256-thread blocks, 30 "
               "registers per thread, one 4-byte load in flight per thread. It takes 796 µs "
               "(model-derived). Is it memory-, compute- or latency-bound?",
        hint="Compute the fraction of each roof it reaches (FLOP/s against 66.9 TFLOP/s, bytes "
             "moved against 4.8 TB/s) and apply the 60 % rule; then look at its occupancy.",
        answer=Choice(
            reference=_staged_verdict,
            options=("memory-bound", "compute-bound", "latency-bound"),
            mistakes=(
                Mistake("memory", "it mostly moves data, but count its bytes per second: DRAM "
                        "runs at a small fraction of its roof.", value="memory-bound"),
                Mistake("compute", "one multiply per 8 bytes moved is nowhere near the "
                        "compute roof.", value="compute-bound"),
            ),
        ),
    ),
    Question(
        id="10.staged_warps",
        name="staged_warps",
        points=1,
        prompt="How many warps per SM are resident for mystery B (H200, compute capability "
               "9.0; the kernel opted in to its 58,368 bytes of dynamic shared memory)?",
        answer=Number(
            reference=_staged_warps,
            units="warps per SM",
            rtol=0.01,
            mistakes=(
                Mistake("no_reservation", "the driver reserves 1 KB of shared memory per "
                        "block on CC 9.0, on top of the kernel's own.",
                        value=_staged_warps_no_reservation),
                Mistake("blocks", "that is blocks per SM; each 256-thread block is 8 warps.",
                        value=lambda ref: ref / 8),
                Mistake("threads", "that is threads per SM; a warp is 32 threads.",
                        value=lambda ref: ref * 32),
                Mistake("max_warps", "64 is what an SM can hold; this kernel's shared memory "
                        "lets fewer blocks in.", value=_max_warps_cc90),
            ),
        ),
    ),
    Question(
        id="10.decode_graph_speedup",
        name="decode_graph_speedup",
        points=2,
        prompt="Mystery C: one decode step of a small language model launches 144 kernels of "
               "about 2 µs of GPU work each, back to back, with one synchronisation at the end "
               "(H200: 4.7 µs of CPU time per launch, 5.1 µs sync round trip). Captured in a "
               "CUDA graph, the step costs one launch (4.7 µs), then 0.68 µs of GPU overhead "
               "per kernel node, then the same sync. By what factor does the graph shorten "
               "the step?",
        hint="Work out both step times: one by one, the GPU waits for each launch when a "
             "kernel is shorter than a launch.",
        answer=Number(
            reference=_decode_speedup,
            units="x (time before / time after)",
            rtol=0.01,
            mistakes=(
                Mistake("no_node_cost", "a graph node is not free: each costs the GPU 0.68 µs "
                        "on top of its kernel.",
                        value=lambda ref: _decode_speedup(graph_node_us=0.0)),
                Mistake("vs_sync", "that compares with a sync after every kernel; this step "
                        "synchronises once, at the end.", value=_decode_vs_sync),
                Mistake("inverted", "that is time after / time before; the factor is before / "
                        "after.", value=lambda ref: 1 / ref),
            ),
        ),
    ),
    Question(
        id="10.roofline_fraction",
        name="roofline_fraction",
        points=2,
        prompt="Write roofline_fraction(flops, bytes_moved, seconds, peak_flops, bandwidth) "
               "returning how close a measured run is to its roofline: the shortest time the "
               "roofline allows for that many FLOPs and bytes, divided by the measured seconds "
               "(1 = on the roof; FLOP/s and bytes/s in).",
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
                Mistake("percent", "return a fraction, not percent.",
                        value=lambda e, **kw: 100 * e),
            ),
        ),
    ),
)

