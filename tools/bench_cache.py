"""How fast the compiled cache simulator runs: sector accesses per second on a few traces.

    .venv/bin/python tools/bench_cache.py              # prints a markdown table
    .venv/bin/python tools/bench_cache.py --repeat 9   # best of 9 runs per case

Each case replays one trace through a fresh :class:`gpu_lessons.cache.Cache` (or a two-level
:class:`~gpu_lessons.cache.Hierarchy`, whose first level emits its misses and write-backs to
the second) ``--repeat`` times (default 7) and keeps the fastest run: on a shared 2-core
machine one run can stall behind another process.  The CPU column is this process's CPU
time, which a busy machine disturbs less than wall time.  The first call compiles the numba
kernels (or loads them from numba's cache); it is not timed.

The cases cover every path of ``cache._simulate``: loads only (hits and fills), stores into
a write-back cache (dirty bits, write-backs on eviction), stores into a write-through cache
with and without write-allocate (the store-forwarding path: every store's bytes go to the
next level), random replacement, and a hierarchy (the emitting path).  The last case replays a
million random loads through pycachesim (the independent C simulator the tests check the
counts against, a test dependency) and through this one, LRU, same geometry.
"""

from __future__ import annotations

import platform
import time

import benchkit
import numba
import numpy as np
from benchkit import best_of

from gpu_lessons.cache import Cache, Hierarchy

N = 1_000_000   # requests per trace
SIZE, LINE, WAYS = 32 * 1024, 128, 4


def _traces() -> dict:
    rng = np.random.default_rng(0)
    # a mix the lessons show: a streaming pass, then random reuse over four times the cache
    stream = np.arange(N // 2, dtype=np.int64) * 4
    reuse = rng.integers(0, 4 * SIZE // 4, N - N // 2, dtype=np.int64) * 4
    addresses = np.concatenate([stream, reuse])
    writes = rng.random(N) < 0.3
    return {"addresses": addresses, "writes": writes}


def _cases(tr) -> dict:
    a, w = tr["addresses"], tr["writes"]

    def cache(**kw):
        return lambda: Cache(SIZE, LINE, WAYS, **kw).run(a, w)

    def hierarchy():
        h = Hierarchy([Cache(SIZE, LINE, WAYS, name="L1", sector_bytes=32),
                       Cache(32 * SIZE, LINE, 16, name="L2", sector_bytes=32)])
        return h.run(a, w)

    return {
        "loads only, LRU": lambda: Cache(SIZE, LINE, WAYS).run(a),
        "30 % stores, write-back, LRU": cache(policy="lru"),
        "30 % stores, write-through + allocate": cache(write_policy="write-through"),
        "30 % stores, write-through, no allocate": cache(write_policy="write-through",
                                                         write_allocate=False),
        "30 % stores, write-back, random": cache(policy="random"),
        "L1 + L2 hierarchy, 30 % stores": hierarchy,
    }


def _pycachesim_case():
    """A million random loads: pycachesim (C) against this simulator, or None without it."""
    try:
        import cachesim
    except ImportError:
        return None
    addrs = np.random.default_rng(0).integers(0, 1 << 22, 1_000_000)
    as_list = addrs.tolist()

    def reference():
        mem = cachesim.MainMemory()
        l1 = cachesim.Cache("L1", SIZE // (LINE * WAYS), WAYS, LINE, "LRU")
        mem.load_to(l1)
        mem.store_from(l1)
        cachesim.CacheSimulator(l1, mem).loadstore([(as_list, None)])

    return reference, lambda: Cache(SIZE, LINE, WAYS).run(addrs)


def _accesses(stats) -> int:
    levels = getattr(stats, "levels", (stats,))
    return sum(s.accesses for s in levels)


def bench(fn, repeat: int) -> tuple[int, float, float]:
    """(sector accesses, best wall time, best CPU time) over ``repeat`` runs after a warm-up."""
    return (_accesses(fn()), *best_of(fn, repeat))


def table(repeat: int) -> str:
    lines = [f"Cache simulator speed on {platform.node() or 'this machine'} "
             f"({platform.processor() or platform.machine()}, Python "
             f"{platform.python_version()}, NumPy {np.__version__}, numba {numba.__version__}), "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}; {N:,} requests per trace, "
             f"best of {repeat} runs.", "",
             "| case | sector accesses | best run (ms) | CPU time (ms) | M accesses/s (CPU) |",
             "|---|---|---|---|---|"]
    for name, fn in _cases(_traces()).items():
        n, wall, cpu = bench(fn, repeat)
        lines.append(f"| {name} | {n:,} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} | "
                     f"{n / cpu / 1e6:.1f} |")
    pair = _pycachesim_case()
    if pair is not None:
        reference, ours = pair
        ref_wall, ref_cpu = best_of(reference, repeat)
        wall, cpu = best_of(ours, repeat)
        lines += ["", "| 1,000,000 random loads, LRU | best run (ms) | CPU time (ms) |",
                  "|---|---|---|",
                  f"| pycachesim | {ref_wall * 1e3:.1f} | {ref_cpu * 1e3:.1f} |",
                  f"| gpu_lessons.cache | {wall * 1e3:.1f} | {cpu * 1e3:.1f} |"]
    return "\n".join(lines)


if __name__ == "__main__":
    benchkit.main(__doc__, table)
