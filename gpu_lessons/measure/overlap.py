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
record keeps every rank's samples.  :mod:`gpu_lessons.measure.overlap_model` sets the model's
prediction beside each point.

On one GPU the run is a **smoke test** of the code path: an all-reduce over one rank moves
nothing between GPUs, so its numbers are not a measurement of communication and the record
says so (``smoke_test``).  PyTorch is imported only inside the run (and its processes), never
when this module is imported; results load, compare and plot without it::

    from gpu_lessons.measure import on_gpus
    from gpu_lessons.measure.overlap import measure_overlap, load_overlap
    m = on_gpus(2, measure_overlap)           # fewer than 2 GPUs: one line, None
    m.compare()                               # the model beside every bucket size
    m.save("overlap.json"); load_overlap("overlap.json")

A record is data: :func:`load_overlap` parses JSON and checks every field it uses (a damaged
or foreign file raises ``ValueError`` saying what is wrong); nothing in it is executed.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import _validate
from .._format import binary_bytes, html_table, percent
from .timing import median_of

KiB, MiB, GiB = 2**10, 2**20, 2**30

#: Version of the record's layout (``"schema"`` in the JSON).
SCHEMA = 1
DTYPES = ("bfloat16", "float16", "float32")
BACKENDS = ("nccl", "gloo")


def _sizes(name: str, values, *, low: int = 4, high: int = 16 * GiB) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of byte counts, got {values!r}")
    out = tuple(_validate.integer(f"{name}[i]", v, low=low, high=high) for v in values)
    if not out:
        raise ValueError(f"{name} must hold at least one size, got none")
    for v in out:
        if v % 4:
            raise ValueError(f"{name} must be multiples of 4 bytes (FP32 gradients), got {v}")
    if list(out) != sorted(set(out)):
        raise ValueError(f"{name} must be increasing without repeats, got {list(out)}")
    return out


