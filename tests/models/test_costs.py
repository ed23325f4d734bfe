"""Kernel cost models against hand derivations, published figures and PyTorch's FLOP counter.

References used here (none of them is this package's own output):
* hand arithmetic, written out beside each case;
* NVIDIA "GPU Performance Background User's Guide" (Deep Learning Performance docs), table of
  FP16 arithmetic intensities: linear layer 4096 outputs × 1024 inputs at batch 512 → 315
  FLOP/B, at batch 1 → 1 FLOP/B, ReLU → 0.25 FLOP/B;
* Kirk & Hwu, PMPP 4th ed., ch. 5: naive matmul 0.25 FLOP/B, 16×16 tiles → 4 FLOP/B;
* ``tests/data/torch_conv_flops.json``: ``torch.utils.flop_counter.FlopCounterMode`` counts
  (written by ``tools/reference/conv_flops.py``);
* a brute-force simulation of a tiled GEMM's loads (below), independent of the closed form.
"""

import json
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpu_lessons import costs
from gpu_lessons.costs import (
    KernelCost,
    attention,
    attention_decode,
    attention_prefill,
    axpy,
    conv2d,
    conv2d_macs_no_input,
    conv_output_size,
    dtype_bytes,
    elementwise,
    gemm,
    gemm_naive,
    gemm_tiled,
    reduction,
)

TORCH = json.loads((Path(__file__).parents[1] / "data" / "torch_conv_flops.json").read_text("utf-8"))
DTYPES = st.sampled_from(["fp32", "fp16", "bf16", "fp8"])


# -- dtypes and KernelCost -------------------------------------------------------------------------

def test_dtype_sizes():
    # IEEE binary32 = 32 bits, binary16 = bfloat16 = 16 bits, FP8 = 8 bits, binary64 = 64 bits
    assert [dtype_bytes(d) for d in ("fp64", "fp32", "fp16", "bf16", "fp8")] == [8, 4, 2, 2, 1]


@pytest.mark.parametrize("bad", ["float32", "FP32", "int8", "tf32", ""])
def test_unknown_dtype_is_refused_with_the_allowed_list(bad):
    with pytest.raises(ValueError, match=r"dtype must be one of .*'fp32'.*'fp8'"):
        axpy(10, dtype=bad)


def test_dtype_of_wrong_type():
    with pytest.raises(TypeError, match="dtype"):
        gemm(2, 2, 2, dtype=4)


def test_kernel_cost_computes_and_checks_intensity():
    k = KernelCost("mine", 300, 1200)
    assert k.intensity == 0.25 and k.flops == 300 and k.bytes == 1200
    assert KernelCost("mine", 300, 1200, 0.25).intensity == 0.25
    with pytest.raises(ValueError, match="intensity"):
        KernelCost("mine", 300, 1200, 0.5)
    with pytest.raises(ValueError, match="bytes"):
        KernelCost("no traffic", 10, 0)
    with pytest.raises(ValueError, match="flops"):
        KernelCost("negative", -1, 10)
    with pytest.raises(TypeError, match="flops"):
        KernelCost("bool", True, 10)
    with pytest.raises(TypeError, match="bytes"):
        KernelCost("str", 1, "10")


def test_kernel_cost_is_frozen_and_prints_units():
    k = axpy(1_000_000)
    with pytest.raises(AttributeError):
        k.flops = 0
    assert repr(k) == "KernelCost('axpy', 2 MFLOP, 12 MB, 0.167 FLOP/byte)"
    page = k._repr_html_()
    assert "<table>" in page and "FLOP/byte" in page and "read" in page


def test_parts_add_up_to_the_totals():
    for k in (axpy(7), reduction(9), gemm_tiled(6, 5, 4, tile=2), conv2d(9, 3, 2, 3, batch=2),
              attention_decode(33, n_heads=4, head_dim=8)):
        assert sum(p[1] for p in k.parts) == k.flops
        assert sum(p[2] for p in k.parts) == k.bytes


# -- elementwise, reduction ------------------------------------------------------------------------

