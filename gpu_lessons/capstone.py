"""Mystery kernels for the capstone (notebook 10), and the diagnosis their evidence supports.

Each :class:`MysteryKernel` is what a learner gets: a short CUDA snippet, the problem sizes, the
GPU, the time per run and **where that time comes from** — measured on an H200
(``docs/measured/h200.md``, median of up to 20 runs) or derived from a model, which the
``time_source`` field then says in words.  :func:`evidence` gathers what the course's tools say
about it, without a verdict:

* the roofline (:mod:`gpu_lessons.roofline`): intensity, ridge point, achieved FLOP/s as a
  fraction of the compute roof;
* the memory model (:mod:`gpu_lessons.memory`): 32-byte sectors per warp-wide global access,
  hence the bytes DRAM really moves (``useful bytes × moved / requested``) and their fraction
  of the DRAM roof; shared-memory wavefronts and the time they take at one wavefront per SM
  per cycle (measured on an H200: cycles per warp-wide load = wavefronts, docs/measured/h200.md);
* the occupancy calculator (:mod:`gpu_lessons.occupancy`) and Little's law
  (:func:`gpu_lessons.latency.littles_law`): resident warps against the warps needed to keep
  DRAM busy;
* the launch model (:func:`gpu_lessons.system.kernel_sequence`): per-launch CPU cost against
  each kernel's GPU time.

:func:`diagnose` then applies the rule Nsight Compute's "GPU Speed Of Light" section uses:
a unit running at **60 %** of its peak or more is the bottleneck; when compute and every
memory level are all below 60 % "achieved compute throughput and/or memory bandwidth below
60.0 % of peak typically indicate latency issues" (Nsight Compute, rule SOLBottleneck).  So

* compute fraction >= 60 %  → compute-bound;
* DRAM or shared-memory fraction >= 60 %  → memory-bound (that level);
* otherwise latency-bound, and the evidence names the cause: launch overhead (a launch costs
  more CPU time than the kernel's GPU work), too few warps (resident warps below what
  Little's law needs), or neither (profile the stall reasons).

The kernels' own fix, and the time after it (measured where the H200 run has it), are data
in each kernel; :func:`gemm_story` is the end-to-end "make this kernel faster" example,
computed from :mod:`gpu_lessons.costs` and the roofline, ending on the measured cuBLAS figure.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace

from . import _validate, costs, latency, memory, system
from . import hardware as _hw
from ._format import percent as _pct
from ._format import ratio as _ratio
from ._format import si as _si
from .costs import KernelCost
from .occupancy import Occupancy, occupancy
from .roofline import COMPUTE_LABELS, Roofline

#: Nsight Compute's GPU Speed Of Light threshold: below 60 % of peak on compute and memory
#: "typically indicate[s] latency issues" (Nsight Compute Profiling Guide, rule SOLBottleneck).
NEAR_ROOF = 0.6

VERDICTS = ("memory-bound", "compute-bound", "latency-bound")

#: Shared-memory wavefronts one SM serves per cycle.  Measured on an H200: a warp-wide shared
#: load of w wavefronts costs w cycles (docs/measured/h200.md, "Shared-memory bank conflicts");
#: 128 bytes per cycle per SM is also NVIDIA's figure (CUDA C++ Programming Guide, compute
#: capability 5.x and later: 32 banks of 32 bits, each serving one word per clock).
WAVEFRONTS_PER_SM_PER_CYCLE = 1

# -- H200 measurements (docs/measured/h200.md; raw samples in tests/data/h200_measurements.json) --

_RUN = "H200 SXM, CuPy 14.2 / CUDA 13.2, 2026-11-29 19:13 UTC"

#: H200 measurements the lessons quote (notebooks 07, 09, 10): median seconds per run, or bytes/s
#: for the bandwidths, each with its table in docs/measured/h200.md.  The raw samples are in
#: tests/data/h200_measurements.json.
H200_MEASURED = {
    "strided_copy_4_stride8": (
        520.752e-6, f"strided_copy_4 (float), stride 8, 62,914,560 elements out, median of 20 "
                    f"({_RUN}); docs/measured/h200.md, '4-byte elements by stride'"),
    "strided_copy_4_stride1": (
        131.280e-6, f"strided_copy_4 (float), stride 1, 62,914,560 elements out, median of 20 "
                    f"({_RUN}); docs/measured/h200.md, '4-byte elements by stride'"),
    "transpose_tiled": (
        334.512e-6, f"transpose_tiled, 8192 x 8192 floats, median of 20 ({_RUN}); "
                    "docs/measured/h200.md, 'The SIMT lesson's kernels'"),
    "transpose_tiled_padded": (
        152.592e-6, f"transpose_tiled_padded, 8192 x 8192 floats, median of 20 ({_RUN}); "
                    "docs/measured/h200.md, 'The SIMT lesson's kernels'"),
    "sgemm_8192": (
        21.678544e-3, f"cupy.matmul FP32 8192^3 (cuBLAS), normal data, full clock, median of 30 "
                      f"({_RUN}); "
                      "docs/measured/h200.md, 'Matrix multiply'"),
    "hgemm_8192": (
        1.439424e-3, f"cupy.matmul FP16 8192^3 (cuBLAS, FP32 accumulate), normal data, full "
                     f"clock, median of 30 ({_RUN}); docs/measured/h200.md, 'Matrix multiply'"),
    "hgemm_1024": (
        27.456e-6, f"cupy.matmul FP16 1024^3 (cuBLAS, FP32 accumulate), normal data, full "
                   f"clock, median of 30 ({_RUN}); docs/measured/h200.md, 'Matrix multiply'"),
    "triad_bandwidth": (
        4346.0e9, f"triad_f4 (a = b + s*c), 960 MiB arrays, bytes/s ({_RUN}); "
                  "docs/measured/h200.md, 'Streaming bandwidth'"),
    "copy_bandwidth": (
        4205e9, f"copy_f4, 960 MiB arrays, bytes/s ({_RUN}); docs/measured/h200.md, "
                "'Streaming bandwidth'"),
}


def _measured(key: str) -> float:
    return H200_MEASURED[key][0]


# -- the kernels --------------------------------------------------------------------------------

@dataclass(frozen=True)
class WarpAccess:
    """One warp-wide memory instruction of a kernel, as 32 byte addresses.

    ``space="global"``: the memory model counts its 32-byte sectors; the global accesses of a
    kernel are taken as representative of its DRAM traffic in the proportions listed.
    ``space="shared"``: the model counts its wavefronts; ``count`` is how many times the whole
    kernel issues this warp instruction (stores follow the same bank rules as loads).
    """

    label: str
    addresses: tuple[int, ...]
    bytes_per_thread: int = 4
    space: str = "global"
    count: int = 1

    def __post_init__(self):
        _validate.choice("space", self.space, ("global", "shared"))
        _validate.integer("count", self.count, low=1)
        object.__setattr__(self, "addresses", tuple(self.addresses))


@dataclass(frozen=True)
class Launch:
    """A launch configuration and the resources ``ptxas -v`` (or the CUDA runtime) reports.

    ``bytes_in_flight_per_thread``: bytes each thread has outstanding from DRAM at a time
    (a 4-byte load with no other load in flight: 4), for Little's law.
    """

    blocks: int
    threads_per_block: int
    registers_per_thread: int
    shared_mem_per_block: int = 0
    bytes_in_flight_per_thread: int = 4


@dataclass(frozen=True)
class MysteryKernel:
    """A kernel to diagnose: code, sizes, GPU and time per run, with the time's source.

    ``cost``: FLOPs and the bytes the algorithm must move (each operand once, as
    :mod:`gpu_lessons.costs` counts them).  ``measured``: True when ``seconds`` was measured on
    real hardware, False when a model derived it (``time_source`` says which model).
    ``launches``: kernel launches per timed run; ``gpu_busy_seconds``: the GPU time those
    kernels take (when the run is a chain of launches); ``launch_overhead_s``: CPU cost per
    launch.  ``fix``: what to change; ``after``: the kernel once fixed (itself a
    :class:`MysteryKernel`, so it can be diagnosed again: does the bottleneck move?).
    """

    key: str
    title: str
    code: str
    gpu: str
    precision: str
    sizes: str
    cost: KernelCost
    seconds: float
    measured: bool
    time_source: str
    launch: Launch | None = None
    accesses: tuple[WarpAccess, ...] = ()
    launches: int = 1
    gpu_busy_seconds: float | None = None
    launch_overhead_s: float | None = None
    fix: str = ""
    after: MysteryKernel | None = None

    def __repr__(self) -> str:
        kind = "measured" if self.measured else "model-derived"
        return (f"MysteryKernel({self.key!r}: {self.title}; {self.sizes} on {self.gpu}: "
                f"{_time(self.seconds)} ({kind}))")

    def _repr_html_(self) -> str:
        kind = "measured" if self.measured else "<b>model-derived</b>"
        rows = [("GPU", html.escape(self.gpu)), ("sizes", html.escape(self.sizes)),
                ("work", f"{_si(self.cost.flops, 'FLOP')}, {_si(self.cost.bytes, 'B')} "
                         "(each operand once)"),
                ("time per run", f"{_time(self.seconds)} ({kind})"),
                ("time source", html.escape(self.time_source))]
        if self.launch is not None:
            ln = self.launch
            rows.append(("launch", f"{ln.blocks:,} blocks × {ln.threads_per_block} threads, "
                                   f"{ln.registers_per_thread} registers/thread, "
                                   f"{ln.shared_mem_per_block:,} B shared/block"))
        if self.launches > 1:
            rows.append(("launches per run", f"{self.launches}"))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>"
                       f"{v}</td></tr>" for k, v in rows)
        # the code is not repeated here: a lesson shows it in the text (``.code`` holds it)
        return f"<table><caption>{html.escape(self.title)}</caption>{body}</table>"


# -- evidence ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evidence:
    """What the course's tools say about one kernel — no verdict (see :func:`diagnose`).

    Fractions are of the catalog's peaks: ``compute_fraction`` = achieved FLOP/s / π;
    ``dram_fraction`` = bytes DRAM moves (useful × ``traffic_factor``) per second / β;
    ``smem_fraction`` = the time shared-memory wavefronts need / the measured time.
    """

    key: str
    gpu: str
    precision: str
    seconds: float
    measured: bool
    flops: float
    useful_bytes: float
    intensity: float
    ridge_point: float
    roofline_side: str
    peak_flops: float
    bandwidth: float
    compute_fraction: float
    global_sectors: tuple[tuple[str, int, int], ...]   # (label, sectors, requested bytes)
    traffic_factor: float
    dram_bytes: float
    dram_fraction: float
    shared_wavefronts: tuple[tuple[str, int, int], ...]  # (label, wavefronts, count)
    smem_seconds: float | None
    smem_fraction: float | None
    occupancy: Occupancy | None
    warps_needed: float | None
    waves: float | None
    launches: int
    launch_overhead_s: float | None
    gpu_busy_seconds: float | None

    @property
    def useful_bandwidth(self) -> float:
        """Useful bytes per second (each operand once), B/s."""
        return self.useful_bytes / self.seconds

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.seconds

    @property
    def gpu_busy_fraction(self) -> float | None:
        """GPU busy time / wall time of a chain of launches."""
        if self.gpu_busy_seconds is None:
            return None
        return self.gpu_busy_seconds / self.seconds

    @property
    def launch_dominated(self) -> bool:
        """A launch costs more CPU time than one kernel's GPU work: the GPU waits for the CPU."""
        if self.launch_overhead_s is None or self.gpu_busy_seconds is None:
            return False
        return self.launch_overhead_s > self.gpu_busy_seconds / self.launches

    @property
    def too_few_warps(self) -> bool:
        """Resident warps per SM below what Little's law needs to keep DRAM busy."""
        if self.occupancy is None or self.warps_needed is None:
            return False
        return self.occupancy.warps_per_sm < self.warps_needed

    @property
    def fractions(self) -> dict[str, float]:
        """Fraction of each roof the kernel reaches: compute, DRAM and (if used) shared memory."""
        out = {"compute": self.compute_fraction, "DRAM": self.dram_fraction}
        if self.smem_fraction is not None:
            out["shared memory"] = self.smem_fraction
        return out

    def rows(self) -> list[tuple[str, str]]:
        """(tool, reading) pairs, every number with its unit."""
        r = [("time per run", f"{_time(self.seconds)} "
                              f"({'measured' if self.measured else 'model-derived'})"),
             ("roofline", f"intensity {_ratio(self.intensity)} FLOP/byte vs ridge "
                          f"{_ratio(self.ridge_point)} FLOP/byte ({self.precision}) → "
                          f"{self.roofline_side} by intensity"),
             ("compute", f"{_rate(self.achieved_flops)} = {_pct(self.compute_fraction)} of "
                         f"{_rate(self.peak_flops)}"),
             ("useful bandwidth", f"{self.useful_bandwidth / 1e9:,.0f} GB/s"),
             ("DRAM", f"{self.dram_bytes / self.seconds / 1e9:,.0f} GB/s moved = "
                      f"{_pct(self.dram_fraction)} of {self.bandwidth / 1e9:,.0f} GB/s")]
        for label, sectors, requested in self.global_sectors:
            r.append((f"sectors: {label}", f"{sectors} sectors/request "
                                           f"({sectors * memory.SECTOR_BYTES} B moved for "
                                           f"{requested} B requested)"))
        if self.global_sectors:
            r.append(("traffic factor", f"{self.traffic_factor:.3g}× the useful bytes"))
        for label, wf, count in self.shared_wavefronts:
            r.append((f"shared: {label}", f"{wf} wavefront{'s' if wf != 1 else ''} × "
                                          f"{count:,} warp instructions"))
        if self.smem_seconds is not None:
            r.append(("shared memory", f"{_time(self.smem_seconds)} of wavefronts = "
                                       f"{_pct(self.smem_fraction)} of the run"))
        if self.occupancy is not None:
            o = self.occupancy
            r.append(("occupancy", f"{o.warps_per_sm} of {o.max_warps_per_sm} warps/SM "
                                   f"({_pct(o.occupancy)}), limited by {o.limiter}"))
        if self.warps_needed is not None:
            r.append(("Little's law", f"{self.warps_needed:,.0f} warps/SM needed to keep DRAM "
                                      "busy"))
        if self.waves is not None:
            r.append(("waves", f"{self.waves:,.2f} waves of blocks over the SMs"))
        if self.launch_overhead_s is not None:
            r.append(("launches", f"{self.launches} × {_time(self.launch_overhead_s)} CPU "
                                  "per launch"))
        if self.gpu_busy_seconds is not None:
            r.append(("GPU busy", f"{_time(self.gpu_busy_seconds)} of {_time(self.seconds)} = "
                                  f"{_pct(self.gpu_busy_fraction)}"))
        return r

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        lines = [f"Evidence for {self.key!r} on {self.gpu}:"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in self.rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows())
        return f"<table><caption>Evidence: {html.escape(self.key)}</caption>{body}</table>"


