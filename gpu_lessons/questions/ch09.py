"""Chapter 09 (MFU) exercise questions.

References come from :mod:`gpu_lessons.mfu` (matmul FLOPs of a pre-LN GPT as
``torch.utils.flop_counter`` counts them; MFU = model FLOP/s / dense peak, PaLM App. B; the
Megatron-LM closed forms of Narayanan et al. 2021 and Korthikanti et al. 2022) and the GPU
catalog (:mod:`gpu_lessons.hardware`), imported inside each function.  The likely mistakes are
the seed's errata E1-E6: multiply-adds counted as FLOPs, "x 2 for forward and backward", the
wrong peak (sparse, FP16-accumulate, another GPU), MFU confused with HFU.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question

# -- 09.training_flops: one training step of GPT-2 medium ------------------------------------------

#: GPT-2 medium (Radford et al. 2019: 24 layers, width 1024, 16 heads), batch 8 x 1024 tokens.
_GPT2_MEDIUM = {"batch": 8, "seq_len": 1024, "d_model": 1024, "n_layers": 24, "d_ff": 4096,
                "vocab_size": 50257, "n_heads": 16}


def _gpt2_medium():
    from ..mfu import transformer_flops

    return transformer_flops(**_GPT2_MEDIUM)


def _training_tflop() -> float:
    """Model FLOPs of one training step, 3 x forward, in TFLOP (19.85)."""
    return _gpt2_medium().training / 1e12


def _six_n_tflop(_ref: float) -> float:
    """6 x non-embedding parameters x tokens (Kaplan et al. 2020)."""
    from ..mfu import six_n_flops_per_token

    f = _gpt2_medium()
    return six_n_flops_per_token(f.parameters().non_embedding) * f.tokens / 1e12


def _causal_tflop(_ref: float) -> float:
    f = _gpt2_medium()
    return 3 * (f.forward - (f.attn_scores + f.attn_values) / 2) / 1e12


# -- 09.forward_flops: the forward count as a function --------------------------------------------

def _tf(batch, seq_len, d_model, n_layers, d_ff, vocab_size):
    """Plain multi-head attention: the FLOPs do not depend on the number of heads."""
    from ..mfu import transformer_flops

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
        return {"seed_attention": e - f.attention / 2,
                "seed_mlp": e + f.mlp,
                "no_logits": e - f.logits,
                "causal": e - (f.attn_scores + f.attn_values) / 2,
                "one_layer": f.layers_forward / f.n_layers + f.logits}[name]
    return value


# -- 09.mfu_from_log: MFU of a Llama-2-7B-shaped run -----------------------------------------------

#: A Llama-2-7B-shaped model (Touvron et al. 2023: h 4096, 32 layers, SwiGLU 11008, 32k vocab).
_LLAMA = {"batch": 64, "seq_len": 4096, "d_model": 4096, "n_layers": 32, "d_ff": 11008,
          "vocab_size": 32000, "n_heads": 32, "gated_mlp": True}
#: The training log: 8 GPUs, 3.2 s per step of 64 x 4096 tokens.
_LOG = {"gpu": "h100", "n_gpus": 8, "step_s": 3.2}


def _log_mfu(flops=None, *, gpu=None, precision="bf16") -> float:
    """MFU in percent: training FLOPs per token (exact count, or ``flops`` per token) x
    64·4096 tokens / 3.2 s, over 8 x the dense ``precision`` peak of ``gpu``."""
    from ..mfu import mfu, transformer_flops

    f = transformer_flops(**_LLAMA)
    return 100 * mfu(f if flops is None else flops, steps_per_s=1 / _LOG["step_s"],
                     tokens_per_step=f.tokens, precision=precision, gpu=gpu or _LOG["gpu"],
                     n_gpus=_LOG["n_gpus"]).mfu


def _log_six_n(_ref: float) -> float:
    from ..mfu import parameter_count, six_n_flops_per_token

    n = parameter_count(d_model=4096, n_layers=32, d_ff=11008, vocab_size=32000,
                        gated_mlp=True, bias=False, norm="rmsnorm").non_embedding
    return _log_mfu(flops=six_n_flops_per_token(n))


# -- 09.wrong_peak: nanoGPT's hard-coded A100 peak on an RTX 4090 ----------------------------------

_PRINTED_MFU = 0.25


def _rtx4090_mfu(precision: str = "bf16", accumulate: str = "fp32", gpu: str = "rtx 4090"):
    """nanoGPT's estimate_mfu divides by 312 TFLOP/s (A100 BF16 dense); the same FLOP/s against
    the RTX 4090's dense BF16 peak with FP32 accumulate (165.2 TFLOP/s, Ada whitepaper)."""
    from ..hardware import gpu as lookup
    from ..mfu import utilization

    achieved = _PRINTED_MFU * lookup("a100").peak_flops("bf16")
    return 100 * utilization(achieved, gpu=gpu, precision=precision,
                             accumulate=accumulate).mfu


