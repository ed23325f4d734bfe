"""System-level costs: kernel launches, host copies, and communication/computation overlap.

Launches (times in µs)
    A stream of ``n`` kernels of duration ``d``.  Launching one costs the CPU ``o`` (the driver
    call); the GPU can start a kernel once its launch call has returned and the previous kernel
    has finished.  Three ways to issue them:

    * ``"async"`` — launches back to back, one sync at the end of the step.  Kernel ``i`` is
      ready at ``(i+1)·o`` and ``end_i = max((i+1)·o, end_{i-1}) + d``, which unrolls to
      ``end = max(o + n·d, n·o + d)``: when ``d < o`` the GPU waits for the CPU (it is
      *launch-bound*) and is busy only ``d / o`` of the time.
    * ``"sync"`` — a CPU–GPU sync after every kernel (``.item()``, ``cudaDeviceSynchronize``):
      each kernel costs ``o + d + r``, ``r`` the round trip (the GPU picking the work up and the
      CPU learning it finished); nothing overlaps.
    * ``"graph"`` — a CUDA Graph: one launch of cost ``g`` replaces ``n``, and each node costs
      the GPU ``c`` on top of its kernel: ``g + n·(c + d)``.

    With ``final_sync`` the step ends when the CPU has seen the last kernel finish (one ``r``
    more for "async" and "graph"); without it, when the GPU finishes.  GPU utilisation =
    ``n·d / step``.  Not modelled: the launch queue's depth (the CPU blocks after ~1000 queued
    launches, which never changes GPU time here) and gaps between back-to-back kernels on the
    GPU itself.  Source of the model and the V100 figures: A. Gray, "Getting Started with CUDA
    Graphs", NVIDIA Technical Blog, 2019 (a 2.9 µs kernel: 9.6 µs per kernel synced, 3.8 µs
    overlapped, 3.4 µs in a graph).

Host copies
    ``t = latency + bytes / bandwidth`` (the latency–bandwidth or Hockney model: R. Hockney,
    "The communication challenge for MPP", Parallel Computing 20, 1994); the size that reaches
    half the bandwidth is ``n½ = latency × bandwidth``.  Pinned (page-locked) memory is copied by
    the GPU's DMA engines directly; pageable memory goes through a staging buffer, which costs a
    CPU copy (CUDA C++ Best Practices Guide, "Pinned Memory").

Communication/computation overlap (times in ms)
    Data-parallel training all-reduces every layer's gradients.  A ring all-reduce of ``S``
    bytes over ``p`` GPUs is a reduce-scatter and an all-gather, each moving ``(p−1)/p·S`` per
    GPU: ``t = 2(p−1)·α + 2(p−1)/p · S / B`` (R. Thakur, R. Rabenseifner, W. Gropp,
    "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005; the same
    factor NCCL's tests use to turn algorithm bandwidth into bus bandwidth, nccl-tests
    PERFORMANCE.md).  With overlap, gradients go into buckets in backward order and a bucket's
    all-reduce starts as soon as its last layer's backward finishes (PyTorch
    DistributedDataParallel: S. Li et al., "PyTorch Distributed", VLDB 2020); without it, all
    communication starts after the backward pass.  Communication kernels occupy SMs: while one
    runs, compute proceeds at ``1 − comm_sm_fraction`` of its speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _validate
from ._format import Readout, Row, duration, html_table, percent, text_table
from .hardware import measured

MODES = ("async", "sync", "graph")
MEMORY_KINDS = ("pinned", "pageable")
DIRECTIONS = ("h2d", "d2h")


#: What a timeline bar is (:attr:`Segment.kind`): the CPU launching one kernel or one CUDA
#: Graph, a kernel (or graph node) running on the GPU, the CPU waiting in a sync, a layer's
#: forward or backward compute, a communication kernel (all-reduce).
SEGMENT_KINDS = ("launch", "graph launch", "kernel", "sync", "forward", "backward", "comm")


class Segment(NamedTuple):
    """One bar of a Gantt chart: ``lane`` ("CPU"/"GPU" or "compute"/"comm"), ``start`` and
    ``end`` in the result's time unit, ``label`` (which one: "launch 3", "backward 7") and
    ``kind`` (what it is, one of :data:`SEGMENT_KINDS`)."""

    lane: str
    start: float
    end: float
    label: str
    kind: str


def _nonneg(name: str, value) -> float:
    return _validate.real(name, value, low=0.0)


# -- launch overhead -------------------------------------------------------------------------------

@dataclass(frozen=True)
class LaunchFigures:
    """Per-launch costs of one system, in µs, each with its source in ``sources``.

    ``launch_us``: CPU time of one kernel launch; ``sync_us``: round trip a sync adds;
    ``graph_launch_us``: one graph launch; ``graph_node_us``: GPU cost per graph node.
    """

    name: str
    launch_us: float
    sync_us: float
    graph_launch_us: float
    graph_node_us: float
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


_GRAY = "A. Gray, 'Getting Started with CUDA Graphs', NVIDIA Technical Blog, 2019 (V100)"

#: Empty kernels per step in the H200 launch measurement (tools/device/measure_h200.py).
_H200_STEP_KERNELS = 1000


def _h200_figures() -> LaunchFigures:
    """The H200's launch costs from the measured figures (``data/measured.toml``), fitted with
    this module's model.  Back-to-back empty kernels are launch-bound, so their time per kernel
    is the launch cost ``o`` (the one final sync adds ``r / 1000``, under 0.01 µs); with a sync
    after each, a kernel costs ``o + r``, so ``r`` = synced − back-to-back (this includes the
    empty kernel's own run time, under 0.7 µs); a 1000-node graph costs ``g + 1000·c + r``, so
    ``c`` = per-kernel graph time − (g + r) / 1000.  The measurement does not isolate one graph
    launch ``g``: it is taken as one kernel launch (one driver call)."""
    b2b = measured("h200.launch.back_to_back_us")
    synced = measured("h200.launch.synced_us")
    graph = measured("h200.launch.graph_per_kernel_us")
    launch = b2b.value
    sync = round(synced.value - launch, 2)
    node = round(graph.value - (launch + sync) / _H200_STEP_KERNELS, 2)
    return LaunchFigures("H200", launch, sync, launch, node, {
        "launch_us": f"{b2b.source}: {b2b} per back-to-back launch",
        "sync_us": f"{synced.source}: {synced} synced − {b2b} back-to-back",
        "graph_launch_us": "assumed equal to one kernel launch (one driver call)",
        "graph_node_us": f"{graph.source}: {graph} per node of a {_H200_STEP_KERNELS}-node graph "
                         f"less (launch + sync) / {_H200_STEP_KERNELS}",
    })


#: Launch costs by system, fitted to the step times the sources report with this module's model.
#: H200: measured (see :func:`_h200_figures`).  V100 (Gray's blog: 20 kernels of 2.9 µs per
#: step, one sync per step): synced o + 2.9 + r = 9.6; overlapped (20·o + 2.9 + r) / 20 = 3.8;
#: so 19·o = 76 − 9.6, o = 3.49 µs and r = 3.21 µs; in a graph (g + 20·(c + 2.9) + r) / 20 =
#: 3.4 gives c = 0.17 µs.  The blog does not isolate one graph launch ``g``: it is taken as one
#: kernel launch (one driver call).
LAUNCH_FIGURES: dict[str, LaunchFigures] = {
    "H200": _h200_figures(),
    "V100": LaunchFigures("V100", 3.49, 3.21, 3.49, 0.17, {
        "launch_us": _GRAY + ": fitted to 3.8 µs per kernel overlapped and 9.6 µs synced",
        "sync_us": _GRAY + ": 9.6 µs synced − 3.49 µs launch − 2.9 µs kernel",
        "graph_launch_us": "assumed equal to one kernel launch (one driver call)",
        "graph_node_us": _GRAY + ": fitted to 3.4 µs per kernel in a 20-kernel graph",
    }),
}


def launch_figures(name: str | LaunchFigures = "H200") -> LaunchFigures:
    """The launch costs of a system in :data:`LAUNCH_FIGURES` (case-insensitive)."""
    if isinstance(name, LaunchFigures):
        return name
    if not isinstance(name, str):
        raise TypeError(f"figures must be a name or LaunchFigures, got {name!r}")
    for key, fig in LAUNCH_FIGURES.items():
        if key.lower() == name.strip().lower():
            return fig
    raise ValueError(f"figures must be one of {', '.join(map(repr, LAUNCH_FIGURES))}; "
                     f"got {name!r}")


def _costs(figures, launch_us, sync_us, graph_launch_us, graph_node_us):
    f = launch_figures(figures)
    pick = {"launch_us": launch_us, "sync_us": sync_us, "graph_launch_us": graph_launch_us,
            "graph_node_us": graph_node_us}
    return tuple(getattr(f, k) if v is None else _nonneg(k, v) for k, v in pick.items())


def _step_us(n, d, mode, o, r, g, c, final_sync):
    """Closed-form step time (µs); ``d`` may be a NumPy array."""
    if mode == "async":
        return np.maximum(o + n * d, n * o + d) + (r if final_sync else 0.0)
    if mode == "sync":
        return n * (o + d + r)
    return g + n * (c + d) + (r if final_sync else 0.0)


@dataclass(frozen=True, repr=False)
class LaunchRun(Readout):
    """``n_kernels`` kernels of ``kernel_us`` issued one way (``mode``); times in µs.

    ``timeline``: :class:`Segment` bars on lanes "CPU" and "GPU" (µs).
    """

    mode: str
    n_kernels: int
    kernel_us: float
    launch_us: float
    sync_us: float
    graph_launch_us: float
    graph_node_us: float
    final_sync: bool
    step_us: float
    timeline: tuple[Segment, ...]

    time_unit = "µs"

    @property
    def gpu_busy_us(self) -> float:
        """Time the GPU spends running kernels: ``n · d``."""
        return self.n_kernels * self.kernel_us

    @property
    def gpu_idle_us(self) -> float:
        return self.step_us - self.gpu_busy_us

    @property
    def utilisation(self) -> float:
        """GPU busy fraction of the step, 0..1."""
        return self.gpu_busy_us / self.step_us

    @property
    def per_kernel_us(self) -> float:
        return self.step_us / self.n_kernels

    def readout_title(self) -> str:
        return f"Launches ({self.mode})"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("kernels", self.n_kernels), Row("kernel", self.kernel_us * 1e-6, "s"),
                Row("launch", self.launch_us * 1e-6, "s"), Row("step", self.step_us * 1e-6, "s"),
                Row("per kernel", self.per_kernel_us * 1e-6, "s"),
                Row("GPU busy", self.utilisation, "%"))


def kernel_sequence(n_kernels: int, kernel_us: float, *, mode: str = "async",
                    figures: str | LaunchFigures = "H200", launch_us: float | None = None,
                    sync_us: float | None = None, graph_launch_us: float | None = None,
                    graph_node_us: float | None = None, final_sync: bool = True) -> LaunchRun:
    """Step time, GPU utilisation and a CPU/GPU timeline for ``n_kernels`` kernels of
    ``kernel_us`` µs each (formulas in the module docstring).

    Costs come from ``figures`` (a :data:`LAUNCH_FIGURES` name); any of ``launch_us``,
    ``sync_us``, ``graph_launch_us``, ``graph_node_us`` overrides one.

    >>> kernel_sequence(100, 2.0, launch_us=5.0, final_sync=False).utilisation  # 200 / 502
    0.398406374501992
    """
    n = _validate.integer("n_kernels", n_kernels, low=1, high=100_000)
    d = _validate.positive("kernel_us", kernel_us)
    _validate.choice("mode", mode, MODES)
    _validate.flag("final_sync", final_sync)
    o, r, g, c = _costs(figures, launch_us, sync_us, graph_launch_us, graph_node_us)
    step = float(_step_us(n, d, mode, o, r, g, c, final_sync))

    seg: list[Segment] = []
    if mode == "async":
        end = 0.0
        for i in range(n):
            ready = (i + 1) * o
            seg.append(Segment("CPU", i * o, ready, f"launch {i}", "launch"))
            start = max(ready, end)
            end = start + d
            seg.append(Segment("GPU", start, end, f"kernel {i}", "kernel"))
        if final_sync:
            seg.append(Segment("CPU", n * o, end + r, "sync wait", "sync"))
    elif mode == "sync":
        t = 0.0
        for i in range(n):
            seg.append(Segment("CPU", t, t + o, f"launch {i}", "launch"))
            seg.append(Segment("GPU", t + o, t + o + d, f"kernel {i}", "kernel"))
            seg.append(Segment("CPU", t + o, t + o + d + r, "sync wait", "sync"))
            t += o + d + r
    else:
        seg.append(Segment("CPU", 0.0, g, "graph launch", "graph launch"))
        for i in range(n):
            start = g + i * (c + d) + c
            seg.append(Segment("GPU", start, start + d, f"node {i}", "kernel"))
        if final_sync:
            seg.append(Segment("CPU", g, g + n * (c + d) + r, "sync wait", "sync"))
    return LaunchRun(mode, n, d, o, r, g, c, final_sync, step, tuple(seg))


@dataclass(frozen=True, repr=False)
class LaunchComparison:
    """The same kernels issued each way (see :func:`compare_modes`)."""

    runs: tuple[LaunchRun, ...]

    def __getitem__(self, mode: str) -> LaunchRun:
        for run in self.runs:
            if run.mode == mode:
                return run
        return _validate.choice("mode", mode, [r.mode for r in self.runs])

    def _rows(self):
        for r in self.runs:
            yield (r.mode, duration(r.step_us * 1e-6), duration(r.per_kernel_us * 1e-6),
                   percent(r.utilisation))

    _HEAD = ("mode", "step", "per kernel", "GPU busy")

    def __repr__(self) -> str:
        r0 = self.runs[0]
        us = {k: duration(getattr(r0, k) * 1e-6)
              for k in ("kernel_us", "launch_us", "sync_us", "graph_node_us")}
        return (f"{r0.n_kernels} kernels × {us['kernel_us']} (launch {us['launch_us']}, sync "
                f"{us['sync_us']}, graph node {us['graph_node_us']})\n"
                + text_table(self._HEAD, self._rows()))

    def _repr_html_(self) -> str:
        r0 = self.runs[0]
        return html_table(f"{r0.n_kernels} kernels × {duration(r0.kernel_us * 1e-6)}", self._HEAD,
                          self._rows())


def compare_modes(n_kernels: int, kernel_us: float, **kw) -> LaunchComparison:
    """:func:`kernel_sequence` in every mode ("async", "sync", "graph") with the same costs."""
    if "mode" in kw:
        raise TypeError("compare_modes runs every mode; do not pass mode=")
    return LaunchComparison(tuple(kernel_sequence(n_kernels, kernel_us, mode=m, **kw)
                                  for m in MODES))


@dataclass(frozen=True, repr=False)
class BatchSweep(Readout):
    """Utilisation against batch size when a kernel takes ``fixed_us + per_item_us × batch``.

    Arrays (one entry per batch size): ``kernel_us``, ``step_us``, ``utilisation`` (0..1) and
    ``items_per_s`` (batch / step time).
    """

    mode: str
    n_kernels: int
    fixed_us: float
    per_item_us: float
    launch_us: float
    batch: np.ndarray
    kernel_us: np.ndarray
    step_us: np.ndarray
    utilisation: np.ndarray
    items_per_s: np.ndarray

    @property
    def knee_batch(self) -> float:
        """Batch at which a kernel lasts as long as a launch (``fixed + per_item·b = o``):
        below it, launches starve the GPU in "async" mode."""
        if self.per_item_us == 0:
            return math.inf if self.fixed_us < self.launch_us else 0.0
        return max(0.0, (self.launch_us - self.fixed_us) / self.per_item_us)

    def readout_title(self) -> str:
        return f"Batch sweep ({self.mode})"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("kernels", self.n_kernels), Row("fixed time per kernel", self.fixed_us * 1e-6, "s"),
                Row("time per item", self.per_item_us * 1e-6, "s"),
                Row("batch", f"{self.batch[0]} to {self.batch[-1]}"),
                Row("GPU busy at the smallest batch", self.utilisation[0], "%"),
                Row("GPU busy at the largest batch", self.utilisation[-1], "%"),
                Row("kernel = launch at batch", self.knee_batch))


def batch_sweep(batch_sizes, *, fixed_us: float, per_item_us: float, n_kernels: int = 1,
                mode: str = "async", figures: str | LaunchFigures = "H200",
                launch_us: float | None = None, sync_us: float | None = None,
                graph_launch_us: float | None = None, graph_node_us: float | None = None,
                final_sync: bool = True) -> BatchSweep:
    """Why a small batch leaves the GPU hungry: kernel duration ``d = fixed + per_item × batch``,
    then the step time of :func:`kernel_sequence` for every batch size at once."""
    b = _validate.int_array("batch_sizes", batch_sizes, low=1, max_ndim=1,
                            nonempty=True).reshape(-1)
    fixed = _nonneg("fixed_us", fixed_us)
    per = _nonneg("per_item_us", per_item_us)
    if fixed == 0 and per == 0:
        raise ValueError("fixed_us and per_item_us are both 0: the kernel would take no time")
    n = _validate.integer("n_kernels", n_kernels, low=1, high=10_000_000)
    _validate.choice("mode", mode, MODES)
    _validate.flag("final_sync", final_sync)
    o, r, g, c = _costs(figures, launch_us, sync_us, graph_launch_us, graph_node_us)
    d = fixed + per * b.astype(float)
    step = _step_us(n, d, mode, o, r, g, c, final_sync)
    return BatchSweep(mode, n, fixed, per, o, b.astype(np.int64), d, step, n * d / step,
                      b / (step * 1e-6))


# -- host <-> device copies ------------------------------------------------------------------------


def _host_copy(memory: str, direction: str) -> tuple[float, str]:
    fig = measured(f"h200.host_copy.{memory}_{direction}_gbs")
    return fig.si, f"{fig.source}: {fig}"


#: Host↔device bandwidth in bytes/s by (memory, direction), with sources: measured on an H200
#: host (256 MiB, cudaMemcpy).  Pageable host→device varied from 6.4 to 8.5 GB/s between runs.
HOST_COPY_BANDWIDTH: dict[tuple[str, str], tuple[float, str]] = {
    (m, d): _host_copy(m, d) for m in MEMORY_KINDS for d in DIRECTIONS}

#: Fixed cost of one copy call, µs.  An estimate, not a measurement: a synchronous cudaMemcpy is
#: one driver call plus a completion wait, like a launch followed by a sync (about 11 µs on the
#: H200, see LAUNCH_FIGURES).  Pass ``latency_us=`` with your own small-copy timing.
COPY_LATENCY_US = 10.0


@dataclass(frozen=True, repr=False)
class CopyTime(Readout):
    """One host↔device copy: ``time_us = latency_us + nbytes / bandwidth``."""

    nbytes: int
    memory: str
    direction: str
    bandwidth: float            # bytes/s
    latency_us: float
    time_us: float

    @property
    def effective_bandwidth(self) -> float:
        """bytes / total time, bytes/s: below ``bandwidth`` because of the latency."""
        return self.nbytes / (self.time_us * 1e-6) if self.time_us > 0 else 0.0

    @property
    def half_bandwidth_bytes(self) -> float:
        """Hockney's ``n½ = latency × bandwidth``: copies this large reach half the bandwidth."""
        return self.latency_us * 1e-6 * self.bandwidth

    def readout_title(self) -> str:
        arrow = "host→device" if self.direction == "h2d" else "device→host"
        return f"Copy {arrow}, {self.memory} memory"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("size", self.nbytes, "B"), Row("time", self.time_us * 1e-6, "s"),
                Row("bandwidth", self.bandwidth, "B/s"),
                Row("latency", self.latency_us * 1e-6, "s"),
                Row("effective bandwidth", self.effective_bandwidth, "B/s"))


