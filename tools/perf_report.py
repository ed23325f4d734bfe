"""Print the performance model's errors against the H200 records, as markdown tables.

    python tools/perf_report.py > /tmp/report.md

The tables docs/performance_model.md quotes: every validation kernel (tests/perf_kernels.py)
and worked puzzle kernel, measured with run_on_gpu against predict_time, and profile()'s
metrics against Nsight Compute's.
"""

import importlib.util
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import perf_kernels  # noqa: E402

from gpu_lessons.perf.model import _predict  # noqa: E402
from gpu_lessons.perf.profile import _report  # noqa: E402

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smsp__inst_executed.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active")


def main():
    data = ROOT / "tests" / "data"
    val = json.loads((data / "h200_perf_validation.json").read_text())
    ncu = json.loads((data / "h200_perf_ncu.json").read_text())["kernels"]
    puzzles = {r["puzzle"]: r["measured_us"]
               for r in json.loads((data / "h200_puzzle_gpu_runs.json").read_text())["runs"]}
    spec = importlib.util.spec_from_file_location(
        "perf_calibration", ROOT / "tools" / "device" / "perf_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(7)
    todo = []
    for name, (kernel, make, what) in perf_kernels.CASES.items():
        grid, block, args = make(rng)
        todo.append(("validation", name, what, kernel, grid, block, args,
                     val["runs"][name]["measured_us"], f"pv_{name}",
                     val["runs"][name]["registers"]))
    for name, (kernel, grid, block, args) in mod.puzzle_cases().items():
        todo.append(("puzzle", name, "", kernel, grid, block, args, puzzles[name],
                     f"{name}_kernel", val["puzzle_runs"][name]["registers"]))
    agree = {m: [] for m in METRICS}
    regs = []
    for group in ("validation", "puzzle"):
        print(f"\n| {group} kernel | measured | predicted | predicted / measured | limiter |")
        print("|---|---|---|---|---|")
        ratios = []
        for g, name, what, kernel, grid, block, args, measured, kname, reg in todo:
            if g != group:
                continue
            pred, x = _predict(kernel, grid, block, args, "H200", True, None, 8, 4.0)
            r = pred.us / measured
            ratios.append(r)
            label = f"`{name}`" + (f" ({what})" if what else "")
            print(f"| {label} | {measured:,.1f} µs | {pred.us:,.1f} µs | {r:.2f} | "
                  f"{pred.limiter} |")
            prof = _report(pred, x, True).metrics
            regs.append(x["registers"] == reg)
            real = ncu[kname]["metrics"]
            for m in METRICS:
                if m.startswith("sm__warps"):
                    agree[m].append(abs(prof[m] - real[m]) <= 10)
                elif real[m] > 1e5:
                    agree[m].append(abs(prof[m] / real[m] - 1) <= 0.15)
        e = np.abs(np.array(ratios) - 1)
        print(f"\n{group}: {len(ratios)} kernels, median error {np.median(e):.1%}, "
              f"{np.mean(e <= 0.25):.0%} within 25 %, worst "
              f"{max(max(ratios), 1 / min(ratios)):.2f}x, "
              f"{sum(abs(np.log(ratios)) >= np.log(2))} off by 2x or more")
    ladder()
    print("\n| metric | kernels within 15 % of ncu (10 points for occupancy) |\n|---|---|")
    print(f"| launch__registers_per_thread (exact) | {sum(regs)} of {len(regs)} |")
    for m, v in agree.items():
        print(f"| {m} | {sum(v)} of {len(v)} |")


def ladder():
    """The matrix-multiply ladder's rungs at n = 2048 (default build) against their record."""
    import inspect

    rec = json.loads((ROOT / "gpu_lessons/data/h200_sgemm_ladder.json").read_text())
    size = next(s for s in rec["sizes"] if s["n"] == 2048)
    n = size["n"]
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    pk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pk)
    a, c = np.ones(n * n, np.float32), np.zeros(n * n, np.float32)
    print("\n| ladder rung (n = 2048, default build) | measured | predicted | predicted / measured "
          "| limiter |\n|---|---|---|---|---|")
    ratios = []
    for r in size["rungs"]:
        kernel = getattr(pk, r["kernel"] + "_kernel")
        args = ((a, a, c, n) if len(inspect.signature(kernel).parameters) == 5
                else (a, a, c, n, n, n))
        pred, _ = _predict(kernel, tuple(r["grid"]), tuple(r["block"]), args, "H200", False,
                           None, 8, 4.0)
        ratios.append(pred.seconds / r["seconds"])
        print(f"| `{r['kernel']}` | {r['seconds'] * 1e6:,.1f} µs | {pred.us:,.1f} µs | "
              f"{ratios[-1]:.2f} | {pred.limiter} |")
    e = np.abs(np.array(ratios) - 1)
    print(f"\nladder: {len(ratios)} rungs, median error {np.median(e):.1%}, "
          f"{np.mean(e <= 0.25):.0%} within 25 %, worst {max(max(ratios), 1 / min(ratios)):.2f}x")


if __name__ == "__main__":
    main()
