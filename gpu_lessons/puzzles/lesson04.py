"""Puzzles for lesson 04 (cache lines, sectors, coalescing and banks): layout and transposes."""

from __future__ import annotations

from ._build import S, cdiv, loads, once, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

COALESCING = S(4, "2. Coalescing: how many sectors does one request cost?")
LAYOUT = S(4, "3. Layout: AoS vs SoA, alignment and padding")
BANKS = S(4, "5. Shared memory banks")

NO_CONFLICTS = Budget("bank_conflicts", 0, "32 lanes reading 32 different banks need one "
                                           "wavefront; padding a tile row to 33 words puts a "
                                           "column in 32 banks", section=BANKS)


def _matrix(s, rng):
    n = s["n"]
    return {"a": values(rng, n * n), "out": unwritten(n * n), "n": n}


def _transpose(pid, title, goal, lines, budgets, sections, picture="out"):
    return Puzzle(
        id=pid, title=title, lesson=4, goal=goal,
        params=("a", "out", "n"), outputs=("out",),
        spec="out = a.reshape(n, n).T.ravel()",
        launch_text="grid (n / 32, n / 32), block (32, 32); n a multiple of 32", lines=lines,
        inputs=_matrix, launch=lambda n: ((n // 32, n // 32), (32, 32)),
        sizes=({"n": 64},), more=({"n": 32}, {"n": 96}), gpu_size={"n": 4096},
        valid=lambda n: size_int("n", n, low=32, multiple=32),
        budgets=budgets, sections=sections, picture=picture, picture_row="n",
    )


PUZZLES = (
    Puzzle(
        id="aos_to_soa", title="Array of structs → struct of arrays", lesson=4,
        goal="`aos` holds n points as x, y, z, x, y, z, … (12-byte structs). Write them into "
             "three arrays `x`, `y`, `z`. Reading field by field from `aos` makes every warp "
             "request stride 12 bytes; instead, let each block of 128 threads copy its 384 "
             "floats into shared memory (`t.shared(384, np.float32)`) with consecutive lanes on "
             "consecutive floats, then, after a `t.sync()`, pick the fields out of shared "
             "memory.",
        params=("aos", "x", "y", "z", "n"), outputs=("x", "y", "z"),
        spec="x, y, z = aos[0::3], aos[1::3], aos[2::3]",
        launch_text="grid ⌈n / 128⌉, block 128", lines=13,
        inputs=lambda s, rng: {"aos": values(rng, 3 * s["n"]), "x": unwritten(s["n"]),
                               "y": unwritten(s["n"]), "z": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (cdiv(n, 128), 128),
        sizes=({"n": 256},), more=({"n": 200},), gpu_size={"n": 1 << 22},
        valid=lambda n: size_int("n", n),
        budgets=(loads("aos"), stores("x"), stores("y"), stores("z"),
                 Budget("bank_conflicts", 0, "a stride of 3 words is odd, so 32 lanes hit 32 "
                                             "different banks", section=BANKS),
                 once("aos")),
        sections=(LAYOUT, COALESCING), picture="aos",
    ),
    _transpose(
        "transpose_naive", "Transpose, first try",
        "`out[j*n + i] = a[i*n + j]` for an n × n matrix, one thread per element. Let "
        "consecutive lanes (`thread_idx.x`) read consecutive elements of a row of `a`. Then "
        "look at what the stores cost with `puzzles.show`.", 3,
        (loads("a"),), (COALESCING,)),
    _transpose(
        "transpose_tiled", "Transpose through a shared tile",
        "The same transpose, with loads *and* stores coalesced: each block reads its 32 × 32 "
        "tile of `a` row by row into shared memory (`t.shared((32, 32), np.float32)`, indexed "
        "`tile[y, x]`), waits (`t.sync()`), and writes the tile's columns as rows of `out`.", 6,
        (loads("a"), stores("out")), (COALESCING, BANKS)),
    _transpose(
        "transpose", "Transpose without bank conflicts",
        "The tiled transpose, now also free of bank conflicts: reading a column of a 32 × 32 "
        "float tile hits one bank 32 times.", 6,
        (loads("a"), stores("out"), NO_CONFLICTS), (BANKS, COALESCING), picture="shared"),
)