def copy_time(nbytes: int, *, memory: str = "pinned", direction: str = "h2d",
              bandwidth: float | None = None, latency_us: float | None = None) -> CopyTime:
    """Time to copy ``nbytes`` between host and device (Hockney model, module docstring).

    ``bandwidth`` (bytes/s) defaults to :data:`HOST_COPY_BANDWIDTH` for ``memory``
    ("pinned"/"pageable") and ``direction`` ("h2d"/"d2h"); ``latency_us`` to
    :data:`COPY_LATENCY_US`.
    """
    nb = _validate.integer("nbytes", nbytes, low=0)
    _validate.choice("memory", memory, MEMORY_KINDS)
    _validate.choice("direction", direction, DIRECTIONS)
    bw = (HOST_COPY_BANDWIDTH[memory, direction][0] if bandwidth is None
          else _validate.positive("bandwidth", bandwidth))
    lat = COPY_LATENCY_US if latency_us is None else _nonneg("latency_us", latency_us)
    return CopyTime(nb, memory, direction, bw, lat, lat + nb / bw * 1e6)


#: PCI Express per-lane signalling rate (GT/s) and line-code efficiency by generation.  Gens 1–2
#: use 8b/10b, 3–5 128b/130b (PCI-SIG base specifications 1.0a–5.0); gen 6 runs 64 GT/s PAM4 with
#: FLIT encoding, which PCI-SIG quotes as 128 GB/s per direction on x16 before FLIT overhead.
PCIE: dict[int, tuple[float, float, str]] = {
    1: (2.5, 8 / 10, "PCI-SIG PCIe 1.0a: 2.5 GT/s, 8b/10b"),
    2: (5.0, 8 / 10, "PCI-SIG PCIe 2.0: 5 GT/s, 8b/10b"),
    3: (8.0, 128 / 130, "PCI-SIG PCIe 3.0: 8 GT/s, 128b/130b"),
    4: (16.0, 128 / 130, "PCI-SIG PCIe 4.0: 16 GT/s, 128b/130b"),
    5: (32.0, 128 / 130, "PCI-SIG PCIe 5.0: 32 GT/s, 128b/130b"),
    6: (64.0, 1.0, "PCI-SIG PCIe 6.0: 64 GT/s PAM4, FLIT mode (overhead not counted)"),
}