def test_axpy_is_two_flops_per_twelve_bytes_in_fp32():
    # y = a*x + y: 1 multiply-add = 2 FLOPs; read x (4 B) + read y (4 B) + write y (4 B) = 12 B
    k = axpy(1000)
    assert (k.flops, k.bytes) == (2000, 12000)
    assert k.intensity == pytest.approx(1 / 6)
    # FP16: 3 accesses × 2 B = 6 B per element
    assert axpy(1000, "fp16").bytes == 6000
    assert axpy(1000, "fp16").intensity == pytest.approx(1 / 3)


def test_relu_matches_nvidia_guide():
    # NVIDIA GPU Performance Background guide: ReLU in FP16 → 0.25 FLOP/B
    # (1 FLOP per element; read 2 B + write 2 B)
    relu = elementwise(1 << 20, flops_per_element=1, reads=1, writes=1, dtype="fp16")
    assert relu.intensity == pytest.approx(0.25)


def test_vector_add():
    # c = a + b, fp32: 1 FLOP per 3 × 4 B = 1/12 FLOP/byte
    assert elementwise(12, reads=2, writes=1).intensity == pytest.approx(1 / 12)
    # a pure copy moves bytes and does no arithmetic
    copy = elementwise(100, flops_per_element=0, reads=1, writes=1)
    assert (copy.flops, copy.bytes, copy.intensity) == (0, 800, 0.0)


def test_reduction_hand_case():
    # sum of 1024 floats: 1023 adds; read 1024 × 4 B, write 4 B = 4100 B
    k = reduction(1024)
    assert (k.flops, k.bytes) == (1023, 4100)
    assert k.intensity == pytest.approx(1023 / 4100)
    assert reduction(1).flops == 0  # one value: nothing to add


@pytest.mark.parametrize("call, name", [
    (lambda: axpy(0), "n"), (lambda: axpy(-5), "n"), (lambda: axpy(2.5), "n"),
    (lambda: reduction(True), "n"),
    (lambda: elementwise(4, reads=0, writes=0), "reads"),
    (lambda: elementwise(4, flops_per_element=-1), "flops_per_element"),
    (lambda: elementwise(4, reads=-1), "reads"),
])
def test_streaming_bad_input(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# -- GEMM ------------------------------------------------------------------------------------------

def test_gemm_matches_nvidia_guide_linear_layers():
    # NVIDIA GPU Performance Background guide, FP16: a linear layer with 4096 outputs and 1024
    # inputs is a GEMM M=4096, N=batch, K=1024.
    # batch 512: 2·4096·512·1024 = 4,294,967,296 FLOPs over
    #   2 B × (4096·1024 + 1024·512 + 4096·512) = 13,631,488 B  → 315.08 FLOP/B (guide: 315)
    big = gemm(4096, 512, 1024, "fp16")
    assert big.flops == 4_294_967_296 and big.bytes == 13_631_488
    assert round(big.intensity) == 315
    # batch 1: 8,388,608 FLOPs over 2 × (4,194,304 + 1024 + 4096) B → 0.9988 (guide: 1)
    assert gemm(4096, 1, 1024, "fp16").intensity == pytest.approx(1, abs=0.002)


def test_gemm_compulsory_square():
    # square N: 2N³ FLOPs / (3N² · s) bytes = 2N/(3s); N = 96, fp32 → 192/12 = 16 FLOP/byte
    assert gemm(96, 96, 96).intensity == pytest.approx(16)


def test_gemm_naive_hand_case_and_pmpp_ratio():
    # 4×4×4: 2·64 = 128 FLOPs; 16 outputs × (4 A + 4 B loads) + 16 stores = 144 elements = 576 B
    k = gemm_naive(4, 4, 4)
    assert (k.flops, k.bytes) == (128, 576)
    # PMPP ch. 5: the simple kernel does 2 FLOPs per 8 bytes loaded → 0.25 FLOP/B (C store
    # is negligible for large N: 2N³ / (4 · (2N³ + N²)) = 0.24988 at N = 1024)
    assert gemm_naive(1024, 1024, 1024).intensity == pytest.approx(0.25, rel=1e-3)


def test_gemm_tiled_hand_cases():
    # 4×4×4 with 2×2 tiles: 4 blocks; A (16 elements) read by 2 block columns = 32, B likewise 32,
    # C written once = 16; 80 elements × 4 B = 320 B
    assert gemm_tiled(4, 4, 4, tile=2).bytes == 320
    # m=5, n=3, k=2, 2×2 tiles: ⌈5/2⌉ = 3 block rows, ⌈3/2⌉ = 2 block columns;
    # A: 5·2 = 10 elements × 2 = 20; B: 2·3 = 6 × 3 = 18; C: 15 → 53 × 4 B = 212 B
    k = gemm_tiled(5, 3, 2, tile_m=2, tile_n=2)
    assert (k.flops, k.bytes) == (60, 212)
    # rectangular tiles: m=8, n=8, k=3, 4×2 tiles → 2 block rows, 4 block columns;
    # A: 24 × 4 = 96; B: 24 × 2 = 48; C: 64 → 208 × 2 B (fp16) = 416 B
    assert gemm_tiled(8, 8, 3, tile_m=4, tile_n=2, dtype="fp16").bytes == 416


def test_gemm_tiled_pmpp_16x16():
    # PMPP ch. 5: 16×16 tiles cut global traffic 16× — 0.25 → 4 FLOP/B in FP32.
    # N = 4096: 2N³ / (4 · (2N³/16 + N²)) = 2 / (4 · (1/8 + 1/4096)) = 3.992
    k = gemm_tiled(4096, 4096, 4096, tile=16)
    assert k.intensity == pytest.approx(3.992, abs=1e-3)


def _simulated_tiled_bytes(m, n, k, tm, tn, bk, s):
    """Walk every block and every k-step of a tiled kernel and count the in-bounds elements
    it loads from global memory, plus the C it stores (independent of the closed form)."""
    loads = 0
    for r0 in range(0, m, tm):
        for c0 in range(0, n, tn):
            for k0 in range(0, k, bk):
                rows, cols = min(tm, m - r0), min(tn, n - c0)
                depth = min(bk, k - k0)
                loads += rows * depth + depth * cols  # A tile + B tile
            loads += min(tm, m - r0) * min(tn, n - c0)  # store this C tile
    return loads * s


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 12), n=st.integers(1, 12), k=st.integers(1, 12),
       tm=st.integers(1, 14), tn=st.integers(1, 14), bk=st.integers(1, 5), dtype=DTYPES)
