"""Record what lesson 03's register cap does to one kernel: registers and local memory per thread.

    .venv/bin/python tools/record_register_spills.py tests/data/sm90_register_spills.json

Lesson 03 compiles ``occ_regs`` (``gpu_lessons.measure.cuda_sources``: 160 floats live across a
loop) under ``--maxrregcount`` 32, 64, 128 and 255 and reads how many registers each thread got
and how many bytes it spills to local memory.  Those are compiler outputs, not timings, so they
need no GPU: NVRTC (the ``nvidia-cuda-nvrtc-cu12`` wheel of the test extra) compiles for sm_90,
the H100's and H200's architecture, runs ptxas, and ``--ptxas-options=-v`` makes it report, per
kernel, ``Used N registers`` and ``B bytes stack frame, S bytes spill stores, L bytes spill
loads``.  The stack frame is the local memory a thread needs (what CuPy's
``RawKernel.local_size_bytes`` reports on a GPU).

The record keeps NVRTC's version, the options and each cap's numbers; ``tests/test_measured.py``
reads the figures lesson 03 quotes from it (through ``gpu_lessons/data/measured.toml``), checks
the registers against the CUDA runtime's answers for the same kernel on an H200
(``tests/data/h200_measurements.json``), and recompiles when the same NVRTC is installed.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_lessons.kernels import nvrtc  # noqa: E402  (the repository's package, not an installed one)
from gpu_lessons.measure.cuda_sources import OCCUPANCY_SOURCE  # noqa: E402

KERNEL = "occ_regs"
ARCH = "sm_90"
CAPS = (32, 64, 128, 255)

_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


def nvrtc_version() -> str:
    """NVRTC's own version, e.g. ``"12.9"``."""
    lib = nvrtc.nvrtc_library()
    if lib is None:
        raise SystemExit("NVRTC is not installed: pip install -e '.[test]'")
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def options(cap: int) -> tuple[str, ...]:
    return (f"--maxrregcount={cap}", "--ptxas-options=-v")


def ptxas_report(log: str, kernel: str = KERNEL) -> dict:
    """Registers, stack frame and spill bytes of ``kernel`` from a ``ptxas -v`` log."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if "Compiling entry function" in line and f"'{kernel}'" in line)
    block = "\n".join(lines[start:start + 4])
    frame, used = _FRAME.search(block), _USED.search(block)
    if frame is None or used is None:
        raise ValueError(f"no ptxas report for {kernel} in:\n{block}")
    return {"registers": int(used.group(1)), "stack_frame_bytes": int(frame.group(1)),
            "spill_store_bytes": int(frame.group(2)), "spill_load_bytes": int(frame.group(3))}


def record() -> dict:
    rows = []
    for cap in CAPS:
        result = nvrtc.compile_ptx(OCCUPANCY_SOURCE, ARCH, options=options(cap))
        if not result.ok:
            raise SystemExit(f"--maxrregcount={cap}: NVRTC failed:\n{result.log}")
        rows.append({"maxrregcount": cap, **ptxas_report(result.log)})
    return {"meta": {"date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
                     "nvrtc": nvrtc_version(), "arch": ARCH, "kernel": KERNEL,
                     "source": "gpu_lessons.measure.cuda_sources.OCCUPANCY_SOURCE",
                     "options": ["--gpu-architecture=sm_90", "--maxrregcount=CAP",
                                 "--ptxas-options=-v"],
                     "script": "tools/record_register_spills.py"},
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the JSON record to write")
    args = ap.parse_args(argv)
    data = record()
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    for row in data["rows"]:
        print(f"--maxrregcount={row['maxrregcount']:3d}: {row['registers']:3d} registers, "
              f"{row['stack_frame_bytes']:5,} B of local memory per thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
