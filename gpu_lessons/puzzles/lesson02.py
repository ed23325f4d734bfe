"""Puzzles for lesson 02 (threads, warps and SMs): indexing, guards, blocks and divergence."""

from __future__ import annotations

from ._build import S, cdiv, loads, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

HIERARCHY = S(2, "1. The execution hierarchy: thread → warp → block → SM")
SIMT = S(2, "2. SIMT: one instruction, 32 lanes, an active mask")
DIVERGENCE = S(2, "3. Warp divergence: branch by lane or branch by warp")


def _one_block(n):
    size_int("n", n, high=1024)


PUZZLES = (
    Puzzle(
        id="map", title="Map", lesson=2,
        goal="Add 10 to every element of `a`. There is one thread per element, all in one "
             "block: thread `t.thread_idx.x` handles element `t.thread_idx.x`.",
        params=("a", "out"), outputs=("out",), spec="out = a + 10",
        launch_text="grid 1, block n (one thread per element)", lines=2,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "out": unwritten(s["n"])},
        launch=lambda n: (1, n),
        sizes=({"n": 64},), more=({"n": 20},), gpu_size={"n": 1024}, valid=_one_block,
        budgets=(loads("a"), stores("out")), sections=(HIERARCHY,), picture="a",
    ),
    Puzzle(
        id="zip", title="Zip", lesson=2,
        goal="Add `a` and `b` element by element, one thread per element in one block.",
        params=("a", "b", "out"), outputs=("out",), spec="out = a + b",
        launch_text="grid 1, block n", lines=2,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "b": values(rng, s["n"]),
                               "out": unwritten(s["n"])},
        launch=lambda n: (1, n),
        sizes=({"n": 64},), more=({"n": 20},), gpu_size={"n": 1024}, valid=_one_block,
        budgets=(loads("a"), loads("b"), stores("out")), sections=(HIERARCHY,),
    ),
    Puzzle(
        id="guard", title="Guard", lesson=2,
        goal="Add 10 to every element of `a`, which has `n` elements — but the block has 256 "
             "threads, more than there are elements. Threads without an element must touch "
             "nothing (`t.return_if`).",
        params=("a", "out", "n"), outputs=("out",), spec="out = a + 10",
        launch_text="grid 1, block 256; n ≤ 256", lines=3,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "out": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (1, 256),
        sizes=({"n": 256},), more=({"n": 100},), gpu_size={"n": 256},
        valid=lambda n: size_int("n", n, high=256),
        budgets=(loads("a"), stores("out")), sections=(SIMT,),
    ),
    Puzzle(
        id="map_2d", title="Map in 2-D", lesson=2,
        goal="`a` is an n × n matrix stored row by row (element (i, j) at `a[i*n + j]`). Add "
             "10 to every element with a 16 × 16 block of threads; n may be smaller than 16. "
             "A warp is 32 threads with consecutive `thread_idx.x` (then `.y`): choose which "
             "index walks along a row.",
        params=("a", "out", "n"), outputs=("out",), spec="out = a + 10",
        launch_text="grid 1, block (16, 16); n ≤ 16", lines=4,
        inputs=lambda s, rng: {"a": values(rng, s["n"] ** 2), "out": unwritten(s["n"] ** 2),
                               "n": s["n"]},
        launch=lambda n: (1, (16, 16)),
        sizes=({"n": 16},), more=({"n": 5},), gpu_size={"n": 16},
        valid=lambda n: size_int("n", n, high=16),
        budgets=(loads("a"), stores("out")), sections=(HIERARCHY,), picture="a",
        picture_row="n",
    ),
    Puzzle(
        id="broadcast", title="Broadcast", lesson=2,
        goal="Make the n × m table `out[i*m + j] = a[i] + b[j]` from a column `a` (n values) "
             "and a row `b` (m values), with one 16 × 16 block; n and m may be smaller than "
             "16.",
        params=("a", "b", "out", "n", "m"), outputs=("out",),
        spec="out = (a[:, None] + b[None, :]).ravel()",
        launch_text="grid 1, block (16, 16); n, m ≤ 16", lines=4,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "b": values(rng, s["m"]),
                               "out": unwritten(s["n"] * s["m"]), "n": s["n"], "m": s["m"]},
        launch=lambda n, m: (1, (16, 16)),
        sizes=({"n": 16, "m": 16},), more=({"n": 5, "m": 11}, {"n": 16, "m": 3}),
        gpu_size={"n": 16, "m": 16},
        valid=lambda n, m: (size_int("n", n, high=16), size_int("m", m, high=16)),
        # no budget on loading a or b: 16 floats are 64 B, 2 sectors, however a warp reads
        # them; the table's stores are where the choice of index shows
        budgets=(stores("out"),), sections=(HIERARCHY,),
    ),
    Puzzle(
        id="blocks", title="Blocks", lesson=2,
        goal="Add 10 to every element of `a` (n elements) with many blocks of 128 threads. "
             "Each thread finds its element from its block and its place in the block; the "
             "last block may be partly empty.",
        params=("a", "out", "n"), outputs=("out",), spec="out = a + 10",
        launch_text="grid ⌈n / 128⌉, block 128", lines=3,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "out": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (cdiv(n, 128), 128),
        sizes=({"n": 512},), more=({"n": 1000},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n),
        budgets=(loads("a"), stores("out")), sections=(HIERARCHY,),
    ),
    Puzzle(
        id="blocks_2d", title="Blocks in 2-D", lesson=2,
        goal="Double every element of a `rows` × `cols` matrix (row by row in memory) with a "
             "2-D grid of 16 × 16 blocks. Blocks at the right and bottom edges hang over the "
             "matrix.",
        params=("a", "out", "rows", "cols"), outputs=("out",), spec="out = a * 2",
        launch_text="grid (⌈cols / 16⌉, ⌈rows / 16⌉), block (16, 16)", lines=4,
        inputs=lambda s, rng: {"a": values(rng, s["rows"] * s["cols"]),
                               "out": unwritten(s["rows"] * s["cols"]),
                               "rows": s["rows"], "cols": s["cols"]},
        launch=lambda rows, cols: ((cdiv(cols, 16), cdiv(rows, 16)), (16, 16)),
        sizes=({"rows": 32, "cols": 32},), more=({"rows": 20, "cols": 37},),
        gpu_size={"rows": 8192, "cols": 8192},
        valid=lambda rows, cols: (size_int("rows", rows), size_int("cols", cols)),
        budgets=(loads("a"), stores("out")), sections=(HIERARCHY,),
    ),
    Puzzle(
        id="split_work", title="Two jobs, one launch", lesson=2,
        goal="One launch of 2n threads does two jobs: `out_a = a * 2` and `out_b = b + 1` "
             "(n elements each, n a multiple of 64). Decide which thread does which element "
             "so that no warp has to run both paths.",
        params=("a", "b", "out_a", "out_b", "n"), outputs=("out_a", "out_b"),
        spec="out_a, out_b = a * 2, b + 1",
        launch_text="grid 2n / 128, block 128", lines=6,
        inputs=lambda s, rng: {"a": values(rng, s["n"]), "b": values(rng, s["n"]),
                               "out_a": unwritten(s["n"]), "out_b": unwritten(s["n"]),
                               "n": s["n"]},
        launch=lambda n: (2 * n // 128, 128),
        sizes=({"n": 64}, {"n": 192}), gpu_size={"n": 1 << 23},
        valid=lambda n: size_int("n", n, multiple=64),
        budgets=(Budget("simt_efficiency", 1.0,
                        "n is a multiple of 64 (so of 32): every warp can take one path whole"),
                 loads("a"), loads("b"), stores("out_a"), stores("out_b")),
        sections=(DIVERGENCE,), picture="a",
    ),
)
