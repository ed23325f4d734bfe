"""Does the pre-Volta warp-synchronous reduction (the last warp's steps with no __syncwarp())
give the right sums on a real GPU?  The simulator runs a warp in lockstep and, since it does
not on Volta and later, reports it as a race.  This runs it, translated by to_cuda, beside the
same kernel with its read and write split by t.syncwarp().

    python3 tools/device/warp_synchronous.py OUT_DIR

Writes OUT_DIR/warp_synchronous.json: per kernel and build (-fmad=false and nvcc's default),
whether the output matched the spec, how many block sums were wrong, and the time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpu_lessons import kernels, puzzles  # noqa: E402


def warp_synchronous(t, x, out):
    # the pre-Volta idiom: the last warp's steps with no __syncwarp(), trusting lockstep
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    for k in range(2):
        s = 128 >> k
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
        t.sync()
    for k in range(6):
        s = 32 >> k
        with t.if_(tid < 32):
            sdata[tid] = sdata[tid] + sdata[tid + s]
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def split_by_syncwarp(t, x, out):
    # the same steps, each read and write ordered by __syncwarp()
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    t.sync()
    for k in range(2):
        s = 128 >> k
        with t.if_(tid < s):
            sdata[tid] = sdata[tid] + sdata[tid + s]
        t.sync()
    for k in range(6):
        s = 32 >> k
        v = t.local(0.0)
        with t.if_(tid < 32):
            v[...] = sdata[tid] + sdata[tid + s]
        t.syncwarp()
        with t.if_(tid < 32):
            sdata[tid] = v
        t.syncwarp()
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def main(out: Path) -> None:
    variants = {"warp_synchronous (no t.syncwarp)": warp_synchronous,
               "split by t.syncwarp": split_by_syncwarp}
    p = puzzles.find("reduce")
    results = []
    for label, kernel in variants.items():
        for exact in (True, False):
            for n in (1 << 24, 1 << 20):
                args = p.make_inputs({"n": n}, seed=1)
                expected = p.expected(args)["out"]
                grid, block = p.launch(n=n)
                run = kernels.run_on_gpu(kernel, grid, block, *args.values(), repeats=5,
                                      exact=exact)
                got = args["out"]
                bad = ~np.isclose(got, expected, rtol=p.rtol, atol=p.atol)
                results.append({"kernel": label, "fmad": not exact, "n": n,
                                "blocks": int(got.size), "wrong_blocks": int(bad.sum()),
                                "first_wrong": (None if not bad.any() else
                                                [float(got[bad][0]), float(expected[bad][0])]),
                                "median_us": run.timing.median * 1e6, "device": run.device})
                print(results[-1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "warp_synchronous.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
