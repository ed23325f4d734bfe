"""Chapter 09 (MFU) exercise questions.

References come from :mod:`gpu_lessons.mfu` (matmul FLOPs of a pre-LN GPT as
``torch.utils.flop_counter`` counts them; MFU = model FLOP/s / dense peak, PaLM App. B; the
Megatron-LM closed forms of Narayanan et al. 2021 and Korthikanti et al. 2022) and the GPU
catalog (:mod:`gpu_lessons.hardware`).  The likely mistakes are the common ones: multiply-adds
counted as FLOPs, "x 2 for forward and backward", the wrong peak (sparse, FP16-accumulate,
another GPU), MFU confused with HFU.
"""

from __future__ import annotations

from ..hardware import gpu as lookup
from ..mfu import (
    REFERENCE_RUNS,
    megatron_training_flops,
    mfu,
    parameter_count,
    six_n_flops_per_token,
    transformer_flops,
    utilization,
)
from ._common import gpus, percent_as_fraction
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- 09.step_time: how long a training step takes at a given MFU -----------------------------------

#: GPT-2 shapes (Radford et al. 2019): layers, width, heads; MLP 4 x width; vocabulary 50,257.
_GPT2 = {"small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20),
         "XL": (48, 1600, 25)}
_STEP_GPUS = ("h100", "a100", "h200", "b200", "rtx 4090", "l40s")


def _gpt2(model, batch, **kw):
    layers, width, heads = _GPT2[model]
    return transformer_flops(batch=batch, seq_len=1024, d_model=width, n_layers=layers,
                             d_ff=4 * width, vocab_size=50257, n_heads=heads)


def _step_ms(model, batch, gpu, n_gpus, mfu_pct, *, flops=None, peak=None) -> float:
    """Milliseconds per training step: model FLOPs of the step (3 x forward, matmuls only) /
    (MFU x GPUs x dense BF16 peak).  GPT-2 medium, 8 x 1,024 tokens: 19.85 TFLOP; on 8 H100s
    at 40 % MFU: 19.85 / (0.4 x 8 x 989.4) s = 6.27 ms."""
    work = _gpt2(model, batch).training if flops is None else flops
    peak = lookup(gpu).peak_flops("bf16") if peak is None else peak
    return 1e3 * work / (mfu_pct / 100 * n_gpus * peak)


def _step_fields(model, batch, gpu, n_gpus, mfu_pct) -> dict:
    layers, width, heads = _GPT2[model]
    return {"layers": layers, "width": f"{width:,}", "heads": heads, "mlp": f"{4 * width:,}",
            "plural": "" if n_gpus == 1 else "s"}


def _step_with(fn):
    """A mistake value: the step time with the training FLOPs replaced by ``fn(flops)``."""
    def value(ref, model, batch, gpu, n_gpus, mfu_pct):
        return _step_ms(model, batch, gpu, n_gpus, mfu_pct, flops=fn(_gpt2(model, batch)))
    return value


def _six_n(f) -> float:
    """6 x non-embedding parameters x tokens (Kaplan et al. 2020)."""
    return six_n_flops_per_token(f.parameters().non_embedding) * f.tokens


# -- 09.forward_flops: the forward count as a function --------------------------------------------

def _tf(batch, seq_len, d_model, n_layers, d_ff, vocab_size):
    """Plain multi-head attention: the FLOPs do not depend on the number of heads."""
    return transformer_flops(batch, seq_len, d_model, n_layers, d_ff, vocab_size, n_heads=1)


def _forward_reference(batch, seq_len, d_model, n_layers, d_ff, vocab_size):
    """Forward FLOPs: (8·b·s·h² + 4·b·s²·h + 4·b·s·h·i)·L + 2·b·s·h·V (Megatron-LM)."""
    return _tf(batch, seq_len, d_model, n_layers, d_ff, vocab_size).forward


def _forward_inputs(rng) -> dict:
    """Models from a toy to a 70B-class width; MLP 4h or any multiple of 64."""
    h = 64 * int(rng.integers(1, 129))
    d_ff = 4 * h if rng.random() < 0.5 else 64 * int(rng.integers(1, 449))
    return {"batch": int(rng.integers(1, 65)), "seq_len": int(rng.integers(1, 8193)),
            "d_model": h, "n_layers": int(rng.integers(1, 97)), "d_ff": d_ff,
            "vocab_size": int(rng.integers(1000, 262_145))}