def evidence(kernel) -> Evidence:
    """Run every tool on ``kernel`` (a :class:`MysteryKernel` or its key)."""
    k = mystery(kernel) if isinstance(kernel, str) else kernel
    if not isinstance(k, MysteryKernel):
        raise TypeError(f"kernel must be a MysteryKernel or one of {', '.join(MYSTERIES)}, "
                        f"got {kernel!r}")
    g = _hw.gpu(k.gpu)
    roof = Roofline.from_gpu(g, k.precision)
    point = roof.point(k.cost)

    sectors, moved, requested = [], 0, 0
    wavefronts, total_wavefronts = [], 0
    for a in k.accesses:
        if a.space == "global":
            load = memory.global_load(list(a.addresses), a.bytes_per_thread)
            sectors.append((a.label, load.sectors, load.requested_bytes))
            moved += load.moved_bytes
            requested += load.requested_bytes
        else:
            sh = memory.shared_load(list(a.addresses), a.bytes_per_thread)
            wavefronts.append((a.label, sh.wavefronts, a.count))
            total_wavefronts += sh.wavefronts * a.count
    factor = moved / requested if requested else 1.0
    dram_bytes = k.cost.bytes * factor
    smem_seconds = smem_fraction = None
    if wavefronts:
        smem_seconds = total_wavefronts / (g.sms * WAVEFRONTS_PER_SM_PER_CYCLE
                                           * g.boost_mhz * 1e6)
        smem_fraction = smem_seconds / k.seconds

    occ = warps_needed = waves = None
    if k.launch is not None:
        ln = k.launch
        occ = occupancy(gpu=g, threads_per_block=ln.threads_per_block,
                        registers_per_thread=ln.registers_per_thread,
                        shared_mem_per_block=ln.shared_mem_per_block)
        warps_needed = latency.littles_law(
            g, bytes_per_thread=ln.bytes_in_flight_per_thread).warps_per_sm
        if occ.blocks_per_sm:
            waves = ln.blocks / (occ.blocks_per_sm * g.sms)

    return Evidence(
        key=k.key, gpu=g.name, precision=k.precision, seconds=k.seconds, measured=k.measured,
        flops=k.cost.flops, useful_bytes=k.cost.bytes, intensity=point.intensity,
        ridge_point=roof.ridge_point, roofline_side=point.bound.bound,
        peak_flops=roof.peak_flops, bandwidth=roof.bandwidth,
        compute_fraction=k.cost.flops / k.seconds / roof.peak_flops,
        global_sectors=tuple(sectors), traffic_factor=factor, dram_bytes=dram_bytes,
        dram_fraction=dram_bytes / k.seconds / roof.bandwidth,
        shared_wavefronts=tuple(wavefronts), smem_seconds=smem_seconds,
        smem_fraction=smem_fraction, occupancy=occ, warps_needed=warps_needed, waves=waves,
        launches=k.launches, launch_overhead_s=k.launch_overhead_s,
        gpu_busy_seconds=k.gpu_busy_seconds)


