"""The roofline model: the fastest a kernel can run, from its arithmetic intensity.

A platform has a compute roof ``π`` (peak FLOP/s) and a memory roof ``β`` (bytes/s).  A kernel
doing ``F`` FLOPs and moving ``B`` bytes has intensity ``I = F / B`` (FLOP/byte) and

* attainable performance ``P = min(π, β · I)`` (FLOP/s),
* ridge point ``I_max = π / β``: below it the kernel is memory-bound, at or above it
  compute-bound (the usual rule, "I ≥ I_max → compute bound"),
* time ``t = max(F / π, B / β)`` — the same statement in seconds, since ``F / t = P``.

Source: S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance
model for multicore architectures", Communications of the ACM 52(4), 2009.

A GPU has several roofs: one compute roof per precision (FP32 on the CUDA cores, TF32/FP16/
BF16/FP8 on the tensor cores, FP64) and one memory roof per level (DRAM, and L2 where the
catalog knows its bandwidth).  :func:`roofs` lists them with their sources, :func:`curves`
turns them into arrays a plot can draw without doing any arithmetic itself.

>>> r = Roofline.from_gpu("h100", "fp16")
>>> round(r.ridge_point)
295
>>> r.classify(1.0).bound
'memory-bound'
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from . import _validate
from . import hardware as _hw
from ._format import Readout, Row, si

#: Labels of the compute roofs, by the catalog's precision keys (see ``hardware.PRECISIONS``).
COMPUTE_LABELS = {
    "fp64": "FP64 (CUDA cores)",
    "fp64_tensor": "FP64 tensor",
    "fp32": "FP32 (CUDA cores)",
    "tf32": "TF32 tensor",
    "fp16": "FP16 tensor",
    "bf16": "BF16 tensor",
    "fp16_acc16": "FP16 tensor, FP16 accumulate",
    "fp8": "FP8 tensor",
}

#: Memory levels a roof can come from: "dram" (HBM or GDDR, the datasheet bandwidth) and "l2"
#: (L2 bytes per clock × boost clock, where the catalog has both).
MEMORIES = ("dram", "l2")

#: A roof's unit: FLOP/s for a compute roof, bytes/s for a memory roof.
_UNIT = {"compute": "FLOP/s", "memory": "B/s"}


# -- roofs from the catalog ------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Roof(Readout):
    """One roof: ``kind`` "compute" (``value`` in FLOP/s) or "memory" (``value`` in bytes/s)."""

    key: str
    label: str
    kind: str
    value: float
    source: str = field(default="", repr=False, compare=False)

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row(self.label, self.value, _UNIT[self.kind]),)


def compute_roofs(gpu) -> tuple[Roof, ...]:
    """The compute roofs of ``gpu`` (a name or a ``hardware.GPU``), one per precision the catalog
    lists, in ``hardware.PRECISIONS`` order.  Dense peaks only."""
    g = _hw.gpu(gpu)
    return tuple(Roof(p, COMPUTE_LABELS[p], "compute", g.peak_flops(p),
                      g.sources.get(f"peak_tflops.{p}", ""))
                 for p in _hw.PRECISIONS if p in g.peak_tflops)


def memory_roofs(gpu) -> tuple[Roof, ...]:
    """The memory roofs of ``gpu``: DRAM always, L2 where the catalog knows its bandwidth
    (``l2_bytes_per_clk × boost clock``, e.g. A100: 5120 B/clk × 1410 MHz = 7.2 TB/s)."""
    g = _hw.gpu(gpu)
    out = [Roof("dram", f"{g.memory_type} (DRAM)", "memory", g.bandwidth,
                g.sources.get("bandwidth_gbs", ""))]
    if g.l2_bandwidth is not None:
        src = (f"{g.l2_bytes_per_clk} B/clk ({g.sources.get('l2_bytes_per_clk', '')}) × "
               f"{si(g.boost_mhz * 1e6, 'Hz', 4)} ({g.sources.get('boost_mhz', '')})")
        out.append(Roof("l2", "L2", "memory", g.l2_bandwidth, src))
    return tuple(out)


def roofs(gpu) -> tuple[Roof, ...]:
    """All roofs of ``gpu``: :func:`compute_roofs` then :func:`memory_roofs`."""
    return compute_roofs(gpu) + memory_roofs(gpu)


# -- the model as plain functions --------------------------------------------------------------------

def ridge_point(peak_flops, bandwidth) -> float:
    """``I_max = π / β`` in FLOP/byte (π in FLOP/s, β in bytes/s)."""
    return _validate.positive("peak_flops", peak_flops) / _validate.positive("bandwidth",
                                                                             bandwidth)


def attainable(intensity, peak_flops, bandwidth):
    """``P = min(π, β · I)`` in FLOP/s.  ``intensity`` is a number (→ float) or an array (→ array)
    of FLOP/byte values >= 0; ``inf`` (a kernel that moves no bytes) gives π."""
    pi = _validate.positive("peak_flops", peak_flops)
    beta = _validate.positive("bandwidth", bandwidth)
    value, scalar = _intensity(intensity)
    if scalar:
        return min(pi, beta * value)
    return np.minimum(pi, beta * value)


def kernel_time(flops, bytes, peak_flops, bandwidth) -> float:
    """Shortest time in seconds for ``flops`` FLOPs and ``bytes`` bytes:
    ``max(flops / π, bytes / β)`` — whichever unit is the bottleneck sets the time."""
    f, b = _work(flops, bytes)
    return max(f / _validate.positive("peak_flops", peak_flops),
               b / _validate.positive("bandwidth", bandwidth))


def log_intensities(lo=1e-2, hi=1e4, n=241) -> np.ndarray:
    """``n`` log-spaced intensities from ``lo`` to ``hi`` FLOP/byte (the x axis of a roofline;
    the default spans a streaming kernel at 0.08 up past FP8 ridges near 800)."""
    lo = _validate.positive("lo", lo)
    hi = _validate.positive("hi", hi)
    if hi <= lo:
        raise ValueError(f"hi={hi:g} must be greater than lo={lo:g}")
    n = _validate.integer("n", n, low=2, high=100_000)
    return np.geomspace(lo, hi, n)


# -- results ---------------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Bound(Readout):
    """Which roof limits a kernel of ``intensity`` and by how much.

    ``margin`` ≥ 1 is how far the intensity sits from the ridge, as a factor: a memory-bound
    kernel needs ``margin`` × more FLOPs per byte to reach the compute roof; a compute-bound one
    could move ``margin`` × more bytes before memory became the limit.
    """

    intensity: float
    ridge_point: float
    bound: str
    margin: float
    attainable: float
    peak_flops: float

    @property
    def fraction_of_peak(self) -> float:
        """Attainable / peak: 1 when compute-bound."""
        return self.attainable / self.peak_flops

    def readout_title(self) -> str:
        return self.bound.capitalize()

    def readout_rows(self) -> tuple[Row, ...]:
        side = "below" if self.bound == "memory-bound" else "above"
        return (Row("intensity", self.intensity, "FLOP/byte"),
                Row("ridge point", self.ridge_point, "FLOP/byte"),
                Row(f"factor {side} the ridge", self.margin),
                Row("attainable", self.attainable, "FLOP/s"),
                Row("of peak", self.fraction_of_peak, "%"))


@dataclass(frozen=True, repr=False)
class KernelTime(Readout):
    """The roofline's prediction for one kernel: its shortest ``seconds`` and what limits it."""

    name: str
    flops: float
    bytes: float
    compute_seconds: float
    memory_seconds: float
    bound: Bound

    @property
    def seconds(self) -> float:
        """``max(flops / π, bytes / β)``."""
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def intensity(self) -> float:
        return self.bound.intensity

    @property
    def flops_per_s(self) -> float:
        """Attainable FLOP/s, ``flops / seconds``."""
        return self.bound.attainable

    @property
    def fraction_of_peak(self) -> float:
        return self.bound.fraction_of_peak

    def readout_title(self) -> str:
        return f"Roofline time: {self.name}, {self.bound.bound}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("time", self.seconds, "s"), Row("memory time", self.memory_seconds, "s"),
                Row("compute time", self.compute_seconds, "s"),
                Row("attainable", self.flops_per_s, "FLOP/s"),
                Row("of peak", self.fraction_of_peak, "%"))


