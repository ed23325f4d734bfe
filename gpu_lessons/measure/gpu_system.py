"""System-level GPU measurements: the cost of a kernel launch (back to back, synced, in a CUDA
graph) and host<->device copy bandwidth from pageable and pinned memory.  The recorded H200
figures feed :mod:`gpu_lessons.system` through ``data/measured.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate
from .._format import Readout, Row, binary_bytes
from . import cuda_sources
from .gpu import GiB, MiB, compiled, cupy_module, device_name
from .timing import Bandwidth, Timing, time_host

# -- launch latency --------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class LaunchLatency(Readout):
    """Cost per launch of an empty kernel, in seconds, three ways.

    ``back_to_back``: n launches, one synchronize at the end (the CPU's launch cost);
    ``synced``: a synchronize after every launch (adds the GPU round trip);
    ``graph``: the same n launches captured once into a CUDA graph, replayed (per kernel).
    Launched from Python through CuPy, so the Python call is part of each figure.
    """

    device: str
    n_kernels: int
    back_to_back: Timing
    synced: Timing
    graph: Timing

    def as_dict(self) -> dict[str, float]:
        """Median seconds per kernel by method, for a bar chart."""
        return {"back-to-back": self.back_to_back.median, "sync after each": self.synced.median,
                "CUDA graph": self.graph.median}

    def readout_title(self) -> str:
        return f"{self.device}: launch cost per empty kernel ({self.n_kernels:,} launches)"

    def readout_rows(self) -> tuple[Row, ...]:
        return tuple(Row(k, v, "s") for k, v in self.as_dict().items())


def launch_from_raw(raw: dict) -> LaunchLatency:
    return LaunchLatency(raw["device"], int(raw["n_kernels"]),
                         Timing.from_raw(raw["back_to_back"]), Timing.from_raw(raw["synced"]),
                         Timing.from_raw(raw["graph"]))


def measure_launch_raw(n_kernels: int = 1000, *, repeats: int = 7,
                       budget_s: float = 2.0) -> dict:
    """Time ``n_kernels`` launches of ``empty_kernel`` back-to-back, synced, and as a graph."""
    n = _validate.integer("n_kernels", n_kernels, low=10, high=100_000)
    cp = cupy_module()
    k = compiled(cuda_sources.EMPTY_SOURCE, "empty_kernel")
    stream = cp.cuda.Stream(non_blocking=True)
    grid, block = (1,), (32,)

    def back_to_back():
        for _ in range(n):
            k(grid, block, ())
        stream.synchronize()

    def synced():
        for _ in range(n):
            k(grid, block, ())
            stream.synchronize()

    with stream:
        stream.begin_capture()
        for _ in range(n):
            k(grid, block, ())
        graph = stream.end_capture()

        def replay():
            graph.launch(stream)
            stream.synchronize()

        per = {}
        for key, fn in (("back_to_back", back_to_back), ("synced", synced), ("graph", replay)):
            t = time_host(fn, warmup=1, repeats=repeats, budget_s=budget_s)
            per[key] = Timing(tuple(s / n for s in t.samples), t.warmup, t.method).to_raw()
    return {"device": device_name(cp), "n_kernels": n, **per}


def launch_latency(n_kernels: int = 1000, **kw) -> LaunchLatency:
    """Launch cost per empty kernel: back-to-back, synced after each, and in a CUDA graph."""
    return launch_from_raw(measure_launch_raw(n_kernels, **kw))


# -- host <-> device copies ------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Transfers(Readout):
    """Host<->device copy bandwidth from pageable and pinned host memory."""

    device: str
    rows: tuple[Bandwidth, ...]

    def get(self, direction: str, memory: str) -> Bandwidth:
        """The row for ``direction`` ("host->device"/"device->host") and ``memory``."""
        for r in self.rows:
            if r.kind == f"{direction} {memory}":
                return r
        raise ValueError(f"no row for direction={direction!r}, memory={memory!r}; have "
                         + ", ".join(repr(r.kind) for r in self.rows))

    def readout_title(self) -> str:
        sizes = {r.bytes_moved for r in self.rows}
        each = f" of {binary_bytes(sizes.pop())}" if len(sizes) == 1 else ""
        return f"{self.device}: host<->device copies{each}"

    def readout_rows(self) -> tuple[Row, ...]:
        return tuple(Row(r.kind, r.bytes_per_s, "B/s") for r in self.rows)


def transfers_from_raw(raw: dict) -> Transfers:
    rows = tuple(Bandwidth(raw["device"], f"{r['direction']} {r['memory']}", int(raw["bytes"]),
                           Timing.from_raw(r["timing"]), int(raw["bytes"]))
                 for r in raw["rows"])
    return Transfers(raw["device"], rows)


def measure_transfers_raw(nbytes: int = 256 * MiB, *, repeats: int = 10,
                          budget_s: float = 2.0) -> dict:
    """Time host->device and device->host copies of ``nbytes`` from pageable and pinned memory."""
    nbytes = _validate.integer("nbytes", nbytes, low=4096, high=8 * GiB)
    cp = cupy_module()
    import cupyx

    pageable = np.empty(nbytes, dtype=np.uint8)
    pageable.fill(7)
    pinned = cupyx.empty_pinned((nbytes,), dtype=np.uint8)
    pinned.fill(7)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    stream = cp.cuda.get_current_stream()
    rows = []
    for memory, host in (("pageable", pageable), ("pinned", pinned)):
        def h2d(host=host):
            dev.set(host)
            stream.synchronize()

        def d2h(host=host):
            dev.get(out=host)
            stream.synchronize()
        for direction, fn in (("host->device", h2d), ("device->host", d2h)):
            t = time_host(fn, warmup=1, repeats=repeats, budget_s=budget_s)
            rows.append({"direction": direction, "memory": memory, "timing": t.to_raw()})
    ok = bool((cp.asnumpy(dev[:4096]) == 7).all())
    if not ok:
        raise RuntimeError("host<->device copy produced wrong bytes")
    return {"device": device_name(cp), "bytes": nbytes, "rows": rows}


def host_transfers(nbytes: int = 256 * MiB, **kw) -> Transfers:
    """Host<->device copy bandwidth, pageable vs pinned (``cupyx.empty_pinned``)."""
    return transfers_from_raw(measure_transfers_raw(nbytes, **kw))
