"""Puzzles for lesson 07 (the optimisation playbook): reductions, scans, register blocking.

The four reductions follow M. Harris, "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007),
each step one fix further; the scans are Hillis & Steele (1986) and Blelloch (1990) as in
GPU Gems 3, chapter 39.
"""

from __future__ import annotations

from ._build import S, loads, once, size_int, stores, unwritten, values
from ._core import Budget, Puzzle

DIVERGENCE = S(2, "3. Warp divergence: branch by lane or branch by warp")
STABLE = S(7, "5.3 Stable execution paths: divergence and needless synchronisation")
BANKS = S(7, "3.3 On-chip: bank conflicts")
BANK_MODEL = S(4, "5. Shared memory banks")
REUSE = S(7, "3.2 Data reuse: block, warp and thread tiling")
TREES = S(7, "5.4 Reductions and scans: trees in shared memory")

# -- reductions: one block of 256 threads sums 256 values ----------------------------------------

REDUCE_SPEC = "out = x.reshape(-1, 256).sum(axis=1)"

#: 1 barrier before each of the log2(256) = 8 halvings (the first waits for the stored
#: values); none after the last, whose one sum thread 0 wrote and thread 0 stores.
TREE_BARRIERS = Budget("barriers", 8, "one barrier before each of the 8 halving steps "
                                      "(256 → 1); none after the last: thread 0 wrote the "
                                      "sum it stores", section=TREES)
#: Sequential addressing (step s: threads tid < s add sdata[tid + s]) issues, per block of 8
#: warps: 8 × 29 full-warp instructions (index, load, store, 8 × (barrier, test, branch),
#: final test and branch); loop bodies of 5 instructions in 4 + 2 + 1 full warps
#: (s = 128, 64, 32) and in warp 0 with 16, 8, 4, 2, 1 lanes; the final load and store with 1
#: lane.  Lanes: (232 + 35) × 32 + 5 × 31 + 2 = 8,701 over 294 × 32 = 9,408 slots: 92.5 %.
#: The budget leaves 2.5 points for a few extra instructions in the loop; the divergent
#: tid % (2s) kernel reaches about 63 %.
WARP_UNIFORM = Budget("simt_efficiency", 0.90,
                      "when the adding threads are consecutive, whole warps are busy or idle "
                      "until fewer than 32 add: 92.5 % with sequential addressing (the "
                      "tid % (2s) test leaves idle lanes in every busy warp: about 63 %)",
                      section=DIVERGENCE)
NO_CONFLICTS = Budget("bank_conflicts", 0, "consecutive threads on consecutive words touch "
                                           "32 different banks", section=BANKS)