# -- the verdict ---------------------------------------------------------------------------------

def classify(fractions: dict[str, float], *, launch_dominated: bool = False,
             too_few_warps: bool = False, near: float = NEAR_ROOF) -> tuple[str, str]:
    """``(verdict, limiter)`` from the fraction of each roof a kernel reaches.

    ``fractions``: {"compute": …, "DRAM": …, "shared memory": …} (0..1, shared optional).  The
    unit nearest its peak is the limiter if it is at ``near`` (60 %) or more: "compute" gives
    "compute-bound", any memory level "memory-bound".  Otherwise the kernel is "latency-bound"
    and the limiter is "launch overhead", "too few warps" or "latency (unexplained)".
    """
    if not isinstance(fractions, dict) or "compute" not in fractions:
        raise TypeError(f"fractions must be a dict with at least a 'compute' entry, got "
                        f"{fractions!r}")
    vals = {str(k): _validate.real(f"fractions[{k!r}]", v, low=0.0) for k, v in fractions.items()}
    near = _validate.real("near", near, low=0.0, high=1.0, low_open=True)
    top = max(vals, key=vals.get)
    if vals[top] >= near:
        return ("compute-bound" if top == "compute" else "memory-bound"), top
    if launch_dominated:
        return "latency-bound", "launch overhead"
    if too_few_warps:
        return "latency-bound", "too few warps"
    return "latency-bound", "latency (unexplained)"


