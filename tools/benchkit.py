"""What the benchmark scripts in ``tools/`` share: the best of several timed runs.

On a shared 2-core machine one run can stall behind another process, so each case is run
``repeat`` times after one untimed call (which compiles or fills caches) and the fastest run
is kept, as wall time and as this process's CPU time (which the neighbours disturb less).
"""

from __future__ import annotations

import argparse
import time


def best_of(fn, repeat: int) -> tuple[float, float]:
    """(best wall time, best CPU time) of ``fn()`` in seconds over ``repeat`` runs, after a
    warm-up call."""
    fn()
    best = best_cpu = float("inf")
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best, best_cpu


def main(doc: str, table, *, repeat: int = 7) -> None:
    """The command line the benchmarks share: ``--repeat N`` (default ``repeat``), then print
    ``table(N)``, a markdown table."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=repeat, help="runs per case (best kept)")
    print(table(parser.parse_args().repeat))
