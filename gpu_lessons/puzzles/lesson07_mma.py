"""Tensor cores (lesson 07, section 6.6): one warp computes a 16 × 8 tile ``c = a @ b`` (a
16 × 16, b 16 × 8, bfloat16 in, float32 out) with one ``t.mma``, each lane loading exactly the
elements of ``a`` and ``b`` its fragments hold (``kernels.mma_layout``) and storing the four
of ``c`` it holds.  The inputs are small whole numbers, so every product and sum is exact and
any order of the sums gives NumPy's answer: a wrong layout shows as wrong values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._build import S, once
from ._core import Budget, Puzzle
from .lesson07_sgemm import WARP_TILES

TENSOR_CORES = S(7, "6.6 Tensor cores: one warp, one matrix instruction")
#: The one shape of mma.m16n8k16.
SIZE = {"m": 16, "n": 8, "k": 16}


def _inputs(s, rng):
    return {"a": rng.integers(-4, 5, (16, 16)).astype(ml_dtypes.bfloat16),
            "b": rng.integers(-4, 5, (16, 8)).astype(ml_dtypes.bfloat16),
            "c": np.full((16, 8), np.nan, np.float32)}


def _valid(m, n, k):
    if (m, n, k) != (16, 8, 16):
        raise ValueError(f"mma_tile is one m16n8k16 tile: m, n, k = 16, 8, 16, got "
                         f"{m}, {n}, {k}")


PUZZLES = (
    Puzzle(
        id="mma_tile", title="One tile on the tensor cores", lesson=7,
        goal="`c = a @ b` for one 16 × 16 `a` and 16 × 8 `b` of bfloat16, in float32, by one "
             "warp and one `t.mma(d, fa, fb, fc)`: each lane loads into "
             "`fa = t.local((8,), ml_dtypes.bfloat16)` and `fb = t.local((4,), …)` the "
             "elements of `a` and `b` its fragments hold, and stores the 4 of `c` it holds "
             "(`gpu_lessons.kernels.mma_layout('a')` prints who holds what).",
        params=("a", "b", "c"), outputs=("c",),
        spec="c = a.astype(np.float32) @ b.astype(np.float32)",
        launch_text="grid 1, block 32 (one warp)", lines=14, inputs=_inputs,
        launch=lambda m, n, k: (1, 32), sizes=(SIZE,), more=(SIZE,), gpu_size=SIZE,
        flops=lambda m, n, k: 2 * m * n * k, valid=_valid,
        budgets=(Budget("tensor_core_share", 1.0, "one m16n8k16 instruction does all 16 × 8 × "
                        "16 multiply-adds", section=TENSOR_CORES),
                 Budget("mma_instructions", 1.0, "the tile is exactly one instruction's shape",
                        section=TENSOR_CORES),
                 once("a", "each element of a sits in one lane's fragment"),
                 once("b", "each element of b sits in one lane's fragment"),
                 Budget("shared_requests_per_block", 0, "the fragments come straight from "
                        "global memory; ldmatrix pays off when a block shares its tiles",
                        section=TENSOR_CORES)),
        sections=(TENSOR_CORES, WARP_TILES), picture="a", max_instructions=2_000,
    ),
)
