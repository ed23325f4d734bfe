"""Puzzles for lesson 06 (occupancy and latency hiding): independent work, and the launch."""

from __future__ import annotations

from ._build import S, cdiv, loads, once, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

OCCUPANCY = S(6, "2. Occupancy and the limits on resident warps")
HIDING = S(6, "7. A model of latency hiding: warps × independent work")

#: What the compiler gives the worked box-filter kernel (NVRTC 13.0 for sm_90, with the options
#: run_on_gpu compiles with; tests/data/h200_registers.json: the H200 agrees).  The check compiles
#: the learner's own kernel for its count and uses this one only when NVRTC is not installed.
#: Shared memory is not stated: the simulator measures what the learner's blocks declare
#: (``SimResult.shared_bytes_per_block``).
BOX_REGISTERS = 20
BOX_RADIUS = 4


def _box_loads(n, block):
    """Each block loads its elements once and 4 halo values on each side, except past the
    ends of the array: at most n + 8·(⌈n / block⌉ − 1) loads."""
    return (n + 2 * BOX_RADIUS * (cdiv(n, block) - 1)) / n


def _block(block):
    return size_int("block", block, high=1024, multiple=32)


PUZZLES = (
    Puzzle(
        id="ilp", title="Four independent loads per thread", lesson=6,
        goal="`out = x * 2 + 1`, with each thread doing four elements so that it has four "
             "loads in flight before it needs any of them. A block of 128 threads covers "
             "512 elements: pick the four so that every warp-wide load is still 32 "
             "consecutive floats, and issue all four loads before the first store.",
        params=("x", "out", "n"), outputs=("out",), spec="out = x * 2 + 1",
        launch_text="grid n / 512, block 128; n a multiple of 512", lines=9,
        inputs=lambda s, rng: {"x": values(rng, s["n"]), "out": unwritten(s["n"]), "n": s["n"]},
        launch=lambda n: (n // 512, 128),
        sizes=({"n": 1024},), more=({"n": 512},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n, low=512, multiple=512),
        budgets=(Budget("loads_before_first_store", 4, "the four elements are independent, "
                        "so all four loads can be in flight at once", array="x"),
                 loads("x"), stores("out"), once("x")),
        sections=(HIDING,), picture="x",
    ),
    Puzzle(
        id="occupancy", title="Choose the block size", lesson=6,
        goal="A 9-point box filter, `out[i] = x[i-4] + … + x[i+4]` (0 outside the array), "
             "with each block staging its values and a halo of 4 on each side in a shared "
             "tile of `block + 8` floats (`t.shared(t.block_dim.x + 8, np.float32)`: its size "
             "follows the launch). The check compiles your kernel with NVRTC for sm_90 "
             "(`gpu_lessons.kernels.compile`) and uses the registers per thread it gets "
             f"(the worked kernel: {BOX_REGISTERS}), and measures the shared memory your "
             "blocks declare. Write the kernel for any block size, and choose `BLOCK` (a "
             "multiple of 32) so that an H100 keeps as many warps resident as this kernel "
             "can have.",
        params=("x", "out", "n"), outputs=("out",),
        spec="out = np.convolve(x, np.ones(9, np.float32), mode='same')",
        launch_text="grid ⌈n / BLOCK⌉, block BLOCK (your choice)", lines=26,
        inputs=lambda s, rng: {"x": values(rng, s["n"], 0, 10), "out": unwritten(s["n"]),
                               "n": s["n"]},
        launch=lambda n, block: (cdiv(n, _block(block)), block),
        sizes=({"n": 3000},), more=({"n": 77},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n, low=9),
        choices={"block": "threads per block"},
        budgets=(Budget("occupancy", lambda **_: 1.0,
                        f"at the worked kernel's {BOX_REGISTERS} registers (24 allocated) × 32 "
                        "lanes = 768 per warp, the register file holds more than 64 warps, so "
                        "the block size decides: 32 stops at the 32-block limit (32 of 64), "
                        "384 leaves warps over (5 × 12 = 60), 256 fills all 64",
                        section=OCCUPANCY,
                        limit_text="the most warps this kernel's registers and tile allow "
                                   "at any block size",
                        params={"cc": "9.0", "registers": "compiled",
                                "fallback_registers": BOX_REGISTERS, "shared_per_thread": 4}),
                 Budget("loads_per_element", _box_loads, "each value once, plus 4 halo values "
                        "on each side of every block boundary", array="x",
                        limit_text="(n + 8·(⌈n / BLOCK⌉ − 1)) / n per element"),
                 loads("x"), stores("out")),
        sections=(OCCUPANCY, HIDING), picture="x",
    ),
)
