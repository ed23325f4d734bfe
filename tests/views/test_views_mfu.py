"""MFU explorer: the bars and the readout show the FLOP and MFU models' numbers.

References: hand derivations from the Megatron-LM per-layer formula (24·s·h² + 4·s²·h forward
FLOPs per sequence per layer with i = 4h, plus 2·s·h·V logits; Narayanan et al. 2021), the
published parameter counts of GPT-2 small (124,439,808) and Llama-2-7B (6,738,415,616), PaLM's
6N + 12·L·H·Q·T (arXiv 2204.02311, App. B), the RTX 4090's two FP16 peaks (165.2 / 330.3
TFLOP/s, Ada whitepaper App. A) and direct calls of :mod:`gpu_lessons.mfu`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import mfu as M
from gpu_lessons.hardware import gpu as catalog_gpu
from gpu_lessons.views.mfu import PRESETS, mfu_explorer

# GPT-2 small, s = 1024, per token (derivation):
#   layers: 12 × (24·768² + 4·1024·768) = 12 × 17,301,504 = 207,618,048 FLOPs forward
#   logits: 2·768·50257 = 77,194,752;  forward 284,812,800;  training 3× = 854,438,400
GPT2_LAYERS_FWD = 12 * (24 * 768**2 + 4 * 1024 * 768)
GPT2_FWD = GPT2_LAYERS_FWD + 2 * 768 * 50257
GPT2_TRAIN = 3 * GPT2_FWD
# Non-embedding N: 12·L·h² weights + per layer biases (3h + h + 4h + h) + (2L + 1) LayerNorms
# of 2h: 84,934,656 + 82,944 + 38,400 = 85,056,000.
GPT2_N = 12 * 12 * 768**2 + 12 * (9 * 768) + 25 * 2 * 768
A100_BF16 = 312e12


DEFAULTS = dict(batch=8, tokens_per_s=1.5e5, gpu="A100 SXM4 80GB", n_gpus=1, precision="bf16",
                accumulate="fp32", recompute=False)


@pytest.fixture(scope="module")
def shared():
    """One explorer reused by the tests (building one serialises three bokeh figures)."""
    return mfu_explorer()


@pytest.fixture
def ex(shared):
    """The shared explorer, back in the factory's default state."""
    shared.apply_preset("gpt2-small")
    _set(shared, **DEFAULTS)
    return shared


def _set(ex, **values):
    for k, v in values.items():
        ex.controls[k].value = v


def _bars(ex) -> dict[str, float]:
    d = ex.utilization.data
    return dict(zip(d["label"], d["percent"], strict=True))


# -- the default: GPT-2 small on one A100 ---------------------------------------------------------

def test_default_against_hand_derivation():
    ex = mfu_explorer()
    assert ex.warning.value == ""
    est = ex.estimates.data
    assert est["gflop"][0] * 1e9 == pytest.approx(GPT2_TRAIN)
    assert est["gflop"][1] * 1e9 == pytest.approx(6 * GPT2_N)
    # PaLM: 6N + 12·L·H·Q·T = 6N + 12·12·12·64·1024
    assert est["gflop"][2] * 1e9 == pytest.approx(6 * GPT2_N + 12 * 12 * 12 * 64 * 1024)
    bars = _bars(ex)
    mfu = GPT2_TRAIN * 1.5e5 / A100_BF16
    assert bars["MFU (exact count)"] == pytest.approx(100 * mfu)        # 41.1 %
    assert bars["MFU by 6N"] == pytest.approx(100 * 6 * GPT2_N * 1.5e5 / A100_BF16)
    assert bars["HFU (no recomputation)"] == pytest.approx(100 * mfu)
    text = ex.readout.value
    assert "MFU 41.1 %" in text and "312.0 TFLOP/s per GPU (bf16 dense" in text
    assert "124,439,808 in all" in text       # GPT-2 small, Hugging Face parameter count
    assert f"{GPT2_N:,} non-embedding" in text
    # Breakdown: forward FLOPs per step for batch 8; the MLP up-projection is 2·b·s·h·i·L.
    comps = dict(zip(ex.breakdown.data["component"], ex.breakdown.data["flops"], strict=True))
    assert comps["MLP up"] == 2 * 8 * 1024 * 768 * 3072 * 12
    assert comps["LM-head logits"] == 2 * 8 * 1024 * 768 * 50257
    assert sum(comps.values()) == 8 * 1024 * GPT2_FWD
    assert "MLP gate" not in comps
    assert ex.controls["accumulate"].disabled   # A100 has one FP16 peak


