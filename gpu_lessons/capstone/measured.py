"""The H200 measurements the capstone and its exercises quote, by the names the capstone uses.

Every value is a figure of ``gpu_lessons/data/measured.toml`` read through
:func:`gpu_lessons.hardware.measured` (``tests/test_measured.py`` recomputes each one from its
raw record in ``tests/data/``); this module only names them for the mystery kernels and gives
them in SI units.  The tables that print them: ``docs/measured/h200.md``.
"""

from __future__ import annotations

from ..hardware import measured as _figure

#: The capstone's name for each figure -> its key in ``data/measured.toml``.
FIGURES = {
    "strided_copy_4_stride8": "h200.strided_copy.float_stride8_us",
    "strided_copy_4_stride1": "h200.strided_copy.float_stride1_us",
    "transpose_tiled": "h200.simt.transpose_tiled_us",
    "transpose_tiled_padded": "h200.simt.transpose_tiled_padded_us",
    "sgemm_8192": "h200.gemm.fp32_8192_ms",
    "hgemm_8192": "h200.gemm.fp16_8192_ms",
    "hgemm_1024": "h200.gemm.fp16_1024_ms",
    "triad_bandwidth": "h200.triad.bandwidth_gbs",
    "copy_bandwidth": "h200.copy.bandwidth_gbs",
    "fir40_v1": "h200.capstone_fir.fir40_v1_us",
    "fir40_v2": "h200.capstone_fir.fir40_v2_us",
    "fir40_v3": "h200.capstone_fir.fir40_v3_us",
    "fir40_v4": "h200.capstone_fir.fir40_v4_us",
    "copy_f4": "h200.capstone_fir.copy_f4_us",
}

#: ``{name: (value in SI units, where it comes from)}``: seconds, or bytes/s for a bandwidth.
H200_MEASURED = {name: (_figure(key).si, _figure(key).source) for name, key in FIGURES.items()}


def measured(name: str) -> float:
    """The figure ``name`` of :data:`FIGURES` in SI units (seconds, or bytes/s)."""
    return _figure(FIGURES[name]).si


def source(name: str) -> str:
    """Where figure ``name`` comes from, prefixed "measured: " for a kernel card."""
    return "measured: " + _figure(FIGURES[name]).source