def pcie_bandwidth(gen: int, lanes: int = 16) -> float:
    """Peak PCIe bandwidth per direction, bytes/s: ``GT/s × encoding efficiency × lanes / 8``.

    Gen 3 x16: 8 GT/s × 128/130 × 16 / 8 = 15.75 GB/s.  Packet headers cost a further ~10–20 %,
    which is why pinned copies reach about 85 % of this.
    """
    gen = _validate.integer("gen", gen, low=1, high=6)
    lanes = _validate.choice("lanes", _validate.integer("lanes", lanes, low=1), (1, 2, 4, 8, 16))
    rate, eff, _ = PCIE[gen]
    return rate * 1e9 * eff * lanes / 8


# -- collectives and overlap -----------------------------------------------------------------------

#: Link bandwidths per GPU and direction, bytes/s.  Peaks: measured all-reduce bus bandwidth is
#: lower (use it when you have it).
LINKS: dict[str, tuple[float, str]] = {
    "nvlink4": (450e9, "NVIDIA H100/H200 SXM datasheets: NVLink 900 GB/s per GPU, both "
                       "directions together"),
    "nvlink3": (300e9, "NVIDIA A100 datasheet: NVLink 600 GB/s per GPU, both directions"),
    "nvlink2": (150e9, "NVIDIA V100 SXM2 datasheet: NVLink 300 GB/s per GPU, both directions"),
    "pcie5": (pcie_bandwidth(5), PCIE[5][2] + ", x16"),
    "pcie4": (pcie_bandwidth(4), PCIE[4][2] + ", x16"),
    "ib_ndr": (50e9, "InfiniBand NDR: 400 Gb/s per port (NVIDIA ConnectX-7)"),
    "ib_hdr": (25e9, "InfiniBand HDR: 200 Gb/s per port (NVIDIA ConnectX-6)"),
}

