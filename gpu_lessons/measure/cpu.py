"""Measure this CPU with NumPy: memory bandwidth, matrix-multiply FLOP/s, a roofline.

No GPU needed: every learner can put a measured point of their own machine next to the
model's numbers.  What is measured, and how it is counted:

* **copy** ``b[:] = a`` (``np.copyto``): 2 arrays per run (read ``a``, write ``b``);
* **triad** ``a = b + s*c``: NumPy has no fused triad, so it runs as two passes
  (``a = s*c``, then ``a += b``) that read or write 5 arrays; the bandwidth counts those 5
  (STREAM's one-pass triad would move 3, McCalpin 1995);
* **GEMM** ``A @ B`` (BLAS, all cores): ``2·n³`` FLOPs (a multiply-add is 2 FLOPs) over a
  minimum traffic of ``3·n²`` elements (read A and B, write C once);
* the **cache staircase**: copy bandwidth against working-set size; it steps down as the
  working set outgrows L1, L2 and the last-level cache (Hennessy & Patterson, *Computer
  Architecture*, 6th ed., §2.6 and Fig. 2.39's memory-mountain style of plot).

Elementwise NumPy runs on one core; BLAS uses all of them.  So the triad bandwidth is one
core's, which is below what all cores together draw from memory on most machines.

Arrays are filled with data before timing (never fresh ``np.zeros``: untouched zero pages
map to one shared page and read from cache), and every size is capped by the memory this
machine has free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _validate
from .._format import Readout, Row, binary_bytes, intensity
from .timing import Bandwidth, FlopRate, Progress, time_host

_MiB = 2**20
#: Smallest and largest default array for bandwidth runs, bytes per array.
DEFAULT_MIN_ARRAY = 64 * _MiB
DEFAULT_MAX_ARRAY = 256 * _MiB


def cpu_label() -> str:
    from ..env import cpu_name

    return f"CPU ({cpu_name()})"


def cache_sizes() -> dict[str, int]:
    """Data-cache sizes of CPU 0 in bytes, e.g. ``{'L1d': 49152, 'L2': 2097152, 'L3': ...}``.

    Read from Linux's ``/sys/devices/system/cpu/cpu0/cache``; empty where that is missing.
    A virtual machine may report the host's whole last-level cache, shared with others.
    """
    found = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        digits = size.rstrip("KMG")
        if digits.isdigit():
            found[f"L{level}" + ("d" if kind == "Data" else "")] = int(digits) * scale
    return found


def available_memory() -> int | None:
    """Free physical memory in bytes (``sysconf``), or ``None`` where it cannot be read."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_array_bytes() -> int:
    """Bytes per array for bandwidth runs: 4x the largest cache, within 64..256 MiB.

    Four times the last-level cache keeps almost every access a miss.  The 256 MiB cap keeps
    a run to a second or two; on machines whose reported last-level cache is larger than
    that (virtual machines often report the whole host's), the result says so.
    """
    largest = max(cache_sizes().values(), default=0)
    return int(min(max(4 * largest, DEFAULT_MIN_ARRAY), DEFAULT_MAX_ARRAY))


