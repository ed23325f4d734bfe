"""Communication/computation overlap measured on GPUs, to set beside the overlap model.

Notebook 08 models data-parallel training's gradient all-reduce, bucketed and overlapped
with the backward pass (:func:`gpu_lessons.system.training_step`).  This module measures the
same thing on real GPUs, one process per GPU over NCCL (:mod:`gpu_lessons.measure.multigpu`):

(a) **compute alone**: a chain of ``n_layers`` GEMMs of ``gemm_n``³ (the "backward pass");
(b) **all-reduce alone** for a sweep of sizes: time, algorithm bandwidth ``algbw = S / t`` and
    bus bandwidth ``busbw = algbw × 2(p−1)/p``, the figure nccl-tests reports for all-reduce
    (NVIDIA nccl-tests, ``doc/PERFORMANCE.md``: the factor makes busbw comparable to the
    hardware's link bandwidth whatever the number of GPUs);
(c) **both together**, for several bucket sizes: the gradients all-reduced in buckets on a
    second CUDA stream, each bucket launched when its last layer's GEMM is done (as PyTorch
    DDP does); ``exposed = total − compute alone``, split into the compute's own slowdown
    (``compute stream end − compute alone``) and the communication left after it;
(d) **contention**: the GEMMs while all-reduces run beside them the whole time: how much NCCL's
    kernels slow the compute (they run on SMs) and the compute slows NCCL.

Every phase: warm-up runs, CUDA events, a barrier and a GPU-side sync before each timed run,
the median over repeats of the slowest rank's time (a step ends when its last GPU does); the
record keeps every rank's samples.  :mod:`gpu_lessons.overlap` sets the model's
prediction beside each point.

On one GPU the run is a **smoke test** of the code path: an all-reduce over one rank moves
nothing between GPUs, so its numbers are not a measurement of communication and the record
says so (``smoke_test``).  PyTorch is imported only inside the run (and its processes), never
when this module is imported; results load, compare and plot without it::

    from gpu_lessons.measure import on_gpus
    from gpu_lessons.measure.overlap import measure_overlap
    from gpu_lessons.overlap import load_overlap
    m = on_gpus(2, measure_overlap)           # fewer than 2 GPUs: one line, None
    m.compare()                               # the model beside every bucket size
    m.save("overlap.json"); load_overlap("overlap.json")

A record is data: :func:`load_overlap` parses JSON and checks every field it uses (a damaged
or foreign file raises ``ValueError`` saying what is wrong); nothing in it is executed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path

from .. import _validate
from ..overlap import OverlapMeasurement, overlap_from_raw
from ..overlap_record import BACKENDS, SCHEMA, OverlapConfig

# -- running it ------------------------------------------------------------------------------

def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def host_meta(backend: str) -> dict:
    """Versions, GPUs, clocks and links of this host, read once by rank 0."""
    import datetime

    import torch

    meta = {"date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "python": platform.python_version(), "torch": torch.__version__,
            "host_cores": os.cpu_count(), "kernel": platform.release(),
            "env": {k: v for k, v in sorted(os.environ.items())
                    if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_", "CUDA_VISIBLE"))}}
    if backend == "nccl":
        nccl = torch.cuda.nccl.version()
        meta["nccl"] = ".".join(str(v) for v in nccl)
        meta["cuda_runtime"] = torch.version.cuda
        meta["nvidia_smi"] = _cmd(["nvidia-smi", "--query-gpu=index,name,pci.bus_id,"
                                   "driver_version,clocks.sm,clocks.max.sm,clocks.mem,"
                                   "power.limit,pstate,temperature.gpu", "--format=csv"])
        meta["driver"] = _cmd(["nvidia-smi", "--query-gpu=driver_version",
                               "--format=csv,noheader"]).splitlines()[:1]
        meta["topology"] = _cmd(["nvidia-smi", "topo", "-m"])
    return meta


def _worker(rank: int, world: int, backend: str, config_raw: dict, rendezvous: str,
            out_path: str, timeout_s: float) -> None:
    """One process of the run (module level, so spawned processes can import it)."""
    from . import multigpu, overlap_run

    multigpu.init_process_group(rank, world, backend, rendezvous, timeout_s)
    import torch.distributed as dist

    try:
        mine = overlap_run.measure_overlap_raw(OverlapConfig.from_raw(config_raw), backend)
        if rank == 0:
            record = {"schema": SCHEMA, "what": "communication/computation overlap",
                      "synthetic": False, "smoke_test": world == 1, "backend": backend,
                      "world_size": world, "config": config_raw, "meta": host_meta(backend),
                      "by_rank": mine["by_rank"]}
            tmp = Path(out_path).with_suffix(".part")
            tmp.write_text(json.dumps(record, indent=1))
            tmp.replace(out_path)
    finally:
        dist.destroy_process_group()


def run_overlap_raw(config: OverlapConfig | None = None, *, world_size: int | None = None,
                    backend: str = "nccl", timeout_s: float = 600.0,
                    in_process: bool = False) -> dict:
    """Run the measurement in ``world_size`` processes (default: every GPU PyTorch sees; 2 for
    gloo) and return the raw record (JSON-ready: every rank's samples, in seconds).

    ``backend="gloo"`` runs the same code on the CPU (for tests).  ``in_process=True`` runs
    a one-process group in this process instead of spawning (world size 1 only).
    """
    from . import multigpu

    config = OverlapConfig() if config is None else config
    if not isinstance(config, OverlapConfig):
        raise TypeError(f"config must be an OverlapConfig, got {type(config).__name__}")
    _validate.choice("backend", backend, BACKENDS)
    limit = _validate.positive("timeout_s", timeout_s)
    _validate.flag("in_process", in_process)
    multigpu.switch_off_multicast()
    if world_size is None:
        if backend == "gloo":
            world_size = 2
        else:
            import torch

            world_size = torch.cuda.device_count()
    world = _validate.integer("world_size", world_size, low=1, high=1024)
    if in_process and world != 1:
        raise ValueError(f"in_process runs one process: world_size must be 1, got {world}")
    with tempfile.TemporaryDirectory(prefix="gpu_lessons_overlap_") as tmp:
        rendezvous = f"file://{tmp}/rendezvous"
        out = os.path.join(tmp, "record.json")
        args = (world, backend, config.to_raw(), rendezvous, out, limit)
        # NCCL's own account of its set-up (channels, transports), into files of the run
        log = {} if backend != "nccl" or "NCCL_DEBUG" in os.environ else {
            "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT",
            "NCCL_DEBUG_FILE": os.path.join(tmp, "nccl.%h.%p.log")}
        with multigpu.environment(log):
            if in_process:
                _worker(0, *args)
            else:
                multigpu.spawn(_worker, world, args, timeout_s=limit)
        if not os.path.exists(out):
            raise multigpu.MultiGpuError("the run ended without writing its record")
        record = json.loads(Path(out).read_text())
        if log:
            texts = [p.read_text(errors="replace") for p in sorted(Path(tmp).glob("nccl.*.log"))]
            record["meta"]["nccl_init"] = nccl_init_summary(texts)
        return record


def nccl_init_summary(texts: list[str]) -> dict:
    """What NCCL said while setting up (``NCCL_DEBUG=INFO``, subsystem INIT): the most
    channels a collective may use (each runs one thread block, on one SM), the transports
    between GPUs (``P2P/CUMEM``: NVLink or PCIe peer to peer; ``SHM``: through host memory),
    and the lines those came from."""
    keep = [ln.strip() for t in texts for ln in t.splitlines()
            if re.search(r"coll channels| via |NVLS|NCCL version", ln)]
    channels = [int(m.group(1)) for ln in keep if (m := re.search(r"(\d+) coll channels", ln))]
    via = sorted({m.group(1) for ln in keep if (m := re.search(r" via (\S+)", ln))})
    return {"coll_channels": max(channels) if channels else None, "transports": via,
            "lines": keep[:80]}


def measure_overlap(config: OverlapConfig | None = None, *, world_size: int | None = None,
                    timeout_s: float = 600.0) -> OverlapMeasurement:
    """Measure (a) compute alone, (b) all-reduce alone, (c) bucketed overlap and (d) contention
    on every GPU of this machine (module docstring).  About a minute with the defaults.

    Call it through :func:`gpu_lessons.measure.on_gpus` in a notebook: with fewer than two
    GPUs that prints one line instead.  Needs PyTorch with NCCL.
    """
    if world_size is None:
        import torch

        world_size = torch.cuda.device_count()
    print(f"Measuring overlap on {world_size} GPUs, one process each over NCCL: about a minute "
          "…", flush=True)
    return overlap_from_raw(run_overlap_raw(config, world_size=world_size,
                                            timeout_s=timeout_s))
