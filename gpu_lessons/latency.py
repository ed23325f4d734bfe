"""Latency hiding: how many warps, and how much independent work, keep a GPU busy.

The workload
    Each warp loops over iterations of ``a·j`` independent ALU instructions followed by ``j``
    independent loads (``a`` = ``alu_per_load``, ``j`` = ``ilp``, loads in flight per warp);
    the next iteration needs the loaded data.  A load's data arrives ``L`` cycles after it
    issues.  One warp scheduler (an SM sub-partition: 4 per SM since Maxwell, each issuing
    one warp instruction per cycle — Maxwell, Volta, Ampere and Hopper whitepapers) picks a
    ready warp every cycle.

Closed form (one scheduler, ``n`` warps)
    A warp alone issues ``I = j·(a+1)`` instructions per iteration; its last load issues
    ``I − 1`` cycles after the iteration starts and the data is back ``L`` cycles later, so an
    iteration takes ``T = I − 1 + L`` cycles.  ``n`` warps overlap at best perfectly until the
    scheduler is busy every cycle::

        issue rate   R(n) = min(1, n·I / T)          instructions per cycle
        loads/cycle       = R(n) · j / I
        saturation   n*   = T / I                    warps needed to hide the latency

    These are the asymptotic bounds of a closed queueing network with one server (the
    scheduler, demand ``I`` cycles per iteration) and a pure delay (``L − 1``): throughput
    ``X(n) <= min(n / (D + Z), 1 / D)`` (Lazowska, Zahorjan, Graham, Sevcik, *Quantitative
    System Performance*, 1984, ch. 5).  It is Little's law applied to the warps: to keep one
    instruction issuing per cycle, ``T/I`` warps must be in flight (V. Volkov, *Understanding
    Latency Hiding on GPUs*, PhD thesis, UC Berkeley, 2016, ch. 4).  :func:`simulate` runs the
    same machine cycle by cycle; with a greedy-then-oldest scheduler it lands on the bound,
    with loose round robin well below it near the knee (the warps bunch up and wait
    together; :func:`issue_rate` with ``policy="lrr"`` gives that curve too).

Little's law for memory
    bytes in flight = bandwidth × latency.  H100 SXM: 3.35 TB/s × 600 ns ≈ 2.0 MB, about
    15 KB per SM — more than 64 warps × 32 threads × 4 B = 8 KB, so full occupancy alone
    cannot saturate HBM with 4-byte loads: each thread needs ≥ 2 loads in flight (ILP) or
    wider loads (V. Volkov, "Better Performance at Lower
    Occupancy", GTC 2010): fewer warps with more independent work each can beat high
    occupancy.  :func:`compare` shows it with the occupancy calculator's warps.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from . import _validate
from ._format import Readout, Row, duration, html_table, text_table
from ._format import bandwidth as _bandwidth
from .hardware import WARP_SIZE, measured

#: DRAM load latency used when none is given, in ns.  A round figure: unloaded
#: pointer-chasing latencies on V100/A100/H100-class GPUs are a few hundred ns and grow under
#: load toward ~600 ns and beyond, which is what a bandwidth-bound kernel sees.  It is the
#: figure the course's lesson outline uses for H100 HBM; replace it with a measured one
#: (``latency_ns=``) where you have it.
DEFAULT_LATENCY_NS = 600.0
LATENCY_SOURCE = ("a round figure for HBM latency under load: a pointer chase on an H200 "
                  "measured 340 ns unloaded (docs/measured/h200.md), and queueing at full "
                  "bandwidth adds to it; pass latency_ns= with a measured value for a given GPU")
#: Load-to-use latency measured on an H200 by pointer chasing (one thread, dependent loads;
#: tools/device/pointer_chase.py, docs/measured/h200.md): L1, L2 (near partition), HBM3e.
H200_UNLOADED_LATENCY_NS = {level: measured(f"h200.pointer_chase.{level.lower()}_ns").value
                            for level in ("L1", "L2", "HBM")}
#: Warp schedulers per SM: 4 processing blocks per SM on Maxwell, GeForce Pascal, Volta, Turing,
#: Ampere, Ada and Hopper (GP100 had 2), each dispatching one warp instruction per clock (NVIDIA
#: architecture whitepapers; docs/misconceptions.md M03).
SCHEDULERS_PER_SM = 4
POLICIES = ("gto", "lrr")


# -- one scheduler: closed form --------------------------------------------------------------------

def _params(alu_per_load, ilp, latency):
    a = _validate.integer("alu_per_load", alu_per_load, low=0, high=10_000)
    j = _validate.integer("ilp", ilp, low=1, high=1024)
    L = _validate.real("latency", latency, low=1.0, high=1e7)
    return a, j, L


def issue_rate(warps, *, alu_per_load: int, latency: float, ilp: int = 1,
               policy: str = "gto"):
    """Closed form: instructions per cycle of one scheduler with ``warps`` warps.

    ``policy="gto"`` (the default) is the bound ``R(n) = min(1, n·I/T)`` of the module
    docstring, which a greedy-then-oldest scheduler reaches: it lets one warp run until it
    waits, so warps' memory phases end up staggered.

    ``policy="lrr"`` approximates loose round robin, which interleaves the warps one
    instruction each: every warp then stretches its ``I`` instructions over ``n·I`` cycles,
    they all reach their loads together and all wait together, so one round takes
    ``n·(I − 1) + L`` cycles: ``R(n) ≈ min(1, n·I / (n·(I − 1) + L))`` (within about 12 %
    of :func:`simulate`; exact when ``I = 1``).  This bunching is what research
    schedulers such as two-level scheduling address (Narasiman et al., "Improving GPU
    Performance via Large Warps and Two-Level Warp Scheduling", MICRO 2011); NVIDIA does not
    document the policy its GPUs use (docs/misconceptions.md M20).

    ``warps`` may be a number or a NumPy array (a whole curve in one call); ``latency`` in
    cycles.
    """
    a, j, L = _params(alu_per_load, ilp, latency)
    _validate.choice("policy", policy, POLICIES)
    w = _validate.real_array("warps", warps, low=0.0, nonempty=True)
    per_iter = j * (a + 1)
    if policy == "gto":
        r = np.minimum(1.0, w * per_iter / (per_iter - 1 + L))
    else:
        r = np.minimum(1.0, w * per_iter / (w * (per_iter - 1) + L))
    return float(r) if r.ndim == 0 else r


def warps_to_saturate(*, alu_per_load: int, latency: float, ilp: int = 1) -> float:
    """``n* = T / I``: warps per scheduler needed to issue every cycle."""
    a, j, L = _params(alu_per_load, ilp, latency)
    per_iter = j * (a + 1)
    return (per_iter - 1 + L) / per_iter


@dataclass(frozen=True, repr=False)
class HidingCurve(Readout):
    """Issue rate and loads per cycle of one scheduler for 1..max warps (closed form)."""

    warps: np.ndarray
    issue_rate: np.ndarray
    loads_per_cycle: np.ndarray
    alu_per_load: int
    ilp: int
    latency: float
    saturation: float

    def readout_title(self) -> str:
        return "Latency hiding, one scheduler"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("warps", f"{self.warps[0]:.0f} to {self.warps[-1]:.0f}"),
                Row("ALU instructions per load", self.alu_per_load), Row("ILP", self.ilp),
                Row("latency (cycles)", self.latency),
                Row("saturates at (warps)", self.saturation))


def curve(max_warps: int = 16, *, alu_per_load: int, latency: float, ilp: int = 1,
          policy: str = "gto") -> HidingCurve:
    """The closed form for 1..``max_warps`` warps on one scheduler (fast enough for a slider)."""
    n = _validate.integer("max_warps", max_warps, low=1, high=4096)
    a, j, L = _params(alu_per_load, ilp, latency)
    w = np.arange(1, n + 1, dtype=float)
    r = issue_rate(w, alu_per_load=a, latency=L, ilp=j, policy=policy)
    return HidingCurve(w, r, r * j / (j * (a + 1)), a, j, L,
                       warps_to_saturate(alu_per_load=a, latency=L, ilp=j))


# -- one scheduler: cycle-by-cycle simulation ------------------------------------------------------

@dataclass(frozen=True, repr=False)
class SchedulerRun(Readout):
    """A cycle-level run of one scheduler.

    ``issue_rate`` and ``loads_per_cycle`` are measured over the steady-state window
    (after a warm-up); ``closed_form`` is :func:`issue_rate` for the same inputs and policy.
    ``timeline[c]``: the warp that issued at cycle ``c`` (−1: nothing ready, a stall) for the
    first cycles, and ``timeline_load[c]`` whether that instruction was a load.
    """

    warps: int
    alu_per_load: int
    ilp: int
    latency: int
    policy: str
    issue_rate: float
    loads_per_cycle: float
    closed_form: float
    cycles: int
    timeline: np.ndarray
    timeline_load: np.ndarray

    def readout_title(self) -> str:
        return f"One scheduler, simulated ({self.policy})"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("warps", self.warps), Row("ALU instructions per load", self.alu_per_load),
                Row("ILP", self.ilp), Row("latency (cycles)", self.latency),
                Row("issue rate (instructions/cycle)", self.issue_rate),
                Row("closed form (instructions/cycle)", self.closed_form),
                Row("loads per cycle", self.loads_per_cycle))


def simulate(warps: int, *, alu_per_load: int, latency: int, ilp: int = 1,
             policy: str = "gto", trace_cycles: int = 400) -> SchedulerRun:
    """Run one warp scheduler cycle by cycle.

    Every cycle the scheduler issues one instruction from a ready warp: ``"gto"`` (greedy
    then oldest: stay on the last warp while it is ready, else the lowest-numbered ready
    warp; T. Rogers et al., MICRO 2012) or ``"lrr"`` (loose round robin: the next ready warp
    after the last one).  ALU instructions and loads of one iteration are independent, so a
    warp stays ready through them; after its last load it waits ``latency`` cycles.
    Runs 2 periods of warm-up and measures over the next 8 (period = the larger of the
    latency-bound and issue-bound iteration times).
    """
    n = _validate.integer("warps", warps, low=1, high=4096)
    a, j, _ = _params(alu_per_load, ilp, latency)
    L = _validate.integer("latency", latency, low=1, high=100_000)
    _validate.choice("policy", policy, POLICIES)
    trace_cycles = _validate.integer("trace_cycles", trace_cycles, low=0, high=100_000)

    per_iter = j * (a + 1)
    first_load = a * j
    period = max(per_iter - 1 + L, n * per_iter)
    warm, end = 2 * period, 10 * period
    pc = [0] * n
    ready = (1 << n) - 1           # bit w set: warp w can issue
    pending: deque = deque()       # (cycle the data is back, warp); FIFO since L is fixed
    timeline = np.full(min(trace_cycles, end), -1, dtype=np.int32)
    timeline_load = np.zeros(timeline.size, dtype=bool)
    cycle, last = 0, -1
    issued = loads = 0
    gto = policy == "gto"
    while cycle < end:
        while pending and pending[0][0] <= cycle:
            ready |= 1 << pending.popleft()[1]
        if not ready:
            cycle = pending[0][0]  # every warp is waiting: skip the idle cycles
            continue
        if gto and last >= 0 and ready >> last & 1:
            w = last
        elif gto or last < 0:
            w = (ready & -ready).bit_length() - 1
        else:
            later = ready >> (last + 1)
            w = (last + 1 + (later & -later).bit_length() - 1 if later
                 else (ready & -ready).bit_length() - 1)
        k = pc[w]
        is_load = k >= first_load
        if cycle >= warm:
            issued += 1
            loads += is_load
        if cycle < timeline.size:
            timeline[cycle] = w
            timeline_load[cycle] = is_load
        k += 1
        if k == per_iter:
            pc[w] = 0
            ready &= ~(1 << w)
            pending.append((cycle + L, w))
        else:
            pc[w] = k
        last = w
        cycle += 1
    window = end - warm
    return SchedulerRun(n, a, j, L, policy, issued / window, loads / window,
                        issue_rate(n, alu_per_load=a, latency=L, ilp=j, policy=policy), end,
                        timeline, timeline_load)


# -- a whole SM ---------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class SMThroughput(Readout):
    """One SM with ``warps`` resident warps spread over its schedulers.

    ``limiter``: "latency" (too few loads in flight), "issue" (schedulers busy every cycle)
    or "bandwidth" (the SM's share of DRAM bandwidth is used up).
    """

    warps: int
    issue_rate: float           # instructions per cycle, whole SM
    loads_per_cycle: float      # warp-wide loads per cycle
    bytes_per_cycle: float
    limiter: str

    def readout_title(self) -> str:
        return "One SM"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("warps", self.warps), Row("issue rate (instructions/cycle)", self.issue_rate),
                Row("loads per cycle", self.loads_per_cycle),
                Row("bytes per cycle", self.bytes_per_cycle), Row("limited by", self.limiter))


def sm_throughput(warps: int, *, alu_per_load: int, latency: float, ilp: int = 1,
                  bytes_per_load: int = 128, bandwidth_per_cycle: float | None = None,
                  schedulers: int = SCHEDULERS_PER_SM) -> SMThroughput:
    """The closed form for a whole SM: warps dealt round-robin to ``schedulers`` schedulers,
    each bounded by :func:`issue_rate`, and the total capped by ``bandwidth_per_cycle``
    (bytes per cycle, the SM's share of DRAM bandwidth; ``None`` = no cap).
    ``bytes_per_load``: bytes one warp-wide load brings (32 lanes × 4 B = 128 B)."""
    n = _validate.integer("warps", warps, low=0, high=4096)
    a, j, L = _params(alu_per_load, ilp, latency)
    s = _validate.integer("schedulers", schedulers, low=1, high=64)
    b = _validate.real("bytes_per_load", bytes_per_load, low=0.0, low_open=True)
    per_sched = np.array([n // s + (1 if i < n % s else 0) for i in range(s)], dtype=float)
    rates = issue_rate(per_sched, alu_per_load=a, latency=L, ilp=j)
    rate = float(np.sum(rates))
    loads = rate * j / (j * (a + 1))
    limiter = "issue" if n and np.all(rates[per_sched > 0] >= 1.0) else "latency"
    nbytes = loads * b
    if bandwidth_per_cycle is not None:
        cap = _validate.real("bandwidth_per_cycle", bandwidth_per_cycle, low=0.0,
                             low_open=True)
        if nbytes > cap:
            scale = cap / nbytes
            rate, loads, nbytes, limiter = rate * scale, loads * scale, cap, "bandwidth"
    return SMThroughput(n, rate, loads, nbytes, limiter)


# -- Little's law for a whole GPU ----------------------------------------------------------------

def bytes_in_flight(bandwidth: float, latency_s: float) -> float:
    """Little's law: data that must be in flight = bandwidth (B/s) × latency (s)."""
    bw = _validate.positive("bandwidth", bandwidth)
    lat = _validate.positive("latency_s", latency_s)
    return bw * lat


def _max_warps_per_sm(g) -> int:
    from .occupancy import occupancy

    # 256-thread blocks of 32 registers fit exactly the warp limit on every CC in the table.
    return occupancy(gpu=g, threads_per_block=256, registers_per_thread=32,
                     shared_mem_per_block=0).max_warps_per_sm


@dataclass(frozen=True, repr=False)
class LittlesLaw(Readout):
    """Concurrency a GPU needs to keep its DRAM busy (Little's law)."""

    gpu: str
    bandwidth: float            # B/s
    latency_ns: float
    latency_cycles: float       # at the boost clock
    bytes_in_flight: float      # whole GPU
    bytes_per_sm: float
    bytes_per_thread: int       # bytes each thread has in flight (load size × ILP)
    threads_per_sm: float
    warps_per_sm: float
    max_warps_per_sm: int

    @property
    def enough_warps(self) -> bool:
        """Whether full occupancy alone provides the needed concurrency."""
        return self.warps_per_sm <= self.max_warps_per_sm

    @property
    def max_warps_per_scheduler(self) -> int:
        """The most warps one warp scheduler can hold: ``max_warps_per_sm /``
        :data:`SCHEDULERS_PER_SM`, since an SM's warps are spread over its schedulers (a CC 9.0
        SM: 64 / 4 = 16; every CC in the occupancy table has a multiple of 4)."""
        return self.max_warps_per_sm // SCHEDULERS_PER_SM

    @property
    def ilp_needed(self) -> int:
        """Loads each thread must keep in flight when every warp slot is used."""
        return math.ceil(self.warps_per_sm / self.max_warps_per_sm)

    def readout_title(self) -> str:
        return f"Little's law: {self.gpu}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("bandwidth", self.bandwidth, "B/s"), Row("latency", self.latency_ns * 1e-9, "s"),
                Row("latency (cycles)", self.latency_cycles),
                Row("bytes in flight", self.bytes_in_flight, "B"),
                Row("per SM", self.bytes_per_sm, "B"), Row("per thread", self.bytes_per_thread, "B"),
                Row("threads per SM", self.threads_per_sm),
                Row("warps per SM needed", self.warps_per_sm),
                Row("warps per SM at most", self.max_warps_per_sm),
                Row("loads in flight per thread", self.ilp_needed))


def littles_law(gpu="H100", *, latency_ns: float = DEFAULT_LATENCY_NS,
                bytes_per_thread: int = 4) -> LittlesLaw:
    """Bytes, threads and warps that must be in flight to saturate ``gpu``'s DRAM.

    bytes in flight = bandwidth × latency (whole GPU); per SM = that / SMs;
    threads per SM = bytes per SM / ``bytes_per_thread`` (bytes one thread has in flight);
    warps per SM = threads / 32.  ``gpu``: a catalog name or ``GPU``.
    """
    from .hardware import gpu as lookup

    g = lookup(gpu)
    lat = _validate.positive("latency_ns", latency_ns)
    bpt = _validate.integer("bytes_per_thread", bytes_per_thread, low=1, high=1 << 20)
    total = bytes_in_flight(g.bandwidth, lat * 1e-9)
    per_sm = total / g.sms
    threads = per_sm / bpt
    cycles = lat * g.boost_mhz / 1e3 if g.boost_mhz else float("nan")
    return LittlesLaw(g.name, g.bandwidth, lat, cycles, total, per_sm, bpt, threads,
                      threads / WARP_SIZE, _max_warps_per_sm(g))


# -- occupancy vs ILP -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """A kernel configuration to compare: launch shape, resources and work per thread.

    ``ilp``: independent loads each thread keeps in flight (register blocking: a thread that
    handles ``ilp`` elements per iteration needs more registers, which lowers occupancy);
    ``alu_per_load``: other instructions per load; ``bytes_per_load``: per thread (4 = float).
    """

    name: str
    threads_per_block: int
    registers_per_thread: int
    shared_mem_per_block: int = 0
    ilp: int = 1
    alu_per_load: int = 2
    bytes_per_load: int = 4


@dataclass(frozen=True, repr=False)
class ConfigResult(Readout):
    config: Config
    warps_per_sm: int
    occupancy: float
    loads_in_flight_per_sm: int     # warp-wide loads
    bandwidth: float                # predicted DRAM bandwidth of the loads, B/s, whole GPU
    fraction_of_peak: float
    limiter: str

    def readout_title(self) -> str:
        return f"Configuration {self.config.name}"

    def readout_rows(self) -> tuple[Row, ...]:
        """Also the columns of :class:`Comparison`."""
        c = self.config
        return (Row("threads per block", c.threads_per_block),
                Row("registers per thread", c.registers_per_thread),
                Row("warps per SM", self.warps_per_sm), Row("occupancy", self.occupancy, "%"),
                Row("ILP", c.ilp), Row("loads in flight per SM", self.loads_in_flight_per_sm),
                Row("predicted bandwidth", self.bandwidth, "B/s"),
                Row("of peak", self.fraction_of_peak, "%"), Row("limited by", self.limiter))


@dataclass(frozen=True, repr=False)
class Comparison:
    gpu: str
    latency_ns: float
    peak_bandwidth: float
    results: tuple[ConfigResult, ...]

    @property
    def best(self) -> ConfigResult:
        return max(self.results, key=lambda r: r.bandwidth)

    def _table(self):
        """Each configuration's readout rows as one line, their labels as the header."""
        head = ("configuration", *(row.label for row in self.results[0].readout_rows()))
        return head, [(r.config.name, *(row.text for row in r.readout_rows()))
                      for r in self.results]

    def __repr__(self) -> str:
        return (f"Comparison on {self.gpu} (latency {duration(self.latency_ns * 1e-9)}, peak "
                f"{_bandwidth(self.peak_bandwidth)})\n" + text_table(*self._table()))

    def _repr_html_(self) -> str:
        return html_table(f"Occupancy vs ILP on {self.gpu} (latency {duration(self.latency_ns * 1e-9)})",
                          *self._table())


def compare(configs, gpu="H100", *, latency_ns: float = DEFAULT_LATENCY_NS) -> Comparison:
    """Predicted DRAM bandwidth of each configuration: occupancy from the calculator, then
    :func:`sm_throughput` with the SM's share of bandwidth as the cap.

    Per SM: warps = ``occupancy(...).warps_per_sm``; loads in flight = warps × ILP;
    bandwidth ≈ SMs × min(loads in flight × bytes / latency, issue bound, peak / SMs).

    The "predicted DRAM bandwidth" counts **loads only**: it is the rate at which the warps
    bring data in, each load waited for.  To turn it into a kernel's time, divide the bytes the
    kernel *reads* by it, not the bytes read and written: a store does not wait for DRAM, so a
    kernel whose stores follow its loads (a copy, a scale) takes about its reads' time.  Its
    stores do use DRAM bandwidth too, which the cap at the peak does not see (compare read +
    written bytes per second with the peak separately).
    """
    from .hardware import gpu as lookup
    from .occupancy import occupancy

    g = lookup(gpu)
    lat = _validate.positive("latency_ns", latency_ns)
    if isinstance(configs, Config):
        configs = [configs]
    configs = list(configs)
    if not configs or not all(isinstance(c, Config) for c in configs):
        raise TypeError("configs must be a non-empty list of latency.Config")
    clock = g.boost_mhz * 1e6
    latency_cycles = lat * 1e-9 * clock
    share = g.bandwidth / g.sms / clock   # bytes per cycle per SM
    results = []
    for c in configs:
        occ = occupancy(gpu=g, threads_per_block=c.threads_per_block,
                        registers_per_thread=c.registers_per_thread,
                        shared_mem_per_block=c.shared_mem_per_block)
        sm = sm_throughput(occ.warps_per_sm, alu_per_load=c.alu_per_load,
                           latency=latency_cycles, ilp=c.ilp,
                           bytes_per_load=WARP_SIZE * c.bytes_per_load,
                           bandwidth_per_cycle=share)
        bw = sm.bytes_per_cycle * clock * g.sms
        results.append(ConfigResult(c, occ.warps_per_sm, occ.occupancy,
                                    occ.warps_per_sm * c.ilp, bw, bw / g.bandwidth,
                                    sm.limiter))
    return Comparison(g.name, lat, g.bandwidth, tuple(results))


def occupancy_vs_ilp(gpu="H100", *, latency_ns: float = DEFAULT_LATENCY_NS) -> Comparison:
    """Occupancy against loads in flight: a streaming kernel (256-thread blocks, float loads)
    at 100 % occupancy with one load in flight per thread, against register-blocked
    versions that hold 4 loads in flight per thread and so need more registers."""
    return compare([
        Config("1 load/thread, 32 regs", 256, 32, ilp=1),
        Config("4 loads/thread, 64 regs", 256, 64, ilp=4),
        Config("4 loads/thread, 128 regs", 256, 128, ilp=4),
    ], gpu, latency_ns=latency_ns)
