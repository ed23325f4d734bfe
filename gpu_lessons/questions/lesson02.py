"""Chapter 02 (threads, warps and SMs) exercise questions.

References come from the GPU catalog (:mod:`gpu_lessons.hardware`), the compute-capability
table and occupancy calculator (:mod:`gpu_lessons.occupancy`) and the SIMT simulator
(:mod:`gpu_lessons.kernels.simt`, :mod:`gpu_lessons.kernels.simt.examples`).

SIMT efficiency = sum of active lanes over issued warp instructions / (32 x instructions),
Nsight Compute's "Avg. Active Threads Per Warp" / 32 (CUDA C++ Programming Guide, "SIMT
Architecture": divergent paths of a warp run one after the other, a path no lane takes is
skipped).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._math import cdiv
from ..hardware import gpu as lookup
from ..kernels import run
from ..kernels.simt.examples import simulate
from ..occupancy import compute_capability, occupancy
from ._common import fraction_as_percent, gpus, max_threads_per_sm, percent_as_fraction
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- 02.wave_efficiency: blocks run in waves ---------------------------------------------------------

_WAVE_GPUS = ("h100", "a100", "h100 pcie", "v100", "rtx 4090", "l40s", "t4", "b200")


def _slots(gpu, threads, *, block_cap=True, sms=True) -> int:
    """Blocks resident on the whole GPU at once when only the thread and block limits bind
    (the occupancy calculator with 1 register per thread and no shared memory)."""
    g = lookup(gpu)
    cc = compute_capability(g.cc)
    per_sm = occupancy(cc=g.cc, threads_per_block=threads, registers_per_thread=1,
                       shared_mem_per_block=0).blocks_per_sm
    if not block_cap:
        per_sm = cc.max_warps_per_sm // cdiv(threads, 32)
    return per_sm * (g.sms if sms else 1)


def _wave_efficiency(gpu, threads, blocks, **kw) -> float:
    """Percent of the block slots a grid fills, averaged over its waves: blocks / (waves x
    slots), waves = ceil(blocks / slots).  H100 SXM5, 256 threads: 8 blocks per SM x 132 =
    1,056 slots; 1,601 blocks take 2 waves: 1,601 / 2,112 = 75.8 %."""
    slots = _slots(gpu, threads, **kw)
    return 100 * blocks / (math.ceil(blocks / slots) * slots)


def _wave_fields(gpu, threads, blocks) -> dict:
    g = lookup(gpu)
    cc = compute_capability(g.cc)
    return {"sms": g.sms, "cc": g.cc, "max_threads": f"{max_threads_per_sm(gpu):,}",
            "max_blocks": cc.max_blocks_per_sm}


def _no_tail(ref, **p):
    return None if math.isclose(ref, 100) else 100.0


# -- 02.resident_threads ----------------------------------------------------------------------------

_RESIDENT_GPUS = ("h100", "a100", "h100 pcie", "v100", "rtx 4090", "l40s", "t4", "b200", "l4",
                  "rtx 3090")


def _resident_threads(gpu) -> int:
    """Threads a GPU keeps resident: max warps per SM (CC 9.0: 64) x 32 x SMs (H100 SXM5:
    64 x 32 x 132 = 270,336)."""
    return max_threads_per_sm(gpu) * lookup(gpu).sms


def _block_limit_times_sms(ref, gpu) -> int | None:
    """The 1,024-thread block limit mistaken for the per-SM limit."""
    value = compute_capability(lookup(gpu).cc).max_threads_per_block * lookup(gpu).sms
    return None if value == ref else value


# -- SIMT efficiency of the parity branch -------------------------------------------------------

@lru_cache(maxsize=32)
def _sim(name: str, iters: int):
    return simulate(name, iters=iters).sim


def _parity_efficiency(iters) -> float:
    """``branch_by_parity`` with ``iters`` multiply-adds per path, from the SIMT simulator.

    By hand, per warp: 7 instructions with 32 lanes (index, bounds test, return, load, % 2,
    == 0, branch), then each path (2 x iters ALU + 1 store) with 16 lanes; iters = 4:
    (7·32 + 2·9·16) / ((7 + 2·9)·32) = 512 / 800 = 0.64.
    """
    return _sim("branch_by_parity", iters).simt_efficiency


def _parity_branch_only(_ref: float, iters) -> float:
    """Efficiency inside the branch alone (the 7 uniform instructions left out)."""
    return _sim("branch_by_parity", iters).stats(region="parity").simt_efficiency


def _parity_one_path(_ref: float, iters) -> float:
    """As if only one 16-lane path were issued: the paths' serialisation forgotten.

    Uses the simulator's counts: total lanes and instructions minus one path's share.
    """
    sim = _sim("branch_by_parity", iters)
    whole, branch = sim.totals, sim.stats(region="parity")
    lanes = whole.active_lanes - branch.active_lanes / 2
    return lanes / (32 * (whole.instructions - branch.instructions / 2))


def _by_warp_efficiency(_ref: float, iters) -> float:
    return _sim("branch_by_warp", iters).simt_efficiency


# -- SIMT efficiency as a function --------------------------------------------------------------

def _two_paths(t, common, if_len, else_len, lanes_if):
    """One warp: ``common`` instructions with every lane (the branch test among them), then an
    if path of ``if_len`` ALU instructions for lanes < ``lanes_if`` and an else path of
    ``else_len`` for the rest."""
    take = t.thread_idx.x < lanes_if      # 1 instruction
    acc = t.local(0.0)                    # 1 instruction
    for _ in range(common - 3):           # the branch test below is the last common one
        acc[...] = acc + 1.0
    with t.if_(take, "paths"):
        for _ in range(if_len):
            acc[...] = acc + 1.0
    with t.else_():
        for _ in range(else_len):
            acc[...] = acc * 2.0


@lru_cache(maxsize=8192)  # a simulator run per input; every check re-asks the same inputs
def _simt_efficiency_reference(common, if_len, else_len, lanes_if):
    """Run the warp in the SIMT simulator and return its SIMT efficiency."""
    return run(_two_paths, 1, 32, common, if_len, else_len, lanes_if).simt_efficiency


def _simt_efficiency_inputs(rng) -> dict:
    lanes = int(rng.choice([0, 32, int(rng.integers(1, 32))], p=[0.1, 0.1, 0.8]))
    return {"common": int(rng.integers(3, 41)), "if_len": int(rng.integers(0, 41)),
            "else_len": int(rng.integers(0, 41)), "lanes_if": lanes}


def _simt_efficiency_edges() -> list[dict]:
    """Uniform warps both ways, the parity split, a single lane, empty paths."""
    return [{"common": 7, "if_len": 9, "else_len": 9, "lanes_if": 16},
            {"common": 5, "if_len": 10, "else_len": 20, "lanes_if": 32},
            {"common": 5, "if_len": 10, "else_len": 20, "lanes_if": 0},
            {"common": 3, "if_len": 12, "else_len": 0, "lanes_if": 1},
            {"common": 4, "if_len": 0, "else_len": 0, "lanes_if": 16}]


def _ignore_skip(e, common, if_len, else_len, lanes_if):
    """A path no lane takes still counted as issued (with no active lanes)."""
    active = 32 * common + lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * (common + if_len + else_len))


def _branch_only(e, common, if_len, else_len, lanes_if):
    """Efficiency of the two paths alone, the common instructions left out."""
    issued = (if_len if lanes_if else 0) + (else_len if lanes_if < 32 else 0)
    active = lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * issued)


def _no_serialise(e, common, if_len, else_len, lanes_if):
    """Paths counted as if they ran at the same time: max(if_len, else_len) issue slots."""
    active = 32 * common + lanes_if * if_len + (32 - lanes_if) * else_len
    return active / (32 * (common + max(if_len, else_len)))


# -- branch granularity -----------------------------------------------------------------------------

#: 02.branch_choice's conditions, on the thread index in a 256-thread block, and how the
#: prompt writes them (C-style integer division).
_CONDITIONS = {
    "parity": lambda tid: tid % 2 == 0,
    "half_warp": lambda tid: tid % 32 < 16,
    "warp": lambda tid: tid // 32 % 2 == 0,
    "offset": lambda tid: (tid + 16) // 32 % 2 == 0,
}
_CONDITION_TEXT = {"parity": "tid % 2 == 0", "half_warp": "tid % 32 < 16",
                   "warp": "(tid / 32) % 2 == 0", "offset": "((tid + 16) / 32) % 2 == 0"}
#: Orders in which the conditions are lettered A-D (the lesson's order first).
_BRANCH_ORDERS = ("parity half_warp warp offset", "warp parity offset half_warp",
                  "half_warp offset parity warp", "offset warp half_warp parity",
                  "parity warp half_warp offset", "half_warp parity warp offset",
                  "offset half_warp warp parity", "warp offset parity half_warp")


@lru_cache(maxsize=8)
def _branch_efficiency(option: str) -> float:
    """SIMT efficiency inside a branch on condition ``option`` (equal 4-instruction paths),
    one 256-thread block in the SIMT simulator."""
    which = list(_CONDITIONS).index(option)

    def kernel(t, out, which):
        i = t.thread_idx.x
        if which == 0:                      # one value for the warp: Python's own if
            c = i % 2 == 0
        elif which == 1:
            c = i % 32 < 16
        elif which == 2:
            c = i // 32 % 2 == 0
        else:
            c = (i + 16) // 32 % 2 == 0
        v = t.local(0.0, np.float32)
        with t.if_(c, "choice"):
            for _ in range(4):
                v[...] = v * 1.5 + 1.0
        with t.else_():
            for _ in range(4):
                v[...] = v * 0.5 - 1.0
        out[i] = v

    result = run(kernel, 1, 256, np.zeros(256, np.float32), which)
    return result.stats(region="choice").simt_efficiency


def _branch_choice(order) -> str:
    """The letter of the condition with the highest SIMT efficiency inside the branch."""
    names = order.split()
    scores = {n: _branch_efficiency(n) for n in names}
    return "ABCD"[names.index(max(scores, key=scores.get))]


def _branch_letter(order, name) -> str:
    return "ABCD"[order.split().index(name)]


def _branch_fields(order) -> dict:
    return {"options": "\n".join(f"- **{letter}**: `{_CONDITION_TEXT[name]}`"
                                  for letter, name in zip("ABCD", order.split(), strict=True))}


QUESTIONS = (
    Question(
        id="02.wave_efficiency",
        name="wave_efficiency",
        points=2,
        title="Blocks run in waves",
        prompt="A kernel launches **{blocks} blocks of {threads} threads** on {a_gpu} **{gpu}** "
               "({sms} SMs of compute capability {cc}: an SM holds at most {max_threads} "
               "threads and {max_blocks} blocks at a time). Suppose registers and shared memory "
               "allow as many blocks as those two limits do, and every block takes the same "
               "time. The blocks then run in *waves*: as many as fit on all SMs at once, then "
               "the next lot, and the last wave may be only partly full.\n\n"
               "Averaged over its waves, what fraction of the GPU's block slots does the grid "
               "use — blocks ÷ (waves × blocks that fit at once) — in **percent**? Store it in "
               "`wave_efficiency`.",
        hint="Blocks per SM = the smaller of the two limits; blocks at once = that × SMs; "
             "waves = blocks at once divided into the grid, rounded up.",
        vary=(gpus(*_WAVE_GPUS),
              Vary("threads", (256, 128, 512, 1024, 64), "threads per block"),
              Vary("blocks", (1_601, 601, 1_093, 1_249, 727, 1_447), "blocks in the grid")),
        derive=_wave_fields,
        answer=Number(
            reference=_wave_efficiency,
            units="%",
            rtol=0.001,
            mistakes=(
                Mistake("no_tail", "that assumes every wave is full; the last one holds only "
                        "the blocks left over.", value=_no_tail),
                Mistake("block_cap", "an SM also holds at most {max_blocks} blocks, whatever "
                        "its thread limit allows.",
                        value=lambda ref, gpu, threads, blocks: None if (
                            _slots(gpu, threads) == _slots(gpu, threads, block_cap=False))
                        else _wave_efficiency(gpu, threads, blocks, block_cap=False)),
                Mistake("one_sm", "that counts the slots of one SM; the grid spreads over all "
                        "{sms} SMs.", value=lambda ref, gpu, threads, blocks: None if (
                            _wave_efficiency(gpu, threads, blocks, sms=False) == ref)
                        else _wave_efficiency(gpu, threads, blocks, sms=False)),
                percent_as_fraction(),
            ),
        ),
    ),
    Question(
        id="02.resident_threads",
        name="resident_threads",
        points=1,
        title="Resident threads on a whole GPU",
        prompt="An SM keeps many more threads *resident* (their registers held on chip, ready "
               "to issue) than it has lanes. At most how many threads can be resident on a "
               "**whole {gpu}** at the same time? Store it in `resident_threads` (the catalog "
               "knows the GPU as `gpu(\"{key}\")`, and `compute_capability(...)` its "
               "compute capability's limits).",
        hint="Its compute capability sets how many warps one SM holds; a warp is 32 threads.",
        vary=(gpus(*_RESIDENT_GPUS),),
        derive=lambda gpu: {"key": gpu},
        answer=Number(
            reference=_resident_threads,
            units="threads",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("block_limit", "1,024 is the most threads in one *block*; an SM holds "
                        "several blocks at once.", value=_block_limit_times_sms),
                Mistake("cores", "that is the number of CUDA cores. An SM keeps many more "
                        "threads resident than it has lanes, so it can switch to another warp "
                        "when one waits.", value=lambda ref, gpu: lookup(gpu).fp32_cores),
                Mistake("warps", "that counts warps; a warp is 32 threads.",
                        value=lambda ref, gpu: ref / 32),
                Mistake("per_sm", "that is one SM; the question asks for the whole GPU.",
                        value=lambda ref, gpu: ref / lookup(gpu).sms),
            ),
        ),
    ),
    Question(
        id="02.parity_efficiency",
        name="parity_efficiency",
        points=2,
        title="SIMT efficiency of a parity branch",
        prompt="The lesson's `branch_by_parity` kernel branches on `threadIdx.x % 2 == 0`. With "
               "`iters={iters}`, one warp issues:\n\n"
               "- 7 instructions with all 32 lanes active (index, bounds test, return, load, "
               "`% 2`, `== 0`, the branch test);\n"
               "- the *if* path: 2 × {iters} ALU instructions + 1 store, with the 16 even lanes;\n"
               "- the *else* path: the same length, with the 16 odd lanes.\n\n"
               "SIMT efficiency = (sum of active lanes over all issued instructions) ÷ (32 × "
               "instructions issued). Compute it by hand and store it in `parity_efficiency` as "
               "a **fraction between 0 and 1**.",
        hint="Both paths are issued, one after the other; count each with its 16 lanes.",
        vary=(Vary("iters", (4, 2, 3, 6, 8, 12), "ALU iterations per path"),),
        answer=Number(
            reference=_parity_efficiency,
            units="(fraction, 0 to 1)",
            rtol=0.005,
            mistakes=(
                fraction_as_percent("give a fraction between 0 and 1, not a percentage."),
                Mistake("branch_only", "that is the efficiency inside the branch alone; the 7 "
                        "instructions before it run with every lane and count too.",
                        value=_parity_branch_only),
                Mistake("one_path", "a divergent warp issues *both* paths, one after the "
                        "other: count each path's instructions.", value=_parity_one_path),
                Mistake("no_divergence", "that would be a branch every warp takes whole (as "
                        "branch_by_warp does); here each warp splits by lane parity.",
                        value=_by_warp_efficiency),
            ),
        ),
    ),
    Question(
        id="02.simt_efficiency",
        name="simt_efficiency",
        points=2,
        title="SIMT efficiency of any two-way branch",
        prompt="Write `simt_efficiency(common, if_len, else_len, lanes_if)` for one warp that "
               "issues\n\n"
               "- `common` instructions with all 32 lanes active (the branch test included), "
               "then\n"
               "- an *if* path of `if_len` instructions run by `lanes_if` lanes (0 to 32), then\n"
               "- an *else* path of `else_len` instructions run by the other `32 - lanes_if` "
               "lanes.\n\n"
               "A path that **no** lane takes is jumped over: it issues nothing. Return the SIMT "
               "efficiency as a fraction between 0 and 1. The check compares your function with "
               "the course's SIMT simulator running such a warp.",
        answer=Function(
            reference=_simt_efficiency_reference,
            inputs=_simt_efficiency_inputs,
            edge_cases=_simt_efficiency_edges,
            signature="simt_efficiency(common, if_len, else_len, lanes_if)",
            units="fraction of lanes busy",
            rtol=1e-9,
            mistakes=(
                Mistake("skipped_path", "a path that no lane takes is jumped over: it issues "
                        "no instructions, so it must not count.", value=_ignore_skip),
                Mistake("branch_only", "the `common` instructions run with all 32 lanes and "
                        "count too.", value=_branch_only),
                Mistake("parallel_paths", "the two paths of a divergent warp run one after "
                        "the other, not side by side: both add issue slots.",
                        value=_no_serialise),
                fraction_as_percent(),
                Mistake("always_one", "a divergent warp leaves lanes idle: the masked-off lanes "
                        "of each path do no work.", value=lambda e, **kw: 1.0),
            ),
        ),
    ),
    Question(
        id="02.branch_choice",
        name="branch_choice",
        points=1,
        title="Choose the branch granularity",
        prompt="A kernel runs 256-thread blocks. Half of each block's threads must take path X "
               "and the other half path Y (equal lengths); *which* half is up to you. With "
               "`tid = threadIdx.x` and integer division, which condition gives the highest "
               "SIMT efficiency?\n\n{options}\n\n"
               "Answer `\"A\"`, `\"B\"`, `\"C\"` or `\"D\"` in `branch_choice`. (You can "
               "test your reasoning with `gpu_lessons.kernels.run`, or simply list which threads "
               "of each warp take which path.)",
        vary=(Vary("order", _BRANCH_ORDERS, "which condition is lettered A, B, C and D"),),
        derive=_branch_fields,
        answer=Choice(
            reference=_branch_choice,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("parity", "tid % 2 splits every warp into its even and odd lanes: "
                        "each warp runs both paths at half width.",
                        value=lambda order: _branch_letter(order, "parity")),
                Mistake("half_warp", "tid % 32 < 16 still splits every warp (lanes 0-15 and "
                        "16-31). Contiguous lanes do not help; what matters is whether all 32 "
                        "lanes of a warp agree.",
                        value=lambda order: _branch_letter(order, "half_warp")),
                Mistake("offset", "adding 16 moves every switch between X and Y to lane 16 of "
                        "a warp: the groups are warp-sized but straddle two warps, so every "
                        "warp still splits.", value=lambda order: _branch_letter(order, "offset")),
            ),
        ),
    ),
)