@dataclass(frozen=True, repr=False)
class Achieved(Readout):
    """A measured kernel against its roofline: rates achieved and fractions of each roof."""

    name: str
    flops: float
    bytes: float
    seconds: float
    predicted_seconds: float
    peak_flops: float
    bandwidth: float

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds

    @property
    def fraction_of_peak(self) -> float:
        """Achieved FLOP/s / π."""
        return self.flops_per_s / self.peak_flops

    @property
    def fraction_of_bandwidth(self) -> float:
        """Achieved bytes/s / β."""
        return self.bytes_per_s / self.bandwidth

    @property
    def fraction_of_roofline(self) -> float:
        """Predicted time / measured time: 1 means the kernel runs on the roof; above 1 means
        the measurement beat the model (a cache served bytes the model charged to DRAM, or the
        FLOP or byte count is wrong)."""
        return self.predicted_seconds / self.seconds

    def readout_title(self) -> str:
        return f"Achieved: {self.name}"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row("time", self.seconds, "s"), Row("compute", self.flops_per_s, "FLOP/s"),
                Row("of peak", self.fraction_of_peak, "%"),
                Row("memory", self.bytes_per_s, "B/s"),
                Row("of bandwidth", self.fraction_of_bandwidth, "%"),
                Row("of the roofline", self.fraction_of_roofline, "%"))


