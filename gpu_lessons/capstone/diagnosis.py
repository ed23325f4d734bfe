"""The evidence the course's tools give about a kernel, and the verdict it supports.

:func:`evidence` gathers, without a verdict:

* the roofline (:mod:`gpu_lessons.roofline`): intensity, ridge point, achieved FLOP/s as a
  fraction of the FLOP peak of the kernel's precision;
* the SM's throughput (:mod:`gpu_lessons.capstone.pipes`): from the kernel's instruction mix,
  how busy its busiest pipe or its instruction issue was — what Nsight Compute reports as
  "SM throughput".  FLOP/s over the peak is not that number: a kernel of FADDs, integer work
  or constant loads keeps the SM busy at a fraction of the FLOP peak.  A kernel without an
  instruction mix gets the FLOP fraction instead, a lower bound of its SM throughput;
* the memory model (:mod:`gpu_lessons.memory`): 32-byte sectors per warp-wide global access,
  hence the bytes DRAM really moves (``useful bytes × moved / requested``) and their fraction
  of the DRAM roof; shared-memory wavefronts and the time they take at one wavefront per SM
  per cycle (measured on an H200: cycles per warp-wide load = wavefronts, docs/measured/h200.md);
* the occupancy calculator (:mod:`gpu_lessons.occupancy`) and Little's law
  (:func:`gpu_lessons.latency.littles_law`): resident warps against the warps needed to keep
  DRAM busy;
* the launch model (:func:`gpu_lessons.system.kernel_sequence`): per-launch CPU cost against
  each kernel's GPU time.

:func:`diagnose` then applies the rule of Nsight Compute's "GPU Speed Of Light" section: a unit
running at **60 %** of its peak or more is the bottleneck; when the SM and every memory level
are all below 60 %, "achieved compute throughput and/or memory bandwidth below 60.0 % of peak
typically indicate latency issues" (Nsight Compute, rule SOLBottleneck).  So

* SM throughput >= 60 %  → compute-bound (the busiest pipe, or issue, is the limiter);
* DRAM or shared-memory fraction >= 60 %  → memory-bound (that level);
* otherwise latency-bound, and the evidence names the cause: launch overhead (a launch costs
  more CPU time than the kernel's GPU work), too few warps (resident warps below what
  Little's law needs), or neither (profile the stall reasons).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _validate, latency, memory
from .. import hardware as _hw
from .._format import bandwidth, duration, exact_bytes, html_table, si, text_table
from .._format import intensity as _intensity
from .._format import percent as _pct
from .._format import ratio as _ratio
from ..occupancy import Occupancy, occupancy
from ..roofline import COMPUTE_LABELS, Roofline
from .kernel import MysteryKernel
from .mysteries import MYSTERIES, mystery
from .pipes import LABELS, SMThroughput, sm_throughput

#: Nsight Compute's GPU Speed Of Light threshold: below 60 % of peak on compute and memory
#: "typically indicate[s] latency issues" (Nsight Compute Profiling Guide, rule SOLBottleneck).
NEAR_ROOF = 0.6

VERDICTS = ("memory-bound", "compute-bound", "latency-bound")

#: Shared-memory wavefronts one SM serves per cycle.  Measured on an H200: a warp-wide shared
#: load of w wavefronts costs w cycles (docs/measured/h200.md, "Shared-memory bank conflicts");
#: 128 bytes per cycle per SM is also NVIDIA's figure (CUDA C++ Programming Guide, compute
#: capability 5.x and later: 32 banks of 32 bits, each serving one word per clock).
WAVEFRONTS_PER_SM_PER_CYCLE = 1


@dataclass(frozen=True)
class Evidence:
    """What the course's tools say about one kernel — no verdict (see :func:`diagnose`).

    ``compute_fraction``: the SM throughput of the pipe model (``sm``) — or, when the kernel
    has no instruction mix, ``flop_fraction`` as its lower bound; ``flop_fraction`` = achieved
    FLOP/s / π; ``dram_fraction`` = bytes DRAM moves (useful × ``traffic_factor``) per second
    / β; ``smem_fraction`` = the time shared-memory wavefronts need / the measured time.
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
    flop_fraction: float
    sm: SMThroughput | None
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
    def compute_fraction(self) -> float:
        """SM throughput (busiest pipe or issue); the FLOP fraction without an instruction mix."""
        return self.sm.throughput if self.sm is not None else self.flop_fraction

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
        """Fraction of each unit's peak the kernel reaches: compute (the SM), DRAM and (if
        used) shared memory."""
        out = {"compute": self.compute_fraction, "DRAM": self.dram_fraction}
        if self.smem_fraction is not None:
            out["shared memory"] = self.smem_fraction
        return out

    def rows(self) -> list[tuple[str, str]]:
        """(tool, reading) pairs, every number with its unit."""
        r = [("time per run", f"{duration(self.seconds)} "
                              f"({'measured' if self.measured else 'model-derived'})"),
             ("roofline", f"intensity {_intensity(self.intensity)} vs ridge "
                          f"{_intensity(self.ridge_point)} ({self.precision}) → "
                          f"{self.roofline_side} by intensity"),
             ("FLOP/s", f"{si(self.achieved_flops, 'FLOP/s')} = {_pct(self.flop_fraction)} of "
                        f"{si(self.peak_flops, 'FLOP/s')}")]
        if self.sm is not None:
            r.append(("SM throughput", f"{_pct(self.sm.throughput)}, busiest: "
                                       f"{LABELS[self.sm.busiest]}"))
            r.append(("SM pipes", f"{self.sm.summary()} (instruction mix: {self.sm.source})"))
        else:
            r.append(("SM throughput", f"no instruction mix: at least {_pct(self.flop_fraction)}"
                                       " (the FLOP fraction)"))
        r += [("useful bandwidth", bandwidth(self.useful_bandwidth)),
              ("DRAM", f"{bandwidth(self.dram_bytes / self.seconds)} moved = "
                       f"{_pct(self.dram_fraction)} of {bandwidth(self.bandwidth)}")]
        for label, sectors, requested in self.global_sectors:
            r.append((f"sectors: {label}", f"{sectors} sectors/request "
                                           f"({exact_bytes(sectors * memory.SECTOR_BYTES)} moved "
                                           f"for {exact_bytes(requested)} requested)"))
        if self.global_sectors:
            r.append(("traffic factor", f"{self.traffic_factor:.3g}× the useful bytes"))
        for label, wf, count in self.shared_wavefronts:
            r.append((f"shared: {label}", f"{wf} wavefront{'s' if wf != 1 else ''} × "
                                          f"{count:,} warp instructions"))
        if self.smem_seconds is not None:
            r.append(("shared memory", f"{duration(self.smem_seconds)} of wavefronts = "
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
            r.append(("launches", f"{self.launches} × {duration(self.launch_overhead_s)} CPU "
                                  "per launch"))
        if self.gpu_busy_seconds is not None:
            r.append(("GPU busy", f"{duration(self.gpu_busy_seconds)} of "
                                  f"{duration(self.seconds)} = {_pct(self.gpu_busy_fraction)}"))
        return r

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        lines = [f"Evidence for {self.key!r} on {self.gpu}:"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in self.rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"Evidence: {self.key}", None, self.rows())


def _kernel(kernel) -> MysteryKernel:
    k = mystery(kernel) if isinstance(kernel, str) else kernel
    if not isinstance(k, MysteryKernel):
        raise TypeError(f"kernel must be a MysteryKernel or one of {', '.join(MYSTERIES)}, "
                        f"got {kernel!r}")
    return k


def _memory_traffic(k: MysteryKernel, g):
    """Sectors of the global accesses, wavefronts of the shared ones, and their time."""
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
    smem_seconds = None
    if wavefronts:
        smem_seconds = total_wavefronts / (g.sms * WAVEFRONTS_PER_SM_PER_CYCLE
                                           * g.boost_mhz * 1e6)
    return tuple(sectors), factor, tuple(wavefronts), smem_seconds


def evidence(kernel) -> Evidence:
    """Run every tool on ``kernel`` (a :class:`MysteryKernel` or its key)."""
    k = _kernel(kernel)
    g = _hw.gpu(k.gpu)
    roof = Roofline.from_gpu(g, k.precision)
    point = roof.point(k.cost)
    sectors, factor, wavefronts, smem_seconds = _memory_traffic(k, g)
    dram_bytes = k.cost.bytes * factor
    sm = sm_throughput(k.instructions, g, k.seconds) if k.instructions is not None else None

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
        flop_fraction=k.cost.flops / k.seconds / roof.peak_flops, sm=sm,
        global_sectors=sectors, traffic_factor=factor, dram_bytes=dram_bytes,
        dram_fraction=dram_bytes / k.seconds / roof.bandwidth,
        shared_wavefronts=wavefronts, smem_seconds=smem_seconds,
        smem_fraction=None if smem_seconds is None else smem_seconds / k.seconds,
        occupancy=occ, warps_needed=warps_needed, waves=waves,
        launches=k.launches, launch_overhead_s=k.launch_overhead_s,
        gpu_busy_seconds=k.gpu_busy_seconds)


# -- the verdict ---------------------------------------------------------------------------------

def classify(fractions: dict[str, float], *, launch_dominated: bool = False,
             too_few_warps: bool = False, near: float = NEAR_ROOF) -> tuple[str, str]:
    """``(verdict, limiter)`` from the fraction of each unit's peak a kernel reaches.

    ``fractions``: {"compute": …, "DRAM": …, "shared memory": …} (0..1, shared optional;
    "compute" is the SM's throughput).  The unit nearest its peak is the limiter if it is at
    ``near`` (60 %) or more: "compute" gives "compute-bound", any memory level
    "memory-bound".  Otherwise the kernel is "latency-bound" and the limiter is "launch
    overhead", "too few warps" or "latency (unexplained)".
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
    ("compute-bound", "instructions"): "compute-bound route: fewer instructions per result — "
                                       "algebra, one FFMA instead of FADD + FMUL, work that is "
                                       "the same for every thread done once",
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
        return (f"{duration(a.evidence.seconds)} ({kind}), {self.speedup:.2g}× faster; now "
                f"{a.verdict} ({a.limiter})")

    def rows(self) -> list[tuple[str, str]]:
        rows = [("verdict", f"{self.verdict} ({self.limiter})"), ("why", self.reason),
                ("route", self.route), ("fix", self.fix)]
        if self.after is not None:
            rows.append(("after the fix", self._after_text()))
        return rows

    def __repr__(self) -> str:
        after = f"\n  after the fix: {self._after_text()}" if self.after is not None else ""
        return (f"Diagnosis({self.evidence.key!r}: {self.verdict.upper()} — {self.limiter})\n"
                f"  why: {self.reason}\n  route: {self.route}\n  fix: {self.fix}{after}")

    def _repr_html_(self) -> str:
        return html_table(f"Diagnosis: {self.evidence.key}", None, self.rows())


def _compute_bound(k: MysteryKernel, ev: Evidence) -> tuple[str, str, str]:
    """``(limiter, reason, route)`` of a compute-bound kernel: the SM's busiest unit."""
    side = (f"intensity {_intensity(ev.intensity)} against the ridge "
            f"{_ratio(ev.ridge_point)}")
    if ev.sm is None:
        at_roof = k.precision in ("fp16", "bf16", "fp8")
        return (COMPUTE_LABELS[k.precision],
                f"{_pct(ev.flop_fraction)} of the {k.precision!s} FLOP roof ({side})",
                _ROUTES["compute-bound", "at roof" if at_roof else "roof"])
    busiest = ev.sm.busiest
    if busiest == "tensor":
        route = _ROUTES["compute-bound", "at roof"]
    elif ev.flop_fraction >= NEAR_ROOF:
        route = _ROUTES["compute-bound", "roof"]
    else:
        route = _ROUTES["compute-bound", "instructions"]
    reason = (f"the SM's busiest unit, {LABELS[busiest]}, is at {_pct(ev.sm.throughput)} "
              f"({ev.sm.summary()}), while the FLOP rate is {_pct(ev.flop_fraction)} of the "
              f"{k.precision} peak ({side})")
    return f"SM: {LABELS[busiest]}", reason, route


def diagnose(kernel) -> Diagnosis:
    """The verdict for ``kernel`` (a :class:`MysteryKernel` or its key), from its evidence."""
    k = _kernel(kernel)
    ev = evidence(k)
    verdict, limiter = classify(ev.fractions, launch_dominated=ev.launch_dominated,
                                too_few_warps=ev.too_few_warps)
    top = _pct(ev.fractions[limiter]) if limiter in ev.fractions else ""
    if verdict == "compute-bound":
        limiter, reason, route = _compute_bound(k, ev)
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
                   f" at intensity {_intensity(ev.intensity)}, far below the ridge "
                   f"{_ratio(ev.ridge_point)}"))
    else:
        route = _ROUTES["latency-bound", limiter]
        fr = ", ".join(f"{'SM' if name == 'compute' else name} {_pct(v)}"
                       for name, v in ev.fractions.items())
        if limiter == "launch overhead":
            cause = (f"each launch costs {duration(ev.launch_overhead_s)} of CPU time but gives "
                     f"the GPU only {duration(ev.gpu_busy_seconds / ev.launches)} of work, so "
                     f"the GPU is busy {_pct(ev.gpu_busy_fraction)} of the time")
        elif limiter == "too few warps":
            o = ev.occupancy
            cause = (f"only {o.warps_per_sm} warps/SM are resident ({o.limiter} limit) but "
                     f"Little's law needs about {ev.warps_needed:,.0f} to keep DRAM busy")
        else:
            cause = "no model here explains it"
        reason = f"every unit is below {_pct(NEAR_ROOF)} of its peak ({fr}); {cause}"
    after = diagnose(k.after) if k.after is not None else None
    return Diagnosis(ev, verdict, limiter, reason, route, k.fix, after)


@dataclass(frozen=True)
class AnswerKey:
    """Every mystery kernel's verdict in one table."""

    diagnoses: tuple[Diagnosis, ...]

    _HEAD = ("kernel", "time", "time from", "verdict", "limiter", "after the fix")

    def _rows(self):
        for d in self.diagnoses:
            e = d.evidence
            after = (f"{duration(d.fixed_seconds)} ({d.speedup:.2g}×), {d.after.verdict}"
                     if d.after is not None else "—")
            yield (e.key, duration(e.seconds), "measured" if e.measured else "model",
                   d.verdict, d.limiter, after)

    def __repr__(self) -> str:
        return text_table(self._HEAD, self._rows())

    def _repr_html_(self) -> str:
        return html_table("Mystery kernels: the answers", self._HEAD, self._rows())


def answer_key() -> AnswerKey:
    """:func:`diagnose` for every kernel in :data:`MYSTERIES`."""
    return AnswerKey(tuple(diagnose(k) for k in MYSTERIES.values()))