#: PyTorch DistributedDataParallel's default bucket size (``bucket_cap_mb=25``, torch docs).
DDP_BUCKET_BYTES = 25 * 2**20


def _link(value) -> float:
    if isinstance(value, str):
        return LINKS[_validate.choice("link_bandwidth", value, LINKS)][0]
    return _validate.positive("link_bandwidth", value)


def ring_allreduce_bytes(nbytes: float, gpus: int) -> float:
    """Bytes each GPU sends in a ring all-reduce of ``nbytes``: ``2(p−1)/p × nbytes``
    (reduce-scatter + all-gather; Thakur, Rabenseifner & Gropp 2005)."""
    s = _nonneg("nbytes", nbytes)
    p = _validate.integer("gpus", gpus, low=1, high=1_000_000)
    return 2 * (p - 1) / p * s


def allreduce_time(nbytes: float, gpus: int, link_bandwidth, *, latency_us: float = 0.0) -> float:
    """Ring all-reduce time in **seconds**: ``2(p−1)·α + 2(p−1)/p · S / B``.

    ``link_bandwidth``: bytes/s per GPU and direction, or a :data:`LINKS` name;
    ``latency_us``: the per-step latency ``α`` (0 by default: the bandwidth term only).
    """
    bw = _link(link_bandwidth)
    alpha = _nonneg("latency_us", latency_us) * 1e-6
    p = _validate.integer("gpus", gpus, low=1, high=1_000_000)
    return _ring_seconds(_nonneg("nbytes", nbytes), p, bw, alpha)


