"""Time ``puzzles.evaluate`` on every puzzle's worked kernel (the learner's wait for a check).

    python tools/bench_puzzles.py                 # print the table
    python tools/bench_puzzles.py --write         # also write docs/measured/puzzles_benchmark.md

Each evaluate runs every case of the puzzle in the simulator, checks the output and hazards
and measures the budgets.  The figure is the best of ``--repeats`` runs (default 3): on a
shared machine one run can stall behind other work, and the best run is what the code costs.
The target is under 2 s per check; tests assert behaviour, never these times.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_lessons import puzzles  # noqa: E402
from gpu_lessons.kernels import simt  # noqa: E402

OUT = ROOT / "docs" / "measured" / "puzzles_benchmark.md"
TARGET_S = 2.0


def _kernels():
    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(repeats: int = 3) -> list[dict]:
    ref = _kernels()
    rows = []
    for p in puzzles.puzzles():
        kernel = getattr(ref, p.kernel_name)
        choices = {name: getattr(ref, name.upper()) for name in p.choices}
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            result = puzzles.evaluate(p.id, kernel, **choices)
            best = min(best, time.perf_counter() - start)
        if not result.passed:
            raise SystemExit(f"{p.id}: the worked kernel does not pass: {result.message}")
        instructions = 0
        for case in p.cases(0, choices):
            args = {k: (v.copy() if hasattr(v, "copy") else v) for k, v in case.args.items()}
            instructions += simt.run(kernel, case.grid, case.block, *args.values()).instructions
        rows.append({"id": p.id, "lesson": p.lesson, "cases": len(p.sizes) + len(p.more),
                     "instructions": instructions, "seconds": best})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| puzzle | lesson | cases | warp instructions simulated | evaluate (s) |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['id']}` | {r['lesson']:02d} | {r['cases']} | "
                     f"{r['instructions']:,} | {r['seconds']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    rows = measure(args.repeats)
    text = table(rows)
    worst = max(rows, key=lambda r: r["seconds"])
    total = sum(r["seconds"] for r in rows)
    summary = (f"{len(rows)} puzzles; slowest `{worst['id']}` at {worst['seconds']:.3f} s "
               f"(target: under {TARGET_S:.0f} s per check); all {len(rows)} together "
               f"{total:.2f} s.")
    print(text)
    print(summary)
    if args.write:
        OUT.write_text(
            "# Puzzle checks: time per `puzzles.evaluate` of the worked kernel\n\n"
            "Measured with `python tools/bench_puzzles.py --write` (best of "
            f"{args.repeats} runs per puzzle) on {datetime.date.today().isoformat()}: "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores "
            f"(shared with other work; load average {os.getloadavg()[0]:.1f} when it "
            f"finished), Python {platform.python_version()}.\n\n"
            "Each check simulates every case of the puzzle (the sizes whose budgets are "
            "measured and the extra sizes checked for correctness only), compares the output "
            "with the NumPy spec, checks for races (between warps on shared memory, between "
            "blocks on global memory, from every lane's recorded element), and measures the "
            "budgets.\n\n"
            f"{text}\n\n{summary}\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
