"""Chapter 06 (occupancy and latency hiding) exercise questions.

References come from the occupancy calculator (:mod:`gpu_lessons.occupancy`, the algorithm of
``cuda_occupancy.h``, checked against the CUDA runtime on an H200) and the latency-hiding model
(:mod:`gpu_lessons.latency`: issue rate ``R(n) = min(1, n·I / (I − 1 + L))`` with
``I = j·(a + 1)``; V. Volkov, *Understanding Latency Hiding on GPUs*, UC Berkeley 2016), imported
inside each function so that listing questions costs nothing.

Likely mistakes are computed with the same per-capability numbers
(``data/compute_capabilities.toml``) and one rule changed: no 1 KB reservation, registers
counted per thread instead of per warp in 256-register units per sub-partition, no cap on the
resident blocks (erratum E10 is the register case).
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question

# -- shared helpers --------------------------------------------------------------------------

def _occupancy(cc: str, threads: int, regs: int, smem: int):
    from ..occupancy import occupancy

    return occupancy(cc=cc, threads_per_block=threads, registers_per_thread=regs,
                     shared_mem_per_block=smem)


def _variant(threads, regs, smem, *, reserve=True, granular=True, block_cap=True,
             cc="9.0") -> float:
    """Occupancy (0..1) with one of the calculator's rules dropped, to reproduce a mistake.

    ``reserve=False``: no 1 KB per-block reservation; ``granular=False``: registers per block =
    regs x threads, shared by the whole 65,536-register file (no rounding to 256 per warp, no
    sub-partitions); ``block_cap=False``: no limit on resident blocks.  The numbers come from
    the compute-capability table, as the calculator's do.
    """
    from ..occupancy import compute_capability

    spec = compute_capability(cc)
    w = -(-threads // 32)
    limits = [spec.max_warps_per_sm // w]
    if block_cap:
        limits.append(spec.max_blocks_per_sm)
    if regs:
        if granular:
            per_warp = -(-regs * 32 // spec.register_unit) * spec.register_unit
            part = spec.registers_per_sm // spec.sub_partitions
            limits.append(spec.sub_partitions * (part // per_warp) // w)
        else:
            limits.append(spec.registers_per_sm // (regs * 32 * w))
    if smem:
        extra = spec.reserved_shared_per_block if reserve else 0
        per_block = -(-(smem + extra) // spec.shared_unit) * spec.shared_unit
        limits.append(spec.max_sm_shared // per_block)
    return min(limits) * w / spec.max_warps_per_sm


# -- 06.smem_occupancy: shared memory limits, with the 1 KB reservation ------------------------

_SMEM_CONFIG = {"threads": 256, "regs": 32, "smem": 46_080}


def _smem_occupancy() -> float:
    """Occupancy in percent of 256-thread blocks, 32 registers, 46,080 B shared on CC 9.0.

    Shared memory: (46,080 + 1,024 reserved) = 47,104 B per block; 233,472 B (228 KB) per SM
    / 47,104 = 4 blocks = 32 warps of 64 = 50 %.
    """
    c = _SMEM_CONFIG
    return 100 * _occupancy("9.0", c["threads"], c["regs"], c["smem"]).occupancy


def _smem_no_reservation(_ref: float) -> float:
    c = _SMEM_CONFIG
    return 100 * _variant(c["threads"], c["regs"], c["smem"], reserve=False)


def _smem_on_a100(_ref: float) -> float:
    c = _SMEM_CONFIG
    return 100 * _occupancy("8.0", c["threads"], c["regs"], c["smem"]).occupancy


def _smem_ignored(_ref: float) -> float:
    c = _SMEM_CONFIG
    return 100 * _occupancy("9.0", c["threads"], c["regs"], 0).occupancy


# -- 06.small_block_limiter: what stops an SM filling up with tiny blocks ----------------------

def _small_block_limiter() -> str:
    """RTX 3090 (CC 8.6), 64-thread blocks, 32 registers, 2 KB shared: warps allow 48 / 2 = 24
    blocks, registers 32, shared memory 100 KB / 3 KB = 33, but CC 8.6 keeps at most 16
    blocks per SM."""
    return _occupancy("8.6", 64, 32, 2048).limiter


# -- 06.max_registers: the register budget for a target number of warps (erratum E10) ----------

_TARGET_WARPS = 40
_BLOCK = 128


def _max_registers(warps: int = _TARGET_WARPS) -> float:
    """The most registers/thread that still leave ``warps`` resident warps per SM (CC 9.0,
    128-thread blocks, no shared memory), read off the calculator's register curve.

    40 warps = 10 blocks of 4 warps: each sub-partition must hold 10 warps, so a warp may take
    at most 16,384 / 10 = 1,638 registers, 1,536 after the 256-register unit = 48 / thread.
    """
    from ..occupancy import occupancy_vs_registers

    curve = occupancy_vs_registers(cc="9.0", threads_per_block=_BLOCK)
    return float(curve.x[curve.warps_per_sm >= warps].max())


def _max_registers_no_granularity(_ref: float) -> float:
    """65,536 / (40 warps x 32 threads) = 51.2 -> 51: the seed's division (erratum E10)."""
    from ..occupancy import compute_capability

    return float(compute_capability("9.0").registers_per_sm // (_TARGET_WARPS * 32))


# -- 06.occupancy_cc90: the whole calculator as a function ----------------------------------------

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

    return [case(256, 40, 0),        # E10: 48 warps, not 51 -> 0.75
            case(32, 16, 0),         # 1-warp blocks: the 32-block cap -> 0.5
            case(96, 32, 0),         # 3-warp blocks: 21 blocks by warps -> 63/64
            case(1024, 64, 0),       # 2,048 registers/warp: 32 warps -> 0.5
            case(1024, 128, 0),      # 4,096 registers/warp: not one block fits -> 0
            case(256, 255, 0),       # 8,160 -> 8,192 registers/warp: 8 warps -> 0.125
            case(128, 32, 232_448),  # the 227 KB opt-in maximum: one block -> 0.0625
            case(200, 48, 12_345)]   # 7-warp blocks, unrounded shared memory -> 35/64


def _percent(e, **kw):
    return 100 * e


def _no_reservation(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block, reserve=False)


def _per_thread_registers(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block,
                    granular=False)


def _no_block_cap(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    return _variant(threads_per_block, registers_per_thread, shared_mem_per_block,
                    block_cap=False)


def _warps_not_blocks(e, threads_per_block, registers_per_thread, shared_mem_per_block):
    """Occupancy as threads / 2048 with fractional blocks: no floor division anywhere."""
    from ..occupancy import compute_capability

    spec = compute_capability("9.0")
    w = -(-threads_per_block // 32)
    unit = spec.register_unit
    per_warp = -(-registers_per_thread * 32 // unit) * unit
    fits = [spec.max_warps_per_sm, spec.registers_per_sm / per_warp]
    if shared_mem_per_block:
        per_block = shared_mem_per_block + spec.reserved_shared_per_block
        fits.append(spec.max_sm_shared / per_block * w)
    return min(fits) / spec.max_warps_per_sm


# -- 06.issue_rate: the latency-hiding model -------------------------------------------------------

def _issue_rate_reference(warps, alu_per_load, ilp, latency):
    """R(n) = min(1, n·I / (I − 1 + L)), I = ilp·(alu_per_load + 1) (gpu_lessons.latency)."""
    from ..latency import issue_rate

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


QUESTIONS = (
    Question(
        id="06.smem_occupancy",
        name="smem_occupancy",
        points=2,
        prompt="An H100 (compute capability 9.0) runs a kernel with 256-thread blocks, 32 "
               "registers per thread and 46,080 bytes of shared memory per block (static + "
               "dynamic, as the kernel asks for it), with the driver's default carveout. What "
               "is its theoretical occupancy, in percent?",
        hint="Work out all four limits in blocks per SM (warps, registers, shared memory, "
             "blocks); the smallest one wins. Remember what the driver adds to every block on "
             "CC 8.0 and later.",
        answer=Number(
            reference=_smem_occupancy,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("no_reservation", "on CC 8.0 and later the driver reserves 1 KB of "
                        "shared memory for every block, on top of what the kernel asks for: "
                        "add it before dividing the SM's shared memory.",
                        value=_smem_no_reservation),
                Mistake("a100_capacity", "164 KB is the shared memory of an A100's SM "
                        "(CC 8.0); a CC 9.0 SM can give up to 228 KB to shared memory.",
                        value=_smem_on_a100),
                Mistake("smem_ignored", "that is what the warp and register limits allow; "
                        "46 KB of shared memory per block binds before them.",
                        value=_smem_ignored),
                Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in "
                        "percent.", value=lambda ref: ref / 100),
            ),
        ),
    ),
    Question(
        id="06.small_block_limiter",
        name="small_block_limiter",
        points=1,
        prompt="An RTX 3090 (compute capability 8.6: at most 48 warps and 16 blocks per SM, "
               "100 KB of shared memory) runs 64-thread blocks with 32 registers per thread "
               "and 2,048 bytes of shared memory per block. Which limit sets the number of "
               "resident blocks?",
        answer=Choice(
            reference=_small_block_limiter,
            options=("warps", "registers", "shared memory", "blocks"),
            mistakes=(
                Mistake("warps", "64-thread blocks are 2 warps each, so the warp limit alone "
                        "would admit 48 / 2 blocks; compare that with every other limit of "
                        "CC 8.6, including the fixed ones.", value="warps"),
                Mistake("registers", "32 registers x 32 lanes = 1,024 registers per warp: the "
                        "register file would hold 64 such warps, more than the SM can run.",
                        value="registers"),
                Mistake("shared_memory", "with the 1 KB reservation each block takes 3 KB, and "
                        "100 KB holds 33 of them: more blocks than another limit allows.",
                        value="shared memory"),
            ),
        ),
    ),
    Question(
        id="06.max_registers",
        name="max_registers",
        points=2,
        prompt="A kernel on an H100 (compute capability 9.0) uses 128-thread blocks and no "
               "shared memory. What is the largest number of registers per thread that still "
               "lets 40 warps (62.5 % occupancy) be resident on each SM?",
        hint="Registers are allocated per warp in units of 256, and each warp lives in one of "
             "the SM's 4 sub-partitions of 16,384 registers; blocks are 4 warps here.",
        answer=Number(
            reference=_max_registers,
            units="registers per thread",
            rtol=0.01,
            mistakes=(
                Mistake("no_granularity", "that divides 65,536 registers by 40 x 32 threads, "
                        "as if registers were handed out one thread at a time. They are "
                        "allocated per warp in units of 256, from 4 sub-partitions of 16,384 "
                        "(erratum E10: why 40 registers/thread give 48 warps, not 51).",
                        value=_max_registers_no_granularity),
                Mistake("full_occupancy", "that is the budget for all 64 warps; the question "
                        "asks for 40.", value=lambda ref: _max_registers(64)),
                Mistake("one_block_less", "at that count one block fewer fits than the "
                        "question needs; recount the warps each sub-partition holds.",
                        when=lambda x, ref: float(x).is_integer() and ref < x <= ref + 3),
            ),
        ),
    ),
    Question(
        id="06.occupancy_cc90",
        name="occupancy_cc90",
        points=3,
        prompt="Write occupancy_cc90(threads_per_block, registers_per_thread, "
               "shared_mem_per_block) returning the theoretical occupancy (a fraction 0..1) of "
               "a kernel on a compute capability 9.0 GPU (H100/H200): 64 warps, 32 blocks, "
               "65,536 registers (4 sub-partitions, 256-register units per warp) and 228 KB of "
               "shared memory per SM (128-byte units, 1 KB reserved per block). Assume the "
               "driver's default carveout and that the kernel has opted in to large shared "
               "memory. A configuration that cannot launch has occupancy 0.",
        answer=Function(
            reference=_occupancy_cc90_reference,
            inputs=_occupancy_cc90_inputs,
            edge_cases=_occupancy_cc90_edges,
            signature="occupancy_cc90(threads_per_block, registers_per_thread, "
                      "shared_mem_per_block)",
            units="fraction of 64 warps",
            rtol=1e-9,
            mistakes=(
                Mistake("percent", "return a fraction 0..1, not percent.", value=_percent),
                Mistake("no_reservation", "the driver adds 1 KB to every block's shared memory "
                        "on CC 9.0 before the SM's 228 KB is divided.", value=_no_reservation),
                Mistake("per_thread_registers", "registers are not handed out per thread: each "
                        "warp gets a multiple of 256, and a warp's registers come from one of 4 "
                        "sub-partitions of 16,384 (erratum E10).",
                        value=_per_thread_registers),
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
        prompt="Write issue_rate(warps, alu_per_load, ilp, latency) for notebook 06's model of "
               "one warp scheduler: each warp repeats rounds of ilp x (alu_per_load + 1) "
               "independent instructions (its last ilp of them are loads), then waits latency "
               "cycles after its last load for the data. One instruction issues per cycle. "
               "Return the fraction of cycles (0..1) in which an instruction issues, at best, "
               "when `warps` warps share the scheduler.",
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
                Mistake("percent", "return a fraction 0..1, not percent.", value=_percent),
            ),
        ),
    ),
    Question(
        id="06.best_config",
        name="best_config",
        points=1,
        prompt="A streaming kernel on an H200 (256-thread blocks, 4-byte loads, 600 ns loaded "
               "latency) can be compiled four ways. A: 32 registers, 1 load in flight per "
               "thread; B: 64 registers, 4 loads in flight; C: 128 registers, 4 loads in "
               "flight; D: 255 registers, 8 loads in flight. Which one does the latency model "
               "predict reaches the highest bandwidth?",
        hint="Find each version's resident warps with the occupancy calculator, then compare "
             "what matters to Little's law.",
        answer=Choice(
            reference=lambda: _best_config(),
            options=("A", "B", "C", "D"),
            mistakes=(
                Mistake("max_occupancy", "100 % occupancy, but each thread has only one 4-byte "
                        "load in flight: by Little's law an H200 needs more bytes in flight "
                        "than 64 warps supply that way.", value="A"),
                Mistake("most_ilp", "8 loads in flight per thread, but 255 registers leave so "
                        "few warps resident that the SM has no more loads in flight than with "
                        "version A.", value="D"),
                Mistake("c", "4 loads per thread, but 128 registers halve the resident warps "
                        "again: count warps x loads in flight per SM.", value="C"),
            ),
        ),
    ),
)

#: 06.best_config's versions: (registers per thread, loads in flight per thread).
_CONFIGS = {"A": (32, 1), "B": (64, 4), "C": (128, 4), "D": (255, 8)}


def _best_config() -> str:
    """The version with the highest predicted bandwidth from :func:`gpu_lessons.latency.compare`
    (occupancy from the calculator, then loads in flight = warps x ILP against Little's law)."""
    from ..latency import Config, compare

    result = compare([Config(k, 256, regs, ilp=ilp) for k, (regs, ilp) in _CONFIGS.items()],
                     "h200")
    ranked = sorted(result.results, key=lambda r: r.bandwidth, reverse=True)
    if ranked[0].bandwidth <= 1.01 * ranked[1].bandwidth:
        raise AssertionError("06.best_config needs one clear winner; the model gives a tie")
    return ranked[0].config.name