def test_gemm_tiled_equals_a_simulation_of_its_loads(m, n, k, tm, tn, bk, dtype):
    got = gemm_tiled(m, n, k, tile_m=tm, tile_n=tn, dtype=dtype).bytes
    assert got == _simulated_tiled_bytes(m, n, k, tm, tn, bk, dtype_bytes(dtype))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 3000), n=st.integers(1, 3000), k=st.integers(1, 3000),
       t=st.integers(1, 256), dtype=DTYPES)
def test_tiled_traffic_never_grows_with_tile_size(m, n, k, t, dtype):
    small = gemm_tiled(m, n, k, tile=t, dtype=dtype)
    large = gemm_tiled(m, n, k, tile=t + 1, dtype=dtype)
    assert large.bytes <= small.bytes
    assert small.flops == large.flops == 2 * m * n * k
    # the two limits of the family: no reuse (tile 1) and each operand once (tile covers C)
    assert gemm_naive(m, n, k, dtype).bytes >= small.bytes >= gemm(m, n, k, dtype).bytes


@given(p=st.integers(0, 6), q=st.integers(1, 6))
def test_doubling_a_dividing_tile_strictly_cuts_traffic(p, q):
    n = 2 ** (p + q)  # tile 2^p divides n and is smaller than it
    assert gemm_tiled(n, n, n, tile=2 ** (p + 1)).bytes < gemm_tiled(n, n, n, tile=2 ** p).bytes