_ROUTES = {
    ("memory-bound", "pattern"): "memory-bound route, step 1 (access pattern): coalescing, "
                                 "AoS → SoA, alignment",
    ("memory-bound", "shared memory"): "memory-bound route, step 3 (on-chip): bank conflicts "
                                       "(padding, swizzling)",
    ("memory-bound", "reuse"): "memory-bound route, step 2 (data reuse) or fewer bytes: tiling, "
                               "fusion, smaller data types, fewer KV heads",
    ("compute-bound", "roof"): "compute-bound route, step 3 (special units): tensor cores or a "
                               "lower precision raise the roof",
    ("compute-bound", "at roof"): "compute-bound: already near the roof — do fewer FLOPs or "
                                  "stop here",
    ("latency-bound", "launch overhead"): "latency-bound route, step 2 (scheduling): fewer "
                                          "launches — fusion, CUDA graphs, persistent kernels",
    ("latency-bound", "too few warps"): "latency-bound route, step 1 (occupancy): fewer "
                                        "registers/shared memory per thread, more independent "
                                        "loads per thread",
    ("latency-bound", "latency (unexplained)"): "latency-bound: profile the warp stall reasons",
}


@dataclass(frozen=True)
class Diagnosis:
    """The verdict :func:`classify` draws from a kernel's :class:`Evidence`, with the route of
    the optimisation playbook (notebook 07) it points to, the fix, and the diagnosis of the
    fixed kernel (``after``: re-measure and look again — the bottleneck may have moved)."""

    evidence: Evidence
    verdict: str
    limiter: str
    reason: str
    route: str
    fix: str
    after: Diagnosis | None = None

    @property
    def fixed_seconds(self) -> float | None:
        return None if self.after is None else self.after.evidence.seconds

    @property
    def speedup(self) -> float | None:
        """Time before / time after the fix."""
        if self.after is None:
            return None
        return self.evidence.seconds / self.after.evidence.seconds

    def _after_text(self) -> str:
        a = self.after
        kind = "measured" if a.evidence.measured else "model-derived"
        return (f"{_time(a.evidence.seconds)} ({kind}), {self.speedup:.2g}× faster; now "
                f"{a.verdict} ({a.limiter})")

    def __repr__(self) -> str:
        after = f"\n  after the fix: {self._after_text()}" if self.after is not None else ""
        return (f"Diagnosis({self.evidence.key!r}: {self.verdict.upper()} — {self.limiter})\n"
                f"  why: {self.reason}\n  route: {self.route}\n  fix: {self.fix}{after}")

    def _repr_html_(self) -> str:
        rows = [("verdict", f"<b>{html.escape(self.verdict)}</b> ({html.escape(self.limiter)})"),
                ("why", html.escape(self.reason)), ("route", html.escape(self.route)),
                ("fix", html.escape(self.fix))]
        if self.after is not None:
            rows.append(("after the fix", html.escape(self._after_text())))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>"
                       f"{v}</td></tr>" for k, v in rows)
        return f"<table><caption>Diagnosis: {html.escape(self.evidence.key)}</caption>{body}</table>"


def diagnose(kernel) -> Diagnosis:
    """The verdict for ``kernel`` (a :class:`MysteryKernel` or its key), from its evidence."""
    k = mystery(kernel) if isinstance(kernel, str) else kernel
    ev = evidence(k)
    verdict, limiter = classify(ev.fractions, launch_dominated=ev.launch_dominated,
                                too_few_warps=ev.too_few_warps)
    top = _pct(ev.fractions[limiter]) if limiter in ev.fractions else ""
    if verdict == "compute-bound":
        limiter = COMPUTE_LABELS[k.precision]
        at_roof = k.precision in ("fp16", "bf16", "fp8")
        route = _ROUTES["compute-bound", "at roof" if at_roof else "roof"]
        reason = (f"{top} of the {k.precision} compute roof: the arithmetic units are the "
                  f"bottleneck (intensity {_ratio(ev.intensity)} FLOP/byte is above the ridge "
                  f"{_ratio(ev.ridge_point)})")
    elif verdict == "memory-bound" and limiter == "shared memory":
        route = _ROUTES["memory-bound", "shared memory"]
        worst = max(ev.shared_wavefronts, key=lambda t: t[1])
        reason = (f"shared-memory wavefronts alone take {top} of the run ({worst[0]}: "
                  f"{worst[1]} wavefronts per warp instruction); DRAM is at "
                  f"{_pct(ev.dram_fraction)}")
    elif verdict == "memory-bound":
        wasted = ev.traffic_factor > 1.5
        route = _ROUTES["memory-bound", "pattern" if wasted else "reuse"]
        reason = (f"DRAM moves {top} of its peak" +
                  (f", but {ev.traffic_factor:.3g}× the useful bytes: the sectors fetched are "
                   "mostly unused" if wasted else
                   f" at intensity {_ratio(ev.intensity)} FLOP/byte, far below the ridge "
                   f"{_ratio(ev.ridge_point)}"))
    else:
        route = _ROUTES["latency-bound", limiter]
        fr = ", ".join(f"{name} {_pct(v)}" for name, v in ev.fractions.items())
        if limiter == "launch overhead":
            cause = (f"each launch costs {_time(ev.launch_overhead_s)} of CPU time but gives "
                     f"the GPU only {_time(ev.gpu_busy_seconds / ev.launches)} of work, so the "
                     f"GPU is busy {_pct(ev.gpu_busy_fraction)} of the time")
        elif limiter == "too few warps":
            o = ev.occupancy
            cause = (f"only {o.warps_per_sm} warps/SM are resident ({o.limiter} limit) but "
                     f"Little's law needs about {ev.warps_needed:,.0f} to keep DRAM busy")
        else:
            cause = "no model here explains it"
        reason = f"every roof is below {_pct(NEAR_ROOF)} ({fr}); {cause}"
    after = diagnose(k.after) if k.after is not None else None
    return Diagnosis(ev, verdict, limiter, reason, route, k.fix, after)


