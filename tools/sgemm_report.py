"""Print docs/measured/sgemm_ladder.md from the H200 record of the matrix-multiply ladder.

    python tools/sgemm_report.py > docs/measured/sgemm_ladder.md

The record is ``gpu_lessons/data/h200_sgemm_ladder.json`` (``tools/device/sgemm_h200.py``);
``tests/puzzles/test_sgemm_record.py`` checks that the page is what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_lessons._format import percent
from gpu_lessons.sgemm_record import _record, measured_ladder, sizes


def report() -> str:
    rec = _record()
    out = [
        "# The matrix-multiply ladder on an H200",
        "",
        f"Recorded {rec['date']} on an {rec['gpu']} ({rec['sm_count']} SMs) by "
        "`tools/device/sgemm_h200.py`: each rung's worked kernel (`solutions/puzzle_kernels.py`, "
        "in the course's kernel language) translated by `kernels.to_cuda`, built by "
        f"CuPy {rec['cupy']}'s NVRTC with its default options (FMA contraction on), launched as "
        "its puzzle defines, beside cuBLAS SGEMM (CuPy `a @ b`, TF32 off) on the same random "
        f"inputs, m = n = k. Timing: {rec['timing']}. TFLOP/s = 2 n³ / time; the FP32 peak is "
        "the catalog's dense figure. Two controls split the last rung's changes apart.",
        "",
    ]
    for n in sizes():
        lad = measured_ladder(n)
        out += [f"## n = {n:,}: cuBLAS {lad.cublas_tflops:.2f} TFLOP/s, FP32 peak "
                f"{lad.peak_tflops:.1f} TFLOP/s", "",
                "| kernel | TFLOP/s | of cuBLAS | of FP32 peak | registers | local memory |",
                "|---|---:|---:|---:|---:|---:|"]
        out += [f"| `{k.name}` | {k.tflops:.2f} | {percent(k.of_cublas)} | "
                f"{percent(k.tflops / lad.peak_tflops)} | {k.registers} | {k.local_bytes} B |"
                for k in lad.rungs + lad.controls]
        out.append("")
    sass = rec.get("sass")
    if sass:
        out += [f"## What NVRTC makes of each rung ({sass['compiler']}, {sass['arch']}, no GPU)",
                "", "| kernel | registers | local memory | SASS instructions | FFMA | "
                "LDS (of them LDS.128) |", "|---|---:|---:|---:|---:|---:|"]
        out += [f"| `{k['kernel']}` | {k['registers']} | {k['local_bytes']} B | "
                f"{k['instructions']:,} | {k['ffma']:,} | {k['lds']} ({k['lds128']}) |"
                for k in sass["kernels"]]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(report(), end="")
