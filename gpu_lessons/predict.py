"""Predict, then observe: write a guess down before an explorer, compare it with the model after.

In a lesson::

    predict("06.first_limit", "registers")   # before the explorer: records the guess
    ...                                      # the explorer, the experiment
    reveal("06.first_limit")                 # after: the guess beside the model's answer

* ``predict(id, ...)`` (the ``...`` left in place) records nothing and says so, so a notebook
  run top to bottom without guesses still works;
* a guess is checked against the prediction's kind: a number (in the unit the prompt names)
  or one of a few named options; anything else raises a ``TypeError``/``ValueError`` naming the
  parameter, the value and what is allowed;
* ``reveal(id)`` computes the model's answer with the package's own functions, every time it
  is called, and shows it beside the guess (or says that no guess was recorded), with how the
  answer was computed.

Guesses live in this kernel session only (a restart forgets them) and are never graded: they
are for the learner.  Every prediction the lessons use is registered in :data:`PREDICTIONS`,
with the question, the unit and the function that computes the answer.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

from ._format import Readout, Row, binary_bytes, duration, exact_bytes, flop_rate, intensity, percent, si

#: How close a numeric guess must be to count as "close": within this factor either way.
CLOSE_FACTOR = 1.25


@dataclass(frozen=True)
class Prediction:
    """One predict-then-observe question.  ``compute()`` returns ``(answer, how)``: the
    model's answer and one line saying how the package computed it."""

    id: str
    question: str
    kind: str                                   # "number" or "choice"
    compute: Callable[[], tuple[object, str]]
    unit: str = ""
    options: tuple[str, ...] = ()


_GUESSES: dict[str, object] = {}


# -- the answers, each computed by the package's models ------------------------------------------

def _tensor_vs_fp32():
    from .hardware import gpu
    g = gpu("h100")
    fp16, fp32 = g.peak_flops("fp16"), g.peak_flops("fp32")
    return fp16 / fp32, (f"{g.name}: dense FP16 tensor peak {flop_rate(fp16)} ÷ FP32 "
                         f"peak {flop_rate(fp32)} (the catalog's datasheet figures)")


#: The CPU core lesson 01 compares with: two AVX-512 FMA units × 16 FP32 lanes × 2 FLOPs per
#: FMA at a round 3.0 GHz (Intel 64 and IA-32 Architectures Optimization Reference Manual).
CPU_CORE = {"clock_hz": 3.0e9, "flops_per_cycle": 2 * 16 * 2, "fp32_lanes": 2 * 16}


def _sm_vs_core():
    from .hardware import compute_peak, gpu
    g = gpu("h100")
    core = compute_peak(1, CPU_CORE["clock_hz"], CPU_CORE["flops_per_cycle"])
    sm = compute_peak(g.fp32_cores_per_sm, g.boost_mhz * 1e6, 2)
    return sm / core, (f"one {g.name} SM: {g.fp32_cores_per_sm} lanes × {si(g.boost_mhz * 1e6, 'Hz', 4)} "
                       f"× 2 = {flop_rate(sm)}; one CPU core: 64 FLOP/cycle × 3.0 GHz = "
                       f"{flop_rate(core)}")


def _parity_over_warp():
    from .kernels.simt.examples import simulate
    parity, by_warp = simulate("branch_by_parity", iters=256), simulate("branch_by_warp", iters=256)
    p, w = parity.sim.instructions, by_warp.sim.instructions
    return p / w, (f"the warp simulator, 256 multiply-adds per path, one block of 256 threads: "
                   f"{p:,} warp instructions by parity, {w:,} by warp index")


def _registers_or_l2():
    from .hardware import gpu
    from .occupancy import compute_capability
    g = gpu("h100")
    regs = g.sms * compute_capability(g.cc).registers_per_sm * 4
    answer = "registers" if regs > g.l2_bytes else "L2"
    return answer, (f"{g.name}: {g.sms} SMs × 256 KiB of registers = {binary_bytes(regs, ',.1f')}; "
                    f"L2 = {binary_bytes(g.l2_bytes, ',.0f')}")


def _local_write_ratio():
    import numpy as np

    from .cache import Cache
    from .traces import Trace

    words = np.tile(np.arange(64), 1000) * 4       # 1000 passes over a 64-float local array
    trace = Trace("local array", np.repeat(words, 2), np.tile([False, True], words.size), 4)

    def to_l2(policy):
        l1 = Cache(16 * 1024, 128, 4, sector_bytes=32, write_policy=policy)
        return (l1.run(trace) + l1.flush()).bytes_to_next

    wt, wb = to_l2("write-through"), to_l2("write-back")
    return wt / wb, (f"cache simulator, 16 KiB 4-way L1 with 32-byte sectors: write-through "
                     f"sends {exact_bytes(wt)} to L2, write-back {exact_bytes(wb)}")


def _stride4_sectors():
    from .memory import global_load, strided
    g = global_load(strided(4))
    return g.sectors, (f"memory model: 32 floats 16 bytes apart span 512 bytes: {g.sectors} "
                       f"distinct 32-byte sectors, {percent(g.efficiency)} of the moved bytes used")