def test_recomputation_raises_hfu_not_mfu(ex):
    _set(ex, recompute=True)
    bars = _bars(ex)
    # HFU adds one forward of the layers: (3·fwd + layers) / (3·fwd)
    ratio = (GPT2_TRAIN + GPT2_LAYERS_FWD) / GPT2_TRAIN
    assert bars["HFU (with recomputation)"] / bars["MFU (exact count)"] == pytest.approx(ratio)
    assert bars["MFU (exact count)"] == pytest.approx(100 * GPT2_TRAIN * 1.5e5 / A100_BF16)


# -- the RTX 4090's FP16-accumulate peak (M18) -----------------------------------------------------

def test_rtx4090_wrong_peak_halves_mfu():
    ex = mfu_explorer(gpu="RTX 4090", precision="fp16")
    assert not ex.controls["accumulate"].disabled
    bars = _bars(ex)
    right = bars["MFU (exact count)"]
    wrong = bars["MFU, FP16-accumulate peak"]
    assert right == pytest.approx(100 * GPT2_TRAIN * 1.5e5 / 165.2e12)
    assert wrong / right == pytest.approx(165.2 / 330.3)
    assert "165.2 TFLOP/s per GPU (fp16 dense, FP32-accumulate)" in ex.readout.value
    assert "halves MFU" in ex.readout.value
    _set(ex, accumulate="fp16")   # now the readout says the FP16-accumulate peak was used
    assert "peak used: <b>330.3 TFLOP/s" in ex.readout.value
    assert _bars(ex)["MFU, FP32-accumulate peak"] == pytest.approx(right)
    _set(ex, precision="bf16")    # no FP16-accumulate variant: the control is ignored
    assert ex.controls["accumulate"].disabled and ex.warning.value == ""
    assert "165.2 TFLOP/s per GPU (bf16 dense, FP32-accumulate)" in ex.readout.value


def test_notes_quote_the_rtx4090_example(ex):
    # 0.1 TFLOP × 50 steps/s = 5 TFLOP/s over 4 GPUs: 5 / (4 × 330.3) = 0.378 %,
    # 5 / (4 × 165.2) = 0.757 %.
    notes = ex.children[1].value
    assert "0.378 %" in notes and "0.757 %" in notes


# -- each control, against direct model calls -----------------------------------------------------

