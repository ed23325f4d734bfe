"""Attention on the tensor cores (lesson 07, section 6.7).  ``flash_attention``: one head's
``softmax(Q Kᵀ / √d) V`` for a tile of 64 queries a block, the scores kept on chip: two
``t.mma`` products a tile of 64 keys and the online softmax (a running maximum and sum per row,
the accumulator rescaled when the maximum grows).  ``decode_attention``: one query a head
against a long KV cache, the memory-bound case: the block's 16 groups of 16 threads each keep
their own running softmax over a share of the keys, combined in shared memory at the end (the
split of flash-decoding, over the warps of one block a head).  The head dimension is 128.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._build import S, size_int
from ._core import Budget, Puzzle
from .lesson07_mma import ALL_ON_TENSOR_CORES, TENSOR_CORES
from .lesson07_sgemm import NO_CONFLICTS, STAGES

ATTENTION = S(7, "6.7 Attention: scores that never leave the chip")
#: The head dimension every attention puzzle uses (a register array's length is fixed when the
#: kernel compiles, so the kernel's loops over it are too).
HEAD_DIM = 128


def _flash_inputs(s, rng):
    n = s["heads"] * s["seq"] * HEAD_DIM
    return {"q": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "k": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "v": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "o": np.full(n, np.nan, np.float32), "seq": s["seq"], "heads": s["heads"]}


def _flash_valid(seq, heads):
    size_int("seq", seq, low=64, multiple=64)
    size_int("heads", heads)


FLASH_SPEC = """\
Q, K, V = (x.reshape(heads, seq, 128).astype(np.float64) for x in (q, k, v))
s = Q @ K.transpose(0, 2, 1) / np.sqrt(128)
p = np.exp(s - s.max(axis=2, keepdims=True))
o = ((p / p.sum(axis=2, keepdims=True)) @ V).astype(np.float32).ravel()"""

def _decode_inputs(s, rng):
    n = s["heads"] * s["seq"] * HEAD_DIM
    return {"q": rng.standard_normal(s["heads"] * HEAD_DIM).astype(ml_dtypes.bfloat16),
            "k": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "v": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "o": np.full(s["heads"] * HEAD_DIM, np.nan, np.float32),
            "seq": s["seq"], "heads": s["heads"]}


def _decode_valid(seq, heads):
    size_int("seq", seq, low=32, multiple=32)
    size_int("heads", heads)


DECODE_SPEC = """\
Q = q.reshape(heads, 1, 128).astype(np.float64)
K, V = (x.reshape(heads, seq, 128).astype(np.float64) for x in (k, v))
s = Q @ K.transpose(0, 2, 1) / np.sqrt(128)
p = np.exp(s - s.max(axis=2, keepdims=True))
o = ((p / p.sum(axis=2, keepdims=True)) @ V).astype(np.float32).ravel()"""

PUZZLES = (
    Puzzle(
        id="flash_attention", title="Attention with the scores on chip (FlashAttention)",
        lesson=7,
        goal="`o = softmax(q kᵀ / √128) v` for each head (bfloat16 `q`, `k`, `v` of `heads × "
             "seq × 128`, float32 `o`), 64 queries a block of four warps, each warp 16 rows. "
             "Hold the warp's Q fragments in registers; for each tile of 64 keys bring K and V "
             "into shared memory with `t.copy_async`, compute the 16 × 64 scores with `t.mma` "
             "(K's fragments by `t.ldmatrix`), keep each row's running maximum `m` and sum `l` "
             "(quad shuffles: lanes 4g .. 4g + 3 hold rows g and g + 8), rescale the "
             "accumulator by `exp2(m_old − m_new)`, and add `P V` with `t.mma` (V by "
             "`t.ldmatrix(..., trans=True)`): two adjacent C fragments of P, rounded to "
             "bfloat16, are exactly one A fragment. Divide by `l` at the end; the scores never "
             "go to global memory.",
        params=("q", "k", "v", "o", "seq", "heads"), outputs=("o",),
        spec=FLASH_SPEC,
        launch_text="grid (seq / 64, heads), block 128; seq a multiple of 64",
        lines=90, inputs=_flash_inputs,
        launch=lambda seq, heads: ((seq // 64, heads), 128),
        sizes=({"seq": 128, "heads": 1},), more=({"seq": 64, "heads": 2},),
        gpu_size={"seq": 4096, "heads": 32},
        flops=lambda seq, heads: 4 * seq * seq * HEAD_DIM * heads, valid=_flash_valid,
        # |o - o_ref| <= 0.01 + 0.01 |o_ref|: P is rounded to bfloat16 (8 significant bits,
        # 2⁻⁹ relative) before P V, and o's elements, averages of standard-normal values, are
        # below 1; a dropped rescale is off by the whole earlier tiles' weight.
        rtol=1e-2, atol=1e-2,
        budgets=(*ALL_ON_TENSOR_CORES, NO_CONFLICTS,
                 Budget("loads_per_element", 1 / 8, "each query's row is read once, by its "
                        "block, 8 halves a copy", array="q", limit_text="1 / 8 per element"),
                 Budget("loads_per_element", lambda seq, heads: seq / 512,
                        "each of a head's seq / 64 blocks reads all of its K once, 8 halves a "
                        "copy", array="k", limit_text="seq / 512 per element"),
                 Budget("loads_per_element", lambda seq, heads: seq / 512,
                        "each of a head's seq / 64 blocks reads all of its V once",
                        array="v", limit_text="seq / 512 per element"),
                 Budget("barriers", lambda seq, heads: seq / 16 + 2,
                        "four a tile of keys (K landed, K read, V landed, V read) and two for "
                        "Q's tile", section=STAGES, limit_text="seq / 16 + 2 per block")),
        sections=(ATTENTION, TENSOR_CORES, STAGES), picture="k", picture_row="seq",
        max_instructions=200_000,
    ),    Puzzle(
        id="decode_attention", title="One query against a long KV cache (decoding)",
        lesson=7,
        goal="`o = softmax(q kᵀ / √128) v` for one query a head (bfloat16 `q` of `heads × 128`, "
             "`k`, `v` of `heads × seq × 128`, float32 `o`), a block of 256 threads a head: "
             "every byte of K and V is read once, so this is the bandwidth slope. Copy tiles of "
             "32 keys into two shared stages with `t.copy_async` (8 halves, 16 bytes, a copy); "
             "16 threads share a key (8 of its dimensions each, 16 apart, so that a warp's reads "
             "fall in different banks) and sum its score with shuffles; each group of 16 keeps "
             "a running maximum, sum and weighted V, and the 16 groups are combined at the end "
             "through shared memory, each rescaled by `exp2(m_g − m)`.",
        params=("q", "k", "v", "o", "seq", "heads"), outputs=("o",),
        spec=DECODE_SPEC,
        launch_text="grid heads, block 256; seq a multiple of 32",
        lines=60, inputs=_decode_inputs,
        launch=lambda seq, heads: (heads, 256),
        sizes=({"seq": 128, "heads": 2},), more=({"seq": 32, "heads": 1},),
        gpu_size={"seq": 8192, "heads": 256},
        # as flash_attention's, with no bfloat16 rounding of P at all
        rtol=1e-2, atol=1e-2,
        budgets=(NO_CONFLICTS,
                 Budget("loads_per_element", 1 / 8, "the query is read once, 8 halves a copy",
                        array="q", limit_text="1 / 8 per element"),
                 Budget("loads_per_element", 1 / 8, "each key is read once, by its head's "
                        "block, 8 halves (16 bytes) a copy", array="k",
                        limit_text="1 / 8 per element"),
                 Budget("loads_per_element", 1 / 8, "each value row likewise", array="v",
                        limit_text="1 / 8 per element"),
                 Budget("load_sectors", 16.0, "32 lanes × 16 bytes, consecutive: 512 bytes, "
                        "16 sectors of 32 bytes a request", array="k"),
                 Budget("load_sectors", 16.0, "as for k", array="v"),
                 Budget("barriers", lambda seq, heads: seq / 32 + 1,
                        "one a tile (after its wait, before the other stage is filled) and "
                        "one before the combine", section=STAGES,
                        limit_text="seq / 32 + 1 per block")),
        sections=(ATTENTION, STAGES), picture="k", picture_row="seq",
        max_instructions=100_000,
    ),
)
