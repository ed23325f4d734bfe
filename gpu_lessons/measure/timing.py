"""Timing done right, and the rates made from timings.

Three rules every measurement in the course follows (CUDA C++ Best Practices Guide §8.1,
"Timing"; the same advice for CPUs in McCalpin's STREAM notes):

* **warm up** first, so one-off costs (page faults, JIT compilation, cuBLAS handle creation,
  clocks ramping up) stay out of the numbers;
* time the **device**, not the host: GPU work is asynchronous, so a GPU timing uses CUDA
  events recorded on the stream (``cudaEventElapsedTime``, resolution about 0.5 µs), or a host
  clock read only after a synchronize;
* **repeat** and report the **median**: one run is noise; the median ignores a stray slow run
  (another process, a clock change) where the mean would not.

Every loop here is bounded twice: a maximum number of repeats and a time budget in seconds,
so a cell can never hang on a slow machine.  Rates use decimal units, as datasheets do:
1 GB/s = 1e9 bytes/s, 1 TFLOP/s = 1e12 FLOP/s.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import _validate
from .._format import Readout, Row

#: The fewest timed runs a measurement keeps, even when the time budget has run out.
MIN_REPEATS = 3


# -- rates -----------------------------------------------------------------------------------

def gb_per_s(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s = bytes / seconds / 1e9 (decimal GB, as in datasheets)."""
    return _validate.real("nbytes", nbytes, low=0.0) / _validate.positive("seconds", seconds) / 1e9


def tflop_per_s(flops: float, seconds: float) -> float:
    """Throughput in TFLOP/s = FLOPs / seconds / 1e12 (a multiply-add counts as 2 FLOPs)."""
    return _validate.real("flops", flops, low=0.0) / _validate.positive("seconds", seconds) / 1e12


# -- a set of timed runs ---------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Timing(Readout):
    """Repeated timings of one operation, in seconds, after ``warmup`` untimed runs."""

    samples: tuple[float, ...]
    warmup: int = 0
    method: str = ""  # "CUDA events", "perf_counter", ...

    def __post_init__(self):
        if not isinstance(self.samples, tuple):
            object.__setattr__(self, "samples", tuple(self.samples))
        if not self.samples:
            raise ValueError("samples must hold at least one timing, got none")
        for s in self.samples:
            _validate.positive("samples[i]", s)
        _validate.integer("warmup", self.warmup, low=0)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def spread(self) -> float:
        """(max - min) / median: how far apart the runs were, as a fraction of the median."""
        return (self.max - self.min) / self.median

    @property
    def repeats(self) -> int:
        return len(self.samples)

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("median", self.median, "s"), Row("min", self.min, "s"),
                Row("max", self.max, "s"), Row("runs", self.repeats),
                Row("warm-up runs", self.warmup),
                *((Row("method", self.method),) if self.method else ()))

    def to_raw(self) -> dict:
        return {"samples": list(self.samples), "warmup": self.warmup, "method": self.method}

    @classmethod
    def from_raw(cls, raw) -> Timing:
        """Rebuild from ``to_raw()``'s dict, or from a bare list of seconds."""
        if isinstance(raw, dict):
            return cls(tuple(raw["samples"]), raw.get("warmup", 0), raw.get("method", ""))
        return cls(tuple(raw))


def _check_loop(warmup, repeats, budget_s):
    _validate.integer("warmup", warmup, low=0, high=1000)
    _validate.integer("repeats", repeats, low=1, high=100_000)
    _validate.positive("budget_s", budget_s)


