"""The matrix-multiply ladder (lesson 07, section 6): ``c = a @ b`` for an m × k and a k × n
matrix, each rung one technique further, after ``matmul_naive``, ``matmul_tiled`` and
``matmul_register``.

The rungs follow the order of S. Boehm's worklog "How to Optimize a CUDA Matmul Kernel for
cuBLAS-like Performance" (2022): 1-D and 2-D thread tiles, vectorised loads, double buffering,
warp tiles.  Every budget is derived in its ``why`` from the tile shape: the best a sound kernel
of that shape reaches, and the worked kernels reach each one.  Checks run one block's tile
with k = 32 (four turns of the k loop, both stages twice), and two products of two blocks with
m ≠ n and k ≠ n, where block offsets and strides that mix up m, n and k show.
"""

from __future__ import annotations

from ._build import S, size_int, unwritten, values
from ._core import Budget, Puzzle
from .lesson07 import BANKS, REUSE

THREAD_TILES = S(7, "6.1 Thread tiles: many results per thread")
WIDE = S(7, "6.2 Wide loads: one float4 instead of four floats")
STAGES = S(7, "6.3 Two stages: load the next tile while computing this one")
WARP_TILES = S(7, "6.4 Warp tiles: what one warp reads at once")

SPEC = "c = (a.reshape(m, k) @ b.reshape(k, n)).ravel()"

#: Global accesses of any width (float or float4) use every byte of every sector they move.
FULL_SECTORS_WHY = ("memory moves in 32-byte sectors: 32 consecutive floats are 4 whole "
                    "sectors, 32 consecutive float4s 16; lanes far apart waste most of each")

def _inputs(s, rng):
    m, n, k = s["m"], s["n"], s["k"]
    return {"a": values(rng, m * k, -4, 5), "b": values(rng, k * n, -4, 5),
            "c": unwritten(m * n), "m": m, "n": n, "k": k}


def _valid(tile, k_step):
    def valid(m, n, k):
        size_int("m", m, low=tile, multiple=tile)
        size_int("n", n, low=tile, multiple=tile)
        size_int("k", k, low=k_step, multiple=k_step)
    return valid


def _reuse(tile, vector=1):
    """Global loads per element of a and b: each is read by the n / tile (m / tile) blocks
    along its row (column) of c, and a float4 load brings 4 elements at once."""
    per = tile * vector
    wide = ", 4 elements (a float4) a load" if vector > 1 else ""
    return (Budget("loads_per_element", lambda m, n, k: n / per,
                   f"a's row of tiles is read once by each of the n / {tile} blocks along its "
                   f"row of c{wide}", array="a", section=REUSE,
                   limit_text=f"n / {per} per element"),
            Budget("loads_per_element", lambda m, n, k: m / per,
                   f"b's column of tiles is read once by each of the m / {tile} blocks along "
                   f"its column of c{wide}", array="b", section=REUSE,
                   limit_text=f"m / {per} per element"))


def _whole_sectors():
    return (Budget("load_sector_use", 1.0, FULL_SECTORS_WHY, array="a"),
            Budget("load_sector_use", 1.0, "likewise", array="b"),
            Budget("store_sector_use", 1.0, "likewise for the stores", array="c"))


NO_CONFLICTS = Budget("bank_conflicts", 0, "every shared access of a warp is served in the "
                      "fewest wavefronts its bytes need", section=BANKS)
VECTOR_SHARED = Budget("shared_loads_per_fma", 4 / 64, "4 float4 loads (8 values of a, 8 of "
                       "b) feed 8 × 8 = 64 multiply-adds: 1/16", section=WIDE)
ONE_BARRIER = Budget("barriers", lambda m, n, k: k / 8 + 1, "one barrier after the first "
                     "tile is stored and one a tile: while a stage is read the other is "
                     "filled", section=STAGES, limit_text="k / 8 + 1 per block")


