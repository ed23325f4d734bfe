"""Tensor cores (lesson 07, section 6.6).  ``mma_tile``: one warp, one ``t.mma``, each lane
loading only the elements its fragments hold; ``hgemm_mma``: the whole product, 128 × 128 tiles
a block of eight warps, each warp 64 × 32 of them, cp.async stages and ``t.ldmatrix``.  The
inputs are small whole numbers, so every sum is exact in any order: a wrong layout shows as
wrong values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._build import S, once, size_int
from ._core import Budget, Puzzle
from .lesson07_sgemm import NO_CONFLICTS, STAGES, WARP_TILES

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


def _hgemm_inputs(s, rng):
    m, n, k = s["m"], s["n"], s["k"]
    return {"a": rng.integers(-4, 5, m * k).astype(ml_dtypes.bfloat16),
            "b": rng.integers(-4, 5, k * n).astype(ml_dtypes.bfloat16),
            "c": np.full(m * n, np.nan, np.float32), "m": m, "n": n, "k": k}


def _hgemm_valid(m, n, k):
    size_int("m", m, low=128, multiple=128)
    size_int("n", n, low=128, multiple=128)
    size_int("k", k, low=32, multiple=32)


#: The tensor-core budgets every mma puzzle keeps.
ALL_ON_TENSOR_CORES = (
    Budget("tensor_core_share", 1.0, "one m16n8k16 instruction does 16 × 8 × 16 multiply-adds, "
           "and every multiply-add of the product can be one of its", section=TENSOR_CORES),
    Budget("mma_instructions", 1.0, "m n k / (16 × 8 × 16) instructions, none twice",
           section=TENSOR_CORES))

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
        budgets=(*ALL_ON_TENSOR_CORES,
                 once("a", "each element of a sits in one lane's fragment"),
                 once("b", "each element of b sits in one lane's fragment"),
                 Budget("shared_requests_per_block", 0, "the fragments come straight from "
                        "global memory; ldmatrix pays off when a block shares its tiles",
                        section=TENSOR_CORES)),
        sections=(TENSOR_CORES, WARP_TILES), picture="a", max_instructions=2_000,
    ),
    Puzzle(
        id="hgemm_mma", title="A BF16 matrix multiply on the tensor cores", lesson=7,
        goal="`c = a @ b` (bfloat16 in, float32 out) with 128 × 128 tiles of `c` a block of "
             "eight warps, each warp 64 × 32 of it in 16 accumulator fragments: 16 `t.mma` a "
             "step of 16 along k. Bring each 128 × 32 tile of `a` and 32 × 128 of `b` into two "
             "shared stages with `t.copy_async` (8 halves, 16 bytes, a lane), and the fragments "
             "out of them with `t.ldmatrix` (`trans=True` for `b`, stored k by n). Pad the "
             "stages' rows so that the 8 rows of each ldmatrix fall in different banks; one "
             "barrier a tile.",
        params=("a", "b", "c", "m", "n", "k"), outputs=("c",),
        spec="c = (a.reshape(m, k).astype(np.float32) @ b.reshape(k, n).astype(np.float32))"
             ".ravel()",
        launch_text="grid (n / 128, m / 128), block 256; m and n multiples of 128, k of 32",
        lines=115, inputs=_hgemm_inputs,
        launch=lambda m, n, k: ((n // 128, m // 128), 256),
        sizes=({"m": 128, "n": 128, "k": 96},),
        more=({"m": 128, "n": 256, "k": 32}, {"m": 256, "n": 128, "k": 64}),
        gpu_size={"m": 4096, "n": 4096, "k": 4096},
        flops=lambda m, n, k: 2 * m * n * k, valid=_hgemm_valid,
        budgets=(*ALL_ON_TENSOR_CORES, NO_CONFLICTS,
                 Budget("loads_per_element", lambda m, n, k: n / 1024,
                        "a's row of tiles is read once by each of the n / 128 blocks along its "
                        "row of c, 8 elements a copy", array="a",
                        limit_text="n / 1024 per element"),
                 Budget("loads_per_element", lambda m, n, k: m / 1024,
                        "b's column of tiles is read once by each of the m / 128 blocks along "
                        "its column of c, 8 elements a copy", array="b",
                        limit_text="m / 1024 per element"),
                 Budget("barriers", lambda m, n, k: k / 32, "one a tile: after its wait, "
                        "before the other stage is filled", section=STAGES,
                        limit_text="k / 32 per block")),
        sections=(TENSOR_CORES, STAGES), picture="a", picture_row="k", max_instructions=40_000,
    ),
)
