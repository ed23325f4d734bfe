"""Time the overlap explorer's update with a measured run beside it (the SM-share slider redraws
the model's staircase and the comparison).

    .venv/bin/python tools/bench_overlap_view.py [--md docs/measured/overlap_view_benchmark.md]

The run is the SYNTHETIC test record (``tests/overlap_fixture.py``) stretched to the default
measurement's shape: 32 layers and six bucket sizes (32 MiB to 1 GiB).  Prints the median and
slowest update over the slider's whole range, in ms.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_lessons.views.system import overlap_explorer  # noqa: E402


def synthetic_record() -> dict:
    spec = importlib.util.spec_from_file_location("overlap_fixture",
                                                  ROOT / "tests" / "overlap_fixture.py")
    fx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fx)
    fx.N_LAYERS = 32
    fx.BUCKETS = tuple(2**20 * b for b in (32, 64, 128, 256, 512, 1024))
    fx.OVERLAP = {b: (300.0 + b / 2**20, 6500.0) for b in fx.BUCKETS}
    return fx.build()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--md", help="also write the figures to this Markdown file")
    args = ap.parse_args()
    e = overlap_explorer(measured=synthetic_record())
    times, cpu = [], []
    slider = e.controls["comm_sm_percent"]
    for v in range(slider.min, slider.max + 1, 5):
        c0 = time.process_time()
        slider.value = v
        cpu.append((time.process_time() - c0) * 1e3)
        times.append(e.last_update_ms)
    # wall time depends on what else the machine runs; CPU time of this process much less
    line = (f"overlap explorer with a measured run (32 layers, 6 bucket sizes): update median "
            f"{statistics.median(times):.1f} ms, slowest {max(times):.1f} ms wall time "
            f"(median {statistics.median(cpu):.1f} ms, slowest {max(cpu):.1f} ms of CPU time) "
            f"over {len(times)} slider positions")
    print(line)
    if args.md:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        Path(args.md).write_text(
            "# Overlap explorer with measured points: update times\n\n"
            "`.venv/bin/python tools/bench_overlap_view.py --md "
            "docs/measured/overlap_view_benchmark.md` moves the SM-share slider of "
            "`overlap_explorer(measured=...)` over its range in steps of 5 %; each update runs "
            "the simulator and redraws the measured panel's model line (one "
            "`system.training_step` per possible number of layers per bucket) and comparison. "
            "The run is the synthetic test record stretched to the default measurement's shape."
            f"\n\n{datetime.date.today()}, {os.cpu_count()} cores, load average {load:.1f}: "
            f"{line}.\n")


if __name__ == "__main__":
    main()
