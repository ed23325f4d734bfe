"""Measure this machine: the CPU always (NumPy), an NVIDIA GPU when CuPy can reach one.

Every measurement returns a frozen result with units in its ``repr`` and data shaped for the
models' plots (points with intensity and FLOP/s, or arrays of stride and GB/s), so a view can
draw a measurement beside the model's prediction without recomputing anything.

In a notebook, GPU cells go through :func:`on_gpu`; without a GPU it prints one line and
returns ``None``, and the lesson carries on with the model's prediction::

    from gpu_lessons.measure import on_gpu, gpu_bandwidth, cpu_bandwidth
    cpu_bandwidth("triad")
    on_gpu(gpu_bandwidth, "copy")

CuPy is imported lazily: importing this package never needs it.

Cells that need several GPUs (communication between them) use PyTorch with NCCL instead, also
imported lazily, through :func:`on_gpus` (:mod:`.multigpu`); with fewer GPUs they print
"Needs 2 GPUs, found 1 — skipped; …".  :mod:`.overlap` measures communication/computation
overlap that way::

    from gpu_lessons.measure import on_gpus
    from gpu_lessons.measure.overlap import measure_overlap
    measured = on_gpus(2, measure_overlap)
"""

from ..memory import predicted_traffic  # memory-model arithmetic the sweeps use
from .cpu import (
    RooflinePoints,
    Staircase,
    cache_sizes,
    cache_staircase,
    cpu_bandwidth,
    cpu_gemm,
    cpu_roofline,
)
from .gpu import (
    GPUS_LINE,
    SKIP_LINE,
    DeviceReport,
    KernelResources,
    device_report,
    gpu_available,
    gpu_status,
    kernel_resources,
    on_gpu,
    skip_line,
)
from .gpu_compute import (
    KernelTiming,
    SimtTimings,
    gemm_flops,
    simt_timings,
    time_kernel,
)
from .gpu_memory import (
    AccessSweep,
    BankSweep,
    bank_sweep,
    gpu_bandwidth,
    gpu_size_sweep,
    offset_sweep,
    strided_sweep,
)
from .gpu_occupancy import (
    OccupancyCheck,
    runtime_occupancy,
)
from .gpu_system import (
    LaunchLatency,
    Transfers,
    host_transfers,
    launch_latency,
)
from .multigpu import on_gpus
from .timing import Bandwidth, FlopRate, Progress, Timing, time_cuda, time_host

__all__ = [
    "GPUS_LINE",
    "SKIP_LINE",
    "AccessSweep",
    "Bandwidth",
    "BankSweep",
    "DeviceReport",
    "FlopRate",
    "KernelResources",
    "KernelTiming",
    "LaunchLatency",
    "OccupancyCheck",
    "Progress",
    "RooflinePoints",
    "SimtTimings",
    "Staircase",
    "Timing",
    "Transfers",
    "bank_sweep",
    "cache_sizes",
    "cache_staircase",
    "cpu_bandwidth",
    "cpu_gemm",
    "cpu_roofline",
    "device_report",
    "gemm_flops",
    "gpu_available",
    "gpu_bandwidth",
    "gpu_size_sweep",
    "gpu_status",
    "host_transfers",
    "kernel_resources",
    "launch_latency",
    "offset_sweep",
    "on_gpu",
    "on_gpus",
    "predicted_traffic",
    "runtime_occupancy",
    "simt_timings",
    "skip_line",
    "strided_sweep",
    "time_cuda",
    "time_host",
    "time_kernel",
]