def _ring_seconds(nbytes: float, p: int, bw: float, alpha_s: float) -> float:
    """:func:`allreduce_time`'s formula on arguments already checked (a step's buckets call
    it many times, and checking the same numbers again would cost more than the formula)."""
    return 2 * (p - 1) * alpha_s + 2 * (p - 1) / p * nbytes / bw


def gradient_buckets(grad_bytes, bucket_bytes: float | None = None) -> list[list[int]]:
    """Layers grouped into all-reduce buckets, DDP's way: walk the layers in backward order (last
    layer first) and close a bucket once it holds at least ``bucket_bytes`` (``None``: one bucket
    per layer).  ``grad_bytes``: bytes of gradients per layer, first layer first.

    >>> gradient_buckets([4, 4, 4, 4, 4], 8)     # layers 4 and 3 make 8 bytes: closed
    [[4, 3], [2, 1], [0]]
    """
    grads = [float(g) for g in _times("grad_bytes", grad_bytes, None).reshape(-1)]
    cap = None if bucket_bytes is None else _validate.positive("bucket_bytes", bucket_bytes)
    groups: list[list[int]] = []
    acc = 0.0
    for layer in range(len(grads) - 1, -1, -1):
        if not groups or cap is None or acc >= cap:
            groups.append([])
            acc = 0.0
        groups[-1].append(layer)
        acc += grads[layer]
    return groups


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket: its layers (in backward order), bytes and all-reduce times (ms)."""

    layers: tuple[int, ...]
    nbytes: float
    ready_ms: float
    start_ms: float
    end_ms: float

    @property
    def label(self) -> str:
        a, b = self.layers[0], self.layers[-1]
        return f"all-reduce layer {a}" if a == b else f"all-reduce layers {a}–{b}"


@dataclass(frozen=True, repr=False)
class StepRun(Readout):
    """One data-parallel training step; times in ms.

    ``step_ms = compute_ms + slowdown_ms + exposed_comm_ms``: compute alone, the extra compute
    time while communication kernels held SMs, and communication left over after the last
    backward layer.  ``timeline``: :class:`Segment` bars on lanes "compute" and "comm" (ms).
    """

    n_layers: int
    gpus: int
    link_bandwidth: float
    overlap: bool
    comm_sm_fraction: float
    buckets: tuple[Bucket, ...]
    compute_ms: float
    compute_end_ms: float
    comm_ms: float
    step_ms: float
    timeline: tuple[Segment, ...]

    time_unit = "ms"

    @property
    def exposed_comm_ms(self) -> float:
        return self.step_ms - self.compute_end_ms

    @property
    def slowdown_ms(self) -> float:
        return self.compute_end_ms - self.compute_ms

    @property
    def hidden_comm_ms(self) -> float:
        """Communication time that ran under compute (clamped at 0 against rounding)."""
        return max(0.0, self.comm_ms - self.exposed_comm_ms)

    @property
    def hidden_fraction(self) -> float:
        """Share of the communication hidden behind compute, ``hidden / comm``, 0..1; 1 when
        there is no communication at all (one GPU, or no gradients): nothing is exposed."""
        return self.hidden_comm_ms / self.comm_ms if self.comm_ms > 0 else 1.0

    def readout_title(self) -> str:
        return (f"Training step: {self.n_layers} layers, {self.gpus} GPUs, overlap "
                f"{'on' if self.overlap else 'off'}")

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("link", self.link_bandwidth, "B/s"), Row("step", self.step_ms * 1e-3, "s"),
                Row("compute alone", self.compute_ms * 1e-3, "s"),
                Row("compute slowed by SM sharing", self.slowdown_ms * 1e-3, "s"),
                Row("exposed communication", self.exposed_comm_ms * 1e-3, "s"),
                Row("communication (all buckets)", self.comm_ms * 1e-3, "s"),
                Row("hidden behind compute", self.hidden_comm_ms * 1e-3, "s"),
                Row("hidden", self.hidden_fraction, "%"), Row("buckets", len(self.buckets)))


def _times(name, value, n):
    """A per-layer quantity: one number for every layer, or one per layer (``n`` of them)."""
    a = _validate.real_array(name, value, low=0.0, max_ndim=1)
    if a.ndim == 1 and a.size == 0:
        raise ValueError(f"{name} is empty: there must be at least one layer")
    if a.ndim == 1 and n is not None and a.size != n:
        raise ValueError(f"{name} has {a.size} entries but there are {n} layers")
    return a


def _finish(t, work, intervals, slow):
    """When ``work`` ms of compute started at ``t`` ends, running at ``1 − slow`` of full speed
    inside the (sorted, disjoint) communication ``intervals``."""
    for s, e in intervals:
        if e <= t:
            continue
        if s > t:
            if work <= s - t:
                return t + work
            work -= s - t
            t = s
        cap = (e - t) * (1 - slow)
        if work <= cap:
            return t + work / (1 - slow)
        work -= cap
        t = e
    return t + work


def training_step(forward_ms, backward_ms=None, grad_bytes=0.0, *, gpus: int,
                  link_bandwidth, n_layers: int | None = None, overlap: bool = True,
                  bucket_bytes: float | None = None, comm_sm_fraction: float = 0.0,
                  latency_us: float = 0.0) -> StepRun:
    """Step time of data-parallel training with per-layer gradient all-reduce.

    ``forward_ms``, ``backward_ms`` (default 2 × forward: backward ≈ twice the forward FLOPs,
    Kaplan et al. 2020 §2.1) and ``grad_bytes`` are per layer, first layer first; a scalar is
    used for every layer (then give ``n_layers``).  ``link_bandwidth``: bytes/s per GPU and
    direction or a :data:`LINKS` name.  ``bucket_bytes``: ``None`` = one all-reduce per layer;
    a size = layers gathered in backward order until a bucket holds at least that many bytes
    (DDP's rule; its default is :data:`DDP_BUCKET_BYTES`).  ``comm_sm_fraction``: share of SMs
    a running all-reduce takes from compute (NCCL runs its rings as CUDA blocks on the SMs).
    ``overlap=False`` starts the first all-reduce after the whole backward pass.
    """
    n = None if n_layers is None else _validate.integer("n_layers", n_layers, low=1,
                                                        high=100_000)
    fwd = _times("forward_ms", forward_ms, n)
    n = n or (fwd.size if fwd.ndim == 1 else None)
    bwd = 2 * fwd if backward_ms is None else _times("backward_ms", backward_ms, n)
    n = n or (bwd.size if bwd.ndim == 1 else None)
    grads = _times("grad_bytes", grad_bytes, n)
    n = n or (grads.size if grads.ndim == 1 else None)
    if n is None:
        raise ValueError("every per-layer argument is a scalar: pass n_layers= to say how many "
                         "layers there are")
    fwd, bwd, grads = (np.broadcast_to(a, (n,)).tolist() for a in (fwd, bwd, grads))
    p = _validate.integer("gpus", gpus, low=1, high=1_000_000)
    bw = _link(link_bandwidth)
    _validate.flag("overlap", overlap)
    f = _validate.real("comm_sm_fraction", comm_sm_fraction, low=0.0, high=0.95)
    alpha = _nonneg("latency_us", latency_us)
    cap = None if bucket_bytes is None else _validate.positive("bucket_bytes", bucket_bytes)

    groups = gradient_buckets(grads, cap)
    last_of = {g[-1]: i for i, g in enumerate(groups)}
    durations = [_ring_seconds(sum(grads[i] for i in g), p, bw, alpha * 1e-6) * 1e3
                 for g in groups]

    seg: list[Segment] = []
    t = 0.0
    for i in range(n):
        seg.append(Segment("compute", t, t + fwd[i], f"forward {i}", "forward"))
        t += fwd[i]
    intervals: list[tuple[float, float]] = []
    ready = [0.0] * len(groups)
    comm_free = 0.0
    for layer in range(n - 1, -1, -1):
        end = _finish(t, bwd[layer], intervals, f if overlap else 0.0)
        seg.append(Segment("compute", t, end, f"backward {layer}", "backward"))
        t = end
        if layer in last_of:
            k = last_of[layer]
            ready[k] = t
            if overlap:
                start = max(t, comm_free)
                comm_free = start + durations[k]
                intervals.append((start, comm_free))
    compute_end = t
    if not overlap:
        comm_free = t
        for k in range(len(groups)):
            intervals.append((comm_free, comm_free + durations[k]))
            comm_free += durations[k]
    buckets = tuple(Bucket(tuple(g), float(sum(grads[i] for i in g)), ready[k], *intervals[k])
                    for k, g in enumerate(groups))
    for b in buckets:
        if b.end_ms > b.start_ms:
            seg.append(Segment("comm", b.start_ms, b.end_ms, b.label, "comm"))
    step = max(compute_end, comm_free)
    return StepRun(n, p, bw, overlap, f, buckets, math.fsum(fwd) + math.fsum(bwd), compute_end,
                   float(sum(durations)), step, tuple(seg))