def _reduce(pid, title, goal, lines, budgets, sections, picture="x"):
    return Puzzle(
        id=pid, title=title, lesson=7, goal=goal,
        params=("x", "out"), outputs=("out",), spec=REDUCE_SPEC,
        launch_text="grid n / 256, block 256", lines=lines,
        inputs=lambda s, rng: {"x": values(rng, s["n"], 0, 10),
                               "out": unwritten(s["n"] // 256)},
        launch=lambda n: (n // 256, 256),
        sizes=({"n": 512},), more=({"n": 256}, {"n": 768}), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n, low=256, multiple=256),
        budgets=budgets, sections=sections, picture=picture,
    )


# -- scans: one block scans 128 values --------------------------------------------------------------

def _scan(pid, title, goal, lines, spec, block, budgets, sections):
    return Puzzle(
        id=pid, title=title, lesson=7, goal=goal,
        params=("x", "out"), outputs=("out",), spec=spec,
        launch_text=f"grid n / 128, block {block}", lines=lines,
        inputs=lambda s, rng: {"x": values(rng, s["n"], 0, 10), "out": unwritten(s["n"])},
        launch=lambda n: (n // 128, block),
        sizes=({"n": 256},), more=({"n": 128},), gpu_size={"n": 1 << 24},
        valid=lambda n: size_int("n", n, low=128, multiple=128),
        budgets=budgets, sections=sections, picture="x",
    )


PUZZLES = (
    _reduce("reduce_tree", "Reduction 1: a tree in shared memory",
            "Each block of 256 threads sums its 256 values: store them in shared memory, then "
            "add pairs in log₂ 256 = 8 steps with a barrier after each. Any pairing that is "
            "correct and race-free passes here; the next puzzles make it faster.", 12,
            (TREE_BARRIERS, loads("x"), once("x")), (TREES,)),
    _reduce("reduce_warp_uniform", "Reduction 2: keep warps whole",
            "The same sum, but the threads that add at each step must be *consecutive* "
            "threads, so that warps are either fully busy or fully idle (until fewer than 32 "
            "additions are left).", 13,
            (WARP_UNIFORM, TREE_BARRIERS, loads("x"), once("x")), (TREES, DIVERGENCE)),
    _reduce("reduce", "Reduction 3: sequential addressing",
            "The same sum, with whole warps busy *and* no bank conflicts: at step s, thread "
            "tid adds the value s places after its own, so a warp reads 32 consecutive "
            "words.", 12,
            (WARP_UNIFORM, NO_CONFLICTS, TREE_BARRIERS, loads("x"), once("x")),
            (TREES, BANKS, BANK_MODEL, DIVERGENCE), picture="shared"),
    _reduce("reduce_shuffle", "Reduction 4: finish with warp shuffles",
            "The same sum with one barrier: each warp adds its 32 values with "
            "`t.shfl_down` (5 steps, no shared memory, no barrier), lane 0 of each warp "
            "stores the warp's total, and after one barrier the first warp adds the 8 "
            "totals with shuffles again. Every lane a shuffle names must execute it (CUDA's "
            "rule for the mask of `__shfl_down_sync`).", 20,
            (Budget("barriers", 1, "one barrier between the warps' totals and the final sum",
                    section=STABLE),
             Budget("shared_requests_per_block", 9, "8 warps store one total each, and the "
                    "first warp loads them once", section=STABLE),
             loads("x"), once("x")),
            (TREES, STABLE)),
    _scan("scan_hillis_steele", "Prefix sum: Hillis–Steele",
          "Inclusive prefix sum of each block's 128 values (`out[i] = x[0] + … + x[i]` "
          "within the block), one thread per value: in step d every thread adds the value "
          "2ᵈ places before it. Reading and writing one array in the same step races; use "
          "two buffers and swap them, so one barrier per step is enough.", 17,
          "out = np.cumsum(x.reshape(-1, 128), axis=1).ravel()", 128,
          (Budget("barriers", 7, "one before each of the log₂ 128 = 7 steps (reading one "
                                 "buffer and writing the other); none after the last: each "
                                 "thread stores the value it wrote itself", section=TREES),
           Budget("bank_conflicts", 0, "each step reads and writes consecutive words",
                  section=BANKS),
           loads("x"), stores("out")),
          (TREES,)),
    _scan("scan_blelloch", "Prefix sum: Blelloch, work-efficient",
          "*Exclusive* prefix sum of each block's 128 values (`out[i] = x[0] + … + x[i-1]`, "
          "0 first) with 64 threads, two values each: an up-sweep builds partial sums in a "
          "tree (127 additions), the root is cleared, a down-sweep pushes the sums back "
          "down (127 additions and 127 swaps). Hillis–Steele does 7 × 128 − 127 = 769 "
          "additions.", 32,
          "out = (np.cumsum(x.reshape(-1, 128), axis=1) - x.reshape(-1, 128)).ravel()", 64,
          (Budget("shared_stores_per_element", (4 * 128 - 2) / 128,
                  "a store per tree update: 128 to load + 127 up + 1 clear + 2 × 127 down = "
                  "4n − 2 for n = 128", array="x", section=TREES),
           loads("x"), stores("out"),
           Budget("bank_conflicts", 0, "the tree's pairs are 2ᵈ words apart, so deep in the "
                  "tree a warp's lanes land on a few banks; one spare word after every 32 "
                  "(index i stored at i + i // 32) spreads them over 32 banks", section=BANKS)),
          (TREES, BANKS)),
    Puzzle(
        id="matmul_register", title="Matrix multiply with 2 × 2 register blocking", lesson=7,
        goal="`c = a @ b` (n a multiple of 16) with 16 × 16 tiles in shared memory as in "
             "`matmul_tiled`, but only 8 × 8 threads per block: each thread computes a 2 × 2 "
             "patch of `c` (rows `row`, `row + 8`, columns `col`, `col + 8`) in four "
             "registers. Per step k it loads two values of the `a` tile and two of the `b` "
             "tile and does four multiply-adds.",
        params=("a", "b", "c", "n"), outputs=("c",),
        spec="c = (a.reshape(n, n) @ b.reshape(n, n)).ravel()",
        launch_text="grid (n / 16, n / 16), block (8, 8); n a multiple of 16", lines=30,
        inputs=lambda s, rng: {"a": values(rng, s["n"] ** 2, -4, 5),
                               "b": values(rng, s["n"] ** 2, -4, 5),
                               "c": unwritten(s["n"] ** 2), "n": s["n"]},
        launch=lambda n: ((n // 16, n // 16), (8, 8)),
        sizes=({"n": 32},), more=({"n": 16},), gpu_size={"n": 4096},
        flops=lambda n: 2 * n**3,  # n² outputs, n multiply-adds each
        valid=lambda n: size_int("n", n, low=16, multiple=16),
        budgets=(Budget("shared_loads_per_fma", 1.0, "2 values of a and 2 of b feed 2 × 2 = 4 "
                        "multiply-adds (one output per thread needs 2 loads per "
                        "multiply-add)", section=REUSE),
                 Budget("loads_per_element", lambda n: n / 16, "16 × 16 tiles: each element "
                        "is read by the n / 16 blocks that need it", array="a", section=REUSE,
                        limit_text="n / 16 per element"),
                 Budget("loads_per_element", lambda n: n / 16, "likewise for b", array="b",
                        section=REUSE, limit_text="n / 16 per element"),
                 loads("a"), loads("b"), stores("c"),
                 Budget("bank_conflicts", 0, "a warp is 4 rows of 8 threads: it stores 4 "
                        "rows of 8 words and reads 4 rows of sa; choose the tiles' row length "
                        "(padding) so that those 4 rows start in banks 8 apart", section=BANKS)),
        sections=(REUSE, BANKS), picture="a", picture_row="n",
    ),
)