def _rung(pid, title, goal, lines, budgets, sections, *, tile=128, threads=256, k_step=8,
          max_instructions=200_000):
    return Puzzle(
        id=pid, title=title, lesson=7, goal=goal,
        params=("a", "b", "c", "m", "n", "k"), outputs=("c",), spec=SPEC,
        launch_text=(f"grid (n / {tile}, m / {tile}), block {threads}; m and n multiples of "
                     f"{tile}, k a multiple of {k_step}"),
        lines=lines, inputs=_inputs,
        launch=lambda m, n, k: ((n // tile, m // tile), threads),
        sizes=({"m": tile, "n": tile, "k": 32},),
        more=({"m": 2 * tile, "n": tile, "k": k_step}, {"m": tile, "n": 2 * tile, "k": 16}),
        gpu_size={"m": 4096, "n": 4096, "k": 4096},
        flops=lambda m, n, k: 2 * m * n * k,  # m n outputs, k multiply-adds each
        valid=_valid(tile, k_step), budgets=budgets, sections=sections, picture="a",
        picture_row="k", max_instructions=max_instructions,
    )


PUZZLES = (
    _rung("sgemm_1d_blocktile", "Matrix multiply, rung 1: 1-D thread tiles",
          "`c = a @ b` with 64 × 64 tiles of `c` per block of 512 threads, k in steps of 8: "
          "copy a 64 × 8 tile of `a` and an 8 × 64 tile of `b` into shared memory, and let "
          "each thread compute 8 results of one column, rows `r .. r + 7`, in a per-thread "
          "array `acc = t.local((8,), np.float32)`. Per step of k it loads one value of the "
          "`b` tile and reuses it for 8 multiply-adds.", 20,
          (Budget("shared_loads_per_fma", 9 / 8, "1 value of b and 8 of a feed 8 "
                  "multiply-adds: 9/8 (one result per thread needs 2)", section=THREAD_TILES),
           *_reuse(64), *_whole_sectors(), NO_CONFLICTS),
          (THREAD_TILES, REUSE), tile=64, threads=512, max_instructions=100_000),
    _rung("sgemm_2d_blocktile", "Matrix multiply, rung 2: 2-D thread tiles",
          "`c = a @ b` with 128 × 128 tiles of `c` per block of 256 threads: each thread "
          "computes an 8 × 8 patch of results in registers (`t.local((8, 8), np.float32)`). "
          "Per step of k it copies 8 values of the `a` tile and 8 of the `b` tile into "
          "per-thread arrays and does 64 multiply-adds (an outer product). Spread a thread's "
          "rows and columns 16 apart, so that a warp's loads fall in different banks.", 28,
          (Budget("shared_loads_per_fma", 16 / 64, "8 values of a and 8 of b feed 8 × 8 = 64 "
                  "multiply-adds: 1/4", section=THREAD_TILES),
           *_reuse(128), *_whole_sectors(), NO_CONFLICTS),
          (THREAD_TILES, REUSE, BANKS)),
    _rung("sgemm_vectorized", "Matrix multiply, rung 3: float4 loads and stores",
          "The 128 × 128, 8 × 8-per-thread product with every access four floats wide: "
          "`t.vload(a, i, 4)` from global memory, the `a` tile stored *transposed* in shared "
          "memory (so a thread's 4 rows are 4 consecutive words: one `t.vload` from shared "
          "memory), a thread's columns in two groups of 4, and `t.vstore` for `c`. A float4 "
          "needs its first index a multiple of 4; pad the transposed tile's rows so that its "
          "stores do not conflict.", 36,
          (VECTOR_SHARED, *_reuse(128, 4), *_whole_sectors(), NO_CONFLICTS),
          (WIDE, REUSE, BANKS)),
    _rung("sgemm_double_buffered", "Matrix multiply, rung 4: double buffering",
          "The float4 product with two shared stages, `t.shared((2, 8, 132), …)`: load the "
          "next tile from global memory into registers *before* computing on this one, store "
          "it into the other stage *after*, and synchronise once a tile. The loads are then "
          "in flight while the multiply-adds run.", 48,
          (ONE_BARRIER, VECTOR_SHARED, *_reuse(128, 4), *_whole_sectors(), NO_CONFLICTS),
          (STAGES, WIDE)),
    _rung("sgemm_warptile", "Matrix multiply, rung 5: warp tiles, stages unrolled",
          "The double-buffered product with each warp computing a 32 × 64 tile of the "
          "block's 128 × 128, its lanes arranged 4 × 8 (each lane still 8 × 8 results, as "
          "two 4-row by two 4-column groups). Arrange the lanes so that neighbours read the "
          "same float4 (lanes i and i ^ 1 the same of one operand, i and i ^ 2 the same of "
          "the other): each half-warp's `t.vload` from shared memory is then one wavefront. "
          "Then take k in steps of 16, two tiles a turn, with an unrolled `for s in "
          "range(2)` over the stages, so that every stage index is a constant.", 54,
          (Budget("shared_wavefronts_per_fma", 8 / 64, "4 float4 loads of a warp, 2 wavefronts "
                  "each (half-warps of 16-byte lanes never share one) when lanes i and i ^ 1 "
                  "(or i ^ 2) read the same float4, feed 64 multiply-add instructions: 1/8 "
                  "(the 16 × 2 lane grid of rung 4 needs 12/64)", section=WARP_TILES),
           ONE_BARRIER, VECTOR_SHARED, *_reuse(128, 4), *_whole_sectors(), NO_CONFLICTS),
          (WARP_TILES, STAGES), k_step=16),
)