# -- 09.mfu_or_hfu and 09.megatron_mfu ------------------------------------------------------------

#: Narayanan et al. 2021 (arXiv 2104.04473), Table 1, the 1T-parameter row: 128 layers, hidden
#: 25,600, sequence 2,048, batch 3,072; vocabulary 51,200 (their §5.1).
_MEGATRON_1T = {"batch": 3072, "seq_len": 2048, "n_layers": 128, "d_model": 25600,
                "vocab_size": 51200}


def _megatron_run():
    from ..mfu import REFERENCE_RUNS

    return next(r for r in REFERENCE_RUNS if r.name.startswith("Megatron"))


def _mfu_or_hfu() -> str:
    run = _megatron_run()
    return "HFU" if run.mfu is None and run.hfu is not None else "MFU"


def _megatron_mfu() -> float:
    """HFU x model FLOPs / hardware FLOPs: eq. 3 (with recomputation) against Korthikanti et
    al.'s count without it: 52 % x 0.750 = 39.0 %."""
    from ..mfu import megatron_training_flops

    ratio = (megatron_training_flops(**_MEGATRON_1T)
             / megatron_training_flops(**_MEGATRON_1T, recompute=True))
    return 100 * _megatron_run().hfu * ratio


def _megatron_hfu(_ref: float) -> float:
    return 100 * _megatron_run().hfu


