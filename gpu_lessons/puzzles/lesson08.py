"""Puzzles for lesson 08 (system level): fewer, bigger launches."""

from __future__ import annotations

import numpy as np

from ._build import S, loads, once, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

LAUNCH = S(8, "2. Launch overhead and kernel granularity")
SMALL_BATCHES = S(8, "Small batches leave the GPU hungry")
FUSION = S(7, "4.2 Fused kernels and pipelining")
PERSISTENT = S(7, "5.2 Scheduling: launch overhead, persistent kernels, work queues")
GRID_STRIDE = S(8, "A grid-stride loop: one launch for any size")


def _segments(s, rng):
    lengths = rng.integers(0, s["max_len"] + 1, size=s["segments"])
    lengths[rng.integers(0, s["segments"])] = 0  # an empty segment: its sum is 0
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int32)
    return {"x": values(rng, int(offsets[-1]), 0, 10), "offsets": offsets,
            "out": unwritten(s["segments"])}


PUZZLES = (
    Puzzle(
        id="grid_stride", title="Grid-stride loop: any n, one fixed launch", lesson=8,
        goal="`out = 2 * x + 1` for any n, with a launch fixed in advance: 4 blocks of 64 "
             "threads. Each thread starts at its global index and steps by the number of "
             "threads in the grid until it passes n, so one launch covers any size. Lanes loop "
             "different numbers of times, so the index is a per-lane variable (`t.local`) and "
             "the loop a `t.while_` (docs/kernel_language.md shows both).",
        params=("x", "out", "n"), outputs=("out",), spec="out = 2 * x + 1",
        launch_text="grid 4, block 64 (fixed, whatever n is)", lines=5,
        inputs=lambda s, rng: {"x": values(rng, s["n"]), "out": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (4, 64),
        # on a real GPU the fixed launch fills it: 32 blocks of 64 threads per SM are 2,048
        # threads, the most an SM holds; 4 blocks would leave all but 4 SMs idle
        gpu_launch=lambda sms, n: (32 * sms, 64),
        sizes=({"n": 1024},), more=({"n": 1000}, {"n": 77}), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n),
        budgets=(loads("x"), stores("out"), once("x")),
        sections=(GRID_STRIDE, PERSISTENT), picture="x",
    ),
    Puzzle(
        id="segmented_sum", title="Many small sums in one launch", lesson=8,
        goal="`x` holds many segments of different lengths back to back; segment s is "
             "`x[offsets[s]:offsets[s+1]]` (some are empty). Launch one block of 128 threads "
             "per segment, all in one launch, and write each segment's sum to `out[s]`. Each "
             "thread strides through its segment with a per-lane loop (`t.local`, "
             "`t.while_`), then the block adds its 128 partial sums in a shared-memory tree, "
             "as in the `dot` puzzle of Exercises 03.",
        params=("x", "offsets", "out"), outputs=("out",),
        spec="out = np.diff(np.r_[0, np.cumsum(x, dtype=np.float64)][offsets])",
        launch_text="grid segments, block 128", lines=19,
        inputs=_segments, launch=lambda segments, max_len: (segments, 128),
        sizes=({"segments": 6, "max_len": 300},), more=({"segments": 3, "max_len": 40},),
        gpu_size={"segments": 4096, "max_len": 2048},
        valid=lambda segments, max_len: (size_int("segments", segments),
                                         size_int("max_len", max_len)),
        budgets=(Budget("load_sectors", 5.0, "a segment may start anywhere: 128 consecutive "
                        "bytes at any 4-byte offset span at most 5 sectors", array="x"),
                 once("x")),
        sections=(SMALL_BATCHES, LAUNCH), picture="x",
    ),
    Puzzle(
        id="softmax", title="Row softmax in one fused kernel", lesson=8,
        goal="Softmax of every row of a `rows` × `cols` matrix (`cols` ≤ 1024), one block "
             "of 128 threads per row, in one kernel instead of three (max, sum, normalise): "
             "keep the row in shared memory, so every element is read from global memory "
             "once. The row's maximum and sum are block reductions: the tree of the `dot` "
             "puzzle of Exercises 03, with `np.maximum` in place of `+` for the maximum.",
        params=("x", "out", "cols"), outputs=("out",),
        spec="X = x.reshape(-1, cols); E = np.exp(X - X.max(axis=1, keepdims=True)); "
             "out = (E / E.sum(axis=1, keepdims=True)).ravel()",
        launch_text="grid rows, block 128; cols ≤ 1024", lines=41,
        inputs=lambda s, rng: {"x": rng.normal(0, 3, s["rows"] * s["cols"]).astype(np.float32),
                               "out": unwritten(s["rows"] * s["cols"]), "cols": s["cols"]},
        launch=lambda rows, cols: (rows, 128),
        sizes=({"rows": 2, "cols": 256},), more=({"rows": 3, "cols": 100},),
        gpu_size={"rows": 4096, "cols": 1024},
        valid=lambda rows, cols: (size_int("rows", rows), size_int("cols", cols, high=1024)),
        budgets=(once("x", "the row stays in shared memory between the three passes"),
                 loads("x"), stores("out")),
        sections=(FUSION, LAUNCH), picture="x",
        rtol=1e-4, atol=1e-6,
    ),
)
