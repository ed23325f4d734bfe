"""Tests for gpu_lessons.mfu.

References, none of them computed by the code under test:
* torch.utils.flop_counter.FlopCounterMode on small torch GPTs
  (tests/data/torch_transformer_flops.json, written by tools/reference/transformer_flops.py);
* published parameter counts (GPT-2 checkpoints, Llama-2 7B, nanoGPT's log);
* published MFU figures (PaLM App. B: PaLM 540B and MT-NLG 530B);
* hand derivations, written out in the comments;
* the Megatron-LM closed forms, as an independent formulation of the same count.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import hardware, mfu
from gpu_lessons.mfu import (
    compare_estimates,
    megatron_layer_forward_flops,
    megatron_training_flops,
    palm_flops_per_token,
    parameter_count,
    six_n_flops_per_token,
    transformer_flops,
    utilization,
)

DATA = json.loads((pathlib.Path(__file__).parents[1] / "data" / "torch_transformer_flops.json")
                  .read_text(encoding="utf-8"))
CONFIGS = DATA["configs"]


def _flops_of(cfg):
    return transformer_flops(cfg["batch"], cfg["seq_len"], cfg["d_model"], cfg["n_layers"],
                             cfg["d_ff"], cfg["vocab_size"], cfg["n_heads"], cfg["gated_mlp"],
                             n_kv_heads=cfg["n_kv_heads"], head_dim=cfg["head_dim"])


# -- against torch's FlopCounterMode --------------------------------------------------------------

def test_reference_file_records_its_origin():
    assert DATA["torch_version"].startswith("2.")
    assert len(DATA["date"]) == 10
    assert len(CONFIGS) >= 10
    assert any(c["config"]["gated_mlp"] for c in CONFIGS)
    assert any(not c["config"]["gated_mlp"] for c in CONFIGS)


@pytest.mark.parametrize("ref", CONFIGS, ids=[c["name"] for c in CONFIGS])
def test_matches_flop_counter(ref):
    f = _flops_of(ref["config"])
    assert f.forward == pytest.approx(ref["forward_flops"], rel=0.01)
    assert f.training == pytest.approx(ref["forward_backward_flops"], rel=0.01)
    assert f.backward == pytest.approx(ref["backward_flops"], rel=0.01)


@pytest.mark.parametrize("ref", CONFIGS, ids=[c["name"] for c in CONFIGS])
def test_components_match_flop_counter(ref):
    # FlopCounterMode attributes each forward matmul to its module (qkv, proj, scores, ...).
    f = _flops_of(ref["config"])
    assert ref["forward_by_component"], "reference has no per-module counts"
    for name, count in ref["forward_by_component"].items():
        assert f.components[name] == count, name


@pytest.mark.parametrize("ref", CONFIGS, ids=[c["name"] for c in CONFIGS])
def test_parameters_match_torch_model(ref):
    c = ref["config"]
    p = parameter_count(d_model=c["d_model"], n_layers=c["n_layers"], d_ff=c["d_ff"],
                        vocab_size=c["vocab_size"], n_heads=c["n_heads"],
                        gated_mlp=c["gated_mlp"], n_kv_heads=c["n_kv_heads"],
                        head_dim=c["head_dim"], bias=c["bias"], norm=c["norm"],
                        n_positions=c["n_positions"])
    assert p.total == ref["parameters"]["total"]
    assert p.token_embedding == ref["parameters"]["token_embedding"]
    assert p.position_embedding == ref["parameters"]["position_embedding"]
    assert p.lm_head == ref["parameters"]["lm_head"]


@pytest.mark.parametrize("ref", CONFIGS, ids=[c["name"] for c in CONFIGS])
def test_torch_backward_is_twice_forward(ref):
    # M31 from the counter itself: training = 3 x forward, not 2 x.
    assert ref["forward_backward_flops"] == 3 * ref["forward_flops"]


def test_cpu_sdpa_attention_core_is_not_counted():
    # Documented in the reference tool: torch's default CPU SDPA kernel has no FLOP formula,
    # so FlopCounterMode misses exactly the attention core (Q·Kᵀ and A·V).
    obs = DATA["observations"]["sdpa_cpu_default"]
    f = _flops_of(obs["config"])
    assert obs["forward_flops"] == f.forward - f.attn_scores - f.attn_values
    assert obs["backward_flops"] == f.backward - 2 * (f.attn_scores + f.attn_values)


def test_fused_sdpa_formula_counts_recomputation_in_backward():
    obs = DATA["observations"]["sdpa_fused_cuda_formulas"]
    ref = next(c for c in CONFIGS if c["name"] == obs["name"])
    f = _flops_of(ref["config"])
    assert obs["attention_core_forward_flops"] == f.attn_scores + f.attn_values
    # 5 bmm in backward against 2 in forward.
    assert obs["attention_core_backward_flops"] == 2.5 * obs["attention_core_forward_flops"]


# -- hand-derived counts --------------------------------------------------------------------------

def test_gpt2_small_forward_by_hand():
    # b=1, s=1024, h=768, L=12, i=3072, V=50257, 12 heads of 64:
    #   per layer: QKV 2·1024·768·2304 = 3,623,878,656; out 2·1024·768·768 = 1,207,959,552;
    #   Q·Kᵀ = A·V = 2·12·1024·1024·64 = 1,610,612,736 each; MLP 2 x 2·1024·768·3072
    #   = 9,663,676,416; layer total 17,716,740,096, x 12 = 212,600,881,152;
    #   logits 2·1024·768·50257 = 79,047,426,048.  Forward 291,648,307,200.
    f = transformer_flops(batch=1, seq_len=1024, d_model=768, n_layers=12, d_ff=3072,
                          vocab_size=50257, n_heads=12, gated_mlp=False)
    assert f.qkv == 12 * 3_623_878_656
    assert f.attn_scores == f.attn_values == 12 * 1_610_612_736
    assert f.logits == 79_047_426_048
    assert f.forward == 291_648_307_200
    assert f.training == 3 * 291_648_307_200


def test_contract_call_from_design_doc():
    f = transformer_flops(batch=8, seq_len=1024, d_model=768, n_layers=12, d_ff=3072,
                          vocab_size=50257, n_heads=12, gated_mlp=False)
    assert f.forward == 8 * 291_648_307_200  # linear in batch, from the hand count above
    assert isinstance(f.forward, int) and isinstance(f.training, int)


def test_recomputation_adds_a_forward_of_the_layers_only():
    f = transformer_flops(batch=1, seq_len=1024, d_model=768, n_layers=12, d_ff=3072,
                          vocab_size=50257, n_heads=12)
    # 3 x 291,648,307,200 + 212,600,881,152 (the layers, from the hand count)
    assert f.training_recompute == 3 * 291_648_307_200 + 212_600_881_152


# -- published parameter counts -------------------------------------------------------------------

@pytest.mark.parametrize(("h", "L", "total"), [
    (768, 12, 124_439_808),     # gpt2
    (1024, 24, 354_823_168),    # gpt2-medium
    (1280, 36, 774_030_080),    # gpt2-large
    (1600, 48, 1_557_611_200),  # gpt2-xl
])
def test_gpt2_parameter_counts(h, L, total):
    # Hugging Face GPT-2 checkpoints (tied embeddings, 1024 learned positions, i = 4h).
    p = parameter_count(d_model=h, n_layers=L, d_ff=4 * h, vocab_size=50257, n_positions=1024,
                        tied_embeddings=True)
    assert p.total == total


def test_nanogpt_gpt2_parameter_split():
    # nanoGPT loading gpt2 prints "number of parameters: 123.65M" (all but wpe) and
    # "num decayed parameter tensors: 50, with 124,318,464 parameters" (2-D weights incl. wte
    # and wpe), "num non-decayed parameter tensors: 98, with 121,344 parameters".
    p = parameter_count(d_model=768, n_layers=12, d_ff=3072, vocab_size=50257, n_positions=1024,
                        tied_embeddings=True)
    assert round((p.total - p.position_embedding) / 1e6, 2) == 123.65
    assert p.layer_weights + p.embedding == 124_318_464
    assert p.layer_biases + p.norms == 121_344


def test_llama2_7b_parameter_count():
    # Llama-2-7b: 6,738,415,616 parameters (checkpoint metadata): h=4096, 32 layers,
    # SwiGLU i=11008, V=32000, RMSNorm, no biases, untied head, RoPE (no position table).
    p = parameter_count(d_model=4096, n_layers=32, d_ff=11008, vocab_size=32000, n_heads=32,
                        gated_mlp=True, bias=False, norm="rmsnorm", n_positions=0)
    assert p.total == 6_738_415_616


def test_tied_embeddings_remove_one_vocab_matrix():
    untied = parameter_count(d_model=64, n_layers=2, d_ff=256, vocab_size=1000)
    tied = parameter_count(d_model=64, n_layers=2, d_ff=256, vocab_size=1000,
                           tied_embeddings=True)
    assert untied.total - tied.total == 64 * 1000


# -- published MFU figures (PaLM App. B) ----------------------------------------------------------

def _chip(name, tflops):
    return dataclasses.replace(hardware.gpu("a100"), name=name, peak_tflops={"bf16": tflops})


def test_palm_540b_mfu():
    # PaLM App. B: 238.3K tokens/s on 6144 TPU v4 chips (275 TFLOP/s bf16 each); MFU 45.7 %
    # with 6N only (N = 540B), 46.2 % with the attention term (L=118, H=48, Q=256, T=2048,
    # N = 540.35B).
    tpu = _chip("TPU v4", 275.0)
    plain = mfu.mfu(six_n_flops_per_token(540e9), gpu=tpu, tokens_per_s=238.3e3, n_gpus=6144)
    full = mfu.mfu(palm_flops_per_token(540.35e9, 118, 48, 256, 2048), gpu=tpu,
                   tokens_per_s=238.3e3, n_gpus=6144)
    assert plain.mfu == pytest.approx(0.457, abs=1e-3)
    assert full.mfu == pytest.approx(0.462, abs=1e-3)


def test_mt_nlg_530b_mfu():
    # PaLM App. B on MT-NLG 530B (Smith et al. 2022): 65.43K tokens/s on 2240 A100s
    # (312 TFLOP/s), 29.7 % without attention, 30.2 % with it; 105 layers, h = 20480,
    # 128 heads of 160, T = 2048.
    plain = mfu.mfu(six_n_flops_per_token(530e9), gpu="a100", tokens_per_s=65.43e3,
                    n_gpus=2240)
    full = mfu.mfu(palm_flops_per_token(530e9, 105, 128, 160, 2048), gpu="a100",
                   tokens_per_s=65.43e3, n_gpus=2240)
    assert plain.mfu == pytest.approx(0.297, abs=1e-3)
    assert full.mfu == pytest.approx(0.302, abs=1e-3)


def test_reference_runs_carry_sources():
    by_name = {r.name: r for r in mfu.REFERENCE_RUNS}
    palm = by_name["PaLM 540B"]
    assert (palm.mfu, palm.hfu) == (0.462, 0.578)
    assert any(r.mfu == 0.72 and "A100" in r.hardware for r in mfu.REFERENCE_RUNS)
    assert any(r.hfu == 0.52 and "A100" in r.hardware for r in mfu.REFERENCE_RUNS)
    assert all(r.source for r in mfu.REFERENCE_RUNS)


# -- estimates against the exact count ------------------------------------------------------------

def test_palm_formula_with_lm_head_weights_is_exact():
    # 6 x (GEMM weights incl. LM head) + 12·L·H·Q·T is the exact count; biases and norms are
    # the only difference from N = non-embedding + LM head.
    c = dict(d_model=768, n_layers=12, d_ff=3072, vocab_size=50257, n_heads=12)
    p = parameter_count(**c)
    for s in (128, 1024, 8192):
        exact = transformer_flops(batch=1, seq_len=s, **c).training_per_token
        assert palm_flops_per_token(p.matmul_weights, 12, 12, 64, s) == exact


def test_compare_estimates_for_gpt2_small():
    cmp_ = compare_estimates([128, 1024, 8192], d_model=768, n_layers=12, d_ff=3072,
                             vocab_size=50257, n_heads=12, include_lm_head=True)
    # N = 123,653,376 (nanoGPT's count, see above); PaLM then misses only biases and norms.
    assert cmp_.n_params == 123_653_376
    assert all(abs(e) < 1e-3 for e in cmp_.palm_error)
    # 6N misses 12·L·h·T per token: hand check at T = 8192:
    # exact = 6·123,532,032 + 12·12·768·8192 = 741,192,192 + 905,969,664 = 1,647,161,856.
    assert cmp_.exact[2] == 1_647_161_856
    assert cmp_.six_n_error[2] == pytest.approx(6 * 123_653_376 / 1_647_161_856 - 1)
    without = compare_estimates(1024, d_model=768, n_layers=12, d_ff=3072, vocab_size=50257,
                                n_heads=12)
    assert without.n_params == 85_056_000  # non-embedding: 124,439,808 - wte - wpe
    assert without.palm_error[0] < -0.2  # the LM head is a quarter of GPT-2 small's FLOPs


def test_compare_estimates_matches_transformer_flops():
    cmp_ = compare_estimates(range(16, 200, 37), d_model=96, n_layers=3, d_ff=200,
                             vocab_size=333, n_heads=4, gated_mlp=True, n_kv_heads=2)
    for s, exact in zip(cmp_.seq_lens, cmp_.exact, strict=True):
        f = transformer_flops(1, s, 96, 3, 200, 333, 4, True, n_kv_heads=2)
        assert exact == pytest.approx(f.training_per_token, rel=1e-12)


# -- Megatron-LM closed forms ---------------------------------------------------------------------

@given(b=st.integers(1, 64), s=st.integers(1, 8192), l=st.integers(1, 128),
       heads=st.integers(1, 64), head_dim=st.integers(1, 256), V=st.integers(1, 300_000))
@settings(max_examples=60, deadline=None)
def test_megatron_closed_forms_equal_exact_count(b, s, l, heads, head_dim, V):
    h = heads * head_dim
    f = transformer_flops(b, s, h, l, 4 * h, V, heads)
    assert megatron_training_flops(b, s, l, h, V) == pytest.approx(f.training, rel=1e-12)
    assert megatron_training_flops(b, s, l, h, V, recompute=True) == pytest.approx(
        f.training_recompute, rel=1e-12)
    assert megatron_layer_forward_flops(b, s, h) * l == pytest.approx(f.layers_forward,
                                                                      rel=1e-12)


def test_megatron_hfu_over_mfu_ratio():
    # HFU/MFU with full recomputation is 96(1 + s/6h + V/16lh) / 72(1 + s/6h + V/12lh).
    b, s, l, h, V = 8, 2048, 24, 2048, 51200
    f = transformer_flops(b, s, h, l, 4 * h, V, 16)
    u = mfu.mfu(f, gpu="h100", steps_per_s=1.0, n_gpus=8, recompute=True)
    expected = (96 * (1 + s / (6 * h) + V / (16 * l * h))) / (72 * (1 + s / (6 * h)
                                                                    + V / (12 * l * h)))
    assert u.hfu / u.mfu == pytest.approx(expected, rel=1e-12)


# -- the often-quoted formulas and their corrections (M27, M29-M32, M18) ------------------------

def test_e1_name_is_model_flops_utilization():
    assert "Model FLOPs Utilization" in mfu.__doc__
    assert "not \"Maximum" in mfu.__doc__
    assert "HFU" in mfu.__doc__


def test_e2_attention():
    # s=2, h=3: seed 4·2·9 + 2·4·3 = 72 + 24 = 96 (multiply-adds); FLOPs 144 + 48 = 192.
    assert mfu.attention_multiply_adds(2, 3) == 96
    assert mfu.attention_flops(2, 3) == 192
    # and against torch's count for one layer of the "tiny" config (b=2, s=16, h=32, L=2)
    ref = next(c for c in CONFIGS if c["name"] == "tiny")["forward_by_component"]
    per_layer = sum(ref[k] for k in ("qkv", "attn_out", "attn_scores", "attn_values")) / 2
    assert mfu.attention_flops(16, 32, batch=2) == per_layer
    assert mfu.attention_multiply_adds(16, 32) * 2 * 2 == per_layer  # off by 2x (b = 2 aside)


def test_e3_mlp():
    # s=2, h=3, i=5: seed 8·30 = 240; true 4·30 = 120, gated 6·30 = 180.
    assert mfu.mlp_flops_doubled(2, 3, 5) == 240
    assert mfu.mlp_flops(2, 3, 5) == 120
    assert mfu.mlp_flops(2, 3, 5, gated=True) == 180
    tiny = next(c for c in CONFIGS if c["name"] == "tiny")  # b=2, s=16, h=32, i=128, L=2
    assert mfu.mlp_flops(16, 32, 128, batch=2) * 2 == (tiny["forward_by_component"]["mlp_up"]
                                                       + tiny["forward_by_component"]["mlp_down"])
    sw = next(c for c in CONFIGS if c["name"] == "swiglu-tiny")  # b=2, s=16, h=32, i=88, L=2
    by = sw["forward_by_component"]
    assert mfu.mlp_flops(16, 32, 88, gated=True, batch=2) * 2 == (by["mlp_up"] + by["mlp_gate"]
                                                                  + by["mlp_down"])


def test_e4_training_multiplier():
    ref = CONFIGS[0]
    assert mfu.training_flops(ref["forward_flops"]) == ref["forward_backward_flops"]
    assert mfu.twice_forward_flops(ref["forward_flops"]) < ref["forward_backward_flops"]
    assert mfu.training_flops(1.0, recompute=True) == 4.0


def test_e5_worked_example():
    ex = mfu.THROUGHPUT_EXAMPLE
    assert mfu.sequence_rate_times_token_flops(ex["sequences_per_s"], ex["flops_per_token"]) == 1e13
    corrected = mfu.achieved_flops(ex["flops_per_token"], steps_per_s=ex["sequences_per_s"],
                                   tokens_per_step=ex["tokens_per_sequence"])
    assert corrected == pytest.approx(10.24e15)  # 1000 x 1024 x 10e9
    assert mfu.achieved_flops(10e9, tokens_per_s=1000 * 1024) == pytest.approx(10.24e15)


def test_e6_rtx4090_peak():
    # 0.1 TFLOP/step x 50 steps/s = 5 TFLOP/s on 4 GPUs.  Seed: 330.3 TFLOP/s each (FP16
    # accumulate) -> 5 / 1321.2 = 0.378 %; training accumulates in FP32: 165.2 -> 0.757 %.
    seed = mfu.rtx4090_mfu_example()
    right = mfu.rtx4090_mfu_example(accumulate="fp32")
    g = hardware.gpu("4090")
    assert seed.peak_flops_per_gpu == g.peak_flops("fp16", accumulate="fp16") == 330.3e12
    assert right.peak_flops_per_gpu == g.peak_flops("fp16", accumulate="fp32") == 165.2e12
    assert seed.mfu == pytest.approx(5 / 1321.2)
    assert right.mfu == pytest.approx(5 / 660.8)
    assert right.mfu / seed.mfu == pytest.approx(2, rel=1e-3)
    assert "0.378 %" in repr(seed)


# -- MFU from throughput --------------------------------------------------------------------------

def test_mfu_by_hand():
    # 8 x H100 (989.4 TFLOP/s bf16 dense), a model at 1 TFLOP per token, 2,000 tokens/s:
    # 2e15 / (8 x 989.4e12) = 25.27 %.
    u = mfu.mfu(1e12, gpu="h100", tokens_per_s=2000, n_gpus=8)
    assert u.mfu == pytest.approx(2e15 / (8 * 989.4e12))
    assert u.achieved_flops_per_gpu == pytest.approx(2.5e14)
    assert u.hfu == u.mfu
    with_recompute = mfu.mfu(1e12, gpu="h100", tokens_per_s=2000, n_gpus=8, recompute=True)
    assert with_recompute.hfu == pytest.approx(u.mfu * 4 / 3)


def test_mfu_from_steps_defaults_to_the_configs_tokens():
    f = transformer_flops(batch=16, seq_len=512, d_model=512, n_layers=8, d_ff=2048,
                          vocab_size=32000, n_heads=8)
    a = mfu.mfu(f, gpu="a100", steps_per_s=3.0)
    b = mfu.mfu(f, gpu="a100", tokens_per_s=3.0 * 16 * 512)
    assert a.mfu == pytest.approx(b.mfu)
    assert a.mfu == pytest.approx(3.0 * f.training / 312e12)


def test_over_100_percent_is_flagged():
    u = utilization(400e12, gpu="a100")
    assert u.mfu > 1 and "impossible" in repr(u)


# -- properties -----------------------------------------------------------------------------------

shapes = st.fixed_dictionaries({
    "seq_len": st.integers(1, 4096), "heads": st.integers(1, 32),
    "head_dim": st.integers(1, 128), "n_layers": st.integers(1, 96),
    "d_ff": st.integers(1, 50_000), "vocab_size": st.integers(1, 260_000),
    "gated": st.booleans()})


def _f(sh, batch=1, **kw):
    kw = {"seq_len": sh["seq_len"], "n_layers": sh["n_layers"], **kw}
    return transformer_flops(batch, kw["seq_len"], sh["heads"] * sh["head_dim"],
                             kw["n_layers"], sh["d_ff"], sh["vocab_size"], sh["heads"],
                             sh["gated"])


@given(shapes)
@settings(max_examples=80, deadline=None)
def test_training_is_three_forwards(sh):
    f = _f(sh)
    assert f.training == 3 * f.forward and f.backward == 2 * f.forward
    assert f.forward == sum(f.components.values())
    assert f.training < f.training_recompute < 4 * f.forward + 1


def test_component_shares_by_hand():
    # b=1, s=4, h=8, one layer, i=32, V=16, one head of d=8:
    #   QKV 2·4·8·(1+2)·8 = 1536, output 2·4·8·8 = 512, scores 2·1·16·8 = 256, ·V 256,
    #   MLP up 2·4·8·32 = 2048, down 2048, logits 2·4·8·16 = 1024: forward 7680.
    f = transformer_flops(1, 4, 8, 1, 32, 16, 1)
    assert f.forward == 7680
    expected = {"qkv": 1536 / 7680, "attn_out": 512 / 7680, "attn_scores": 256 / 7680,
                "attn_values": 256 / 7680, "mlp_up": 2048 / 7680, "mlp_down": 2048 / 7680,
                "logits": 1024 / 7680}
    assert f.shares == pytest.approx(expected)
    assert list(f.shares) == list(expected)            # forward-pass order, no gate
    # every component has its formula for tables and hover text
    assert set(mfu.FORMULAS) == set(mfu.COMPONENTS) == set(mfu.COMPONENT_LABELS)


@given(shapes)
@settings(max_examples=80, deadline=None)
def test_shares_split_the_forward_pass(sh):
    f = _f(sh)
    shares = f.shares
    assert shares.keys() == f.components.keys()
    assert math.fsum(shares.values()) == pytest.approx(1.0)
    assert all(0 < v < 1 for v in shares.values())
    assert ("mlp_gate" in shares) == sh["gated"]


@given(shapes, st.integers(1, 64), st.integers(1, 64))
@settings(max_examples=60, deadline=None)
def test_linear_in_batch(sh, b1, b2):
    assert _f(sh, b1 + b2).forward == _f(sh, b1).forward + _f(sh, b2).forward


@given(shapes)
@settings(max_examples=60, deadline=None)
def test_layers_scale_and_head_does_not(sh):
    one, two = _f(sh, n_layers=sh["n_layers"]), _f(sh, n_layers=2 * sh["n_layers"])
    assert two.layers_forward == 2 * one.layers_forward
    assert two.logits == one.logits


@given(shapes)
@settings(max_examples=60, deadline=None)
def test_attention_core_quadratic_in_seq_len(sh):
    one, two = _f(sh), _f(sh, seq_len=2 * sh["seq_len"])
    assert two.attn_scores == 4 * one.attn_scores
    assert two.qkv == 2 * one.qkv and two.logits == 2 * one.logits


@given(st.integers(1, 10_000), st.integers(1, 10_000), st.integers(1, 10_000))
def test_gated_mlp_with_two_thirds_width_costs_the_same(h, k, s):
    # SwiGLU with i = 2k does the same MLP FLOPs as a plain MLP with i = 3k.
    assert mfu.mlp_flops(s, h, 2 * k, gated=True) == mfu.mlp_flops(s, h, 3 * k)


@given(st.floats(1e6, 1e13), st.floats(1.0, 1e7), st.integers(1, 4096))
def test_mfu_scales_as_one_over_gpus(per_token, tokens_per_s, n):
    one = mfu.mfu(per_token, gpu="h100", tokens_per_s=tokens_per_s)
    many = mfu.mfu(per_token, gpu="h100", tokens_per_s=tokens_per_s, n_gpus=n)
    assert many.mfu == pytest.approx(one.mfu / n, rel=1e-12)
    twice = mfu.mfu(per_token, gpu="h100", tokens_per_s=2 * tokens_per_s)
    assert twice.mfu == pytest.approx(2 * one.mfu, rel=1e-12)


@given(st.integers(1, 10**12), st.integers(1, 128), st.integers(1, 128), st.integers(1, 256),
       st.integers(1, 32768))
def test_palm_minus_six_n_is_the_attention_term(n, L, H, Q, T):
    assert palm_flops_per_token(n, L, H, Q, T) - six_n_flops_per_token(n) == pytest.approx(
        12 * L * H * Q * T, rel=1e-9)


@given(st.integers(1, 48), st.integers(1, 16), st.integers(1, 64))
@settings(max_examples=40, deadline=None)
def test_six_n_error_grows_with_seq_len(layers, heads, head_dim):
    cmp_ = compare_estimates([64, 256, 1024, 4096], d_model=heads * head_dim, n_layers=layers,
                             d_ff=4 * heads * head_dim, vocab_size=1000, n_heads=heads)
    ratios = [e + 1 for e in cmp_.six_n_error]
    assert all(a > b for a, b in itertools.pairwise(ratios))


@given(st.integers(1, 4096), st.integers(1, 48), st.integers(1, 50_000), st.integers(1, 10**5),
       st.booleans(), st.booleans(), st.sampled_from(["layernorm", "rmsnorm"]))
def test_parameter_parts_add_up(h, L, i, V, gated, bias, norm):
    p = parameter_count(d_model=h, n_layers=L, d_ff=i, vocab_size=V, gated_mlp=gated,
                        bias=bias, norm=norm, n_positions=7)
    assert p.total == p.non_embedding + p.embedding + p.lm_head
    assert p.matmul_weights == p.layer_weights + V * h
    assert p.position_embedding == 7 * h


# -- display --------------------------------------------------------------------------------------

def test_html_breakdown():
    plain = transformer_flops(8, 1024, 768, 12, 3072, 50257, 12)._repr_html_()
    gated = transformer_flops(8, 1024, 768, 12, 2048, 50257, 12, True)._repr_html_()
    for label in ("QKV projections", "attention scores Q·Kᵀ", "attention · V",
                  "LM-head logits", "% of forward", "training"):
        assert label in plain
    assert "MLP gate" in gated and "MLP gate" not in plain
    assert "TFLOP" in plain
    assert "TFLOP" in repr(transformer_flops(8, 1024, 768, 12, 3072, 50257, 12))


# -- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"batch": 0}, ValueError, ["batch", "0"]),
    ({"batch": 1.5}, TypeError, ["batch", "1.5"]),
    ({"seq_len": "1024"}, TypeError, ["seq_len"]),
    ({"n_heads": 5}, ValueError, ["d_model=768", "n_heads=5"]),
    ({"gated_mlp": "yes"}, TypeError, ["gated_mlp"]),
    ({"n_kv_heads": 5}, ValueError, ["n_kv_heads=5", "n_heads=12"]),
    ({"n_kv_heads": 24}, ValueError, ["n_kv_heads", "24"]),
    ({"vocab_size": -1}, ValueError, ["vocab_size"]),
])
def test_transformer_flops_rejects_bad_input(kwargs, error, words):
    args = dict(batch=8, seq_len=1024, d_model=768, n_layers=12, d_ff=3072,
                vocab_size=50257, n_heads=12) | kwargs
    with pytest.raises(error) as e:
        transformer_flops(**args)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"precision": "fp4"}, ValueError, ["precision", "fp4", "bf16"]),
    ({"precision": "bf16", "accumulate": "fp16"}, ValueError, ["accumulate", "fp16"]),
    ({"gpu": "h1000"}, ValueError, ["h1000"]),
    ({"n_gpus": 0}, ValueError, ["n_gpus"]),
    ({"tokens_per_s": None}, ValueError, ["tokens_per_s", "steps_per_s"]),
    ({"steps_per_s": 2.0}, ValueError, ["exactly one"]),
    ({"tokens_per_s": None, "steps_per_s": 2.0}, ValueError, ["tokens_per_step"]),
    ({"tokens_per_s": -5.0}, ValueError, ["tokens_per_s"]),
    ({"recompute": 1}, TypeError, ["recompute"]),
])
def test_mfu_rejects_bad_input(kwargs, error, words):
    args = dict(gpu="h100", tokens_per_s=1e5) | kwargs
    with pytest.raises(error) as e:
        mfu.mfu(1e9, **args)
    for w in words:
        assert w in str(e.value)


def test_mfu_refuses_sparse_and_odd_flops():
    with pytest.raises(TypeError):
        mfu.mfu(1e9, gpu="h100", tokens_per_s=1.0, sparse=True)
    with pytest.raises(TypeError, match="TransformerFlops"):
        mfu.mfu("lots", gpu="h100", tokens_per_s=1.0)
    with pytest.raises(ValueError, match="flops"):
        mfu.mfu(0.0, gpu="h100", tokens_per_s=1.0)
    with pytest.raises(ValueError, match="no such peak"):
        mfu.mfu(1e9, gpu="v100", tokens_per_s=1.0, precision="bf16")


def test_other_functions_reject_bad_input():
    with pytest.raises(ValueError, match="norm"):
        parameter_count(d_model=64, n_layers=1, d_ff=64, vocab_size=10, norm="batchnorm")
    with pytest.raises(ValueError, match="n_heads"):
        parameter_count(d_model=64, n_layers=1, d_ff=64, vocab_size=10, n_kv_heads=2)
    with pytest.raises(ValueError, match="empty"):
        compare_estimates([], d_model=64, n_layers=1, d_ff=64, vocab_size=10, n_heads=2)
    with pytest.raises(TypeError, match="seq_lens"):
        compare_estimates(None, d_model=64, n_layers=1, d_ff=64, vocab_size=10, n_heads=2)
    with pytest.raises(ValueError, match="seq_len"):
        mfu.attention_multiply_adds(0, 64)
    with pytest.raises(TypeError, match="forward_flops"):
        mfu.training_flops("1e9")
    with pytest.raises(ValueError, match="n_params"):
        six_n_flops_per_token(-1)
    with pytest.raises(ValueError, match="hardware_flops_per_s"):
        utilization(1e12, gpu="h100", hardware_flops_per_s=1e11)


def test_breakdown_table_rows_by_hand():
    # b = 1, s = 2, h = 4, one layer, i = 8, V = 10, one head: QKV 2·2·4·12 = 192, output
    # projection 2·2·4·4 = 64, scores and ·V 2·4·4 = 32 each, MLP up and down 2·2·4·8 = 128
    # each, logits 2·2·4·10 = 160: forward 736; training 3 × 736 = 2,208; recomputing the
    # layers' forward (736 - 160 = 576) gives 2,784; per token 2,208 / 2 = 1,104
    caption, header, rows = transformer_flops(1, 2, 4, 1, 8, 10, 1).table()
    assert caption.startswith("Matmul FLOPs per step: batch=1, seq_len=2")
    assert header == ("component", "formula", "FLOPs", "% of forward")
    by = {r[0]: r[2:] for r in rows}
    assert by["QKV projections"] == ("192 FLOP", "26.1 %")          # 192 / 736
    assert by["LM-head logits"] == ("160 FLOP", "21.7 %")
    assert by["forward"] == ("736 FLOP", "100 %")
    assert by["training (MFU)"] == ("2.21 kFLOP", "300 %")
    assert by["training with full recomputation (HFU)"] == ("2.78 kFLOP", "378 %")
    assert by["training per token"] == ("1.1 kFLOP", "")


def test_estimate_table_rows_say_six_n():
    # 6N for N = 85,056,000 is 510.3 MFLOP per token
    cmp_ = compare_estimates([1024], d_model=768, n_layers=12, d_ff=3072, vocab_size=50257,
                             n_heads=12)
    caption, header, rows = cmp_.table()
    assert "N = 85,056,000" in caption and header[2] == "6N"
    assert rows[0][0] == 1024 and rows[0][2] == "510 MFLOP"