QUESTIONS = (
    Question(
        id="09.training_flops",
        name="training_flops",
        points=2,
        prompt="GPT-2 medium (24 layers, d_model 1024, 16 heads, MLP 4096, vocabulary 50,257, "
               "untied LM head) trains on batches of 8 sequences of 1,024 tokens. How many "
               "model FLOPs does one training step (forward and backward, no activation "
               "recomputation) take, counting matmuls only, in TFLOP?",
        hint="Per layer: attention projections, the two attention matmuls over the sequence, "
             "the MLP; then the LM head once. Each multiply-add is 2 FLOPs.",
        answer=Number(
            reference=_training_tflop,
            units="TFLOP",
            rtol=0.01,
            mistakes=(
                Mistake("forward_only", "that is the forward pass; training adds a backward "
                        "pass that costs about twice the forward.",
                        value=lambda ref: _gpt2_medium().forward / 1e12),
                Mistake("times_two", "the backward pass costs about 2x the forward (a matmul "
                        "for the input gradient and one for the weight gradient), so training "
                        "is about 3x forward, not 2x (erratum E4).",
                        value=lambda ref: 2 * _gpt2_medium().forward / 1e12),
                Mistake("macs", "that counts multiply-adds; FLOPs count a multiply-add as 2 "
                        "(errata E2, E3).", value=lambda ref: ref / 2),
                Mistake("recompute", "that includes re-running the forward pass for activation "
                        "recomputation: hardware FLOPs, not model FLOPs.",
                        value=lambda ref: _gpt2_medium().training_recompute / 1e12),
                Mistake("six_n", "6N (non-embedding parameters) leaves out the attention "
                        "matmuls over the sequence and the LM head, both large at this size.",
                        value=_six_n_tflop),
                Mistake("no_logits", "the LM head (d_model x vocabulary, once per token) is a "
                        "large matmul too.", value=lambda ref: 3 * (
                            _gpt2_medium().forward - _gpt2_medium().logits) / 1e12),
                Mistake("causal", "FLOP counts (FlopCounterMode, MFU) do not discount the "
                        "causal mask: count the full s x s score matrix.", value=_causal_tflop),
            ),
        ),
    ),
    Question(
        id="09.forward_flops",
        name="forward_flops",
        points=3,
        prompt="Write forward_flops(batch, seq_len, d_model, n_layers, d_ff, vocab_size) "
               "returning the matmul FLOPs of one forward pass of a pre-LN GPT with plain "
               "multi-head attention (heads x head size = d_model), a two-matmul MLP of width "
               "d_ff and an untied LM head, counted as torch's FlopCounterMode counts them "
               "(2 FLOPs per multiply-add, no causal discount).",
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
                Mistake("seed_attention", "the attention part is counted in multiply-adds "
                        "(the seed's 4·s·h² + 2·s²·h per sequence); in FLOPs it is "
                        "8·s·h² + 4·s²·h (erratum E2).", value=_part("seed_attention")),
                Mistake("seed_mlp", "the MLP is two matmuls of s x h x d_ff: 4·s·h·d_ff FLOPs "
                        "per sequence, not 8 (erratum E3).", value=_part("seed_mlp")),
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
        prompt="A Llama-2-7B-shaped model (32 layers, d_model 4096, 32 heads, SwiGLU MLP of "
               "width 11,008, vocabulary 32,000, untied LM head) trains in BF16 on 8 H100 SXM5 "
               "GPUs without activation recomputation. The log shows 3.2 s per step, each step "
               "64 sequences of 4,096 tokens. What is the MFU, in percent?",
        hint="MFU = model FLOPs per token x tokens per second / (number of GPUs x dense BF16 "
             "peak per GPU).",
        answer=Number(
            reference=_log_mfu,
            units="%",
            rtol=0.03,
            mistakes=(
                Mistake("sparse_or_fp8", "that divides by a peak twice the dense BF16 one: the "
                        "2:4 sparse (or FP8) figure. MFU uses the dense peak of the precision "
                        "the model trains in.", value=lambda ref: ref / 2),
                Mistake("no_backward", "the model FLOPs of a training step include the "
                        "backward pass (about 2x the forward).", value=lambda ref: ref / 3),
                Mistake("one_gpu", "the tokens/s is the whole job's: divide by the peak of "
                        "all 8 GPUs.", value=lambda ref: 8 * ref),
                Mistake("gpus_twice", "the GPU count is applied twice.",
                        value=lambda ref: ref / 8),
                Mistake("a100_peak", "312 TFLOP/s is the A100's BF16 peak (nanoGPT's "
                        "hard-coded value); these are H100 SXM5s.",
                        value=lambda ref: _log_mfu(gpu="a100")),
                Mistake("fp32_peak", "that is the FP32 CUDA-core peak; BF16 matmuls run on the "
                        "tensor cores.", value=lambda ref: _log_mfu(precision="fp32")),
                Mistake("six_n", "6N leaves out the attention over 4,096-token sequences "
                        "(12·L·H·Q·T per token, PaLM App. B) and the LM head: at this length "
                        "they are a sizeable share of the FLOPs.", value=_log_six_n),
                Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in "
                        "percent.", value=lambda ref: ref / 100),
            ),
        ),
    ),
    Question(
        id="09.wrong_peak",
        name="wrong_peak",
        points=2,
        prompt="nanoGPT's estimate_mfu divides the achieved FLOP/s by an A100's BF16 peak, "
               "312 TFLOP/s, whatever GPU it runs on. On one RTX 4090 training in BF16 it "
               "printed 'mfu 25.00%'. What is the MFU against the RTX 4090's own dense BF16 "
               "tensor-core peak, with the FP32 accumulation training uses, in percent?",
        hint="Recover the achieved FLOP/s from the printed figure, then divide by the right "
             "peak from the catalog (gpu('rtx 4090').peak_flops(...)).",
        answer=Number(
            reference=_rtx4090_mfu,
            units="%",
            rtol=0.01,
            mistakes=(
                Mistake("fp16_accumulate", "330 TFLOP/s is GeForce Ada's peak with FP16 "
                        "accumulation (and the FP8 peak); mixed-precision training accumulates "
                        "in FP32, where the RTX 4090 runs at half that (erratum E6).",
                        value=lambda ref: _rtx4090_mfu("fp16", "fp16")),
                Mistake("unchanged", "that is nanoGPT's figure against the A100's peak; "
                        "convert it to the RTX 4090's.", value=100 * _PRINTED_MFU),
                Mistake("fp32_cores", "that divides by the FP32 CUDA-core peak; BF16 matmuls "
                        "run on the tensor cores.", value=lambda ref: _rtx4090_mfu("fp32")),
                Mistake("ratio_inverted", "the ratio is upside down: a GPU with a lower peak "
                        "shows a higher MFU for the same FLOP/s.",
                        value=lambda ref: 100 * _PRINTED_MFU ** 2 * 100 / ref),
            ),
        ),
    ),
    Question(
        id="09.mfu_or_hfu",
        name="mfu_or_hfu",
        points=1,
        prompt="Narayanan et al. (2021) report 163 TFLOP/s per A100, 52 % of the 312 TFLOP/s "
               "peak, for a 1-trillion-parameter GPT. They count FLOPs with their eq. 3, "
               "96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), which includes the extra forward pass of "
               "full activation recomputation. Is 52 % an MFU or an HFU?",
        answer=Choice(
            reference=_mfu_or_hfu,
            options=("MFU", "HFU"),
            mistakes=(
                Mistake("mfu", "MFU counts only the FLOPs the model needs (forward and "
                        "backward, 72·B·s·l·h²·(...)); eq. 3's 96 = 4 x 24 also counts the "
                        "recomputed forward pass (PaLM App. B; erratum E1).", value="MFU"),
            ),
        ),
    ),
    Question(
        id="09.megatron_mfu",
        name="megatron_mfu",
        points=2,
        prompt="Continuing 09.mfu_or_hfu: the 1T model has 128 layers, h = 25,600, sequence "
               "length s = 2,048 and vocabulary V = 51,200. Without recomputation a step takes "
               "72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) FLOPs (Korthikanti et al. 2022). What is "
               "the run's MFU, in percent?",
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