def _gemm_ridge_n():
    from . import costs
    from .roofline import Roofline
    roof = Roofline.from_gpu("a100", "fp16")   # no GPU the graded question asks about
    lo, hi = 1, 1 << 20             # intensity N/3 grows with N: bisect for the first N on the ridge
    while lo < hi:
        mid = (lo + hi) // 2
        if costs.gemm(mid, mid, mid, dtype="fp16").intensity >= roof.ridge_point:
            hi = mid
        else:
            lo = mid + 1
    return lo, (f"costs.gemm: intensity 2N³ / (3N² × 2 B) = N/3 FLOP/byte reaches the A100 FP16 "
                f"ridge of {intensity(roof.ridge_point)} at N = {lo:,}")


def _first_limit():
    from .occupancy import occupancy
    r = occupancy(cc="9.0", threads_per_block=256, registers_per_thread=40,
                  shared_mem_per_block=4096)
    return r.limiter, (f"occupancy calculator, CC 9.0, 256 threads, 40 registers, 4 KiB: "
                       f"{r.warps_per_sm} of 64 warps ({percent(r.occupancy)}), limited by "
                       f"{' = '.join(r.limiters)}")


def _knee_ilp1():
    from .latency import warps_to_saturate
    n = warps_to_saturate(alu_per_load=4, latency=400, ilp=1)
    return n, ("latency model: a warp issues I = 4 + 1 = 5 instructions per round of "
               f"T = 5 − 1 + 400 = 404 cycles, so T / I = {n:.1f} warps keep one scheduler busy")


def _fp16_tile():
    from . import costs
    from .roofline import Roofline
    roof = Roofline.from_gpu("h100", "fp16")
    n = 4096
    for tile in range(1, n + 1):
        i = costs.gemm_tiled(n, n, n, tile=tile, dtype="fp16").intensity
        if i >= roof.ridge_point:
            return tile, (f"costs.gemm_tiled, 4096³ in FP16: the first T × T tile with intensity "
                          f"at or above the H100's FP16 ridge is T = {tile} "
                          f"({intensity(i)}); T = 256 gives "
                          f"{costs.gemm_tiled(n, n, n, tile=256, dtype='fp16').intensity:.0f}")
    return math.inf, "no tile up to the matrix size reaches the ridge"


#: The launch explorer's starting kernel: a fixed 2 µs plus 0.05 µs per item of the batch.
LAUNCH_KERNEL = {"fixed_us": 2.0, "per_item_us": 0.05}


def _launch_batch():
    from .system import launch_figures
    fig = launch_figures("H200")
    b = (fig.launch_us - LAUNCH_KERNEL["fixed_us"]) / LAUNCH_KERNEL["per_item_us"]
    return b, (f"a kernel lasts as long as one launch when 2 µs + 0.05 µs × batch = "
               f"{duration(fig.launch_us * 1e-6)} (the H200's launch cost): batch = {b:.0f}")


def _half_mfu_tokens():
    from .hardware import gpu
    from .mfu import transformer_flops
    llama = transformer_flops(batch=1, seq_len=4096, d_model=4096, n_layers=32, d_ff=11008,
                              vocab_size=32000, n_heads=32, gated_mlp=True)
    peak = gpu("a100").peak_flops("bf16")
    tokens = 0.5 * 8 * peak / llama.training_per_token
    return tokens, (f"0.5 × 8 GPUs × {flop_rate(peak)} ÷ "
                    f"{si(llama.training_per_token, 'FLOP')} per token (Llama-2-7B, 4096-token "
                    f"sequences, exact matmul count)")


PREDICTIONS: dict[str, Prediction] = {p.id: p for p in (
    Prediction("00.tensor_vs_fp32", "How many times faster is an H100's dense FP16 tensor-core "
               "peak than its FP32 peak?", "number", _tensor_vs_fp32, "×"),
    Prediction("01.sm_vs_core", "How many times the FP32 FLOP/s of one CPU core (two AVX-512 "
               "FMA units, 3.0 GHz) does one H100 SM deliver?", "number", _sm_vs_core, "×"),
    Prediction("02.parity_over_warp", "With 256 multiply-adds per path, how many times as many "
               "warp instructions does the branch by lane parity issue as the branch by warp "
               "index?", "number", _parity_over_warp, "×"),
    Prediction("03.registers_or_l2", "On an H100, which is bigger: the register files of all SMs "
               "together, or the L2 cache?", "choice", _registers_or_l2,
               options=("registers", "L2")),
    Prediction("03.local_write_ratio", "For the local array rewritten 1,000 times, how many "
               "times more bytes reach L2 under write-through than under write-back?",
               "number", _local_write_ratio, "×"),
    Prediction("04.stride4_sectors", "How many 32-byte sectors does one warp's load of floats "
               "at stride 4 touch?", "number", _stride4_sectors, "sectors"),
    Prediction("05.gemm_ridge_n", "At what N does a square FP16 GEMM, every matrix moved once, "
               "reach the A100's FP16 ridge point?", "number", _gemm_ridge_n, ""),
    Prediction("06.first_limit", "At 256 threads, 40 registers and 4 KiB of shared memory on "
               "CC 9.0, which limit binds?", "choice", _first_limit,
               options=("warps", "blocks", "registers", "shared memory")),
    Prediction("06.knee_ilp1", "With 4 ALU instructions per load, one load in flight and a "
               "400-cycle latency, how many warps must one scheduler hold to issue every "
               "cycle?", "number", _knee_ilp1, "warps"),
    Prediction("07.fp16_tile", "How wide must a square tile be before a 4096³ FP16 tiled GEMM "
               "reaches the H100's tensor-core ridge?", "number", _fp16_tile, "elements"),
    Prediction("08.launch_batch", "With kernels of 2 µs + 0.05 µs per item, at what batch size "
               "does one kernel last as long as one launch?", "number", _launch_batch, "items"),
    Prediction("09.half_mfu_tokens", "How many tokens per second must 8 A100s training "
               "Llama-2-7B in BF16 reach for an MFU of 50 %?", "number", _half_mfu_tokens,
               "tokens/s"),
)}