def _forward_edges() -> list[dict]:
    def case(b, s, h, L, i, V):
        return {"batch": b, "seq_len": s, "d_model": h, "n_layers": L, "d_ff": i,
                "vocab_size": V}

    return [case(8, 1024, 768, 12, 3072, 50257),      # GPT-2 small, the design's example
            case(1, 1, 1, 1, 1, 1),                    # every term 2, 8 or 4: 18 FLOPs
            case(1, 4096, 4096, 32, 16384, 32000),     # long sequence: s²h matters
            case(64, 128, 12288, 96, 49152, 50257)]    # GPT-3 175B shapes, short sequences


def _part(name):
    """A mistake that changes one component: value = expected ± f(component)."""
    def value(e, **kw):
        f = _tf(**kw)
        return {"attention_macs": e - f.attention / 2,
                "mlp_eight": e + f.mlp,
                "no_logits": e - f.logits,
                "causal": e - (f.attn_scores + f.attn_values) / 2,
                "one_layer": f.layers_forward / f.n_layers + f.logits}[name]
    return value


def _shortcut(e, batch, seq_len, d_model, n_layers, d_ff, vocab_size):
    """The shortcut formula learners meet in notes and blog posts: per layer and sequence
    4·s·h² + 2·s²·h (attention, multiply-adds) + 8·s·h·i (MLP), then the LM head."""
    b, s, h, i = batch, seq_len, d_model, d_ff
    return n_layers * b * (4 * s * h * h + 2 * s * s * h + 8 * s * h * i) + 2 * b * s * h * vocab_size


# -- 09.mfu_from_log: MFU of a Llama-2-7B-shaped run -----------------------------------------------

#: A Llama-2-7B-shaped model (Touvron et al. 2023: h 4096, 32 layers, SwiGLU 11008, 32k vocab).
_LLAMA = {"batch": 64, "seq_len": 4096, "d_model": 4096, "n_layers": 32, "d_ff": 11008,
          "vocab_size": 32000, "n_heads": 32, "gated_mlp": True}


def _log_mfu(gpu, n_gpus, step_s, *, flops=None, peak_gpu=None, precision="bf16") -> float:
    """MFU in percent: training FLOPs per token (exact count, or ``flops`` per token) x
    64·4096 tokens / the step time, over the GPUs' dense ``precision`` peak (the hand
    derivation for 8 H100s and 3.2 s is in tests/test_exercises.py)."""
    f = transformer_flops(**_LLAMA)
    return 100 * mfu(f if flops is None else flops, steps_per_s=1 / step_s,
                     tokens_per_step=f.tokens, precision=precision, gpu=peak_gpu or gpu,
                     n_gpus=n_gpus).mfu


def _log_six_n(ref, gpu, n_gpus, step_s) -> float:
    n = parameter_count(d_model=4096, n_layers=32, d_ff=11008, vocab_size=32000,
                        gated_mlp=True, bias=False, norm="rmsnorm").non_embedding
    return _log_mfu(gpu, n_gpus, step_s, flops=six_n_flops_per_token(n))


# -- 09.wrong_peak: nanoGPT's hard-coded A100 peak on another GPU ---------------------------------

def _true_mfu(gpu, printed, precision: str = "bf16", accumulate: str = "fp32") -> float:
    """nanoGPT's estimate_mfu divides by 312 TFLOP/s (A100 BF16 dense); the same FLOP/s against
    the GPU's own dense BF16 peak with FP32 accumulate (RTX 4090: 165.2 TFLOP/s, Ada
    whitepaper)."""
    achieved = printed / 100 * lookup("a100").peak_flops("bf16")
    return 100 * utilization(achieved, gpu=gpu, precision=precision, accumulate=accumulate).mfu


def _acc16(ref, gpu, printed) -> float | None:
    if "fp16_acc16" not in lookup(gpu).peak_tflops:
        return None
    return _true_mfu(gpu, printed, "fp16", "fp16")


# -- 09.mfu_or_hfu and 09.megatron_mfu ------------------------------------------------------------

#: Narayanan et al. 2021 (arXiv 2104.04473), Table 1, the 1T-parameter row: 128 layers, hidden
#: 25,600, sequence 2,048, batch 3,072; vocabulary 51,200 (their §5.1).
_MEGATRON_1T = {"batch": 3072, "seq_len": 2048, "n_layers": 128, "d_model": 25600,
                "vocab_size": 51200}


def _megatron_run():
    return next(r for r in REFERENCE_RUNS if r.name.startswith("Megatron"))


def _mfu_or_hfu() -> str:
    run = _megatron_run()
    return "HFU" if run.mfu is None and run.hfu is not None else "MFU"


