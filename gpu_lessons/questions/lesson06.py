"""Chapter 06 (occupancy and latency hiding) exercise questions.

References come from the occupancy calculator (:mod:`gpu_lessons.occupancy`, the algorithm of
``cuda_occupancy.h``, checked against the CUDA runtime on an H200) and the latency-hiding model
(:mod:`gpu_lessons.latency`: issue rate ``R(n) = min(1, n·I / (I − 1 + L))`` with
``I = j·(a + 1)``; V. Volkov, *Understanding Latency Hiding on GPUs*, UC Berkeley 2016).

Likely mistakes are computed with the same per-capability numbers
(``data/compute_capabilities.toml``) and one rule changed: no 1 KB reservation, registers
pooled over the whole register file instead of allocated per warp in 256-register units from
4 sub-partitions, no cap on the resident blocks.
"""

from __future__ import annotations

from functools import lru_cache

from .._format import percent
from .._math import cdiv, round_up
from ..hardware import gpu as lookup
from ..latency import Config, compare, issue_rate
from ..occupancy import LIMITS, compute_capability, occupancy, occupancy_vs_registers
from ._common import fraction_as_percent, gpus
from .types import Choice, Design, Function, Mistake, Number, Question, Vary

# -- shared helpers --------------------------------------------------------------------------

def _occupancy(cc: str, threads: int, regs: int, smem: int):
    return occupancy(cc=cc, threads_per_block=threads, registers_per_thread=regs,
                     shared_mem_per_block=smem)


