"""Puzzles for lesson 05 (roofline): matrix multiply, from one product per thread to tiles.

Arithmetic intensity is FLOPs over bytes moved; a tile kept in shared memory divides the
bytes each block reads from DRAM by the tile edge, so the kernel climbs the roofline.
"""

from __future__ import annotations

from ._build import S, cdiv, loads, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

INTENSITY = S(5, "3. The kernel: FLOPs, bytes and arithmetic intensity")
BANKS = S(4, "5. Shared memory banks")


def _matmul_inputs(s, rng):
    n = s["n"]
    return {"a": values(rng, n * n, -4, 5), "b": values(rng, n * n, -4, 5),
            "c": unwritten(n * n), "n": n}


SPEC = "c = (a.reshape(n, n) @ b.reshape(n, n)).ravel()"

PUZZLES = (
    Puzzle(
        id="matmul_naive", title="Matrix multiply, one output per thread", lesson=5,
        goal="`c = a @ b` for n × n matrices stored row by row. Each thread computes one "
             "element of `c` as a dot product of a row of `a` and a column of `b`, reading "
             "both from global memory. Let `thread_idx.x` walk along a row of `c` (and of "
             "`b`) so those accesses coalesce; n need not be a multiple of 16.",
        params=("a", "b", "c", "n"), outputs=("c",), spec=SPEC,
        launch_text="grid (⌈n / 16⌉, ⌈n / 16⌉), block (16, 16)", lines=7,
        inputs=_matmul_inputs, launch=lambda n: ((cdiv(n, 16), cdiv(n, 16)), (16, 16)),
        sizes=({"n": 16},), more=({"n": 20},), gpu_size={"n": 4096},
        flops=lambda n: 2 * n**3,  # n² outputs, n multiply-adds each
        valid=lambda n: size_int("n", n),
        budgets=(loads("b"), stores("c"),
                 Budget("loads_per_element", lambda n: n, "every element of a is read by "
                        "the n threads of its row of c", array="a", section=INTENSITY,
                        limit_text="n per element"),
                 Budget("loads_per_element", lambda n: n, "every element of b is read by "
                        "the n threads of its column of c", array="b", section=INTENSITY,
                        limit_text="n per element")),
        sections=(INTENSITY,), picture="b", picture_row="n",
    ),
    Puzzle(
        id="matmul_tiled", title="Matrix multiply with shared-memory tiles", lesson=5,
        goal="`c = a @ b` again (n a multiple of 16), but each 16 × 16 block first copies a "
             "16 × 16 tile of `a` and one of `b` into shared memory (`t.shared((16, 16), "
             "np.float32)` each), waits (`t.sync()`), multiplies the tiles from there, waits "
             "again, and moves on to the next pair of tiles. Every element of `a` and `b` is "
             "then read from global memory n / 16 times instead of n. (Lesson 07, “3.2 Data "
             "reuse”, takes tiling further.)",
        params=("a", "b", "c", "n"), outputs=("c",), spec=SPEC,
        launch_text="grid (n / 16, n / 16), block (16, 16); n a multiple of 16", lines=15,
        inputs=_matmul_inputs, launch=lambda n: ((n // 16, n // 16), (16, 16)),
        sizes=({"n": 32},), more=({"n": 16},), gpu_size={"n": 4096},
        flops=lambda n: 2 * n**3,  # n² outputs, n multiply-adds each
        valid=lambda n: size_int("n", n, low=16, multiple=16),
        budgets=(Budget("loads_per_element", lambda n: n / 16, "a's row of tiles is read "
                        "once by each of the n / 16 blocks along its row of c", array="a",
                        section=INTENSITY, limit_text="n / 16 per element"),
                 Budget("loads_per_element", lambda n: n / 16, "b's column of tiles is read "
                        "once by each of the n / 16 blocks along its column of c", array="b",
                        section=INTENSITY, limit_text="n / 16 per element"),
                 loads("a"), loads("b"), stores("c"),
                 Budget("bank_conflicts", 0, "a warp is 2 rows of 16 threads: stored as "
                        "`sa[ty, tx]`, each tile row goes to 16 consecutive banks and "
                        "`sa[ty, k]` is read by a row's 16 lanes at once (a broadcast); a tile "
                        "stored transposed puts a warp's stores 16 words apart, in 2 banks",
                        section=BANKS)),
        sections=(INTENSITY, BANKS), picture="a", picture_row="n",
    ),
)
