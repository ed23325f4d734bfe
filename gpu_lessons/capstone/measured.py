"""The H200 measurements the capstone and its exercises quote, each with where it comes from.

Raw samples: ``tests/data/h200_measurements.json`` (the course's H200 run) and
``tests/data/h200_capstone_fir.json`` (the filter of mystery 6); the tables that print them:
``docs/measured/h200.md``.  ``tests/test_capstone.py`` checks every value against those files.
"""

from __future__ import annotations

_RUN = "H200 SXM, CuPy 14.2 / CUDA 13.2, 2026-11-29 19:13 UTC"

#: H200 measurements the lessons quote (notebooks 07, 09, 10): median seconds per run, or
#: bytes/s for the bandwidths, each with its table in docs/measured/h200.md.
H200_MEASURED = {
    "strided_copy_4_stride8": (
        520.752e-6, f"strided_copy_4 (float), stride 8, 62,914,560 elements out, median of 20 "
                    f"({_RUN}); docs/measured/h200.md, '4-byte elements by stride'"),
    "strided_copy_4_stride1": (
        131.280e-6, f"strided_copy_4 (float), stride 1, 62,914,560 elements out, median of 20 "
                    f"({_RUN}); docs/measured/h200.md, '4-byte elements by stride'"),
    "transpose_tiled": (
        334.512e-6, f"transpose_tiled, 8192 x 8192 floats, median of 20 ({_RUN}); "
                    "docs/measured/h200.md, 'The SIMT lesson's kernels'"),
    "transpose_tiled_padded": (
        152.592e-6, f"transpose_tiled_padded, 8192 x 8192 floats, median of 20 ({_RUN}); "
                    "docs/measured/h200.md, 'The SIMT lesson's kernels'"),
    "sgemm_8192": (
        21.678544e-3, f"cupy.matmul FP32 8192^3 (cuBLAS), normal data, full clock, median of 30 "
                      f"({_RUN}); docs/measured/h200.md, 'Matrix multiply'"),
    "hgemm_8192": (
        1.439424e-3, f"cupy.matmul FP16 8192^3 (cuBLAS, FP32 accumulate), normal data, full "
                     f"clock, median of 30 ({_RUN}); docs/measured/h200.md, 'Matrix multiply'"),
    "hgemm_1024": (
        27.456e-6, f"cupy.matmul FP16 1024^3 (cuBLAS, FP32 accumulate), normal data, full "
                   f"clock, median of 30 ({_RUN}); docs/measured/h200.md, 'Matrix multiply'"),
    "triad_bandwidth": (
        4346.0e9, f"triad_f4 (a = b + s*c), 960 MiB arrays, bytes/s ({_RUN}); "
                  "docs/measured/h200.md, 'Streaming bandwidth'"),
    "copy_bandwidth": (
        4205e9, f"copy_f4, 960 MiB arrays, bytes/s ({_RUN}); docs/measured/h200.md, "
                "'Streaming bandwidth'"),
    "fir40_v4": (
        226e-6, "fir40_v4 (taps in __constant__, float4 loads), 2^26 floats in and out, "
                "compiled for sm_90, H200 SXM (summary figure of the course's accuracy review; "
                "tests/data/h200_capstone_fir.json); docs/measured/h200.md, 'The capstone's "
                "filter'"),
}


def measured(key: str) -> float:
    """The value of ``H200_MEASURED[key]`` (seconds, or bytes/s for a bandwidth)."""
    return H200_MEASURED[key][0]


def source(key: str) -> str:
    """Where ``H200_MEASURED[key]`` comes from, prefixed "measured: " for a kernel card."""
    return "measured: " + H200_MEASURED[key][1]