def _variant(threads, regs, smem, *, reserve=True, granular=True, sub_partitions=True,
             block_cap=True, cc="9.0") -> float:
    """Occupancy (0..1) with one of the calculator's rules dropped, to reproduce a mistake.

    ``reserve=False``: no 1 KB per-block reservation; ``granular=False``: the register file is
    one pool of 65,536 handed out thread by thread (regs x threads per block, no rounding, no
    sub-partitions); ``sub_partitions=False``: warps rounded to 256 registers but drawn from
    one pool; ``block_cap=False``: no limit on resident blocks.  The numbers come from the
    compute-capability table, as the calculator's do.
    """
    spec = compute_capability(cc)
    w = cdiv(threads, 32)
    limits = [spec.max_warps_per_sm // w]
    if block_cap:
        limits.append(spec.max_blocks_per_sm)
    if regs:
        per_warp = round_up(regs * 32, spec.register_unit)
        if not granular:
            limits.append(spec.registers_per_sm // (regs * 32 * w))
        elif not sub_partitions:
            limits.append(spec.registers_per_sm // per_warp // w)
        else:
            part = spec.registers_per_sm // spec.sub_partitions
            limits.append(spec.sub_partitions * (part // per_warp) // w)
    if smem:
        extra = spec.reserved_shared_per_block if reserve else 0
        per_block = round_up(smem + extra, spec.shared_unit)
        limits.append(spec.max_sm_shared // per_block)
    return min(limits) * w / spec.max_warps_per_sm


# -- 06.occupancy_design: choose a block size and a register budget --------------------------------

_DESIGN_GPUS = ("h100", "a100", "rtx 4090", "v100", "rtx 3090", "t4")
_BLOCKS = tuple(range(32, 1025, 32))


def _design_fields(gpu, regs, regs_min, smem_per_warp, target) -> dict:
    return {"cc": lookup(gpu).cc}


@lru_cache(maxsize=65536)  # every variant of the same GPU asks about the same launches
def _design_occupancy(gpu, threads, regs, smem_per_warp):
    return _occupancy(lookup(gpu).cc, threads, regs, smem_per_warp * (threads // 32))


def _design_verify(design, gpu, regs, regs_min, smem_per_warp, target):
    """The first rule ``design`` breaks: block size, register range, occupancy, limiter."""
    threads, r, limiter = (design["threads_per_block"], design["registers_per_thread"],
                           design["limiter"])
    if not (32 <= threads <= 1024 and threads % 32 == 0):
        return "block_size", ""
    if not regs_min <= r <= regs:
        return "registers_range", ""
    occ = _design_occupancy(gpu, threads, r, smem_per_warp)
    if occ.occupancy < target / 100:
        return "occupancy", (f"Your design keeps {occ.warps_per_sm} warps per SM resident: "
                             f"{percent(occ.occupancy)}.")
    if limiter not in occ.limiters:
        return "limiter", ""
    return None


def _design_candidates(gpu, regs, regs_min, smem_per_warp):
    """Every block size with the register counts where the allocation changes: a warp's
    registers come in units of 256, i.e. 8 per thread, so the top of each band of 8 (and
    the ends of the range) covers every occupancy there is."""
    counts = sorted({regs_min, regs, *range(round_up(regs_min, 8), regs + 1, 8)})
    for threads in _BLOCKS:
        for r in counts:
            yield threads, r, _design_occupancy(gpu, threads, r, smem_per_warp)


def _design_example(gpu, regs, regs_min, smem_per_warp, target) -> tuple:
    """The design with the most occupancy (the largest block, then the most registers, on a
    tie) — one right answer among many."""
    best = max(_design_candidates(gpu, regs, regs_min, smem_per_warp),
               key=lambda c: (c[2].occupancy, c[0], c[1]))
    threads, r, occ = best
    if occ.occupancy < target / 100:
        raise AssertionError(f"06.occupancy_design: no design reaches {percent(target / 100)} on "
                             f"{gpu}")
    return threads, r, occ.limiter


def _design_too_low(gpu, regs, regs_min, smem_per_warp, target) -> tuple:
    """A design in range whose occupancy falls short (the largest block at the most
    registers, usually)."""
    for threads in reversed(_BLOCKS):
        occ = _design_occupancy(gpu, threads, regs, smem_per_warp)
        if occ.occupancy < target / 100:
            return threads, regs, occ.limiter
    raise AssertionError("06.occupancy_design: every design meets the target")


def _design_wrong_limiter(gpu, regs, regs_min, smem_per_warp, target) -> tuple:
    threads, r, _ = _design_example(gpu, regs, regs_min, smem_per_warp, target)
    binding = _design_occupancy(gpu, threads, r, smem_per_warp).limiters
    return threads, r, next(name for name in LIMITS if name not in binding)


# -- 06.which_change: which change raises occupancy most -----------------------------------------

#: Kernels to improve: (GPU, threads per block, registers per thread, shared memory per block,
#: the register count a rewrite could reach).  Each has one change that clearly helps most.
_CASES = {
    "smem": ("h100", 128, 32, 32768, 24),
    "regs": ("h100", 256, 64, 8192, 32),
    "wide": ("h100", 768, 32, 8192, 24),
    "small": ("rtx 4090", 64, 32, 8192, 24),
    "ampere_smem": ("rtx 3090", 128, 32, 16384, 24),
    "a100_regs": ("a100", 64, 48, 4096, 32),
    "turing": ("t4", 640, 40, 2048, 32),
    "volta_smem": ("v100", 256, 48, 24576, 32),
}
_CHANGES = ("smem_half", "regs_cut", "block_double", "block_half")
_CHANGE_ORDERS = ("smem_half regs_cut block_double block_half",
                  "regs_cut block_half smem_half block_double",
                  "block_double smem_half block_half regs_cut",
                  "block_half block_double regs_cut smem_half",
                  "smem_half block_half block_double regs_cut",
                  "regs_cut smem_half block_half block_double")


def _after(case, change) -> float:
    """Occupancy after one change (0 when the change makes the block illegal)."""
    g, threads, regs, smem, cut = _CASES[case]
    cc = lookup(g).cc
    if change == "smem_half":
        return _occupancy(cc, threads, regs, smem // 2).occupancy
    if change == "regs_cut":
        return _occupancy(cc, threads, cut, smem).occupancy
    if change == "block_double":
        return _occupancy(cc, 2 * threads, regs, smem).occupancy if 2 * threads <= 1024 else 0.0
    return _occupancy(cc, threads // 2, regs, smem).occupancy


def _which_change(case, order) -> str:
    """The letter of the change that gives the most occupancy; it must beat the next best by
    at least 5 percentage points (the cases are chosen so that it does)."""
    ranked = sorted(_CHANGES, key=lambda c: _after(case, c), reverse=True)
    if _after(case, ranked[0]) < _after(case, ranked[1]) + 0.05:
        raise AssertionError(f"06.which_change: no clear best change for {case}")
    return "ABCD"[order.split().index(ranked[0])]


def _change_fields(case, order) -> dict:
    g, threads, regs, smem, cut = _CASES[case]
    text = {"smem_half": f"halve the shared memory per block, to {smem // 2:,} bytes",
            "regs_cut": f"rewrite it to need only {cut} registers per thread",
            "block_double": f"double the block size to {2 * threads} threads (shared memory "
                            f"per block unchanged)",
            "block_half": f"halve the block size to {threads // 2} threads (shared memory per "
                          f"block unchanged)"}
    lines = [f"- **{letter}**: {text[c]};" for letter, c in zip("ABCD", order.split(),
                                                                 strict=True)]
    lines[-1] = lines[-1][:-1] + "."
    return {"gpu": lookup(g).name, "cc": lookup(g).cc, "threads": threads, "regs": regs,
            "smem": f"{smem:,}", "options": "\n".join(lines)}


def _change_mistake(change: str):
    def value(case, order):
        if "ABCD"[order.split().index(change)] == _which_change(case, order):
            return None
        return "ABCD"[order.split().index(change)]
    return value


# -- 06.max_registers: the register budget for a target number of warps ----------------------------

def _max_registers(gpu, threads, warps) -> float:
    """The most registers/thread that still leave at least ``warps`` resident warps per SM
    (no shared memory), read off the calculator's register curve.

    H100, 128-thread blocks, 40 warps = 10 blocks of 4 warps: each sub-partition must hold 10
    warps, so a warp may take at most 16,384 / 10 = 1,638 registers, 1,536 after the
    256-register unit = 48 / thread.
    """
    curve = occupancy_vs_registers(cc=lookup(gpu).cc, threads_per_block=threads)
    return float(curve.x[curve.warps_per_sm >= warps].max())


def _max_registers_pooled(ref, gpu, threads, warps) -> float | None:
    """65,536 / (warps x 32), rounded down: registers pooled thread by thread."""
    value = float(compute_capability(lookup(gpu).cc).registers_per_sm // (warps * 32))
    return None if value == ref else value


def _max_registers_full(ref, gpu, threads, warps) -> float | None:
    """The budget at full occupancy: the most warps whole blocks of this size can reach."""
    w = cdiv(threads, 32)
    full = compute_capability(lookup(gpu).cc).max_warps_per_sm // w * w
    value = _max_registers(gpu, threads, full)
    return None if value == ref else value


def _occupancy_cc90_reference(threads_per_block, registers_per_thread, shared_mem_per_block):
    return _occupancy("9.0", threads_per_block, registers_per_thread,
                      shared_mem_per_block).occupancy


def _occupancy_cc90_inputs(rng) -> dict:
    """Any block size (half of them whole warps), 16-128 registers, and either no shared
    memory or up to ~100 KB that is usually not a multiple of the 128-byte unit."""
    whole_warps = rng.random() < 0.5
    threads = 32 * int(rng.integers(1, 33)) if whole_warps else int(rng.integers(1, 1025))
    smem = 0 if rng.random() < 0.3 else int(rng.integers(1, 100_001))
    return {"threads_per_block": threads, "registers_per_thread": int(rng.integers(16, 129)),
            "shared_mem_per_block": smem}


def _occupancy_cc90_edges() -> list[dict]:
    """Hand-picked cases, each pinned to one rule (derivations in tests/test_exercises.py)."""
    def case(t, r, s):
        return {"threads_per_block": t, "registers_per_thread": r, "shared_mem_per_block": s}

    return [case(256, 40, 0),        # M19: 48 warps, not 51 -> 0.75
            case(32, 16, 0),         # 1-warp blocks: the 32-block cap -> 0.5
            case(96, 32, 0),         # 3-warp blocks: 21 blocks by warps -> 63/64
            case(1024, 64, 0),       # 2,048 registers/warp: 32 warps -> 0.5
            case(1024, 128, 0),      # 4,096 registers/warp: not one block fits -> 0
            case(256, 255, 0),       # 8,160 -> 8,192 registers/warp: 8 warps -> 0.125
            case(128, 32, 232_448),  # the 227 KB opt-in maximum: one block -> 0.0625
            case(200, 48, 12_345)]   # 7-warp blocks, unrounded shared memory -> 35/64


def _no_reservation(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block, reserve=False)


def _pooled_registers(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block,
                    granular=False)


def _no_sub_partitions(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block,
                    sub_partitions=False)


def _no_block_cap(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block,
                    block_cap=False)


def _warps_not_blocks(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    """Occupancy as threads / 2048 with fractional blocks: no floor division anywhere."""
    spec = compute_capability("9.0")
    w = cdiv(threads_per_block, 32)
    unit = spec.register_unit
    per_warp = round_up(registers_per_thread * 32, unit)
    fits = [spec.max_warps_per_sm, spec.registers_per_sm / per_warp]
    if shared_mem_per_block:
        per_block = shared_mem_per_block + spec.reserved_shared_per_block
        fits.append(spec.max_sm_shared / per_block * w)
    return min(fits) / spec.max_warps_per_sm


# -- 06.issue_rate: the latency-hiding model -------------------------------------------------------

def _issue_rate_reference(warps, alu_per_load, ilp, latency):
    """R(n) = min(1, n·I / (I − 1 + L)), I = ilp·(alu_per_load + 1) (gpu_lessons.latency)."""
    return issue_rate(warps, alu_per_load=alu_per_load, latency=latency, ilp=ilp)


def _issue_rate_inputs(rng) -> dict:
    """1-64 warps on one scheduler, 0-20 ALU instructions per load, 1-8 loads in flight,
    latencies from an L1 hit (~30 cycles) to loaded HBM (~1,200)."""
    return {"warps": int(rng.integers(1, 65)), "alu_per_load": int(rng.integers(0, 21)),
            "ilp": int(rng.integers(1, 9)), "latency": int(rng.integers(20, 1201))}


def _issue_rate_edges() -> list[dict]:
    def case(n, a, j, L):
        return {"warps": n, "alu_per_load": a, "ilp": j, "latency": L}

    return [case(8, 4, 1, 400),    # notebook 06: 8 warps, ILP 1 -> 40/404
            case(8, 4, 4, 400),    # the same with 4 loads in flight -> 160/419
            case(1, 0, 1, 1),      # a one-cycle latency: one warp issues every cycle
            case(64, 8, 8, 300),   # far past the knee: capped at 1
            case(1, 0, 4, 4)]      # notebook 07: 4 FMA chains of latency 4 -> 4/7


def _rate(n, work, wait):
    return min(1.0, n * work / wait)


# -- 06.best_config: occupancy against independent loads -----------------------------------------

#: 06.best_config's versions: (registers per thread, loads in flight per thread).
_CONFIGS = {"lean": (32, 1), "balanced": (64, 4), "heavy": (128, 4), "greedy": (255, 8)}
_CONFIG_ORDERS = ("lean balanced heavy greedy", "greedy lean balanced heavy",
                  "heavy greedy lean balanced", "balanced heavy greedy lean",
                  "lean heavy balanced greedy", "heavy lean greedy balanced")


def _ranked_configs(gpu):
    # compare() predicts the rate of *loads*; every version streams the same loads and stores,
    # so ranking by that rate ranks the versions (no time is computed from it here)
    result = compare([Config(k, 256, regs, ilp=ilp) for k, (regs, ilp) in _CONFIGS.items()],
                     gpu)
    return sorted(result.results, key=lambda r: r.bandwidth, reverse=True)


def _best_config(gpu, order) -> str:
    """The version with the highest predicted bandwidth from :func:`gpu_lessons.latency.compare`
    (occupancy from the calculator, then loads in flight = warps x ILP against Little's law)."""
    ranked = _ranked_configs(gpu)
    if ranked[0].bandwidth <= 1.01 * ranked[1].bandwidth:
        raise AssertionError("06.best_config needs one clear winner; the model gives a tie")
    return "ABCD"[order.split().index(ranked[0].config.name)]


def _config_fields(gpu, order) -> dict:
    parts = [f"{letter}: {_CONFIGS[name][0]} registers, {_CONFIGS[name][1]} load"
             f"{'' if _CONFIGS[name][1] == 1 else 's'} in flight"
             for letter, name in zip("ABCD", order.split(), strict=True)]
    return {"versions": "; ".join(parts)}


def _config_mistake(name: str):
    def value(gpu, order):
        letter = "ABCD"[order.split().index(name)]
        return None if letter == _best_config(gpu, order) else letter
    return value


QUESTIONS = (
    Question(
        id="06.occupancy_design",
        name="occupancy_design",
        points=3,
        title="Design a launch for an occupancy target",
        prompt="A kernel for {a_gpu} **{gpu}** (compute capability {cc}) uses **{smem_per_warp} "
               "bytes of shared memory per warp** of its block (its tile grows with the block). "
               "Compiled as it is, it needs **{regs} registers per thread**; with "
               "`__launch_bounds__` the compiler can fit it in fewer, down to **{regs_min}**, "
               "without spilling (below that it spills to local memory).\n\n"
               "Choose a block size (a multiple of 32, at most 1024 threads) and a register "
               "count (from {regs_min} to {regs}) that give **at least {target} % theoretical "
               "occupancy**, and name the limit that then binds: `\"warps\"`, `\"registers\"`, "
               "`\"shared memory\"` or `\"blocks\"` (any of them when several tie). Answer "
               "`occupancy_design = (threads_per_block, registers_per_thread, limiter)`. Many "
               "designs are right; check yours with "
               "`occupancy(cc=\"{cc}\", threads_per_block=..., registers_per_thread=..., "
               "shared_mem_per_block=...)`.",
        hint="Work out the four limits in blocks per SM for a candidate; registers are "
             "allocated per warp in 256-register units, from 4 sub-partitions.",
        vary=(gpus(*_DESIGN_GPUS),
              Vary("regs", (96, 128, 80, 72), "registers per thread as compiled"),
              Vary("regs_min", (40, 48, 32), "the fewest registers without spills"),
              Vary("smem_per_warp", (2048, 1536, 1024, 2560), "shared memory per warp, bytes"),
              Vary("target", (50, 40, 45), "the occupancy target, %")),
        derive=_design_fields,
        answer=Design(
            fields=(("threads_per_block", "int"), ("registers_per_thread", "int"),
                    ("limiter", LIMITS)),
            verify=_design_verify,
            reference=_design_example,
            mistakes=(
                Mistake("block_size", "a block is a whole number of warps: use a multiple of "
                        "32 threads, from 32 to 1024.",
                        value=lambda **p: (100, p["regs"], "warps")),
                Mistake("registers_range", "the kernel needs at least {regs_min} registers per "
                        "thread (fewer spill to local memory) and never uses more than {regs}.",
                        value=lambda **p: (256, p["regs_min"] - 1, "registers")),
                Mistake("occupancy", "this design does not reach {target} % occupancy: find the "
                        "limit that binds and relax it (fewer registers, or a block size that "
                        "wastes less of the SM).", value=_design_too_low),
                Mistake("limiter", "the design meets the target, but another limit binds: "
                        "compare all four in blocks per SM.", value=_design_wrong_limiter),
            ),
        ),
    ),
    Question(
        id="06.which_change",
        name="which_change",
        points=1,
        title="Which change raises occupancy most?",
        prompt="A kernel on {a_gpu} **{gpu}** (compute capability {cc}) runs {threads}-thread blocks "
               "with {regs} registers per thread and {smem} bytes of shared memory per block. "
               "Which *single* change raises its theoretical occupancy the most?\n\n"
               "{options}\n\n"
               "Answer with one letter, `\"A\"`, `\"B\"`, `\"C\"` or `\"D\"`, in "
               "`which_change`. Work out which limit binds first; the calculator "
               "(`occupancy(...)`, with its `limiters`) can confirm each option.",
        vary=(Vary("case", tuple(_CASES), "the kernel and its options"),
              Vary("order", _CHANGE_ORDERS, "which change is lettered A, B, C and D")),
        derive=_change_fields,
        answer=Choice(
            reference=_which_change,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("smem_half", "less shared memory per block helps only while shared "
                        "memory is the limit that binds, and only until the next limit does.",
                        value=_change_mistake("smem_half")),
                Mistake("regs_cut", "fewer registers help only while registers are the limit "
                        "that binds, and only until the next limit does.",
                        value=_change_mistake("regs_cut")),
                Mistake("block_double", "a larger block changes how many blocks each limit "
                        "admits, and how many warps are stranded when the SM's warp budget is "
                        "not a multiple of the block: count warps per SM before and after.",
                        value=_change_mistake("block_double")),
                Mistake("block_half", "a smaller block changes how many blocks each limit "
                        "admits, and the per-SM block cap may then bind: count warps per SM "
                        "before and after.", value=_change_mistake("block_half")),
            ),
        ),
    ),
    Question(
        id="06.max_registers",
        name="max_registers",
        points=2,
        title="A register budget for a target occupancy",
        prompt="A kernel on {a_gpu} **{gpu}** (compute capability {cc}) uses **{threads}-thread "
               "blocks** and no shared memory. What is the largest number of registers per "
               "thread that still lets **at least {warps} warps** be resident on each SM?\n\n"
               "Answer with a whole number of **registers per thread** in `max_registers`. "
               "Check your answer with the calculator "
               "(`occupancy(cc=\"{cc}\", threads_per_block={threads}, registers_per_thread=...)`) "
               "at your answer and one above it.",
        hint="Registers are allocated per warp in units of 256, and each warp lives in one of "
             "the SM's 4 sub-partitions of 16,384 registers; blocks are whole.",
        vary=(gpus("h100", "rtx 4090"),
              Vary("threads", (128, 256, 64, 96, 192), "threads per block"),
              Vary("warps", (40, 32, 24, 16, 44), "resident warps wanted per SM")),
        derive=lambda gpu, threads, warps: {"cc": lookup(gpu).cc},
        answer=Number(
            reference=_max_registers,
            units="registers per thread",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("no_granularity", "that divides 65,536 registers by {warps} × 32 "
                        "threads, as if registers were handed out one thread at a time. They "
                        "are allocated per warp in units of 256, from 4 sub-partitions of "
                        "16,384 (this is why 40 registers per thread give 48 warps, not 51).",
                        value=_max_registers_pooled),
                Mistake("full_occupancy", "that is the budget for the most warps an SM can "
                        "hold; the question asks for {warps}.", value=_max_registers_full),
                Mistake("one_block_less", "at that count fewer warps fit than the question "
                        "needs; recount the warps each sub-partition holds.",
                        when=lambda x, ref, **p: float(x).is_integer() and ref < x <= ref + 7),
            ),
        ),
    ),
    Question(
        id="06.occupancy_cc90",
        name="occupancy_cc90",
        points=3,
        title="The occupancy calculator as a function",
        prompt="Write `occupancy_cc90(threads_per_block, registers_per_thread, "
               "shared_mem_per_block)` returning the theoretical occupancy (a fraction 0..1) "
               "of a kernel on a compute capability 9.0 GPU (H100/H200): 64 warps, 32 blocks, "
               "65,536 registers (4 sub-partitions, 256-register units per warp) and 228 KB of "
               "shared memory per SM (128-byte units, 1 KB reserved per block). Assume the "
               "driver's default carveout and that the kernel has opted in to large shared "
               "memory. A configuration that cannot launch has occupancy 0.\n\n"
               "Return a **fraction** between 0 and 1. Your function is tried on fixed cases "
               "(small blocks, odd block sizes, the largest shared-memory request, a block that "
               "cannot launch) and on 100 random configurations; the check reports the first "
               "input where it disagrees with the CUDA runtime's rules.",
        answer=Function(
            reference=_occupancy_cc90_reference,
            inputs=_occupancy_cc90_inputs,
            edge_cases=_occupancy_cc90_edges,
            signature="occupancy_cc90(threads_per_block, registers_per_thread, "
                      "shared_mem_per_block)",
            units="fraction of 64 warps",
            rtol=1e-9,
            mistakes=(
                fraction_as_percent("return a fraction 0..1, not percent."),
                Mistake("no_reservation", "the driver adds 1 KB to every block's shared memory "
                        "on CC 9.0 before the SM's 228 KB is divided.", value=_no_reservation),
                Mistake("pooled_registers", "registers are not handed out from one pool of "
                        "65,536, thread by thread: each warp gets a multiple of 256, and a "
                        "warp's registers come from one of 4 sub-partitions of 16,384 (so 40 "
                        "registers per thread allow 48 warps, not 51; M19).",
                        value=_pooled_registers),
                Mistake("no_sub_partitions", "rounding each warp's registers up to 256 is "
                        "right, but a warp's registers come from one of 4 sub-partitions of "
                        "16,384, not from one pool of 65,536: count the warps each "
                        "sub-partition holds (M19).", value=_no_sub_partitions),
                Mistake("no_block_cap", "a CC 9.0 SM also holds at most 32 blocks, whatever "
                        "the other resources allow (it matters for small blocks).",
                        value=_no_block_cap),
                Mistake("no_floor", "blocks are resident whole: every limit is a floor "
                        "division in blocks per SM, and occupancy counts the warps of whole "
                        "blocks.", value=_warps_not_blocks),
            ),
        ),
    ),
    Question(
        id="06.issue_rate",
        name="issue_rate",
        points=2,
        title="Issue rate of one warp scheduler",
        prompt="Write `issue_rate(warps, alu_per_load, ilp, latency)` for notebook 06's model "
               "of one warp scheduler: each warp repeats rounds of ilp × (alu_per_load + 1) "
               "independent instructions (its last ilp of them are loads), then waits latency "
               "cycles after its last load for the data. One instruction issues per cycle. "
               "Return the fraction of cycles (0..1) in which an instruction issues, at best, "
               "when `warps` warps share the scheduler.\n\n"
               "Return a fraction between 0 and 1 (instructions per cycle of one scheduler).",
        hint="A round of I instructions takes I − 1 + L cycles for one warp alone.",
        answer=Function(
            reference=_issue_rate_reference,
            inputs=_issue_rate_inputs,
            edge_cases=_issue_rate_edges,
            signature="issue_rate(warps, alu_per_load, ilp, latency)",
            units="instructions per cycle",
            rtol=1e-9,
            mistakes=(
                Mistake("no_cap", "a scheduler issues at most one instruction per cycle: cap "
                        "the rate at 1.",
                        value=lambda e, warps, alu_per_load, ilp, latency: warps * ilp
                        * (alu_per_load + 1) / (ilp * (alu_per_load + 1) - 1 + latency)),
                Mistake("latency_only", "a round lasts longer than the latency: the warp "
                        "issues its instructions first (one per cycle), then waits for its "
                        "last load.",
                        value=lambda e, warps, alu_per_load, ilp, latency: _rate(
                            warps, ilp * (alu_per_load + 1), latency)),
                Mistake("one_cycle_long", "the latency counts from the cycle the last load "
                        "issues, so a lone warp's round is I − 1 + L cycles, not I + L.",
                        value=lambda e, warps, alu_per_load, ilp, latency: _rate(
                            warps, ilp * (alu_per_load + 1),
                            ilp * (alu_per_load + 1) + latency)),
                Mistake("no_ilp", "ilp multiplies the work of a round (ilp loads, each with "
                        "its ALU instructions) before the warp waits once.",
                        value=lambda e, warps, alu_per_load, ilp, latency: _rate(
                            warps, alu_per_load + 1, alu_per_load + latency)),
                fraction_as_percent("return a fraction 0..1, not percent."),
            ),
        ),
    ),
    Question(
        id="06.best_config",
        name="best_config",
        points=1,
        title="More warps or more loads in flight?",
        prompt="A streaming kernel on {a_gpu} **{gpu}** (256-thread blocks, 4-byte loads, 600 ns "
               "loaded latency) can be compiled four ways. {versions}. Which one does the "
               "latency model predict reaches the highest bandwidth?\n\n"
               "Answer with one letter, `\"A\"`, `\"B\"`, `\"C\"` or `\"D\"`, in "
               "`best_config`. `latency.compare` in notebook 06 does this comparison for other "
               "versions; here, reason with warps and loads in flight.",
        hint="Find each version's resident warps with the occupancy calculator, then compare "
             "what matters to Little's law.",
        vary=(gpus("h200", "h100", "a100", "h100 pcie"),
              Vary("order", _CONFIG_ORDERS, "which version is lettered A, B, C and D")),
        derive=_config_fields,
        answer=Choice(
            reference=_best_config,
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("max_occupancy", "full occupancy, but each thread has only one 4-byte "
                        "load in flight: by Little's law the {gpu} needs more bytes in flight "
                        "than the warps an SM holds supply that way.",
                        value=_config_mistake("lean")),
                Mistake("most_ilp", "8 loads in flight per thread, but 255 registers leave so "
                        "few warps resident that the SM has few loads in flight in total.",
                        value=_config_mistake("greedy")),
                Mistake("heavy", "4 loads per thread, but 128 registers halve the resident "
                        "warps again: count warps × loads in flight per SM.",
                        value=_config_mistake("heavy")),
                Mistake("balanced", "count warps × loads in flight per SM for each version, and "
                        "compare with what the {gpu}'s bandwidth × latency asks for.",
                        value=_config_mistake("balanced")),
            ),
        ),
    ),
)
