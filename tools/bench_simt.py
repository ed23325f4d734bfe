"""How fast the SIMT simulator runs: warp instructions per second on a few kernels.

    .venv/bin/python tools/bench_simt.py                 # prints a markdown table
    .venv/bin/python tools/bench_simt.py --repeat 7      # best of 7 runs per kernel
    .venv/bin/python tools/bench_simt.py --profile matmul_tiled   # cProfile, top 25 lines

Each kernel is run ``--repeat`` times (default 5) and the fastest run is kept: on a shared
2-core machine one run can stall behind another process, and the fastest run is the one
that measures the simulator rather than the neighbours.  "instructions" are the simulator's
warp instructions (``SimResult.instructions``); instructions/s = instructions / best wall
time.  The CPU column is the process's CPU time (all its threads), which a busy machine
disturbs less than wall time; the wall time also counts waiting, e.g. for thread hand-offs.

The kernels: every teaching kernel of :mod:`gpu_lessons.kernels.simt.examples` at its default size,
a 64 x 64 matrix multiply (naive, and with 16 x 16 shared-memory tiles: 16 blocks x 8 warps,
4 tiles of 16 multiply-adds), a sequential-addressing reduction of 4096 floats, and, where
the simulator has them, a 256-bin histogram with shared-memory atomics and a warp-shuffle
reduction.  These kernels are written here (not in the package) because some of them are
worked answers of the kernel puzzles.
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import time

import numpy as np

from gpu_lessons.kernels import simt
from gpu_lessons.kernels.simt import examples as K

N = 64       # matrix edge
TILE = 16    # matmul tile edge


def matmul_naive(t, a, b, c, n):
    row = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    col = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    acc = 0.0
    for k in range(n):
        acc = acc + a[row * n + k] * b[k * n + col]
    c[row * n + col] = acc


def matmul_tiled(t, a, b, c, n):
    sa = t.shared((16, 16), np.float32, name="sa")
    sb = t.shared((16, 16), np.float32, name="sb")
    tx, ty = t.thread_idx.x, t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = 0.0
    for k0 in range(0, n, 16):
        sa[ty, tx] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(16):
            acc = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


def histogram_shared(t, x, bins, n):
    local = t.shared(256, np.int32, name="local")
    tid = t.thread_idx.x
    local[tid] = 0
    t.sync()
    i = t.block_idx.x * t.block_dim.x + tid
    with t.if_(i < n):
        t.atomic_add(local, x[i], 1)
    t.sync()
    t.atomic_add(bins, tid, local[tid])


def reduce_shuffle(t, x, out):
    partial = t.shared(8, np.float32, name="partial")
    tid = t.thread_idx.x
    v = x[t.block_idx.x * t.block_dim.x + tid]
    for offset in (16, 8, 4, 2, 1):
        v = v + t.shfl_down(v, offset)
    with t.if_(t.lane == 0):
        partial[t.warp] = v
    t.sync()
    with t.if_(tid < 32):
        w = partial[t.lane & 7]
        for offset in (4, 2, 1):
            w = w + t.shfl_down(w, offset)
        with t.if_(tid == 0):
            out[t.block_idx.x] = w


def _cases() -> dict:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, (N, N)).astype(np.float32).ravel()
    b = rng.integers(0, 4, (N, N)).astype(np.float32).ravel()
    x = rng.integers(0, 10, 4096).astype(np.float32)
    cases = {name: (lambda name=name: K.simulate(name).sim) for name in K.KERNELS}
    cases["matmul_naive"] = lambda: simt.run(matmul_naive, (N // TILE, N // TILE),
                                             (TILE, TILE), a, b, np.zeros(N * N, np.float32), N)
    cases["matmul_tiled"] = lambda: simt.run(matmul_tiled, (N // TILE, N // TILE),
                                             (TILE, TILE), a, b, np.zeros(N * N, np.float32), N)
    cases["reduce_sequential_4096"] = lambda: K.simulate("reduce_sequential", n=4096).sim
    ctx = simt.WarpContext
    if hasattr(ctx, "atomic_add"):
        keys = rng.integers(0, 256, 4096).astype(np.int32)
        cases["histogram_shared_4096"] = lambda: simt.run(
            histogram_shared, 16, 256, keys, np.zeros(256, np.int32), 4096)
    if hasattr(ctx, "shfl_down"):
        cases["reduce_shuffle_4096"] = lambda: simt.run(reduce_shuffle, 16, 256, x,
                                                        np.zeros(16, np.float32))
    return cases


def bench(fn, repeat: int) -> tuple[int, float, float]:
    """(instructions, best wall time, best CPU time of this process) over ``repeat`` runs."""
    best, best_cpu, n = float("inf"), float("inf"), 0
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        n = result.instructions
    return n, best, best_cpu


def table(repeat: int, only: str | None = None) -> str:
    lines = [f"SIMT simulator speed on {platform.node() or 'this machine'} "
             f"({platform.processor() or platform.machine()}, Python "
             f"{platform.python_version()}, NumPy {np.__version__}), "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}; best of {repeat} runs.", "",
             "| kernel | warp instructions | best run (ms) | CPU time (ms) | instructions/s |",
             "|---|---|---|---|---|"]
    total_n = total_s = total_cpu = 0.0
    for name, fn in _cases().items():
        if only and only not in name:
            continue
        n, s, cpu = bench(fn, repeat)
        total_n += n
        total_s += s
        total_cpu += cpu
        lines.append(f"| {name} | {n} | {s * 1e3:.1f} | {cpu * 1e3:.1f} | {n / s:,.0f} |")
    lines.append(f"| **all** | {int(total_n)} | {total_s * 1e3:.1f} | {total_cpu * 1e3:.1f} | "
                 f"{total_n / total_s:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per kernel (best kept)")
    parser.add_argument("--profile", metavar="KERNEL", help="profile one kernel instead")
    parser.add_argument("--only", metavar="TEXT", help="only kernels whose name contains TEXT")
    args = parser.parse_args()
    if args.profile:
        fn = _cases()[args.profile]
        fn()  # warm the caches first, as a second puzzle check would find them
        prof = cProfile.Profile()
        prof.enable()
        fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    print(table(args.repeat, args.only))


if __name__ == "__main__":
    main()