# -- the two calls a lesson makes ------------------------------------------------------------------

def _prediction(id) -> Prediction:
    if not isinstance(id, str):
        raise TypeError(f"id must be a prediction id (a string), got {id!r} ({type(id).__name__})")
    if id not in PREDICTIONS:
        raise ValueError(f"id must be one of {', '.join(map(repr, PREDICTIONS))}; got {id!r}")
    return PREDICTIONS[id]


def _checked_guess(p: Prediction, guess):
    if p.kind == "number":
        if isinstance(guess, bool) or not isinstance(guess, numbers.Real):
            raise TypeError(f"guess for {p.id} must be a number (in {p.unit or 'the unit asked'})"
                            f", got {guess!r} ({type(guess).__name__})")
        if not math.isfinite(guess):
            raise ValueError(f"guess for {p.id} must be a finite number, got {guess!r}")
        return float(guess)
    if not isinstance(guess, str):
        raise TypeError(f"guess for {p.id} must be one of {', '.join(map(repr, p.options))}; "
                        f"got {guess!r} ({type(guess).__name__})")
    for option in p.options:
        if guess.strip().lower() == option.lower():
            return option
    raise ValueError(f"guess for {p.id} must be one of {', '.join(map(repr, p.options))}; "
                     f"got {guess!r}")


def predict(id: str, guess=...) -> None:
    """Record ``guess`` for prediction ``id`` (leave ``...`` to record nothing)."""
    p = _prediction(id)
    if guess is ...:
        _GUESSES.pop(id, None)
        print(f"No guess recorded for {id}: replace ... with your guess, then run this cell.")
        return
    _GUESSES[id] = _checked_guess(p, guess)
    unit = _unit(p.unit) if p.kind == "number" else ""
    print(f"Recorded your guess for {id}: {_show(_GUESSES[id])}{unit}. "
          "The lesson reveals the model's answer after the experiment.")


@dataclass(frozen=True, repr=False)
class Reveal(Readout):
    """A guess beside the model's answer."""

    id: str
    question: str
    guess: object            # None when no guess was recorded
    answer: object
    unit: str
    how: str

    @property
    def verdict(self) -> str:
        if self.guess is None:
            return "no guess was recorded (predict() before the experiment)"
        if isinstance(self.answer, str):
            return "right" if self.guess == self.answer else f"not quite: the model says {self.answer}"
        if self.answer == 0 or self.guess <= 0:
            return "exact" if self.guess == self.answer else "far off"
        r = self.guess / self.answer
        if 1 / CLOSE_FACTOR <= r <= CLOSE_FACTOR:
            return f"close: within {percent(CLOSE_FACTOR - 1)} of the model"
        return (f"your guess is {r:.2g}× the model's answer" if r > 1
                else f"your guess is 1/{1 / r:.2g} of the model's answer")

    def readout_title(self) -> str:
        return f"Prediction {self.id}"

    def readout_rows(self) -> tuple[Row, ...]:
        unit = "" if isinstance(self.answer, str) else _unit(self.unit)
        guess = "—" if self.guess is None else _show(self.guess) + unit
        return (Row("question", self.question), Row("your guess", guess),
                Row("the model", _show(self.answer) + unit), Row("verdict", self.verdict),
                Row("how", self.how))


def reveal(id: str) -> Reveal:
    """The model's answer to prediction ``id`` beside the recorded guess (if any)."""
    p = _prediction(id)
    answer, how = p.compute()
    return Reveal(id, p.question, _GUESSES.get(id), answer, p.unit, how)


def answer(id: str):
    """The model's answer to prediction ``id`` (what :func:`reveal` shows)."""
    return _prediction(id).compute()[0]


def _unit(unit: str) -> str:
    """``"×"`` sticks to its number (``14.8×``); other units follow a space."""
    return unit if unit in ("", "×") else f" {unit}"


def _show(value) -> str:
    if isinstance(value, str):
        return value
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1e4 else f"{value:,.0f}"