@pytest.mark.parametrize("call, name", [
    (lambda: gemm(0, 2, 2), "m"), (lambda: gemm(2, -1, 2), "n"), (lambda: gemm(2, 2, 1.5), "k"),
    (lambda: gemm_tiled(8, 8, 8), "tile"),
    (lambda: gemm_tiled(8, 8, 8, tile=0), "tile"),
    (lambda: gemm_tiled(8, 8, 8, tile_m=4), "tile_n"),
    (lambda: gemm_tiled(8, 8, 8, tile=4, tile_m=4), "tile"),
    (lambda: gemm_naive(8, 8, 8, dtype="double"), "dtype"),
])
def test_gemm_bad_input(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# -- convolution -----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", TORCH["conv2d"], ids=lambda c: c["label"])
def test_conv2d_flops_equal_torch_flop_counter(case):
    assert conv2d(**case["args"]).flops == case["flops"]


@pytest.mark.parametrize("case", TORCH["conv2d"], ids=lambda c: c["label"])
def test_conv_output_size_equals_torch(case):
    a = case["args"]

    def side(key, i, default):
        v = a.get(key, default)
        return v[i] if isinstance(v, list) else v

    got = [conv_output_size(side("x", i, None), side("k", i, None),
                            padding=side("padding", i, 0), stride=side("stride", i, 1),
                            dilation=side("dilation", i, 1)) for i in (0, 1)]
    assert got == case["output_hw"]


def test_torch_reference_file_says_where_it_came_from():
    assert TORCH["torch_version"].startswith("2.") and TORCH["date"][:2] == "20"
    assert len(TORCH["conv2d"]) >= 10


def test_conv2d_macs_no_input_hand_case():
    # X=5, K=3, no padding, stride 1 → M = (5 − 3 + 0)/1 + 1 = 3; Cin = 2, Cout = 4
    # seed "FLOPs" = M²·K²·Cin·Cout = 9·9·2·4 = 648 (really multiply-adds)
    # seed bytes = (K²·Cin·Cout + M²·Cout)·4 = (72 + 36)·4 = 432
    k = conv2d_macs_no_input(5, 3, 2, 4)
    assert (k.flops, k.bytes) == (648, 432)
    assert "multiply-adds" in k.name


def test_conv2d_corrected_hand_case():
    # same layer, corrected: FLOPs = 2·648 = 1296 (torch agrees, see the JSON);
    # bytes = (weights 72 + input 5²·2 = 50 + output 36) · 4 = 632
    k = conv2d(5, 3, 2, 4)
    assert (k.flops, k.bytes) == (1296, 632)


def test_conv2d_grouped_batched_fp16_hand_case():
    # x=4, k=3, padding 1 → M = 4; Cin 4, Cout 6, groups 2 (2 input channels per filter), batch 2
    # FLOPs = 2·batch·M²·K²·(Cin/g)·Cout = 2·2·16·9·2·6 = 6912
    # bytes = 2 B · (weights 9·2·6 = 108 + input 2·16·4 = 128 + output 2·16·6 = 192) = 856
    k = conv2d(4, 3, 4, 6, padding=1, groups=2, batch=2, dtype="fp16")
    assert (k.flops, k.bytes) == (6912, 856)


def test_multiply_add_part_is_labelled_in_flops():
    # The parts table puts this row under a "FLOPs" column, so its label must say that each
    # multiply-add is counted as 2 (M16). Hand case: 2x3 @ 3x4 = 24 multiply-adds = 48 FLOPs;
    # conv 4x4 input, 3x3 filter, padding 1, 1 -> 1 channel: M = 4, 16·9 = 144 MACs = 288 FLOPs.
    for k, flops in ((costs.gemm(2, 4, 3), 48), (conv2d(4, 3, 1, 1, padding=1), 288)):
        label, part_flops, _ = k.parts[0]
        assert part_flops == flops
        assert "2 FLOPs each" in label and "2 FLOPs each" in k._repr_html_()


def test_resnet50_conv1_macs():
    # ResNet-50 conv1: 224×224×3 → 112×112×64 with 7×7 stride 2 padding 3:
    # 112²·49·3·64 = 118,013,952 multiply-adds (the widely quoted ≈118 M MACs)
    assert conv2d_macs_no_input(224, 7, 3, 64, padding=3, stride=2).flops == 118_013_952


def test_output_size_floors_like_pytorch():
    # (224 − 3)/2 + 1 = 111.5 → 111 (the JSON's torch output shape for this layer is 111×111)
    assert conv_output_size(224, 3, stride=2) == 111
    # dilation 2 makes a 3×3 kernel span 5: (64 + 4 − 5)/1 + 1 = 64
    assert conv_output_size(64, 3, padding=2, dilation=2) == 64


@settings(max_examples=60, deadline=None)
@given(x=st.integers(1, 64), k=st.integers(1, 7), c_in=st.integers(1, 64),
       c_out=st.integers(1, 64), padding=st.integers(0, 3), stride=st.integers(1, 3))
def test_seed_counts_half_the_flops_and_omits_the_input(x, k, c_in, c_out, padding, stride):
    if x + 2 * padding < k:
        return
    seed = conv2d_macs_no_input(x, k, c_in, c_out, padding=padding, stride=stride)
    fixed = conv2d(x, k, c_in, c_out, padding=padding, stride=stride)
    assert fixed.flops == 2 * seed.flops  # M16: FLOPs = 2 × multiply-adds
    assert fixed.bytes - seed.bytes == 4 * x * x * c_in  # M16: the input map X²·Cin in fp32


@pytest.mark.parametrize("call, name", [
    (lambda: conv2d(3, 5, 1, 1), "k"),                     # kernel larger than the input
    (lambda: conv2d(8, 3, 6, 4, groups=4), "groups"),       # 4 does not divide 6
    (lambda: conv2d(8, 3, 2, 2, stride=0), "stride"),
    (lambda: conv2d(8, 3, 2, 2, padding=-1), "padding"),
    (lambda: conv2d(8, 3, 2, 2, batch=0), "batch"),
    (lambda: conv2d((8, 8, 8), 3, 2, 2), "x"),
    (lambda: conv2d(8, (3, 0), 2, 2), r"k\[1\]"),
    (lambda: conv2d(8, 3, 0, 2), "c_in"),
    (lambda: conv2d(8, 3, 2, 2, dtype="float16"), "dtype"),
    (lambda: conv2d_macs_no_input(8, 3, 2, 2.5), "c_out"),
])
def test_conv_bad_input(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# -- attention -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", TORCH["attention"], ids=lambda c: c["label"])
def test_attention_flops_equal_torch_flop_counter(case):
    assert attention(**case["args"]).flops == case["flops"]


def test_attention_prefill_hand_case():
    # b=1, h=8, s=128, d=64, fp16: FLOPs 4·8·128·128·64 = 33,554,432 (Q·Kᵀ and A·V, 2mnk each)
    # bytes: Q, K, V, O each 8·128·64 elements × 2 B = 131,072 → 524,288; I = s/2 = 64
    k = attention_prefill(128, n_heads=8, head_dim=64)
    assert (k.flops, k.bytes) == (33_554_432, 524_288)
    assert k.intensity == 64


def test_decode_attention_is_about_one_flop_per_byte_in_fp16():
    # M17: one new token over L = 4096 cached tokens, h = 32, d = 128, fp16:
    # FLOPs 4·32·4096·128; bytes 2·(2·32·4096·128 + 2·32·128) → I = L/(L+1) = 0.99976
    k = attention_decode(4096, n_heads=32, head_dim=128)
    assert k.intensity == pytest.approx(4096 / 4097)
    # batching does not help: every sequence reads its own cache
    assert attention_decode(4096, n_heads=32, head_dim=128, batch=64).intensity == k.intensity
    # prefill of the same 4096 tokens: I = s/2 = 2048 FLOP/byte
    assert attention_prefill(4096, n_heads=32, head_dim=128).intensity == 2048


def test_gqa_raises_decode_intensity_by_the_group_size():
    # 32 query heads share 8 KV heads: I = 4·32·L·d / (2·(2·8·L·d + 2·32·d)) = 64L/(16L + 64)
    # L = 4096 → 262,144 / 65,600 = 3.996
    k = attention_decode(4096, n_heads=32, n_kv_heads=8, head_dim=128)
    assert k.intensity == pytest.approx(262_144 / 65_600)


def test_causal_counts_only_unmasked_pairs():
    # prefill of 4 tokens, causal: pairs 1+2+3+4 = 10; FLOPs = 4·b·h·pairs·d = 40 with b=h=d=1
    assert attention_prefill(4, n_heads=1, head_dim=1, causal=True).flops == 40
    # 2 new tokens over 5 keys (3 cached): the first sees 4 keys, the second 5 → 9 pairs → 36
    assert attention(2, 5, n_heads=1, head_dim=1, causal=True).flops == 36
    # without the mask (torch's convention) all 2·5 = 10 pairs → 40
    assert attention(2, 5, n_heads=1, head_dim=1).flops == 40


@settings(max_examples=80, deadline=None)
@given(seq=st.integers(2, 100_000), kv_groups=st.sampled_from([1, 2, 4, 8]),
       per_group=st.integers(1, 8), head_dim=st.sampled_from([32, 64, 80, 128, 256]),
       batch=st.integers(1, 64), causal=st.booleans(), dtype=DTYPES)
def test_decode_intensity_is_below_prefill(seq, kv_groups, per_group, head_dim, batch, causal,
                                           dtype):
    # Non-causal: I_prefill / I_decode = (h_kv·s + h) / (h + h_kv) > 1 for s > 1.  Causal
    # prefill counts s(s+1)/2 pairs; with g = h/h_kv the ratio's sign is that of (s − 1)(s − g),
    # so a causal prompt must be longer than the group size (a 2-token prompt with g = 2 ties).
    assume(not causal or seq > per_group)
    kw = dict(n_heads=kv_groups * per_group, n_kv_heads=kv_groups, head_dim=head_dim,
              batch=batch, dtype=dtype)
    decode = attention_decode(seq, **kw)
    prefill = attention_prefill(seq, causal=causal, **kw)
    assert decode.intensity < prefill.intensity
    # decode never beats 2·(h/h_kv)/s FLOP/byte (s = element size)
    assert decode.intensity < 2 * per_group / dtype_bytes(dtype)


@pytest.mark.parametrize("call, name", [
    (lambda: attention(5, 4, n_heads=2, head_dim=8), "q_len"),
    (lambda: attention(1, 4, n_heads=6, n_kv_heads=4, head_dim=8), "n_kv_heads"),
    (lambda: attention_decode(0, n_heads=2, head_dim=8), "context_len"),
    (lambda: attention_prefill(16, n_heads=0, head_dim=8), "n_heads"),
    (lambda: attention_prefill(16, n_heads=2, head_dim=8, causal=1), "causal"),
    (lambda: attention_decode(16, n_heads=2, head_dim=8, dtype="fp4"), "dtype"),
    (lambda: attention_decode(16, n_heads=2, head_dim=8.5), "head_dim"),
])
def test_attention_bad_input(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_every_model_has_notes_and_a_name():
    for k in (axpy(8), reduction(8), gemm(2, 2, 2), gemm_naive(2, 2, 2),
              gemm_tiled(2, 2, 2, tile=2), conv2d(4, 3, 1, 1), conv2d_macs_no_input(4, 3, 1, 1),
              attention_prefill(4, n_heads=1, head_dim=4),
              attention_decode(4, n_heads=1, head_dim=4)):
        assert k.name and k.notes
        assert math.isfinite(k.intensity)
    assert set(costs.DTYPE_BYTES) >= {"fp32", "fp16", "bf16", "fp8"}


def test_kernel_cost_table_rows_say_each_part_by_hand():
    # axpy over 10^6 FP32 elements: 2 FLOPs each = 2 MFLOP; reads x and y, 2 x 4 B = 8 MB;
    # writes y, 4 MB; 2 / 12 = 0.167 FLOP/byte
    caption, header, rows = costs.axpy(10**6).table()
    assert caption == "axpy" and header == ("", "FLOPs", "bytes", "intensity")
    assert rows == [("total", "2 MFLOP", "12 MB", "0.167 FLOP/byte"),
                    ("arithmetic", "2 MFLOP", "–", ""), ("reads", "–", "8 MB", ""),
                    ("writes", "–", "4 MB", "")]
    assert repr(costs.axpy(10**6)) == "KernelCost('axpy', 2 MFLOP, 12 MB, 0.167 FLOP/byte)"