def _megatron_mfu() -> float:
    """HFU x model FLOPs / hardware FLOPs: eq. 3 (with recomputation) against Korthikanti et
    al.'s count without it: 52 % x 0.750 = 39.0 %."""
    ratio = (megatron_training_flops(**_MEGATRON_1T)
             / megatron_training_flops(**_MEGATRON_1T, recompute=True))
    return 100 * _megatron_run().hfu * ratio


def _megatron_hfu(_ref: float) -> float:
    return 100 * _megatron_run().hfu


QUESTIONS = (
    Question(
        id="09.step_time",
        name="step_time",
        points=2,
        title="How long is a training step?",
        prompt="GPT-2 {model} ({layers} layers, d_model {width}, {heads} heads, MLP {mlp}, "
               "vocabulary 50,257, untied LM head) trains on batches of **{batch} sequences of "
               "1,024 tokens**, in BF16 on **{n_gpus} {gpu}{plural}**, without activation "
               "recomputation. The run reaches **{mfu_pct} % MFU**. How long does one training "
               "step take, in **ms**? Store it in `step_time`.\n\n"
               "Count matmul FLOPs only (a multiply-add is 2 FLOPs; backward ≈ 2 × forward) "
               "and use the GPU's dense BF16 peak (`gpu(...).peak_flops(\"bf16\")`).",
        hint="Per layer: attention projections, the two attention matmuls over the sequence, "
             "the MLP; then the LM head once. Step time = step FLOPs / (MFU × GPUs × peak).",
        vary=(Vary("model", ("medium", "small", "large", "XL"), "the GPT-2 size"),
              Vary("batch", (8, 16, 32), "sequences per step"),
              gpus(*_STEP_GPUS),
              Vary("n_gpus", (8, 4, 16), "GPUs"),
              Vary("mfu_pct", (40, 30, 50, 45), "the run's MFU, %")),
        derive=_step_fields,
        answer=Number(
            reference=_step_ms,
            units="ms",
            rtol=0.01,
            mistakes=(
                Mistake("forward_only", "that is the forward pass alone; training adds a "
                        "backward pass that costs about twice the forward.",
                        value=_step_with(lambda f: f.forward)),
                Mistake("times_two", "the backward pass costs about 2× the forward (a matmul "
                        "for the input gradient and one for the weight gradient), so training "
                        "is about 3× forward, not 2× (M31).",
                        value=_step_with(lambda f: 2 * f.forward)),
                Mistake("half", "half the time: either each multiply-add was counted as one "
                        "FLOP, or the peak is the sparse (2:4) figure, twice the dense one.",
                        value=lambda ref, **p: ref / 2),
                Mistake("recompute", "that includes re-running the forward pass for activation "
                        "recomputation: hardware FLOPs, not model FLOPs.",
                        value=_step_with(lambda f: f.training_recompute)),
                Mistake("six_n", "6N (non-embedding parameters) leaves out the attention "
                        "matmuls over the sequence and the LM head, both large at this size.",
                        value=_step_with(_six_n)),
                Mistake("no_logits", "the LM head (d_model × vocabulary, once per token) is a "
                        "large matmul too.", value=_step_with(lambda f: 3 * (f.forward
                                                                             - f.logits))),
                Mistake("one_gpu", "the work is shared by all {n_gpus} GPUs.",
                        value=lambda ref, n_gpus, **p: None if n_gpus == 1 else ref * n_gpus),
                Mistake("fp32_peak", "that divides by the FP32 CUDA-core peak; BF16 matmuls "
                        "run on the tensor cores.",
                        value=lambda ref, model, batch, gpu, n_gpus, mfu_pct: _step_ms(
                            model, batch, gpu, n_gpus, mfu_pct,
                            peak=lookup(gpu).peak_flops("fp32"))),
                Mistake("mfu_percent", "MFU is a fraction of the peak: {mfu_pct} % is "
                        "0.{mfu_pct}, not {mfu_pct}.", value=lambda ref, **p: ref / 100),
            ),
        ),
    ),
    Question(
        id="09.forward_flops",
        name="forward_flops",
        points=3,
        title="A transformer's forward FLOPs",
        prompt="Write `forward_flops(batch, seq_len, d_model, n_layers, d_ff, vocab_size)` "
               "returning the matmul FLOPs of one forward pass of a pre-LN GPT with plain "
               "multi-head attention (heads × head size = d_model), a two-matmul MLP of width "
               "d_ff and an untied LM head, counted as torch's FlopCounterMode counts them "
               "(2 FLOPs per multiply-add, no causal discount).\n\n"
               "Return a number of **FLOPs**. The check compares your function with the "
               "package's counter (which agrees with torch's FlopCounterMode) on GPT-2 small, "
               "GPT-3-sized shapes and 100 random models.",
        answer=Function(
            reference=_forward_reference,
            inputs=_forward_inputs,
            edge_cases=_forward_edges,
            signature="forward_flops(batch, seq_len, d_model, n_layers, d_ff, vocab_size)",
            units="FLOPs",
            rtol=1e-9,
            mistakes=(
                Mistake("macs", "that counts multiply-adds; a multiply-add is 2 FLOPs.",
                        value=lambda e, **kw: e / 2),
                Mistake("shortcut_formula", "that is the common shortcut formula, per layer and "
                        "sequence 4·s·h² + 2·s²·h for attention and 8·s·h·d_ff for the MLP. The "
                        "attention terms count multiply-adds: in FLOPs they are 8·s·h² + 4·s²·h. "
                        "The MLP is two matmuls of s × h × d_ff: 4·s·h·d_ff FLOPs, not 8.",
                        value=_shortcut),
                Mistake("attention_macs", "the attention part is counted in multiply-adds "
                        "(4·s·h² + 2·s²·h per sequence); in FLOPs it is 8·s·h² + 4·s²·h (M29).",
                        value=_part("attention_macs")),
                Mistake("mlp_eight", "the MLP is two matmuls of s × h × d_ff: 4·s·h·d_ff FLOPs "
                        "per sequence, not 8.", value=_part("mlp_eight")),
                Mistake("no_logits", "the LM head's matmul (d_model x vocab_size per token) "
                        "is missing.", value=_part("no_logits")),
                Mistake("causal", "do not halve the attention matmuls for the causal mask: "
                        "FlopCounterMode counts the full s x s scores.", value=_part("causal")),
                Mistake("one_layer", "the layer FLOPs must be multiplied by n_layers.",
                        value=_part("one_layer")),
                Mistake("training", "that is a training step (3 x forward); return the "
                        "forward pass.", value=lambda e, **kw: 3 * e),
            ),
        ),
    ),
    Question(
        id="09.mfu_from_log",
        name="mfu_from_log",
        points=2,
        title="MFU from a training log",
        prompt="A Llama-2-7B-shaped model (32 layers, d_model 4096, 32 heads, SwiGLU MLP of "
               "width 11,008, vocabulary 32,000, untied LM head) trains in BF16 on **{n_gpus} "
               "{gpu}** GPUs without activation recomputation. The log shows **{step_s} s per "
               "step**, each step 64 sequences of 4,096 tokens. What is the MFU, in "
               "**percent**? Store it in `mfu_from_log`.\n\n"
               "A SwiGLU MLP has three matmuls of d_model × width (gate, up, down).",
        hint="MFU = model FLOPs per token × tokens per second / (number of GPUs × dense BF16 "
             "peak per GPU).",
        vary=(gpus("h100", "a100", "h200", "b200"),
              Vary("n_gpus", (8, 16, 32), "GPUs"),
              Vary("step_s", (3.2, 2.5, 4.0, 5.0, 6.4), "seconds per step")),
        answer=Number(
            reference=_log_mfu,
            units="%",
            rtol=0.03,
            mistakes=(
                Mistake("sparse_or_fp8", "that divides by a peak twice the dense BF16 one: the "
                        "2:4 sparse (or FP8) figure. MFU uses the dense peak of the precision "
                        "the model trains in (M18).", value=lambda ref, **p: ref / 2),
                Mistake("no_backward", "the model FLOPs of a training step include the "
                        "backward pass (about 2× the forward).", value=lambda ref, **p: ref / 3),
                Mistake("one_gpu", "the tokens/s is the whole job's: divide by the peak of "
                        "all {n_gpus} GPUs.", value=lambda ref, n_gpus, **p: n_gpus * ref),
                Mistake("gpus_twice", "the GPU count is applied twice.",
                        value=lambda ref, n_gpus, **p: ref / n_gpus),
                Mistake("a100_peak", "312 TFLOP/s is the A100's BF16 peak (nanoGPT's "
                        "hard-coded value); these are {gpu}s.",
                        value=lambda ref, gpu, n_gpus, step_s: None if gpu == "a100"
                        else _log_mfu(gpu, n_gpus, step_s, peak_gpu="a100")),
                Mistake("fp32_peak", "that is the FP32 CUDA-core peak; BF16 matmuls run on the "
                        "tensor cores.", value=lambda ref, gpu, n_gpus, step_s: _log_mfu(
                            gpu, n_gpus, step_s, precision="fp32")),
                Mistake("six_n", "6N leaves out the attention over 4,096-token sequences "
                        "(12·L·H·Q·T per token, PaLM App. B) and the LM head: at this length "
                        "they are a sizeable share of the FLOPs.", value=_log_six_n),
                percent_as_fraction(),
            ),
        ),
    ),
    Question(
        id="09.wrong_peak",
        name="wrong_peak",
        points=2,
        title="The wrong peak",
        prompt="nanoGPT's `estimate_mfu` divides the achieved FLOP/s by an A100's BF16 peak, "
               "312 TFLOP/s, whatever GPU it runs on. On one **{gpu}** training in BF16 it "
               "printed `mfu {printed}.00%`. What is the MFU against the {gpu}'s own dense "
               "BF16 tensor-core peak, with the FP32 accumulation training uses, in "
               "**percent**? Store it in `wrong_peak`.",
        hint="Recover the achieved FLOP/s from the printed figure, then divide by the right "
             "peak from the catalog (`gpu(\"{key}\").peak_flops(...)`).",
        vary=(gpus("rtx 4090", "l40s", "rtx 3090", "l4", "h100", "h100 pcie"),
              Vary("printed", (25, 18, 32, 40, 12), "the MFU nanoGPT printed, %")),
        derive=lambda gpu, printed: {"key": gpu},
        answer=Number(
            reference=_true_mfu,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("fp16_accumulate", "that is the {gpu}'s peak with FP16 accumulation; "
                        "mixed-precision training accumulates in FP32, where a GeForce card "
                        "runs at half that rate (M18).", value=_acc16),
                Mistake("unchanged", "that is nanoGPT's figure against the A100's peak; "
                        "convert it to the {gpu}'s.", value=lambda ref, gpu, printed: printed),
                Mistake("fp32_cores", "that divides by the FP32 CUDA-core peak; BF16 matmuls "
                        "run on the tensor cores.",
                        value=lambda ref, gpu, printed: _true_mfu(gpu, printed, "fp32")),
                Mistake("ratio_inverted", "the ratio is upside down: a GPU with a lower peak "
                        "shows a higher MFU for the same FLOP/s, and a higher peak a lower "
                        "one.", value=lambda ref, gpu, printed: printed ** 2 / ref),
            ),
        ),
    ),
    Question(
        id="09.mfu_or_hfu",
        name="mfu_or_hfu",
        points=1,
        title="MFU or HFU?",
        prompt="Narayanan et al. (2021) report 163 TFLOP/s per A100, 52 % of the 312 TFLOP/s "
               "peak, for a 1-trillion-parameter GPT. They count FLOPs with their eq. 3, "
               "96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), which includes the extra forward pass of "
               "full activation recomputation. Is 52 % an MFU or an HFU?\n\n"
               "Answer `\"MFU\"` or `\"HFU\"` in `mfu_or_hfu`.",
        answer=Choice(
            reference=_mfu_or_hfu,
            options=("MFU", "HFU"),
            mistakes=(
                Mistake("mfu", "MFU counts only the FLOPs the model needs (forward and "
                        "backward, 72·B·s·l·h²·(...)); eq. 3's 96 = 4 × 24 also counts the "
                        "recomputed forward pass (PaLM App. B; M27).", value="MFU"),
            ),
        ),
    ),
    Question(
        id="09.megatron_mfu",
        name="megatron_mfu",
        points=2,
        title="The MFU of a published run",
        prompt="Continuing `09.mfu_or_hfu`: the 1T model has 128 layers, h = 25,600, sequence "
               "length s = 2,048 and vocabulary V = 51,200. Without recomputation a step takes "
               "72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) FLOPs (Korthikanti et al. 2022). What is "
               "the run's MFU, in **percent**? Store it in `megatron_mfu`.",
        answer=Number(
            reference=_megatron_mfu,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("unchanged", "that is the reported figure, which counts the "
                        "recomputed forward pass too.", value=_megatron_hfu),
                Mistake("inverted", "MFU is below HFU: the model FLOPs are fewer than the "
                        "FLOPs the hardware executed.",
                        value=lambda ref: _megatron_hfu(ref) ** 2 / ref),
                Mistake("two_thirds", "training without recomputation is 3 forward passes and "
                        "with it 4 (not 2 and 3).",
                        value=lambda ref: _megatron_hfu(ref) * 2 / 3),
            ),
        ),
    ),
)

