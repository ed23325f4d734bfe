"""The overlap measurement's record types: what one run measures and each point it measured.

Pure data, read from the JSON record that :mod:`gpu_lessons.measure.overlap` writes: the run's
:class:`OverlapConfig`, an all-reduce size (:class:`AllReducePoint`), a bucket size of the
overlapped step (:class:`OverlapPoint`) and the contention phase (:class:`Contention`), each
the median over repeats of the slowest rank's time.  The whole measurement, set beside the
model, is :class:`gpu_lessons.overlap.OverlapMeasurement`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import asdict, dataclass

from . import _validate
from ._format import Readout, Row, binary_bytes

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


def median_of(values) -> float:
    """The median of a non-empty sequence of numbers."""
    if len(values) == 0:
        raise ValueError("values must not be empty")
    return statistics.median(float(v) for v in values)



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


@dataclass(frozen=True, repr=False)
class AllReducePoint(Readout):
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

    def readout_title(self) -> str:
        return f"All-reduce of {binary_bytes(self.nbytes)} on {self.gpus} GPUs"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("time", self.time_us * 1e-6, "s"),
                Row("algbw", self.algbw_gbs * 1e9, "B/s"),
                Row("busbw", self.busbw_gbs * 1e9, "B/s"))


@dataclass(frozen=True, repr=False)
class OverlapPoint(Readout):
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

    def readout_title(self) -> str:
        return f"Buckets of {binary_bytes(self.bucket_bytes)}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("buckets", self.n_buckets),
                Row("step", self.total_us * 1e-6, "s"),
                Row("exposed", self.exposed_us * 1e-6, "s"),
                Row("compute slowed", self.slowdown_us * 1e-6, "s"),
                Row("tail", self.tail_us * 1e-6, "s"))


@dataclass(frozen=True, repr=False)
class Contention(Readout):
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

    def readout_title(self) -> str:
        return f"Contention beside {self.count} all-reduces of {binary_bytes(self.allreduce_bytes)}"

    def readout_rows(self) -> tuple[Row, ...]:
        under = self.allreduce_under_us
        return (Row("compute alone", self.compute_alone_us * 1e-6, "s"),
                Row("compute beside them", self.compute_us * 1e-6, "s"),
                Row("compute slowed by", self.compute_slowdown, "%"),
                Row("comm_sm_fraction", self.comm_sm_fraction),
                Row("all-reduce alone", self.allreduce_alone_us * 1e-6, "s"),
                Row("all-reduce beside compute", "not observed" if under is None else under * 1e-6,
                    "s"),
                Row("all-reduce slowed by", "not observed" if under is None else
                    self.comm_slowdown, "%"))


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
