"""The end-to-end "make this kernel faster" example of notebook 10: a square GEMM made faster
step by step, each step predicted by the roofline of its :mod:`gpu_lessons.costs` traffic and
ending on the measured cuBLAS figures."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _validate, costs
from .. import hardware as _hw
from .._format import Readout, Row, duration, html_table, si, text_table
from .._format import intensity as _intensity
from .._format import ratio as _ratio
from ..costs import KernelCost
from ..roofline import Roofline
from .measured import H200_MEASURED


@dataclass(frozen=True, repr=False)
class Step(Readout):
    """One version of the kernel: its cost model, its roofline and the predicted time."""

    name: str
    change: str
    cost: KernelCost
    precision: str
    seconds: float
    bound: str
    ridge_point: float
    peak_flops: float
    measured_seconds: float | None = None
    measured_source: str = ""

    @property
    def flops_per_s(self) -> float:
        return self.cost.flops / self.seconds

    def readout_title(self) -> str:
        return f"Step {self.name}"

    def readout_rows(self) -> tuple[Row, ...]:
        measured = (Row("measured", self.measured_seconds, "s"),) if self.measured_seconds else ()
        return (Row("intensity", self.cost.intensity, "FLOP/byte"),
                Row(f"ridge ({self.precision})", self.ridge_point, "FLOP/byte"),
                Row("bound", self.bound), Row("predicted time", self.seconds, "s"),
                Row("predicted rate", self.flops_per_s, "FLOP/s"), *measured)


@dataclass(frozen=True)
class Story:
    """The GEMM of size ``n`` made faster step by step (see :func:`gemm_story`)."""

    gpu: str
    n: int
    steps: tuple[Step, ...]

    _HEAD = ("step", "change", "intensity", "ridge", "bound", "predicted time",
             "predicted rate", "speed-up", "measured")

    def _rows(self):
        prev = None
        for s in self.steps:
            speed = "—" if prev is None else f"{prev / s.seconds:.3g}×"
            meas = duration(s.measured_seconds) if s.measured_seconds else "—"
            yield (s.name, s.change, _intensity(s.cost.intensity),
                   f"{_ratio(s.ridge_point)} ({s.precision})", s.bound, duration(s.seconds),
                   si(s.flops_per_s, "FLOP/s"), speed, meas)
            prev = s.seconds

    def __repr__(self) -> str:
        return (f"GEMM {self.n}³ on {self.gpu}, DRAM-only traffic model (no L2 reuse):\n"
                + text_table(self._HEAD, self._rows()))

    def _repr_html_(self) -> str:
        return html_table(f"GEMM {self.n}³ on {self.gpu}: predicted by the roofline with "
                          "DRAM-only traffic", self._HEAD, self._rows())


def gemm_story(n: int = 8192, gpu="H200 SXM") -> Story:
    """A square GEMM made faster in five steps, each predicted by the roofline of
    :mod:`gpu_lessons.costs` traffic (DRAM only: L2 reuse is ignored, so the times are upper
    bounds):

    1. naive, one thread per output, FP32 (``costs.gemm_naive``): ≈ 0.25 FLOP/byte;
    2. 32 × 32 shared-memory tiles (``costs.gemm_tiled(tile=32)``): ≈ 8 FLOP/byte;
    3. 128 × 128 block tiles with register blocking (each thread computes 8 × 8 outputs, so
       shared memory is read 8× less): ≈ 32 FLOP/byte, past the FP32 ridge;
    4. the same tiles on tensor cores in FP16: the roof rises 15×, the ridge with it, and the
       kernel is memory-bound again;
    5. 128 × 256 tiles in FP16 — and the measured cuBLAS time, which beats the DRAM-only
       prediction because L2 serves the tiles' re-reads.

    Steps 3 and 5 carry the H200 measurements of cuBLAS (FP32 and FP16, n = 8192) when
    ``n == 8192`` and the GPU is the H200.
    """
    n = _validate.integer("n", n, low=256, high=65536)
    g = _hw.gpu(gpu)
    on_h200 = g.name == "H200 SXM" and n == 8192
    plan = [
        ("naive", "one thread per output, operands from DRAM", costs.gemm_naive(n, n, n),
         "fp32", None),
        ("tiled 32", "32 × 32 tiles staged in shared memory", costs.gemm_tiled(n, n, n, tile=32),
         "fp32", None),
        ("tiled 128 + registers", "128 × 128 block tiles, 8 × 8 outputs per thread",
         costs.gemm_tiled(n, n, n, tile=128), "fp32", "sgemm_8192"),
        ("tensor cores", "same tiles, FP16 on tensor cores",
         costs.gemm_tiled(n, n, n, tile=128, dtype="fp16"), "fp16", None),
        ("tensor cores, 128 × 256", "larger FP16 tiles (cuBLAS-class kernel)",
         costs.gemm_tiled(n, n, n, tile_m=128, tile_n=256, dtype="fp16"), "fp16", "hgemm_8192"),
    ]
    steps = []
    for name, change, cost, prec, meas in plan:
        roof = Roofline.from_gpu(g, prec)
        t = roof.point(cost)
        ms = H200_MEASURED[meas] if (meas and on_h200) else None
        steps.append(Step(name, change, cost, prec, t.seconds, t.bound.bound, roof.ridge_point,
                          roof.peak_flops, ms[0] if ms else None,
                          ("measured: " + ms[1]) if ms else ""))
    return Story(g.name, n, tuple(steps))