# -- one roofline ------------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Roofline(Readout):
    """A compute roof ``peak_flops`` (FLOP/s) and a memory roof ``bandwidth`` (bytes/s).

    Build it from explicit numbers, ``Roofline(peak_flops=19.5e12, bandwidth=2.039e12)``, or from
    the catalog, ``Roofline.from_gpu("a100", "fp32")``.
    """

    peak_flops: float
    bandwidth: float
    name: str = "custom"
    compute: str = "compute"
    memory: str = "memory"
    source: str = field(default="given", repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "peak_flops", _validate.positive("peak_flops", self.peak_flops))
        object.__setattr__(self, "bandwidth", _validate.positive("bandwidth", self.bandwidth))
        for attr in ("name", "compute", "memory"):
            if not isinstance(getattr(self, attr), str):
                raise TypeError(f"{attr} must be a string, got {getattr(self, attr)!r}")

    @classmethod
    def from_gpu(cls, gpu, precision="fp32", memory="dram", *, accumulate="fp32") -> Roofline:
        """The roofline of a catalog GPU for one precision (see :data:`COMPUTE_LABELS`) and one
        memory level (:data:`MEMORIES`).  ``accumulate="fp16"`` picks the FP16-accumulate
        tensor peak where a GPU has a faster one (GeForce)."""
        g = _hw.gpu(gpu)
        peak = g.peak_flops(precision, accumulate=accumulate)
        key = precision
        if precision == "fp16" and accumulate == "fp16" and "fp16_acc16" in g.peak_tflops:
            key = "fp16_acc16"
        _validate.choice("memory", memory, MEMORIES)
        mem = {r.key: r for r in memory_roofs(g)}
        if memory not in mem:
            raise ValueError(f"memory={memory!r}: the catalog has no L2 bandwidth for {g.name} "
                             f"(it has {', '.join(map(repr, mem))})")
        src = f"peak: {g.sources.get(f'peak_tflops.{key}', '')}; bandwidth: {mem[memory].source}"
        return cls(peak, mem[memory].value, g.name, COMPUTE_LABELS[key], mem[memory].label, src)

    @property
    def ridge_point(self) -> float:
        """``I_max = π / β`` in FLOP/byte."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity):
        """``min(π, β · I)`` in FLOP/s, for a number or an array of intensities."""
        return attainable(intensity, self.peak_flops, self.bandwidth)

    def classify(self, intensity) -> Bound:
        """Memory- or compute-bound at ``intensity`` (FLOP/byte), with the margin."""
        value, scalar = _intensity(intensity)
        if not scalar:
            raise TypeError(f"intensity must be a single number to classify, got {intensity!r}")
        ridge = self.ridge_point
        if value >= ridge:
            return Bound(value, ridge, "compute-bound", value / ridge, self.peak_flops,
                         self.peak_flops)
        margin = ridge / value if value > 0 else math.inf
        return Bound(value, ridge, "memory-bound", margin, self.bandwidth * value,
                     self.peak_flops)

    def time(self, flops, bytes, *, name="kernel") -> KernelTime:
        """Predicted time of a kernel doing ``flops`` FLOPs and moving ``bytes`` bytes."""
        f, b = _work(flops, bytes)
        intensity = f / b if b else math.inf
        return KernelTime(str(name), f, b, f / self.peak_flops, b / self.bandwidth,
                          self.classify(intensity))

    def point(self, cost) -> KernelTime:
        """:meth:`time` for a ``costs.KernelCost`` (anything with ``name``, ``flops``,
        ``bytes``): the kernel as a point on this roofline."""
        for attr in ("name", "flops", "bytes"):
            if not hasattr(cost, attr):
                raise TypeError(f"cost must have name, flops and bytes (a KernelCost), "
                                f"got {cost!r}")
        return self.time(cost.flops, cost.bytes, name=cost.name)

    def achieved(self, flops, bytes, seconds, *, name="kernel") -> Achieved:
        """Compare a measured run (``seconds``) with this roofline."""
        predicted = self.time(flops, bytes, name=name)
        seconds = _validate.positive("seconds", seconds)
        return Achieved(predicted.name, predicted.flops, predicted.bytes, seconds,
                        predicted.seconds, self.peak_flops, self.bandwidth)

    def curve(self, intensity=None, *, lo=1e-2, hi=1e4, n=241) -> tuple[np.ndarray, np.ndarray]:
        """``(I, P)`` arrays to plot: log-spaced intensities (or the ones given) and
        ``min(π, β·I)`` at each."""
        xs = log_intensities(lo, hi, n) if intensity is None else _intensity_array(intensity)
        return xs, self.attainable(xs)

    def readout_title(self) -> str:
        return f"{self.name} roofline"

    def readout_rows(self) -> tuple[Row, ...]:
        return (Row(self.compute, self.peak_flops, "FLOP/s"),
                Row(self.memory, self.bandwidth, "B/s"),
                Row("ridge point π/β", self.ridge_point, "FLOP/byte"))


# -- several roofs, ready to plot ----------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RoofCurve:
    """``attainable[i] = min(compute.value, memory.value · intensity[i])`` for one roof pair."""

    compute: Roof
    memory: Roof
    ridge_point: float
    attainable: np.ndarray = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.compute.label} / {self.memory.label}"


@dataclass(frozen=True, eq=False, repr=False)
class RooflineCurves(Readout):
    """Every (compute roof, memory roof) pair of one GPU evaluated on the same intensities.

    A view draws ``intensity`` against each ``line.attainable`` — no arithmetic of its own.
    """

    gpu: str
    intensity: np.ndarray = field(repr=False)
    roofs: tuple[Roof, ...]
    lines: tuple[RoofCurve, ...] = field(repr=False)

    def line(self, precision="fp32", memory="dram") -> RoofCurve:
        """The curve for one precision key and memory key."""
        for ln in self.lines:
            if ln.compute.key == precision and ln.memory.key == memory:
                return ln
        have = sorted({(ln.compute.key, ln.memory.key) for ln in self.lines})
        raise ValueError(f"precision={precision!r}, memory={memory!r}: no such curve for "
                         f"{self.gpu}; it has {have}")

    def readout_title(self) -> str:
        return f"{self.gpu} roofs"

    def readout_rows(self) -> tuple[Row, ...]:
        return (*(Row(r.label, r.value, _UNIT[r.kind]) for r in self.roofs),
                *(Row(f"ridge {ln.label}", ln.ridge_point, "FLOP/byte") for ln in self.lines))


def curves(gpu, *, precisions=None, memories=None, intensity=None, lo=1e-2, hi=1e4,
           n=241) -> RooflineCurves:
    """Plottable rooflines of ``gpu`` for the given precision keys (default: all it has) and
    memory keys (default: all it has), over ``intensity`` or ``n`` log-spaced points from ``lo``
    to ``hi`` FLOP/byte."""
    g = _hw.gpu(gpu)
    comp = _select("precisions", precisions, compute_roofs(g), g.name)
    mem = _select("memories", memories, memory_roofs(g), g.name)
    xs = log_intensities(lo, hi, n) if intensity is None else _intensity_array(intensity)
    xs.setflags(write=False)
    lines = []
    for c in comp:
        for m in mem:
            ys = np.minimum(c.value, m.value * xs)
            ys.setflags(write=False)
            lines.append(RoofCurve(c, m, c.value / m.value, ys))
    return RooflineCurves(g.name, xs, comp + mem, tuple(lines))


# -- helpers -------------------------------------------------------------------------------------------

def _select(name, keys, available, gpu_name):
    if keys is None:
        return available
    if isinstance(keys, str):
        keys = (keys,)
    by_key = {r.key: r for r in available}
    out = []
    for k in keys:
        if k not in by_key:
            raise ValueError(f"{name}: {k!r} is not available for {gpu_name}; it has "
                             f"{', '.join(map(repr, by_key))}")
        out.append(by_key[k])
    if not out:
        raise ValueError(f"{name} is empty; choose from {', '.join(map(repr, by_key))}")
    return tuple(out)


def _intensity(value):
    """Validate FLOP/byte value(s): returns ``(float, True)`` or ``(float array, False)``."""
    if isinstance(value, bool):
        raise TypeError(f"intensity must be a number of FLOP/byte, got {value!r}")
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v) or v < 0:
            raise ValueError(f"intensity must be >= 0 FLOP/byte, got {value!r}")
        return v, True
    return _intensity_array(value), False


def _intensity_array(value) -> np.ndarray:
    return _validate.real_array("intensity (FLOP/byte)", value, low=0.0, nonempty=True)


def _work(flops, nbytes) -> tuple[float, float]:
    f = _validate.real("flops", flops, low=0.0)
    b = _validate.real("bytes", nbytes, low=0.0)
    if f == 0 and b == 0:
        raise ValueError("flops and bytes are both 0: there is no kernel to time")
    return f, b