def _check(ex):
    c = ex.controls
    p = PRESETS[c["preset"].value]
    d = c["d_model"].value
    f = M.transformer_flops(c["batch"].value, c["seq_len"].value, d, c["n_layers"].value,
                            c["d_ff"].value, p.vocab_size, d // p.head_dim, p.gated_mlp)
    g = catalog_gpu(c["gpu"].value)
    acc = (c["accumulate"].value
           if c["precision"].value == "fp16" and "fp16_acc16" in g.peak_tflops else "fp32")
    u = M.mfu(f, gpu=g, tokens_per_s=c["tokens_per_s"].value, precision=c["precision"].value,
              accumulate=acc, n_gpus=c["n_gpus"].value, recompute=c["recompute"].value)
    bars = _bars(ex)
    assert bars["MFU (exact count)"] == pytest.approx(100 * u.mfu)
    hfu = [v for k, v in bars.items() if k.startswith("HFU")]
    assert hfu == pytest.approx([100 * u.hfu])
    comps = dict(zip(ex.breakdown.data["component"], ex.breakdown.data["flops"], strict=True))
    assert comps == pytest.approx({M.COMPONENT_LABELS[k]: v for k, v in f.components.items()})
    assert ex.estimates.data["gflop"][0] == pytest.approx(f.training_per_token * 1e-9)
    return f, u


@pytest.mark.parametrize("control,value", [
    ("d_model", 1024), ("n_layers", 24), ("d_ff", 4096), ("seq_len", 2048), ("batch", 64),
    ("tokens_per_s", 1e6), ("gpu", "H100 SXM5"), ("n_gpus", 8), ("precision", "fp8"),
    ("precision", "tf32"), ("recompute", True), ("preset", "llama-2-7b"),
])
def test_each_control_matches_the_model(ex, control, value):
    _set(ex, gpu="H100 SXM5" if control != "gpu" else "A100 SXM4 80GB")
    before = (dict(ex.breakdown.data), dict(ex.utilization.data))
    _set(ex, **{control: value})
    assert ex.warning.value == ""
    _check(ex)
    assert (dict(ex.breakdown.data), dict(ex.utilization.data)) != before


def test_presets_set_the_sliders(ex):
    _set(ex, preset="llama-2-7b")
    c = ex.controls
    assert (c["d_model"].value, c["n_layers"].value, c["d_ff"].value, c["seq_len"].value) == \
        (4096, 32, 11008, 4096)
    assert c["d_model"].step == 128           # heads of 128: every slider stop is valid
    assert "MLP gate" in ex.breakdown.data["component"]
    assert "6,738,415,616 in all" in ex.readout.value   # Meta's published Llama-2-7B count
    _set(ex, d_model=4096 + 3 * 128)
    assert ex.warning.value == "" and "35 heads × 128" in ex.readout.value
    _set(ex, preset="gpt2-xl")
    assert c["d_model"].value == 1600 and c["d_model"].step == 64
    assert "25 heads × 64" in ex.readout.value
    ex.apply_preset("gpt2-small")
    assert c["preset"].value == "gpt2-small" and c["d_model"].value == 768
    with pytest.raises(ValueError, match="preset"):
        ex.apply_preset("gpt5")


def test_mfu_above_100_percent_is_flagged(ex):
    _set(ex, tokens_per_s=1e7)
    assert _bars(ex)["MFU (exact count)"] > 100
    assert "impossible" in ex.readout.value


def test_refusals_become_warnings(ex):
    _set(ex, gpu="V100 SXM2")            # bf16 is not a V100 precision
    assert "bf16" in ex.warning.value and "V100" in ex.warning.value
    _set(ex, precision="fp16")
    assert ex.warning.value == ""


def test_extreme_values_never_raise(ex):
    _set(ex, gpu="H100 SXM5")
    for preset in PRESETS:
        _set(ex, preset=preset)
        for name in ("d_model", "n_layers", "d_ff", "seq_len", "batch", "tokens_per_s", "n_gpus"):
            ctl = ex.controls[name]
            for v in (ctl.min, ctl.max):
                _set(ex, **{name: v})
                assert ex.warning.value == "", (preset, name, v)
        ex.apply_preset(preset)


@pytest.mark.parametrize("kwargs,err,word", [
    ({"model": "gpt5"}, ValueError, "model"), ({"gpu": "Z9000"}, ValueError, "Z9000"),
    ({"n_gpus": 0}, ValueError, "n_gpus"), ({"tokens_per_s": -1.0}, ValueError, "tokens_per_s"),
    ({"precision": "int8"}, ValueError, "precision"),
    ({"accumulate": "fp8"}, ValueError, "accumulate"),
    ({"recompute": 1}, TypeError, "recompute"), ({"batch": 2.5}, TypeError, "batch"),
])
def test_bad_arguments_raise_clearly(kwargs, err, word):
    with pytest.raises(err, match=word):
        mfu_explorer(**kwargs)


# -- properties ----------------------------------------------------------------------------------

@settings(max_examples=25)
@given(preset=st.sampled_from(sorted(PRESETS)), layers=st.integers(1, 128),
       seq=st.integers(1, 256).map(lambda k: 128 * k), tokens=st.floats(1e2, 1e7),
       n_gpus=st.integers(1, 4096), gpu=st.sampled_from(["A100 SXM4 80GB", "H100 SXM5",
                                                          "RTX 4090", "B200"]),
       precision=st.sampled_from(["bf16", "fp16", "fp8"]), recompute=st.booleans())
def test_view_equals_model_and_mfu_scales(shared, preset, layers, seq, tokens, n_gpus, gpu,
                                          precision, recompute):
    ex = shared
    if gpu == "A100 SXM4 80GB" and precision == "fp8":
        precision = "bf16"    # A100 has no FP8 peak
    ex.apply_preset(preset)
    _set(ex, n_layers=layers, seq_len=seq, tokens_per_s=tokens, n_gpus=n_gpus, gpu=gpu,
         precision=precision, recompute=recompute)
    assert ex.warning.value == ""
    _check(ex)
    # MFU = tokens/s × FLOPs/token / (n_gpus × peak): doubling the GPUs halves it.
    before = _bars(ex)["MFU (exact count)"]
    _set(ex, n_gpus=2 * n_gpus)
    assert _bars(ex)["MFU (exact count)"] == pytest.approx(before / 2)
    # HFU >= MFU always; equal without recomputation.
    hfu = next(v for k, v in _bars(ex).items() if k.startswith("HFU"))
    assert hfu >= _bars(ex)["MFU (exact count)"] * (1 - 1e-12)
    assert (hfu > _bars(ex)["MFU (exact count)"]) == recompute


