"""Puzzles for lesson 03 (the memory hierarchy): shared memory as a block's scratchpad."""

from __future__ import annotations

import math

import numpy as np

from ._build import S, cdiv, loads, power_of_two, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

SHARED = S(3, "How do L1 cache and shared memory share one SRAM?")
L2 = S(3, "Where do all the SMs meet? L2")
BINS = 16
HIERARCHY = S(2, "1. The execution hierarchy: thread → warp → block → SM")
STAGING = S(3, "7. When may a block read its scratchpad? A stencil, its halo and its "
               "barrier")


def _halo_loads(n):
    """Each block of 128 loads its own elements once plus one neighbour on each side; the
    first block has no left neighbour and the last no right one: n + 2·(blocks − 1)."""
    return (n + 2 * (cdiv(n, 128) - 1)) / n


def _histogram_inputs(s, rng):
    n = s["n"]
    return {"x": rng.integers(0, BINS, size=n).astype(np.int32),
            "hist": np.zeros(BINS, np.int32), "n": n}


HISTOGRAM_SPEC = f"hist = np.bincount(x, minlength={BINS})"

PUZZLES = (
    Puzzle(
        id="stencil", title="1-D stencil with a shared-memory halo", lesson=3,
        goal="`out[i] = x[i-1] + x[i] + x[i+1]`, with 0 for the neighbours outside the "
             "array. Blocks of 128 threads: each block loads its 128 values into shared "
             "memory once, plus one neighbour on each side (the *halo*), then every thread "
             "reads its three values from shared memory. The tile is `t.shared(130, np.float32)`, "
             "and `t.sync()` (CUDA's `__syncthreads()`) must separate its writes from the "
             "reads (docs/kernel_language.md lists both).",
        params=("x", "out", "n"), outputs=("out",),
        spec="out = x + np.r_[0, x[:-1]] + np.r_[x[1:], 0]",
        launch_text="grid ⌈n / 128⌉, block 128", lines=16,
        inputs=lambda s, rng: {"x": values(rng, s["n"]), "out": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (cdiv(n, 128), 128),
        sizes=({"n": 256},), more=({"n": 300}, {"n": 100}), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n, low=2),
        budgets=(Budget("loads_per_element", _halo_loads,
                        "each element once, plus two halo values per block but the first: "
                        "n + 2·(⌈n/128⌉ − 1) loads", array="x", section=STAGING,
                        limit_text="(n + 2·(⌈n / 128⌉ − 1)) / n per element"),
                 loads("x"), stores("out")),
        sections=(STAGING, SHARED), picture="x",
    ),
    Puzzle(
        id="dot", title="Dot product: a block reduction", lesson=3,
        goal="`out[0] = a · b` for n values (n a power of two, one thread each, one block). "
             "Each thread multiplies its pair into shared memory; then the block adds the "
             "products in a tree: half the threads add pairs, then a quarter, … A barrier, "
             "`t.sync()`, separates the steps. Size the shared array from the launch "
             "(`t.shared(t.block_dim.x, np.float32)`); the halving step is the same in every "
             "thread, so its loop is a plain Python `while`.",
        params=("a", "b", "out"), outputs=("out",), spec="out = np.array([a @ b])",
        launch_text="grid 1, block n (n a power of two, at most 1024)", lines=12,
        inputs=lambda s, rng: {"a": values(rng, s["n"], 0, 10), "b": values(rng, s["n"], 0, 10),
                               "out": unwritten(1)},
        launch=lambda n: (1, n),
        sizes=({"n": 128},), more=({"n": 32},), gpu_size={"n": 1024},
        valid=lambda n: power_of_two("n", n, low=2, high=1024),
        budgets=(Budget("barriers", lambda n: math.log2(n),
                        "one before each of the log₂ n halving steps (the first waits for "
                        "the products); none after the last, whose sum thread 0 wrote "
                        "itself", section=STAGING, limit_text="log₂ n per block"),
                 Budget("loads_per_element", 1.0, "each value is needed once", array="a"),
                 Budget("loads_per_element", 1.0, "each value is needed once", array="b"),
                 loads("a"), loads("b")),
        sections=(STAGING, HIERARCHY), picture="a",
    ),
    Puzzle(
        id="histogram_global", title="Histogram with global atomics", lesson=3,
        goal=f"Count how many elements of `x` (ints from 0 to {BINS - 1}) fall in each of "
             f"{BINS} bins; `hist` starts at zero. Many threads hit the same bin at once, so "
             "`hist[b] += 1` would lose counts: use `t.atomic_add(hist, b, 1)`, which the "
             "L2 cache applies one after another.",
        params=("x", "hist", "n"), outputs=("hist",), spec=HISTOGRAM_SPEC,
        launch_text="grid ⌈n / 128⌉, block 128", lines=3,
        inputs=_histogram_inputs, launch=lambda n: (cdiv(n, 128), 128),
        sizes=({"n": 512},), more=({"n": 300},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n),
        budgets=(Budget("atomics_per_element", 1.0, "one atomic per element counted",
                        array="x", section=L2),
                 loads("x"), Budget("loads_per_element", 1.0, "each value is read once",
                                    array="x")),
        sections=(L2,), picture="x",
    ),
    Puzzle(
        id="histogram_shared", title="Histogram, privatised in shared memory", lesson=3,
        goal=f"The same histogram, but each block first counts into its own {BINS} bins in "
             "shared memory (zeroed by the block, atomics on shared memory), then adds its "
             f"{BINS} totals to `hist` with one global atomic per bin. Contention moves from "
             "the L2 cache to the SM: every block still adds to the same {BINS} bins, but it "
             f"sends {BINS} global atomics instead of 128, each bin from its own lane, so no "
             "warp instruction's lanes collide on one address. The bins are "
             f"`t.shared({BINS}, np.int32)`; `t.atomic_add` works on a shared array as on a global "
             "one, and `t.sync()` separates zeroing, counting and merging.",
        params=("x", "hist", "n"), outputs=("hist",), spec=HISTOGRAM_SPEC,
        launch_text="grid ⌈n / 128⌉, block 128", lines=11,
        inputs=_histogram_inputs, launch=lambda n: (cdiv(n, 128), 128),
        sizes=({"n": 512},), more=({"n": 300},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n),
        budgets=(Budget("atomic_serialisation", 1.0, f"the merge's {BINS} lanes each update "
                        "a different bin", section=SHARED),
                 Budget("global_atomics_per_block", BINS, "one global atomic per bin per "
                        "block", section=SHARED),
                 loads("x"), Budget("loads_per_element", 1.0, "each value is read once",
                                    array="x")),
        sections=(SHARED, L2), picture="x",
    ),
)