def _fit_memory(array_bytes: int, arrays: int) -> int:
    free = available_memory()
    if free is not None and arrays * array_bytes > free // 4:
        array_bytes = max(free // (4 * arrays), _MiB)
    return int(array_bytes)


def _filled(n: int, value: float, dtype=np.float64) -> np.ndarray:
    a = np.empty(n, dtype=dtype)
    a.fill(value)  # touch every page now, not inside the timed region
    return a


def _cache_note(array_bytes: int) -> str:
    largest = max(cache_sizes().values(), default=0)
    if largest and array_bytes < 2 * largest:
        return (f"arrays ({binary_bytes(array_bytes)}) are not much larger than the reported "
                f"last-level cache ({binary_bytes(largest)}): part of the traffic may hit cache")
    return ""


def cpu_bandwidth(kind: str = "copy", *, array_bytes: int | None = None, repeats: int = 10,
                  budget_s: float = 2.0) -> Bandwidth:
    """Memory bandwidth of this CPU with NumPy, in GB/s (see the module docstring).

    ``kind`` is ``"copy"`` or ``"triad"``; ``array_bytes`` is the size of each float64 array
    (default :func:`default_array_bytes`, capped at a quarter of free memory).
    """
    _validate.choice("kind", kind, ("copy", "triad"))
    arrays = 2 if kind == "copy" else 3
    if array_bytes is None:
        array_bytes = default_array_bytes()
    array_bytes = _validate.integer("array_bytes", array_bytes, low=4096, high=2**34)
    array_bytes = _fit_memory(array_bytes, arrays)
    n = array_bytes // 8
    a, b = _filled(n, 1.0), _filled(n, 2.0)
    if kind == "copy":
        def run():
            np.copyto(b, a)
        moved, note = 2 * n * 8, ""
    else:
        c, s = _filled(n, 0.5), 3.0

        def run():
            np.multiply(c, s, out=a)
            np.add(a, b, out=a)
        moved = 5 * n * 8
        note = "NumPy triad = 2 passes, 5 arrays counted"
    timing = time_host(run, warmup=1, repeats=repeats, budget_s=budget_s)
    note = "; ".join(x for x in (note, _cache_note(n * 8)) if x)
    return Bandwidth(cpu_label(), kind, moved, timing, array_bytes=n * 8, note=note)


def cpu_gemm(n: int = 2048, *, dtype: str = "float32", repeats: int = 5,
             budget_s: float = 2.0) -> FlopRate:
    """Matrix-multiply rate of NumPy's BLAS on this CPU: ``2·n³`` FLOPs per ``A @ B``."""
    n = _validate.integer("n", n, low=16, high=16384)
    _validate.choice("dtype", dtype, ("float32", "float64"))
    size = np.dtype(dtype).itemsize
    if 3 * n * n * size > (available_memory() or 2**62) // 4:
        raise ValueError(f"n={n}: three {n}x{n} {dtype} matrices need "
                         f"{binary_bytes(3 * n * n * size)}, more than a quarter of free memory")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    out = np.empty((n, n), dtype=dtype)
    timing = time_host(lambda: np.matmul(a, b, out=out), warmup=1, repeats=repeats,
                       budget_s=budget_s)
    return FlopRate(cpu_label(), f"GEMM {n}x{n}x{n} {dtype}", 2.0 * n**3, 3.0 * n * n * size,
                    timing)


@dataclass(frozen=True, repr=False)
class RooflinePoints(Readout):
    """This CPU's measured roofs and points, ready for a roofline plot.

    ``peak_flops`` (FLOP/s) is the measured GEMM rate, a practical compute roof (the true
    peak is higher); ``bandwidth`` (bytes/s) the measured triad bandwidth.  ``points`` are
    ``(name, intensity FLOP/byte, FLOP/s)``.  Pass the two roofs to the roofline model as
    explicit numbers to draw the lines.
    """

    device: str
    peak_flops: float
    bandwidth: float
    points: tuple[tuple[str, float, float], ...]

    @property
    def ridge_point(self) -> float:
        """I_max = peak / bandwidth, FLOP/byte."""
        return self.peak_flops / self.bandwidth

    @property
    def names(self) -> list[str]:
        return [p[0] for p in self.points]

    @property
    def intensity(self) -> np.ndarray:
        return np.array([p[1] for p in self.points])

    @property
    def flops_per_s(self) -> np.ndarray:
        return np.array([p[2] for p in self.points])

    def readout_title(self) -> str:
        return f"{self.device}: measured roofline"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("roof: compute (GEMM)", self.peak_flops, "FLOP/s"),
                Row("roof: memory (triad)", self.bandwidth, "B/s"),
                Row("ridge point", self.ridge_point, "FLOP/byte"),
                *(Row(f"{n} at {intensity(i)}", f, "FLOP/s") for n, i, f in self.points))


