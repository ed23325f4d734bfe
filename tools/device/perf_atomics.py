"""Atomic throughput on a few hot cache lines, and shared atomics on random bins (an H200 run).

    PYTHONUNBUFFERED=1 python3 tools/device/perf_atomics.py OUT.json
    python3 tools/device/perf_atomics.py --dry

Two questions the performance model's atomics rest on, each timed as
``tools/device/perf_calibration.py`` times its microbenchmarks (CUDA events, median of 10 after
2 warm-ups, ``-fmad=false``):

* ``global_words{W}``: every thread adds 1 four times to word ``(block x 256 + thread) % W`` of
  one array: each warp request covers 32 consecutive words, one 128-byte line, and the grid's
  requests spread over ``W / 32`` lines.  How the time per request falls as the hot lines grow
  from 1 to 128 says how many lines the L2 serves at once.
* ``shared_random`` against ``shared_pattern``: 256 shared bins per block, four adds per thread
  to bins read from a global array of random (or ``i % 256``) values, and no global atomic at
  the end: whether random addresses make shared atomics slower than patterned ones.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("perf_calibration",
                                              os.path.join(HERE, "perf_calibration.py"))
pc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pc)

from gpu_lessons import kernels  # noqa: E402

SMS = pc.SMS
WORDS = (32, 64, 128, 256, 512, 1024, 4096)


def mb_global_words(t, out, w):
    j = (t.block_idx.x * 256 + t.thread_idx.x) % w
    for _k in range(4):
        t.atomic_add(out, j, 1)


def mb_shared_bins(t, x, out, n):
    bins = t.shared(256, np.int32)
    tid = t.thread_idx.x
    bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 1024 + tid
    for k in range(4):
        t.atomic_add(bins, x[i + k * 256], 1)
    t.sync()
    with t.if_(bins[tid] == n):      # never true: keeps the bins without a global atomic
        out[tid] = bins[tid]


def cases():
    rng = np.random.default_rng(3)
    out = {}
    blocks = SMS * 16
    for w in WORDS:
        out[f"global_words{w}"] = (mb_global_words, (blocks,), (256,),
                                   (np.zeros(w, np.int32), w),
                                   {"warp_requests": blocks * 8 * 4, "lines": w // 32})
    n = 1 << 24
    for name, x in (("shared_random", rng.integers(0, 256, n)),
                    ("shared_pattern", np.arange(n) % 256)):
        out[name] = (mb_shared_bins, (n // 1024,), (256,),
                     (x.astype(np.int32), np.zeros(256, np.int32), -1),
                     {"warp_atomics": n // 32})
    return out


def main(argv):
    if "--dry" in argv:
        for name, (k, _grid, block, args, _) in cases().items():
            small = tuple(a[:4096].copy() if isinstance(a, np.ndarray) and a.size > 4096 else a
                          for a in args)
            if name.startswith("shared"):
                kernels.run(k, (2,), block, *small)
            else:
                kernels.run(k, (2,), block, *args)
            kernels.to_cuda(k, *args)
            print(f"  {name}: simulated and translated")
        return
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    record = {"what": __doc__.strip().splitlines()[0], "how": "tools/device/perf_atomics.py",
              "gpu": props["name"].decode(), "cupy": cp.__version__,
              "driver": cp.cuda.runtime.driverGetVersion(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cases": {}}
    for name, (k, grid, block, args, counts) in cases().items():
        sec, samples, regs = pc._time(k, grid, block, args, flush=False)
        record["cases"][name] = {"grid": list(grid), "block": list(block), "counts": counts,
                                 "seconds": sec, "samples": samples, "registers": regs}
        print(f"  {name:18s} {sec * 1e6:9.1f} us")
    with open(argv[1], "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
