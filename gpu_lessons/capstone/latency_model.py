"""The latency model of lesson 06, applied to a mystery kernel whose warps each load once.

Such a kernel (the capstone's filter) runs in **rounds**: each warp issues its ``I``
instructions, one of them a load whose data arrives ``L`` cycles later, and then exits; the SM
starts another warp in its slot.  With ``n`` warps per scheduler (resident warps per SM / 4)
the two bounds of :func:`gpu_lessons.latency.issue_rate` apply:

* **staggered** (``policy="gto"``): the warps' memory waits overlap perfectly, so a scheduler
  issues ``R = min(1, n·I / (I − 1 + L))`` instructions per cycle;
* **bunched** (``policy="lrr"``): the ``n`` warps reach their loads together and wait together,
  so a round of them takes ``n·(I − 1) + L`` cycles: ``R = min(1, n·I / (n·(I − 1) + L))``.
  With **one block per SM** this is the case for a structural reason, not a scheduling one: the
  block's warps start together, and the next block starts only when all of them have exited.

Time = warp instructions of the grid / (R × 4 schedulers × SMs × clock).

What it leaves out, measured on an H200 for ``fir_filter`` (one 256-thread block, 8 warps,
per SM; ``tests/data/h200_capstone_fir.json``): the bunched bound with the course's round
600 ns latency predicts 1.478 ms against 1.500 ms measured with CUDA events and 1.471 ms by
Nsight Compute; the staggered bound 1.335 ms (11 % fast).  The close agreement is partly two
errors cancelling:

* **block turnover**: between one block's last warp exiting and the next block's start the SM
  holds no warp — Nsight Compute counted warps resident in only 84 % of the cycles, so about
  240 of the ~1,470 cycles of each round (the model has none);
* **the latency**: 600 ns (1,188 cycles) is a round figure for DRAM under load; this kernel
  keeps DRAM 7 % busy, and the pointer chase measured 340 ns unloaded.  The active part of a
  round (84 % of 1,467 cycles ≈ 1,227) less the 2 × 143 issue cycles leaves ≈ 940 cycles
  (≈ 475 ns) of waiting per round: the model's 600 ns is ~250 cycles too long, about what it
  leaves out in turnover.

The dependency chain inside a warp is hidden here and so left out too: the filter's 40
dependent FFMAs on ``acc`` need 40 × 4 = 160 cycles (most arithmetic instructions take about 4
cycles before a dependent one can issue: CUDA C++ Programming Guide, "Multiprocessor Level"),
less than the 2 × 124 cycles two bunched warps take to issue their post-load instructions on one
scheduler; the other 80 FFMAs of each warp do not depend on ``acc`` and fill the gaps.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _validate, latency
from .. import hardware as _hw
from .._format import Readout, Row
from ..occupancy import occupancy
from .kernel import MysteryKernel

#: Warp schedulers per SM (:data:`gpu_lessons.latency.SCHEDULERS_PER_SM`).
SCHEDULERS = latency.SCHEDULERS_PER_SM


@dataclass(frozen=True, repr=False)
class LatencyPrediction(Readout):
    """The rounds model's time for one kernel, both bounds, against its time per run.

    ``instructions``: per warp (``I``); ``warps_per_sm``: resident (occupancy calculator);
    ``latency_cycles``: ``L`` at the GPU's boost clock.  :attr:`seconds` is the bunched bound
    when one block fills the SM (its warps start and end together) and the staggered bound
    otherwise (a lower bound: blocks of one SM start at different times, warps of one block
    together).
    """

    key: str
    gpu: str
    warps: int
    warps_per_sm: int
    blocks_per_sm: int
    instructions: float
    latency_ns: float
    latency_cycles: float
    clock_hz: float
    sms: int
    staggered_seconds: float
    bunched_seconds: float
    kernel_seconds: float
    kernel_measured: bool

    @property
    def warps_per_scheduler(self) -> float:
        return self.warps_per_sm / SCHEDULERS

    @property
    def bunched(self) -> bool:
        """Whether :attr:`seconds` is the bunched bound (one block per SM)."""
        return self.blocks_per_sm == 1

    @property
    def seconds(self) -> float:
        return self.bunched_seconds if self.bunched else self.staggered_seconds

    @property
    def round_cycles(self) -> float:
        """Cycles of one round of ``n`` bunched warps on a scheduler: ``n·(I − 1) + L``."""
        return self.warps_per_scheduler * (self.instructions - 1) + self.latency_cycles

    @property
    def error(self) -> float:
        """(prediction − time per run) / time per run."""
        return self.seconds / self.kernel_seconds - 1

    def readout_title(self) -> str:
        return f"Latency model: {self.key} on {self.gpu}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("warps per SM", self.warps_per_sm), Row("blocks per SM", self.blocks_per_sm),
                Row("warps per scheduler", self.warps_per_scheduler),
                Row("instructions per warp (one load)", self.instructions),
                Row("latency", self.latency_ns * 1e-9, "s"),
                Row("latency (cycles)", self.latency_cycles),
                Row("cycles per round (n·(I − 1) + L)", self.round_cycles),
                Row("bunched", self.bunched_seconds, "s"),
                Row("staggered", self.staggered_seconds, "s"),
                Row("time per run", self.kernel_seconds, "s"),
                Row("time per run is", "measured" if self.kernel_measured else "model-derived"),
                Row("model used", "bunched" if self.bunched else "staggered"),
                Row("model error", self.error, "%"))


def latency_prediction(kernel, *, latency_ns: float = latency.DEFAULT_LATENCY_NS
                       ) -> LatencyPrediction:
    """The rounds model (module docstring) for ``kernel``, a :class:`MysteryKernel` (or its
    key) with a launch and an instruction mix, whose every warp issues one load."""
    from .mysteries import mystery

    k = mystery(kernel) if isinstance(kernel, str) else kernel
    if not isinstance(k, MysteryKernel):
        raise TypeError(f"kernel must be a MysteryKernel or a mystery's key, got {kernel!r}")
    if k.launch is None or k.instructions is None:
        raise ValueError(f"kernel {k.key!r} needs a launch and an instruction mix for the "
                         "latency model")
    lat = _validate.real("latency_ns", latency_ns, low=1.0, high=1e6)
    g = _hw.gpu(k.gpu)
    ln = k.launch
    occ = occupancy(gpu=g, threads_per_block=ln.threads_per_block,
                    registers_per_thread=ln.registers_per_thread,
                    shared_mem_per_block=ln.shared_mem_per_block)
    warps = ln.blocks * ln.threads_per_block // _hw.WARP_SIZE
    per_warp = k.instructions.total / warps
    clock = g.boost_mhz * 1e6
    cycles = lat * 1e-9 * clock
    n = occ.warps_per_sm / SCHEDULERS
    issue_slots = SCHEDULERS * g.sms * clock            # warp instructions per second

    def seconds(policy):
        rate = latency.issue_rate(n, alu_per_load=round(per_warp) - 1, latency=cycles,
                                  policy=policy)
        return k.instructions.total / (rate * issue_slots)

    return LatencyPrediction(k.key, g.name, warps, occ.warps_per_sm, occ.blocks_per_sm,
                             per_warp, lat, cycles, clock, g.sms, seconds("gto"),
                             seconds("lrr"), k.seconds, k.measured)


__all__ = ["LatencyPrediction", "latency_prediction"]
