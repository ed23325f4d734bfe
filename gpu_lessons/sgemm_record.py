"""The matrix-multiply ladder as measured on an H200, beside cuBLAS.

``data/h200_sgemm_ladder.json`` is written by ``tools/device/sgemm_h200.py``: every rung's
worked kernel (``matmul_naive`` ... ``sgemm_warptile``, in the course's kernel language,
translated by ``kernels.to_cuda`` and built by CuPy's NVRTC with its default options) timed at
m = n = k = 2048, 4096 and 8192 with CUDA events, in rounds with cuBLAS's SGEMM (CuPy ``a @ b``,
TF32 off) on the same inputs.  Two *controls* split the last rung's two changes apart: rung 4
with its stage loop unrolled, and rung 5 without.  :func:`measured_ladder` reads one size;
TFLOP/s are 2 n³ / t (a multiply-add is 2 FLOPs), beside the catalog's dense FP32 peak.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from . import _validate
from ._format import binary_bytes, flop_rate, html_table, percent
from .hardware import gpu as catalog_gpu

RECORD = "data/h200_sgemm_ladder.json"


@dataclass(frozen=True)
class MeasuredKernel:
    """One kernel's run: ``tflops`` (2 n³ / median seconds), ``of_cublas`` (cuBLAS's time over
    this one's), the registers and local memory the driver reports, the largest error
    relative to cuBLAS's largest output."""

    name: str
    seconds: float
    tflops: float
    of_cublas: float
    registers: int
    local_bytes: int
    max_rel_error: float


@dataclass(frozen=True, repr=False)
class LadderRecord:
    """The ladder at one size: ``rungs`` in course order, ``controls``, cuBLAS's TFLOP/s, the
    GPU's dense FP32 peak (catalog), where and when it was measured."""

    gpu: str
    date: str
    n: int
    cublas_tflops: float
    peak_tflops: float
    rungs: tuple[MeasuredKernel, ...]
    controls: tuple[MeasuredKernel, ...]

    def rung(self, name: str) -> MeasuredKernel:
        for k in self.rungs + self.controls:
            if k.name == name:
                return k
        raise ValueError(f"no kernel {name!r} in the record; it holds "
                         f"{', '.join(k.name for k in self.rungs + self.controls)}")

    def of_cublas(self, tflops: float) -> float:
        """A rate in TFLOP/s as a fraction of cuBLAS's in the same run (a learner's kernel)."""
        return tflops / self.cublas_tflops

    def _rows(self):
        return [(k.name, flop_rate(k.tflops * 1e12), percent(k.of_cublas),
                 percent(k.tflops / self.peak_tflops), f"{k.registers}")
                for k in self.rungs + self.controls]

    def _title(self) -> str:
        return (f"{self.gpu}, n = {self.n:,} (FP32, {self.date}): cuBLAS "
                f"{flop_rate(self.cublas_tflops * 1e12)}, FP32 peak {flop_rate(self.peak_tflops * 1e12)}")

    def __repr__(self) -> str:
        lines = [self._title()]
        lines += [f"  {name:<28} {rate:>14} {of:>8} of cuBLAS {peak:>8} of peak {regs:>4} "
                  f"registers" for name, rate, of, peak, regs in self._rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(self._title(), ("kernel", "TFLOP/s", "of cuBLAS", "of FP32 peak",
                                          "registers"), self._rows())


@cache
def _record() -> dict:
    return json.loads(resources.files(__package__).joinpath(RECORD).read_text("utf-8"))


def sizes() -> tuple[int, ...]:
    """The sizes (m = n = k) the record holds."""
    return tuple(row["n"] for row in _record()["sizes"])


def measured_ladder(n: int = 4096) -> LadderRecord:
    """The recorded ladder at ``n`` (one of :func:`sizes`)."""
    n = _validate.integer("n", n, low=1)
    rec = _record()
    rows = [row for row in rec["sizes"] if row["n"] == n]
    if not rows:
        raise ValueError(f"n={n}: the record holds n = {', '.join(map(str, sizes()))}")
    row = rows[0]

    def kernels(key):
        return tuple(MeasuredKernel(k["kernel"], k["seconds"], k["tflops"], k["of_cublas"],
                                    k["registers"], k["local_bytes"], k["max_rel_error"])
                     for k in row[key])

    return LadderRecord(rec["gpu"], rec["date"], n, row["cublas_tflops"],
                        catalog_gpu("H200").peak_flops("fp32") / 1e12, kernels("rungs"),
                        kernels("controls"))


@dataclass(frozen=True, repr=False)
class SassCounts:
    """What NVRTC (``compiler``, sm_90, default build, no GPU) makes of each rung: per kernel
    ``(name, registers, local bytes, SASS instructions, FFMA, LDS, LDS.128)``."""

    compiler: str
    kernels: tuple[tuple[str, int, int, int, int, int, int], ...]

    def _rows(self):
        return [(name, f"{regs}", binary_bytes(local), f"{ins:,}", f"{ffma:,}", percent(ffma / ins),
                 f"{lds} ({lds128})")
                for name, regs, local, ins, ffma, lds, lds128 in self.kernels]

    _HEAD = ("kernel", "registers", "local memory", "SASS instructions", "FFMA", "FFMA share",
             "LDS (LDS.128)")

    def __repr__(self) -> str:
        lines = [f"SASS for sm_90 ({self.compiler})"]
        lines += ["  " + "  ".join(f"{c:>10}" if i else f"{c:<26}" for i, c in enumerate(row))
                  for row in [self._HEAD, *self._rows()]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(f"SASS for sm_90 ({self.compiler})", self._HEAD, self._rows())


def sass_counts() -> SassCounts:
    """The record's SASS counts (``tools/device/sgemm_h200.py --sass``)."""
    sass = _record()["sass"]
    return SassCounts(sass["compiler"], tuple(
        (k["kernel"], k["registers"], k["local_bytes"], k["instructions"], k["ffma"], k["lds"],
         k["lds128"]) for k in sass["kernels"]))