# -- the catalogue of mystery kernels ---------------------------------------------------------------

def _elementwise_cost(name, n, flops_per_element=0, dtype="fp32") -> KernelCost:
    c = costs.elementwise(n, flops_per_element=flops_per_element, reads=1, writes=1,
                          dtype=dtype, name=name)
    return c


def _sum_costs(name: str, parts: list[KernelCost], notes: str) -> KernelCost:
    return KernelCost(name, sum(p.flops for p in parts), sum(p.bytes for p in parts),
                      notes=notes, parts=tuple((p.name, p.flops, p.bytes) for p in parts))


def _decode_layer_cost(batch, context, kv_dtype="fp16") -> KernelCost:
    """One Llama-2-7B-shaped decoder layer at decode time (one new token per sequence), FP16.

    Weights h = 4096, SwiGLU i = 11008 (Touvron et al. 2023, arXiv 2307.09288): the four
    projections and three MLP GEMMs read every weight once for the whole batch
    (``costs.gemm`` with m = batch); attention reads each sequence's K and V cache
    (``costs.attention_decode``, 32 heads of 128) stored in ``kv_dtype``.
    """
    h, i = 4096, 11008
    gemms = [costs.gemm(batch, 3 * h, h, dtype="fp16"),
             costs.gemm(batch, h, h, dtype="fp16"),
             costs.gemm(batch, 2 * i, h, dtype="fp16"),
             costs.gemm(batch, h, i, dtype="fp16")]
    names = ["QKV projection", "output projection", "MLP gate + up", "MLP down"]
    gemms = [KernelCost(nm, c.flops, c.bytes) for nm, c in zip(names, gemms, strict=True)]
    attn = costs.attention_decode(context, n_heads=32, head_dim=128, batch=batch,
                                  dtype=kv_dtype)
    kv = "" if kv_dtype == "fp16" else f", {kv_dtype} KV cache"
    return _sum_costs(f"decode layer (batch {batch}, context {context:,}{kv})", [*gemms, attn],
                      "weights read once per step for the whole batch; K and V caches read "
                      "once per sequence")


def _stream_bandwidth(regs, *, bytes_per_load=4, alu=40) -> float:
    """Predicted DRAM bandwidth (B/s) of a 256-thread streaming kernel on an H200
    (:func:`gpu_lessons.latency.compare`, 600 ns loaded latency)."""
    cfg = latency.Config(f"{regs} registers", 256, regs, ilp=1, alu_per_load=alu,
                         bytes_per_load=bytes_per_load)
    return latency.compare([cfg], "h200").results[0].bandwidth