def cpu_roofline(*, array_bytes: int | None = None, n: int = 2048,
                 budget_s: float = 2.0, progress: bool = True) -> RooflinePoints:
    """Measure the triad and a float32 GEMM and return them as roofline roofs and points.

    The triad does 2 FLOPs per element (a multiply and an add) over the bytes it moved, so
    its intensity is 2 / (5 x 8) = 0.05 FLOP/byte (NumPy's two passes, see above).
    ``progress=False`` keeps the text progress bar out of a notebook cell's output.
    """
    with Progress(2, "CPU roofline", enabled=progress) as bar:
        triad = cpu_bandwidth("triad", array_bytes=array_bytes, budget_s=budget_s)
        bar.update(1, "triad")
        gemm = cpu_gemm(n, budget_s=budget_s)
        bar.update(1, "GEMM")
    points = (("triad (NumPy)", *triad.roofline_point(2, 8)),
              (gemm.name, gemm.intensity, gemm.flops_per_s))
    return RooflinePoints(cpu_label(), gemm.flops_per_s, triad.bytes_per_s, points)


@dataclass(frozen=True, repr=False)
class Staircase(Readout):
    """Copy bandwidth against working-set size: steps show the cache levels.

    ``working_set`` in bytes (both arrays of the copy), ``gbps`` the copy bandwidth there,
    ``caches`` the reported cache sizes (bytes) to draw as vertical lines.
    """

    device: str
    working_set: tuple[int, ...]
    gbps: tuple[float, ...]
    caches: dict

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(working set bytes, GB/s)`` as NumPy arrays, ready to plot."""
        return np.array(self.working_set, dtype=float), np.array(self.gbps)

    def readout_title(self) -> str:
        return f"{self.device}: copy bandwidth by working set"

    def readout_rows(self) -> tuple[Row, ...]:
        return (*(Row(f"working set {binary_bytes(s)}", g * 1e9, "B/s")
                  for s, g in zip(self.working_set, self.gbps, strict=True)),
                *(Row(f"{k} cache", v, "B") for k, v in self.caches.items()))


def default_staircase_sizes() -> list[int]:
    """Working sets from 16 KiB to 4x the largest cache (at most 256 MiB), 2 per octave."""
    top = min(max(4 * max(cache_sizes().values(), default=0), 64 * _MiB), DEFAULT_MAX_ARRAY)
    sizes, s = [], 16 * 2**10
    while s <= top:
        sizes += [s, int(s * 1.5)]
        s *= 2
    return [x for x in sizes if x <= top]


def cache_staircase(sizes=None, *, budget_s: float = 2.0, progress: bool = True) -> Staircase:
    """Copy bandwidth at each working-set size (bytes, both arrays together).

    Each size gets an equal share of ``budget_s``; small copies are repeated inside one timed
    chunk so the clock's own cost does not show.  The result is noisy on a busy or virtual
    machine: read the steps, not the third digit.
    """
    sizes = default_staircase_sizes() if sizes is None else list(sizes)
    if not sizes:
        raise ValueError("sizes must hold at least one working-set size in bytes")
    sizes = [_validate.integer("sizes[i]", s, low=64, high=2**33) for s in sizes]
    budget_s = _validate.positive("budget_s", budget_s)
    share = budget_s / len(sizes)
    out = []
    bar = Progress(len(sizes), "cache staircase", enabled=progress)
    with bar:
        for size in sizes:
            n = max(size // 16, 1)  # two float64 arrays
            a, b = _filled(n, 1.0), _filled(n, 2.0)
            # aim for ~1 ms per timed chunk: ~10 GB/s is a safe floor for a copy
            inner = int(min(max(1e-3 * 10e9 / (16 * n), 1), 100_000))
            timing = time_host(lambda a=a, b=b: np.copyto(b, a), warmup=1, repeats=7,
                               budget_s=share, inner=inner)
            out.append(16 * n / timing.median / 1e9)
            bar.update(1, binary_bytes(16 * n))
    return Staircase(cpu_label(), tuple(16 * max(s // 16, 1) for s in sizes), tuple(out),
                     cache_sizes())
