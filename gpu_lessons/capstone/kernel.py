"""What a learner gets for a mystery kernel: its code, sizes, GPU and time, with the time's
source, and what the course's tools need to examine it (warp accesses, launch, instruction
mix).  No verdict here: :mod:`gpu_lessons.capstone.diagnosis` draws it."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _validate
from .._format import Readout, Row
from ..costs import KernelCost
from .pipes import InstructionMix


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


@dataclass(frozen=True, repr=False)
class MysteryKernel(Readout):
    """A kernel to diagnose: code, sizes, GPU and time per run, with the time's source.

    ``cost``: FLOPs and the bytes the algorithm must move (each operand once, as
    :mod:`gpu_lessons.costs` counts them).  ``measured``: True when ``seconds`` was measured on
    real hardware, False when a model derived it (``time_source`` says which model).
    ``instructions``: the warp instructions on each SM pipe (:class:`InstructionMix`), for the
    SM-throughput model; without it the diagnosis falls back to FLOP/s over the peak, a lower
    bound.  ``launches``: kernel launches per timed run; ``gpu_busy_seconds``: the GPU time
    those kernels take (when the run is a chain of launches); ``launch_overhead_s``: CPU cost
    per launch.  ``fix``: what to change; ``after``: the kernel once fixed (itself a
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
    instructions: InstructionMix | None = None
    launches: int = 1
    gpu_busy_seconds: float | None = None
    launch_overhead_s: float | None = None
    fix: str = ""
    after: MysteryKernel | None = None

    def readout_title(self) -> str:
        return self.title

    def readout_rows(self) -> tuple[Row, ...]:
        # the code is not repeated here: a lesson shows it in the text (``.code`` holds it)
        rows = [Row("GPU", self.gpu), Row("sizes", self.sizes), Row("work", self.cost.flops, "FLOP"),
                Row("bytes (each operand once)", self.cost.bytes, "B"),
                Row("time per run", self.seconds, "s"),
                Row("time per run is", "measured" if self.measured else "model-derived"),
                Row("time source", self.time_source)]
        if self.launch is not None:
            ln = self.launch
            rows += [Row("blocks", ln.blocks), Row("threads per block", ln.threads_per_block),
                     Row("registers per thread", ln.registers_per_thread),
                     Row("shared memory per block", ln.shared_mem_per_block, "B")]
        if self.instructions is not None:
            rows += [Row("warp instructions", round(self.instructions.total)),
                     Row("instruction counts", self.instructions.source)]
        if self.launches > 1:
            rows.append(Row("launches per run", self.launches))
        return tuple(rows)