def time_host(fn: Callable[[], object], *, warmup: int = 1, repeats: int = 10,
              budget_s: float = 2.0, inner: int = 1) -> Timing:
    """Time ``fn()`` with ``time.perf_counter``: for CPU work, or GPU work that syncs itself.

    ``inner`` calls are timed together and divided out (for operations so short that the
    clock's own cost would show).  Stops after ``repeats`` runs or once ``budget_s`` seconds
    have passed, whichever is first, but keeps at least :data:`MIN_REPEATS` runs.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    _check_loop(warmup, repeats, budget_s)
    inner = _validate.integer("inner", inner, low=1, high=10_000_000)
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append(max(time.perf_counter() - t0, 1e-9) / inner)
        if time.perf_counter() - start > budget_s and len(samples) >= min(MIN_REPEATS, repeats):
            break
    return Timing(tuple(samples), warmup, "perf_counter")


def time_cuda(fn: Callable[[], object], *, warmup: int = 2, repeats: int = 20,
              budget_s: float = 2.0, stream=None,
              while_running: Callable[[], object] | None = None) -> Timing:
    """Time GPU work ``fn()`` with CUDA events recorded on ``stream`` (default: current).

    Events are recorded on the GPU's own timeline around the work, so host-side launch cost
    and Python overhead before the work starts are not counted (CUDA C++ Best Practices
    Guide §8.1.2, "Using CUDA GPU Timers").  ``while_running()``, if given, is called after
    each timed run is queued and before waiting for it (to read the clock it runs at);
    it cannot stretch the timing.  Needs CuPy.
    """
    import cupy

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    _check_loop(warmup, repeats, budget_s)
    stream = stream or cupy.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    start_ev, end_ev = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats:
        start_ev.record(stream)
        fn()
        end_ev.record(stream)
        if while_running is not None:
            while_running()
        end_ev.synchronize()
        samples.append(max(cupy.cuda.get_elapsed_time(start_ev, end_ev) * 1e-3, 1e-9))
        if time.perf_counter() - start > budget_s and len(samples) >= min(MIN_REPEATS, repeats):
            break
    return Timing(tuple(samples), warmup, "CUDA events")


# -- progress --------------------------------------------------------------------------------

class Progress:
    """A one-line text progress bar for sweeps: ``strided copy [#######.....] 7/12``.

    Plain text with carriage returns, so it works in a terminal and in a notebook's output
    without widgets.  It stays silent until ``min_seconds`` have passed, so a sweep that ends
    quickly prints nothing; pass ``min_seconds=0`` to always draw it, ``enabled=False`` never.
    """

    def __init__(self, total: int, label: str, *, stream=None, min_seconds: float = 1.0,
                 width: int = 24, enabled: bool = True):
        self.total = _validate.integer("total", total, low=1)
        self.enabled = bool(enabled)
        self.label = str(label)
        self.width = _validate.integer("width", width, low=1, high=200)
        self.min_seconds = _validate.real("min_seconds", min_seconds, low=0.0)
        self.stream = stream if stream is not None else sys.stdout
        self.done = 0
        self.drawn = False
        self._start = time.perf_counter()

    def line(self, note: str = "") -> str:
        filled = round(self.width * self.done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        tail = f" {note}" if note else ""
        return f"{self.label} [{bar}] {self.done}/{self.total}{tail}"

    def update(self, n: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + _validate.integer("n", n, low=0))
        if self.enabled and time.perf_counter() - self._start >= self.min_seconds:
            # pad so a shorter line fully covers a longer one drawn before it
            self.stream.write("\r" + self.line(note).ljust(self.width + len(self.label) + 40))
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def median_of(values: Sequence[float]) -> float:
    """The median of a non-empty sequence of numbers."""
    if len(values) == 0:
        raise ValueError("values must not be empty")
    return statistics.median(float(v) for v in values)


# -- results a timing turns into -------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Bandwidth(Readout):
    """A measured bandwidth: ``bytes_moved`` per run over the median run time.

    ``bytes_moved`` counts each array read once and each array written once (the STREAM
    convention, McCalpin 1995); it leaves out extra traffic the hardware may add, such as a
    CPU reading a cache line before writing it (write-allocate), so the figure is what the
    program asked for, not every byte that crossed the bus.
    """

    device: str
    kind: str  # "copy", "triad", "host->device pinned", ...
    bytes_moved: int
    timing: Timing
    array_bytes: int = 0
    note: str = ""

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_moved / self.timing.median

    @property
    def gbps(self) -> float:
        return gb_per_s(self.bytes_moved, self.timing.median)

    def roofline_point(self, flops_per_element: float, element_bytes: int) -> tuple[float, float]:
        """``(intensity FLOP/byte, FLOP/s)`` of this run as a roofline point, for a kernel doing
        ``flops_per_element`` FLOPs per element of ``array_bytes`` (a triad: 2, one multiply-add).
        """
        _validate.positive("flops_per_element", flops_per_element)
        _validate.integer("element_bytes", element_bytes, low=1)
        if not self.array_bytes:
            raise ValueError("roofline_point needs array_bytes (the size of one array)")
        flops = flops_per_element * (self.array_bytes // element_bytes)
        return flops / self.bytes_moved, flops / self.timing.median

    def fraction_of(self, peak_bytes_per_s: float) -> float:
        """Achieved / ``peak_bytes_per_s`` (e.g. a catalog GPU's ``.bandwidth``)."""
        return self.bytes_per_s / _validate.positive("peak_bytes_per_s", peak_bytes_per_s)

    def readout_title(self) -> str:
        return f"{self.device}: {self.kind}"

    def readout_rows(self) -> tuple[Row, ...]:
        t = self.timing
        return (Row("bandwidth", self.bytes_per_s, "B/s"), Row("bytes per run", self.bytes_moved, "B"),
                Row("median time", t.median, "s"), Row("runs", t.repeats),
                Row("warm-up runs", t.warmup),
                *((Row("method", t.method),) if t.method else ()),
                *((Row("array size", self.array_bytes, "B"),) if self.array_bytes else ()),
                *((Row("note", self.note),) if self.note else ()))


@dataclass(frozen=True, repr=False)
class FlopRate(Readout):
    """A measured arithmetic rate: ``flops`` per run over the median run time.

    ``min_bytes`` is the least traffic the operation needs (each input read once, the output
    written once), so ``intensity = flops / min_bytes`` places the run on a roofline plot.
    ``conditions`` says how the GPU was when it ran (rested or busy, its SM clock);
    ``clock_peak_flops`` is the peak scaled to the clock it ran at, when that was read.
    """

    device: str
    name: str
    flops: float
    min_bytes: float
    timing: Timing
    peak_flops: float | None = None  # the reference peak in FLOP/s, if known
    conditions: str = ""
    clock_peak_flops: float | None = None

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.timing.median

    @property
    def tflops(self) -> float:
        return tflop_per_s(self.flops, self.timing.median)

    @property
    def gflops(self) -> float:
        return self.tflops * 1e3

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/byte (FLOPs over the minimum bytes moved)."""
        return self.flops / self.min_bytes

    @property
    def fraction_of_peak(self) -> float | None:
        return None if not self.peak_flops else self.flops_per_s / self.peak_flops

    @property
    def point(self) -> tuple[float, float]:
        """``(intensity FLOP/byte, FLOP/s)``: where this run sits on a roofline plot."""
        return self.intensity, self.flops_per_s

    @property
    def fraction_of_clock_peak(self) -> float | None:
        """The rate over the peak at the SM clock the run was read at (None if not read)."""
        return None if not self.clock_peak_flops else self.flops_per_s / self.clock_peak_flops

    def _at_clock(self) -> bool:
        """Whether the clock it ran at says something the rated peak does not."""
        return bool(self.clock_peak_flops) and not (
            self.peak_flops and abs(self.clock_peak_flops / self.peak_flops - 1) < 0.005)

    def readout_title(self) -> str:
        return f"{self.device}: {self.name}"

    def readout_rows(self) -> tuple[Row, ...]:
        rows = [Row("rate", self.flops_per_s, "FLOP/s"), Row("FLOPs per run", self.flops, "FLOP"),
                Row("median time", self.timing.median, "s"), Row("runs", self.timing.repeats),
                Row("intensity", self.intensity, "FLOP/byte")]
        if self.peak_flops:
            rows += [Row("of peak", self.fraction_of_peak, "%"),
                     Row("peak", self.peak_flops, "FLOP/s")]
        if self._at_clock():  # it ran at another clock than the peak assumes
            rows += [Row("of peak at its clock", self.fraction_of_clock_peak, "%"),
                     Row("peak at its clock", self.clock_peak_flops, "FLOP/s")]
        if self.conditions:
            rows.append(Row("conditions", self.conditions))
        return tuple(rows)