@dataclass(frozen=True)
class OverlapConfig:
    """What one run measures.  Sizes in bytes; gradients are FP32 (4 bytes per value).

    Defaults (about a minute on two H200s): 32 GEMMs of 4096³ in BF16 (≈ 0.18 ms each at
    750 TFLOP/s) with 32 MiB of gradients each (1 GiB in all), buckets from PyTorch DDP's
    default 25 MiB up to one bucket for everything, all-reduces from 64 KiB to 1 GiB.
    """

    gemm_n: int = 4096
    dtype: str = "bfloat16"
    n_layers: int = 32
    grad_bytes_per_layer: int = 32 * MiB
    bucket_bytes: tuple[int, ...] = (25 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB,
                                     1 * GiB)
    allreduce_bytes: tuple[int, ...] = tuple(64 * KiB * 4**k for k in range(8))  # .. 1 GiB
    contention_bytes: int = 64 * MiB
    repeats: int = 10
    warmup: int = 3
    iters: int = 10

    def __post_init__(self):
        put = object.__setattr__
        put(self, "gemm_n", _validate.integer("gemm_n", self.gemm_n, low=8, high=32768))
        _validate.choice("dtype", self.dtype, DTYPES)
        put(self, "n_layers", _validate.integer("n_layers", self.n_layers, low=1, high=1024))
        put(self, "grad_bytes_per_layer", _sizes("grad_bytes_per_layer",
                                                 [self.grad_bytes_per_layer])[0])
        put(self, "bucket_bytes", _sizes("bucket_bytes", self.bucket_bytes))
        put(self, "allreduce_bytes", _sizes("allreduce_bytes", self.allreduce_bytes))
        put(self, "contention_bytes", _sizes("contention_bytes", [self.contention_bytes])[0])
        put(self, "repeats", _validate.integer("repeats", self.repeats, low=1, high=1000))
        put(self, "warmup", _validate.integer("warmup", self.warmup, low=0, high=100))
        put(self, "iters", _validate.integer("iters", self.iters, low=1, high=1000))
        if self.total_grad_bytes > 16 * GiB:
            raise ValueError(f"n_layers × grad_bytes_per_layer must be <= 16 GiB, got "
                             f"{binary_bytes(self.total_grad_bytes)}")

    @property
    def total_grad_bytes(self) -> int:
        return self.n_layers * self.grad_bytes_per_layer

    @property
    def gemm_flops(self) -> float:
        """FLOPs of one GEMM: 2·n³ (a multiply-add is 2 FLOPs)."""
        return 2.0 * self.gemm_n**3

    def to_raw(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_raw(cls, raw) -> OverlapConfig:
        if not isinstance(raw, dict):
            raise TypeError(f"config must be a dict, got {type(raw).__name__}")
        known = set(cls.__dataclass_fields__)
        extra = set(raw) - known
        if extra:
            raise ValueError(f"config has unknown keys {sorted(extra)}; allowed: {sorted(known)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})

    @classmethod
    def cpu_test(cls) -> OverlapConfig:
        """A tiny run for the gloo path on a CPU (tests only: its numbers mean nothing)."""
        return cls(gemm_n=96, dtype="float32", n_layers=6, grad_bytes_per_layer=64 * KiB,
                   bucket_bytes=(64 * KiB, 128 * KiB, 384 * KiB),
                   allreduce_bytes=(4 * KiB, 64 * KiB, 256 * KiB), contention_bytes=64 * KiB,
                   repeats=3, warmup=1, iters=2)

    @classmethod
    def quick(cls) -> OverlapConfig:
        """The default sizes with fewer repeats: a fast check that everything runs."""
        return cls(repeats=3, warmup=1, iters=3)


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


# -- results ---------------------------------------------------------------------------------

def _need(raw, key: str, where: str = "record"):
    if not isinstance(raw, dict) or key not in raw:
        raise ValueError(f"not an overlap record: {where} has no {key!r}")
    return raw[key]


def _samples(values, where: str) -> list[float]:
    if not isinstance(values, list) or not values:
        raise ValueError(f"not an overlap record: {where} must be a non-empty list of seconds")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"not an overlap record: {where} holds {v!r}, not a positive "
                             "number of seconds")
        out.append(float(v))
    return out


def _slowest(per_rank: list[list[float]], where: str) -> float:
    """Median over repeats of the slowest rank's time, in µs.  Repeat ``r`` of every rank
    started together (a GPU-side sync before each), so the max over ranks is that repeat's
    time; the median ignores a stray slow repeat."""
    runs = [_samples(s, where) for s in per_rank]
    n = min(len(r) for r in runs)
    return median_of([max(r[i] for r in runs) for i in range(n)]) * 1e6


@dataclass(frozen=True)
class AllReducePoint:
    """One all-reduce size: median time per operation (slowest rank), µs; bandwidths in GB/s
    (decimal, as nccl-tests prints them)."""

    nbytes: int
    gpus: int
    time_us: float

    @property
    def algbw_gbs(self) -> float:
        """Algorithm bandwidth: bytes / time."""
        return self.nbytes / (self.time_us * 1e-6) / 1e9

    @property
    def busbw_gbs(self) -> float:
        """Bus bandwidth as nccl-tests reports it for all-reduce: ``algbw × 2(p−1)/p`` (0 on one
        GPU, where nothing crosses a link)."""
        return self.algbw_gbs * 2 * (self.gpus - 1) / self.gpus

    def __repr__(self) -> str:
        return (f"AllReducePoint({binary_bytes(self.nbytes)}: {self.time_us:,.1f} µs, algbw "
                f"{self.algbw_gbs:,.1f} GB/s, busbw {self.busbw_gbs:,.1f} GB/s)")


@dataclass(frozen=True)
class OverlapPoint:
    """One bucket size of phase (c), times in µs (median of the slowest rank).

    ``exposed_us = total − compute alone``: what communication added to the step.  It splits
    into ``slowdown_us`` (the compute stream itself ran longer, sharing the GPU with NCCL)
    and ``tail_us`` (communication still running after the compute stream finished).
    """

    bucket_bytes: int
    buckets: tuple[tuple[int, ...], ...]
    total_us: float
    compute_us: float
    compute_alone_us: float

    @property
    def n_buckets(self) -> int:
        return len(self.buckets)

    @property
    def exposed_us(self) -> float:
        return self.total_us - self.compute_alone_us

    @property
    def slowdown_us(self) -> float:
        return self.compute_us - self.compute_alone_us

    @property
    def tail_us(self) -> float:
        return self.total_us - self.compute_us

    def __repr__(self) -> str:
        return (f"OverlapPoint(buckets of {binary_bytes(self.bucket_bytes)} → {self.n_buckets}: "
                f"step {self.total_us:,.1f} µs, exposed {self.exposed_us:,.1f} µs = compute "
                f"slowed {self.slowdown_us:,.1f} + tail {self.tail_us:,.1f} µs)")


@dataclass(frozen=True)
class Contention:
    """Phase (d): the GEMM chain while ``count`` all-reduces of ``allreduce_bytes`` ran beside it
    from start to finish.  Times in µs.  ``allreduce_under_us`` is the median time per
    all-reduce among those that ran wholly while the GEMMs ran (``None`` if none did).  The
    GEMMs are timed from when the host queued the first of them: the all-reduces were queued
    first, and the compute stream's wait for the host is not a slowdown."""

    allreduce_bytes: int
    count: int
    compute_alone_us: float
    compute_us: float
    allreduce_alone_us: float
    allreduce_under_us: float | None

    @property
    def compute_slowdown(self) -> float:
        """Extra compute time under communication, as a fraction: ``under / alone − 1``."""
        return self.compute_us / self.compute_alone_us - 1

    @property
    def comm_sm_fraction(self) -> float:
        """The model's ``comm_sm_fraction``: compute under communication runs at ``1 − f`` of its
        speed, so ``f = 1 − alone / under`` (clamped to 0..0.95, the model's range)."""
        return min(0.95, max(0.0, 1 - self.compute_alone_us / self.compute_us))

    @property
    def comm_slowdown(self) -> float | None:
        """Extra all-reduce time under compute, as a fraction (``None`` if not observed)."""
        if self.allreduce_under_us is None:
            return None
        return self.allreduce_under_us / self.allreduce_alone_us - 1

    def __repr__(self) -> str:
        comm = ("not observed" if self.comm_slowdown is None else
                f"{self.allreduce_alone_us:,.1f} → {self.allreduce_under_us:,.1f} µs per "
                f"all-reduce ({percent(self.comm_slowdown, signed=True)})")
        return (f"Contention(compute {self.compute_alone_us:,.1f} → {self.compute_us:,.1f} µs "
                f"({percent(self.compute_slowdown, signed=True)}, "
                f"comm_sm_fraction {self.comm_sm_fraction:.3f}) "
                f"beside {self.count} all-reduces of {binary_bytes(self.allreduce_bytes)}; "
                f"all-reduce {comm})")


def _comm_under(ends: list[float], begin_s: float, end_s: float) -> float | None:
    """Median duration of the back-to-back all-reduces that ran wholly while the GEMMs ran
    (from ``begin_s`` to ``end_s``; an all-reduce runs from the previous one's end to its own)."""
    done = [b - a for a, b in itertools.pairwise(ends) if a >= begin_s and b <= end_s]
    return median_of(done) if done else None


def _contention(ranks: list[dict], compute_alone_us: float) -> Contention:
    c0 = _need(ranks[0], "contention", "rank 0")
    compute = _slowest([_need(r["contention"], "compute_samples", "contention")
                        for r in ranks], "contention compute_samples")
    alone = _slowest([_need(r["contention"], "allreduce_alone_samples", "contention")
                      for r in ranks], "contention allreduce_alone_samples")
    per_repeat = []
    for i in range(min(len(r["contention"]["comm_end_samples"]) for r in ranks)):
        vals = []
        for r in ranks:
            c = r["contention"]
            begin = float(c["compute_start_samples"][i])
            vals.append(_comm_under([float(e) for e in c["comm_end_samples"][i]], begin,
                                    begin + float(c["compute_samples"][i])))
        if all(v is not None for v in vals):
            per_repeat.append(max(vals))
    under = median_of(per_repeat) * 1e6 if per_repeat else None
    return Contention(int(_need(c0, "allreduce_bytes", "contention")),
                      int(_need(c0, "count", "contention")), compute_alone_us, compute, alone,
                      under)


@dataclass(frozen=True, repr=False)
class OverlapMeasurement:
    """Everything one run measured, in µs and GB/s (module docstring for the phases).

    ``smoke_test``: one GPU, so the all-reduces moved nothing between GPUs: a check of the code
    path, not a measurement of communication.  ``synthetic``: made up for tests, never a
    measurement.  ``raw`` is the record it was built from (every rank's samples, seconds).
    """

    world_size: int
    backend: str
    gpu_names: tuple[str, ...]
    smoke_test: bool
    synthetic: bool
    config: OverlapConfig
    compute_us: float
    allreduce: tuple[AllReducePoint, ...]
    points: tuple[OverlapPoint, ...]
    contention: Contention
    meta: dict = field(default_factory=dict, compare=False)
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def layer_us(self) -> float:
        """Compute per layer (one GEMM), µs."""
        return self.compute_us / self.config.n_layers

    @property
    def gemm_tflops(self) -> float:
        """Rate of the GEMM chain alone, TFLOP/s (2·n³ FLOPs per GEMM)."""
        return self.config.gemm_flops / (self.layer_us * 1e-6) / 1e12

    @property
    def label(self) -> str:
        names = sorted(set(self.gpu_names))
        what = names[0] if len(names) == 1 else " + ".join(names)
        tags = [t for t, on in (("SYNTHETIC test fixture, not a measurement", self.synthetic),
                                ("smoke test (one GPU: no communication measured)",
                                 self.smoke_test)) if on]
        return f"{self.world_size} × {what} ({self.backend})" + "".join(f" — {t}" for t in tags)

    def compare(self, **kwargs):
        """The overlap model's prediction beside every point
        (:func:`gpu_lessons.measure.overlap_model.compare_overlap`)."""
        from .overlap_model import compare_overlap

        return compare_overlap(self, **kwargs)

    def to_raw(self) -> dict:
        return self.raw

    def save(self, path) -> None:
        """Write the raw record as JSON (what :func:`load_overlap` reads)."""
        Path(path).write_text(json.dumps(self.raw, indent=1) + "\n")

    def to_dict(self) -> dict:
        """The summary, JSON-ready, with the unit in every key."""
        return {"label": self.label, "world_size": self.world_size, "backend": self.backend,
                "gpu_names": list(self.gpu_names), "smoke_test": self.smoke_test,
                "synthetic": self.synthetic, "compute_us": self.compute_us,
                "layer_us": self.layer_us, "gemm_tflops": self.gemm_tflops,
                "allreduce": [{"bytes": p.nbytes, "time_us": p.time_us,
                               "algbw_gbs": p.algbw_gbs, "busbw_gbs": p.busbw_gbs}
                              for p in self.allreduce],
                "overlap": [{"bucket_bytes": p.bucket_bytes, "n_buckets": p.n_buckets,
                             "total_us": p.total_us, "exposed_us": p.exposed_us,
                             "slowdown_us": p.slowdown_us, "tail_us": p.tail_us}
                            for p in self.points],
                "contention": {"compute_slowdown": self.contention.compute_slowdown,
                               "comm_sm_fraction": self.contention.comm_sm_fraction,
                               "comm_slowdown": self.contention.comm_slowdown}}

    def _rows(self):
        for p in self.points:
            yield (binary_bytes(p.bucket_bytes), f"{p.n_buckets}", f"{p.total_us:,.1f} µs",
                   f"{p.exposed_us:,.1f} µs", f"{p.slowdown_us:,.1f} µs", f"{p.tail_us:,.1f} µs")

    _HEAD = ("bucket", "buckets", "step", "exposed (step − compute alone)",
             "compute slowed", "comm after compute")

    def __repr__(self) -> str:
        c = self.config
        big = self.allreduce[-1]
        lines = [f"Overlap on {self.label}",
                 f"compute alone: {c.n_layers} GEMMs of {c.gemm_n}³ {c.dtype} = "
                 f"{self.compute_us:,.1f} µs ({self.layer_us:,.1f} µs each, "
                 f"{self.gemm_tflops:,.1f} TFLOP/s)",
                 f"all-reduce of {binary_bytes(big.nbytes)}: {big.time_us:,.1f} µs, busbw "
                 f"{big.busbw_gbs:,.1f} GB/s",
                 repr(self.contention)]
        rows = [self._HEAD, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"Overlap measured on {self.label}: compute alone "
                          f"{self.compute_us:,.1f} µs, gradients "
                          f"{binary_bytes(self.config.total_grad_bytes)}", self._HEAD,
                          self._rows())


def overlap_from_raw(raw: dict) -> OverlapMeasurement:
    """Build the results from a raw record (pure arithmetic; what the tests replay).  A record
    that is not one raises ``ValueError`` saying what is wrong."""
    if not isinstance(raw, dict):
        raise TypeError(f"raw must be a dict (a parsed overlap record), got {type(raw).__name__}")
    try:
        return _from_raw(raw)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an overlap record: {type(exc).__name__} {exc}") from None


def _from_raw(raw: dict) -> OverlapMeasurement:
    if _need(raw, "schema") != SCHEMA:
        raise ValueError(f"overlap record schema {raw['schema']!r} is not {SCHEMA}")
    config = OverlapConfig.from_raw(_need(raw, "config"))
    world = _validate.integer("world_size", _need(raw, "world_size"), low=1)
    ranks = _need(raw, "by_rank")
    if not isinstance(ranks, list) or len(ranks) != world:
        raise ValueError(f"not an overlap record: by_rank must hold {world} ranks")
    compute = _slowest([_need(r, "compute_samples", "a rank") for r in ranks],
                       "compute_samples")
    allreduce = []
    for i, nbytes in enumerate(config.allreduce_bytes):
        per_rank = [_need(r, "allreduce", "a rank")[i] for r in ranks]
        if any(p.get("nbytes") != nbytes for p in per_rank):
            raise ValueError(f"not an overlap record: all-reduce {i} is not {nbytes} bytes")
        allreduce.append(AllReducePoint(nbytes, world, _slowest(
            [p["samples"] for p in per_rank], f"allreduce {nbytes} B samples")))
    points = []
    for i, cap in enumerate(config.bucket_bytes):
        per_rank = [_need(r, "overlap", "a rank")[i] for r in ranks]
        buckets = tuple(tuple(int(x) for x in g) for g in _need(per_rank[0], "buckets"))
        points.append(OverlapPoint(
            cap, buckets, _slowest([p["total_samples"] for p in per_rank], "overlap total"),
            _slowest([p["compute_samples"] for p in per_rank], "overlap compute"), compute))
    names = tuple(str(_need(r, "meta", "a rank").get("name", "?")) for r in ranks)
    return OverlapMeasurement(world, _validate.choice("backend", raw.get("backend"), BACKENDS),
                              names, bool(raw.get("smoke_test", world == 1)),
                              bool(raw.get("synthetic", False)), config, compute,
                              tuple(allreduce), tuple(points), _contention(ranks, compute),
                              dict(raw.get("meta", {})), raw)


def load_overlap(path) -> OverlapMeasurement:
    """Read a record written by ``tools/device/overlap_nccl.py`` (or :meth:`save`)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an overlap record (a JSON file), got {str(path)!r}: "
                         "no such file")
    try:
        raw = json.loads(p.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p.name} is not JSON: {exc}") from None
    return overlap_from_raw(raw)