def _build() -> dict[str, MysteryKernel]:
    bw = _measured("copy_bandwidth")
    out = {}

    # 1. One field of an array of 32-byte structs: lanes 32 bytes apart.
    n = 62_914_560
    soa = MysteryKernel(
        key="aos_field (fixed)", title="Read one field stored as its own array (SoA)",
        code=r"""
__global__ void get_x(const float* __restrict__ px, float* __restrict__ x) {
    long base = blockIdx.x * 256L * 8 + threadIdx.x;
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = px[base + 256 * j];    // lanes 4 bytes apart
    for (int j = 0; j < 8; ++j) x[base + 256 * j] = v[j];
}""",
        gpu="H200 SXM", precision="fp32", sizes=f"{n:,} floats (240 MiB in, 240 MiB out)",
        cost=_elementwise_cost("copy one field", n),
        seconds=_measured("strided_copy_4_stride1"), measured=True,
        time_source="measured: " + H200_MEASURED["strided_copy_4_stride1"][1],
        accesses=(WarpAccess("load px[i]", tuple(memory.strided(1))),
                  WarpAccess("store x[i]", tuple(memory.strided(1)))))
    out["aos_field"] = MysteryKernel(
        key="aos_field", title="Read one field of an array of structs",
        code=r"""
struct Particle { float x, y, z, vx, vy, vz, mass, charge; };   // 32 bytes

__global__ void get_x(const Particle* __restrict__ p, float* __restrict__ x) {
    // 256 threads per block, 8 particles per thread, all loads issued before the stores
    long base = blockIdx.x * 256L * 8 + threadIdx.x;
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = p[base + 256 * j].x;   // lanes 32 bytes apart
    for (int j = 0; j < 8; ++j) x[base + 256 * j] = v[j];
}""",
        gpu="H200 SXM", precision="fp32",
        sizes=f"{n:,} particles (x: 240 MiB out, the structs 1.875 GiB)",
        cost=_elementwise_cost("copy one field", n),
        seconds=_measured("strided_copy_4_stride8"), measured=True,
        time_source=("measured: " + H200_MEASURED["strided_copy_4_stride8"][1] + " — the same "
                     "warp access pattern as p[i].x with 32-byte structs"),
        accesses=(WarpAccess("load p[i].x", tuple(memory.aos_field(32, 0))),
                  WarpAccess("store x[i]", tuple(memory.strided(1)))),
        fix=("structure of arrays: keep x in its own float array, so a warp reads 128 "
             "consecutive bytes (4 sectors instead of 32)"),
        after=soa)

    # 2. Tiled transpose with a 32-way bank conflict on the column read.
    n = 8192
    tiles = n * n // 32   # warp instructions for each of the tile's store and load
    transpose_code = r"""
__global__ void transpose_tiled(const float* a, float* out) {   // block 32 x 8
    __shared__ float tile[32][32{pad}];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    int width = gridDim.x * 32;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = a[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;  y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}}"""

    def transpose(pad):
        key = "transpose_tiled" + (" (fixed)" if pad else "")
        timed = "transpose_tiled_padded" if pad else "transpose_tiled"
        return MysteryKernel(
            key=key, title="Transpose through a shared-memory tile" + (", padded" if pad else ""),
            code=transpose_code.replace("{pad}", " + 1" if pad else "").replace("}}", "}"),
            gpu="H200 SXM", precision="fp32", sizes=f"{n:,} × {n:,} floats (256 MiB each way)",
            cost=_elementwise_cost("transpose", n * n),
            seconds=_measured(timed), measured=True,
            time_source="measured: " + H200_MEASURED[timed][1],
            # registers and blocks/SM as the CUDA runtime reported them in the same H200 run
            launch=Launch(blocks=(n // 32) ** 2, threads_per_block=256, registers_per_thread=28,
                          shared_mem_per_block=32 * (32 + pad) * 4,
                          bytes_in_flight_per_thread=16),
            accesses=(WarpAccess("load a (row)", tuple(memory.strided(1))),
                      WarpAccess("store out (row)", tuple(memory.strided(1))),
                      WarpAccess("tile store (row)", tuple(memory.matrix_row(0, ld=32 + pad)),
                                 space="shared", count=tiles),
                      WarpAccess("tile load (column)",
                                 tuple(memory.tile_column(0, width=32, padding=pad)),
                                 space="shared", count=tiles)))

    out["transpose_tiled"] = replace(
        transpose(0), after=transpose(1),
        fix="pad the tile to [32][33]: a column then spans all 32 banks (1 wavefront, not 32)")

    # 3. FP32 GEMM on the CUDA cores; 4. the same product on the tensor cores.
    n = 8192
    hgemm = MysteryKernel(
        key="hgemm", title="Half-precision matrix multiply on tensor cores (cuBLAS)",
        code=r"""
// C = A @ B with FP16 inputs, FP32 accumulate: cuBLAS picks a tiled tensor-core kernel
cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, CUDA_R_16F, n,
             A, CUDA_R_16F, n, &zero, C, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);""",
        gpu="H200 SXM", precision="fp16", sizes=f"{n:,} × {n:,} times {n:,} × {n:,}, FP16",
        cost=costs.gemm(n, n, n, dtype="fp16"),
        seconds=_measured("hgemm_8192"), measured=True,
        time_source="measured: " + H200_MEASURED["hgemm_8192"][1],
        fix=("nothing big left in this kernel: about 75 % of a peak that assumes a 1830 MHz "
             "tensor clock is what cuBLAS reaches on this GPU at full clock (and about 65 % once "
             "the 700 W power cap pulls the clock to ~1,440 MHz). Do fewer FLOPs, or move to "
             "FP8 (a 2× higher roof) if the model tolerates it"))
    out["sgemm"] = MysteryKernel(
        key="sgemm", title="Single-precision matrix multiply (cuBLAS)",
        code=r"""
// C = A @ B in FP32: cupy.matmul calls cuBLAS (no tensor cores: TF32 is off by default)
cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n);""",
        gpu="H200 SXM", precision="fp32", sizes=f"{n:,} × {n:,} times {n:,} × {n:,}, FP32",
        cost=costs.gemm(n, n, n, dtype="fp32"),
        seconds=_measured("sgemm_8192"), measured=True,
        time_source="measured: " + H200_MEASURED["sgemm_8192"][1],
        fix=("change the roof: run the product on the tensor cores (BF16/FP16 inputs with FP32 "
             "accumulate, or TF32) when the accuracy allows (relative error 2e-4 instead of "
             "2e-6 in this run)"),
        after=replace(hgemm, key="sgemm (fixed)", fix=""))
    out["hgemm"] = hgemm

    # 5. A decoder layer at decode time, small batch, long context.
    batch, context = 8, 8192
    decode_code = r"""
// per layer, per generated token (batch 8, each sequence with 8,192 cached tokens):
qkv  = x @ W_qkv;            // [8 x 4096] @ [4096 x 12288]   (GEMM, m = batch = 8)
kv_cache.append(k, v);       // K and V cache in {kv}
o    = attention(q, K_cache, V_cache);   // each query reads its sequence's whole cache
x    = x + o @ W_o;
x    = x + (silu(x @ W_gate) * (x @ W_up)) @ W_down;"""

    def decode(kv_dtype):
        cost = _decode_layer_cost(batch, context, kv_dtype=kv_dtype)
        return MysteryKernel(
            key="decode_layer" + ("" if kv_dtype == "fp16" else " (fixed)"),
            title="One decoder layer of a 7B model, generating one token",
            code=decode_code.replace("{kv}", kv_dtype.upper()),
            gpu="H200 SXM", precision="fp16",
            sizes=("Llama-2-7B shapes (h = 4096, 32 heads × 128, SwiGLU 11008), FP16 weights, "
                   f"{kv_dtype.upper()} KV cache, batch {batch}, context {context:,}"),
            cost=cost, seconds=cost.bytes / bw, measured=False,
            time_source=("model-derived: the layer's bytes (weights once, every K and V cache "
                         "entry once) at the copy bandwidth measured on an H200 (4,205 GB/s); "
                         "a real decode step adds launch gaps and is slower"))

    out["decode_layer"] = replace(
        decode("fp16"), after=decode("fp8"),
        fix=("move fewer bytes per token: store the KV cache in FP8 (half the bytes, no "
             "retraining); a model trained with grouped-query attention (8 KV heads) would read "
             "4× less. A bigger batch raises the GEMMs' intensity but not attention's: every "
             "sequence has its own cache"))

    # 6. A streaming kernel whose registers cap the resident warps.
    n = 1 << 26
    slow_bw = _stream_bandwidth(168)
    fixed_bw = min(_stream_bandwidth(32, bytes_per_load=16), bw)
    filt = _elementwise_cost("40-tap filter", n, flops_per_element=80)
    lean = MysteryKernel(
        key="register_hog (fixed)", title="The filter with shared taps and float4 loads",
        code=r"""
// ptxas -v: 32 registers; the 40 taps live in __constant__ memory (the same for all threads)
__constant__ float w[40], s[40];
__global__ void __launch_bounds__(256, 8) fir40_v4(const float4* x, float4* y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    float4 v = x[i], acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < 40; ++k) { acc.x = fmaf(w[k], v.x + s[k], acc.x); /* .y .z .w alike */ }
    y[i] = acc;
}""",
        gpu="H200 SXM", precision="fp32", sizes=f"{n:,} floats in, {n:,} out (256 MiB each)",
        cost=filt, seconds=2 * n * 4 / fixed_bw, measured=False,
        time_source=(f"model-derived: the latency model predicts more than the DRAM can give for "
                     f"64 warps/SM with 16-byte loads, so the measured copy bandwidth "
                     f"({fixed_bw / 1e9:,.0f} GB/s) sets the time"),
        launch=Launch(blocks=n // 4 // 256, threads_per_block=256, registers_per_thread=32,
                      bytes_in_flight_per_thread=16),
        accesses=(WarpAccess("load x[i] (float4)", tuple(memory.strided(1, element_bytes=16)),
                             bytes_per_thread=16),
                  WarpAccess("store y[i] (float4)", tuple(memory.strided(1, element_bytes=16)),
                             bytes_per_thread=16)))
    out["register_hog"] = MysteryKernel(
        key="register_hog", title="A 40-tap filter with per-thread taps in registers",
        code=r"""
// ptxas -v: Used 168 registers, 0 bytes spill stores
__global__ void fir40(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;      // 256 threads per block
    float w[40], s[40];                  // per-thread taps and state, all in registers
    make_taps(w, s);                     // computed, not loaded: no memory traffic
    float v = x[i], acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc = fmaf(w[k], v + s[k], acc);
    y[i] = acc;
}""",
        gpu="H200 SXM", precision="fp32", sizes=f"{n:,} floats in, {n:,} out (256 MiB each)",
        cost=filt, seconds=2 * n * 4 / slow_bw, measured=False,
        time_source=(f"model-derived: the latency-hiding model (gpu_lessons.latency.compare, "
                     f"600 ns loaded latency) predicts {slow_bw / 1e9:,.0f} GB/s for 8 resident "
                     "warps per SM with one 4-byte load in flight each"),
        launch=Launch(blocks=n // 256, threads_per_block=256, registers_per_thread=168),
        accesses=(WarpAccess("load x[i]", tuple(memory.strided(1))),
                  WarpAccess("store y[i]", tuple(memory.strided(1)))),
        fix=("free registers so more warps fit: the taps are the same for every thread, so "
             "keep them in constant (or shared) memory and compile for 32 registers "
             "(__launch_bounds__(256, 8)); load float4 so each thread has 16 bytes in flight"),
        after=lean)

    # 7. A chain of tiny elementwise kernels.
    n, chain = 1 << 20, 10
    one = _elementwise_cost("one elementwise op", n, flops_per_element=1)
    per_kernel = one.bytes / bw
    fig = system.launch_figures("H200")
    launches = (f"launch {fig.launch_us:g} µs and sync {fig.sync_us:g} µs from "
                "gpu_lessons.system.LAUNCH_FIGURES['H200'] (measured on an H200)")
    chain_cost = KernelCost(f"{chain} elementwise kernels", chain * one.flops, chain * one.bytes,
                            parts=tuple((f"kernel {j + 1}", one.flops, one.bytes)
                                        for j in range(chain)))
    fused_cost = _elementwise_cost("fused kernel", n, flops_per_element=chain)
    fused = MysteryKernel(
        key="kernel_chain (fixed)", title="The ten operations fused into one kernel",
        code=r"""
__global__ void fused(const float* x, float* y, Params p, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    float v = tanhf(x[i] * p.scale + p.bias) * 0.5f + 0.5f;              // ops 1-5
    y[i] = ((v * p.gate - p.mean) * p.inv_std) * p.gamma + p.beta;      // ops 6-10
}""",
        gpu="H200 SXM", precision="fp32", sizes=f"one kernel over {n:,} floats",
        cost=fused_cost,
        seconds=system.kernel_sequence(1, fused_cost.bytes / bw * 1e6, figures=fig).step_us
        * 1e-6,
        measured=False,
        time_source=("model-derived: gpu_lessons.system.kernel_sequence for one launch and a "
                     f"sync ({launches}); one pass over 8 MiB at the measured 4,205 GB/s"),
        launches=1, gpu_busy_seconds=fused_cost.bytes / bw,
        launch_overhead_s=fig.launch_us * 1e-6)
    out["kernel_chain"] = MysteryKernel(
        key="kernel_chain", title="Ten small elementwise kernels in a row",
        code=r"""
# PyTorch-style eager code: every operation is one kernel launch over 1M floats
y = x * scale;  y = y + bias;  y = torch.tanh(y);  y = y * 0.5;  y = y + 0.5
y = y * gate;   y = y - mean;  y = y * inv_std;    y = y * gamma; y = y + beta
torch.cuda.synchronize()""",
        gpu="H200 SXM", precision="fp32",
        sizes=f"{chain} kernels, each over {n:,} floats (4 MiB in, 4 MiB out)",
        cost=chain_cost,
        seconds=system.kernel_sequence(chain, per_kernel * 1e6, figures=fig).step_us * 1e-6,
        measured=False,
        time_source=("model-derived: gpu_lessons.system.kernel_sequence (launches back to back, "
                     f"one sync at the end; {launches}); each kernel {per_kernel * 1e6:.2f} µs of "
                     "GPU work, its 8 MiB at the measured 4,205 GB/s"),
        launches=chain, gpu_busy_seconds=chain * per_kernel,
        launch_overhead_s=fig.launch_us * 1e-6,
        fix=("launch less: fuse the ten operations into one kernel (one read of x, one write of "
             "y, one launch), or capture the chain in a CUDA graph (one launch, then "
             f"{fig.graph_node_us:g} µs per kernel on the GPU)"),
        after=fused)
    return out


MYSTERIES: dict[str, MysteryKernel] = _build()


def mystery(key: str) -> MysteryKernel:
    """The mystery kernel named ``key`` (see :data:`MYSTERIES`)."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, one of {', '.join(MYSTERIES)}; got {key!r}")
    return MYSTERIES[_validate.choice("key", key, MYSTERIES)]


def roofline_points(keys=None) -> tuple[list[str], list[float], list[float]]:
    """``(names, intensities, FLOP/s)`` of the mystery kernels that do floating-point work, as
    they ran, for ``RooflineExplorer.add_points`` (kernels that only move data have no place on
    a log-scale FLOP/s axis).  ``keys``: which kernels (default: all of :data:`MYSTERIES`)."""
    keys = list(MYSTERIES) if keys is None else [keys] if isinstance(keys, str) else list(keys)
    names, xs, ys = [], [], []
    for key in keys:
        k = mystery(key)
        if k.cost.flops > 0:
            names.append(k.key)
            xs.append(k.cost.intensity)
            ys.append(k.cost.flops / k.seconds)
    return names, xs, ys


@dataclass(frozen=True)
class AnswerKey:
    """Every mystery kernel's verdict in one table."""

    diagnoses: tuple[Diagnosis, ...]

    def _rows(self):
        for d in self.diagnoses:
            e = d.evidence
            after = (f"{_time(d.fixed_seconds)} ({d.speedup:.2g}×), {d.after.verdict}"
                     if d.after is not None else "—")
            yield (e.key, _time(e.seconds), "measured" if e.measured else "model",
                   d.verdict, d.limiter, after)

    _HEAD = ("kernel", "time", "time from", "verdict", "limiter", "after the fix")

    def __repr__(self) -> str:
        rows = [self._HEAD, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                         for r in rows)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self._rows())
        return f"<table><caption>Mystery kernels: the answers</caption><tr>{head}</tr>{body}</table>"


def answer_key() -> AnswerKey:
    """:func:`diagnose` for every kernel in :data:`MYSTERIES`."""
    return AnswerKey(tuple(diagnose(k) for k in MYSTERIES.values()))


# -- the end-to-end story: make a GEMM faster ------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One version of the kernel: its cost model, its roofline and the predicted time."""

    name: str
    change: str
    cost: KernelCost
    precision: str
    seconds: float
    bound: str
    ridge_point: float
    peak_flops: float
    measured_seconds: float | None = None
    measured_source: str = ""

    @property
    def flops_per_s(self) -> float:
        return self.cost.flops / self.seconds

    def __repr__(self) -> str:
        m = (f"; measured {_time(self.measured_seconds)}" if self.measured_seconds else "")
        return (f"Step({self.name}: {_ratio(self.cost.intensity)} FLOP/byte vs ridge "
                f"{_ratio(self.ridge_point)} ({self.precision}) → {self.bound}, "
                f"{_time(self.seconds)} = {_rate(self.flops_per_s)}{m})")


@dataclass(frozen=True)
class Story:
    """The GEMM of size ``n`` made faster step by step (see :func:`gemm_story`)."""

    gpu: str
    n: int
    steps: tuple[Step, ...]

    def _rows(self):
        prev = None
        for s in self.steps:
            speed = "—" if prev is None else f"{prev / s.seconds:.3g}×"
            meas = _time(s.measured_seconds) if s.measured_seconds else "—"
            yield (s.name, s.change, f"{_ratio(s.cost.intensity)} FLOP/byte",
                   f"{_ratio(s.ridge_point)} ({s.precision})", s.bound, _time(s.seconds),
                   _rate(s.flops_per_s), speed, meas)
            prev = s.seconds

    _HEAD = ("step", "change", "intensity", "ridge", "bound", "predicted time",
             "predicted rate", "speed-up", "measured")

    def __repr__(self) -> str:
        rows = [self._HEAD, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        lines = [f"GEMM {self.n}³ on {self.gpu}, DRAM-only traffic model (no L2 reuse):"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self._rows())
        return (f"<table><caption>GEMM {self.n}³ on {html.escape(self.gpu)}: predicted by the "
                f"roofline with DRAM-only traffic</caption><tr>{head}</tr>{body}</table>")


def gemm_story(n: int = 8192, gpu="H200 SXM") -> Story:
    """A square GEMM made faster in five steps, each predicted by the roofline of
    :mod:`gpu_lessons.costs` traffic (DRAM only: L2 reuse is ignored, so the times are upper
    bounds):

    1. naive, one thread per output, FP32 (``costs.gemm_naive``): ≈ 0.25 FLOP/byte;
    2. 32 × 32 shared-memory tiles (``costs.gemm_tiled(tile=32)``): ≈ 8 FLOP/byte;
    3. 128 × 128 block tiles with register blocking (each thread computes 8 × 8 outputs, so
       shared memory is read 8× less): ≈ 32 FLOP/byte, past the FP32 ridge;
    4. the same tiles on tensor cores in FP16: the roof rises 15×, the ridge with it, and the
       kernel is memory-bound again;
    5. 128 × 256 tiles in FP16 — and the measured cuBLAS time, which beats the DRAM-only
       prediction because L2 serves the tiles' re-reads.

    Steps 3 and 5 carry the H200 measurements of cuBLAS (FP32 and FP16, n = 8192) when
    ``n == 8192`` and the GPU is the H200.
    """
    n = _validate.integer("n", n, low=256, high=65536)
    g = _hw.gpu(gpu)
    on_h200 = g.name == "H200 SXM" and n == 8192
    plan = [
        ("naive", "one thread per output, operands from DRAM", costs.gemm_naive(n, n, n),
         "fp32", None),
        ("tiled 32", "32 × 32 tiles staged in shared memory", costs.gemm_tiled(n, n, n, tile=32),
         "fp32", None),
        ("tiled 128 + registers", "128 × 128 block tiles, 8 × 8 outputs per thread",
         costs.gemm_tiled(n, n, n, tile=128), "fp32", "sgemm_8192"),
        ("tensor cores", "same tiles, FP16 on tensor cores",
         costs.gemm_tiled(n, n, n, tile=128, dtype="fp16"), "fp16", None),
        ("tensor cores, 128 × 256", "larger FP16 tiles (cuBLAS-class kernel)",
         costs.gemm_tiled(n, n, n, tile_m=128, tile_n=256, dtype="fp16"), "fp16", "hgemm_8192"),
    ]
    steps = []
    for name, change, cost, prec, meas in plan:
        roof = Roofline.from_gpu(g, prec)
        t = roof.point(cost)
        ms = H200_MEASURED[meas] if (meas and on_h200) else None
        steps.append(Step(name, change, cost, prec, t.seconds, t.bound.bound, roof.ridge_point,
                          roof.peak_flops, ms[0] if ms else None,
                          ("measured: " + ms[1]) if ms else ""))
    return Story(g.name, n, tuple(steps))


# -- formatting -------------------------------------------------------------------------------------

def _time(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _rate(flops: float) -> str:
    for scale, unit in ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP/s"


__all__ = [
    "H200_MEASURED", "MYSTERIES", "NEAR_ROOF", "VERDICTS", "AnswerKey", "Diagnosis", "Evidence",
    "Launch", "MysteryKernel", "Step", "Story", "WarpAccess", "answer_key", "classify",
    "diagnose", "evidence", "gemm_story", "mystery", "roofline_points",
]
