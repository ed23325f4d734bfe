"""float16 and bfloat16 values: arrays of np.float16 and ml_dtypes.bfloat16 load, store and
convert as NumPy and ml_dtypes convert (round to nearest even from float32 and float64, exact
back to float32), in the simulator and, translated, on the CPU (g++) bit for bit; NVRTC compiles
the translation's own 16-bit types; arithmetic on halves is refused with the form that works."""

import cuda_cpu as cpu
import ml_dtypes
import numpy as np
import pytest

from gpu_lessons.kernels import KernelLanguageError, nvrtc, run, to_cuda
from gpu_lessons.kernels.simt import KernelError

BF16 = ml_dtypes.bfloat16


def convert(t, f32, f64, h_in, b_in, h32, b32, h64, b64, back_h, back_b, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        h32[i] = f32[i]                        # float32 -> float16, rounded to nearest even
        b32[i] = f32[i]
        h64[i] = f64[i]                        # float64 -> float16 in one rounding
        b64[i] = f64[i]
        x = t.local(h_in[i], np.float32)       # exact
        y = t.local(b_in[i], np.float32)
        back_h[i] = x
        back_b[i] = y


def _edge_values():
    """Ties, the ends of both ranges, subnormals, infinities and NaN, beside random values."""
    f16, bf = np.finfo(np.float16), ml_dtypes.finfo(BF16)
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 65519.0, 65520.0,
               float(f16.tiny), float(f16.tiny) / 2**10, float(f16.tiny) / 2**11,
               float(f16.tiny) / 2**11 * 1.5, float(f16.tiny) / 2**12, float(bf.max),
               float(bf.tiny), float(bf.tiny) / 2**7, 3.4e38, 1 + 2**-11, 1 + 3 * 2**-11,
               1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-30, 2049.0, 2051.0, 1e-30, -5e-8]
    rng = np.random.default_rng(7)
    wide = rng.standard_normal(3000) * np.exp2(rng.integers(-30, 30, 3000))
    return np.concatenate([np.array(special, np.float64), wide,
                           rng.uniform(-70000, 70000, 1000)])


def _args():
    f64 = _edge_values()
    n = f64.size
    f32 = f64.astype(np.float32)
    bits = np.random.default_rng(8).integers(0, 2**16, n).astype(np.uint16)
    bits[(bits & 0x7C00) == 0x7C00] &= 0xFC00     # NaN payloads aside (NumPy keeps them)
    h_in = bits.view(np.float16)
    b_bits = bits.copy()
    b_bits[(b_bits & 0x7F80) == 0x7F80] &= 0xFF80
    b_in = b_bits.view(BF16)
    outs = [np.zeros(n, d) for d in (np.float16, BF16, np.float16, BF16, np.float32,
                                     np.float32)]
    return [f32, f64, h_in, b_in, *outs, n]


def _bits(a):
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def test_the_simulator_converts_as_numpy_and_ml_dtypes_do():
    args = _args()
    f32, f64, h_in, b_in, h32, b32, h64, b64, back_h, back_b, n = args
    run(convert, (n + 127) // 128, 128, *args)
    # the references: NumPy's and ml_dtypes' own conversions, element by element
    with np.errstate(over="ignore"):
        want = [f32.astype(np.float16), f32.astype(BF16), f64.astype(np.float16),
                f64.astype(BF16)]
    for got, ref in zip((h32, b32, h64, b64), want, strict=True):
        np.testing.assert_array_equal(_bits(got), _bits(ref))
    np.testing.assert_array_equal(_bits(back_h), _bits(h_in.astype(np.float32)))
    np.testing.assert_array_equal(_bits(back_b), _bits(b_in.astype(np.float32)))
    # by hand: 1 + 2**-11 is halfway between 1 and 1 + 2**-10, and 1 is even
    assert h32[list(f64).index(1 + 2**-11)] == 1.0
    assert h32[list(f64).index(1 + 3 * 2**-11)] == 1 + 2 * 2**-10     # to the even neighbour
    assert np.isinf(h32[list(f64).index(65520.0)]) and h32[list(f64).index(65519.0)] == 65504
    # float64 -> bfloat16 rounds once: 1 + 2**-8 + 2**-30 is above the tie (float32 is not)
    assert b64[list(f64).index(1 + 2**-8 + 2**-30)] == 1 + 2**-7
    assert b32[list(f64).index(1 + 2**-8 + 2**-30)] == 1.0


@pytest.mark.skipif(not cpu.available(), reason="g++ is not installed")
def test_the_translation_converts_bit_for_bit_as_the_simulator():
    sim, gcc = _args(), _args()
    n = sim[-1]
    run(convert, (n + 127) // 128, 128, *sim)
    src = to_cuda(convert, *gcc)
    assert "struct half_t" in str(src) and "const bf16_t* b_in" in str(src)
    cpu.run_cpu(src, (n + 127) // 128, 128, *gcc)
    for a, b in zip(sim[4:10], gcc[4:10], strict=True):
        np.testing.assert_array_equal(_bits(b), _bits(a))


@pytest.mark.skipif(nvrtc.newest_library() is None, reason="NVRTC is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_the_half_types_without_cuda_fp16_h(arch):
    src = to_cuda(convert, *_args())
    assert "#include" not in str(src)
    out = nvrtc.compile_ptx(str(src), arch)
    assert out.ok, out.log


@pytest.mark.parametrize("dtype", ["np.float16", "ml_dtypes.bfloat16"])
def test_arithmetic_on_halves_is_refused_with_the_form_that_works(dtype):
    def k(t, h, out):
        i = t.thread_idx.x
        out[i] = h[i] * 2.0
    h = np.ones(32, np.float16 if dtype == "np.float16" else BF16)
    name = "float16" if dtype == "np.float16" else "bfloat16"
    with pytest.raises(KernelError, match=rf"{name} values are loaded, stored, moved and "
                                          r"converted, not computed with .*t.local\(h, "
                                          r"np.float32\)"):
        run(k, 1, 32, h, np.zeros(32, np.float32))
    with pytest.raises(KernelLanguageError, match=rf"{name} values are loaded, stored"):
        to_cuda(k, h, np.zeros(32, np.float32))


def test_a_shared_bfloat16_array_is_named_through_ml_dtypes():
    def k(t, x, out):
        s = t.shared(32, ml_dtypes.bfloat16)
        i = t.thread_idx.x
        s[i] = x[i]
        t.sync()
        v = t.local(s[31 - i], np.float32)
        out[i] = v
    x = np.linspace(-3, 3, 32).astype(np.float32)
    out = np.zeros(32, np.float32)
    run(k, 1, 32, x, out)
    np.testing.assert_array_equal(out, x.astype(BF16).astype(np.float32)[::-1])
    assert "__shared__ bf16_t s[32];" in str(to_cuda(k, x, out))


def test_cp_async_copies_eight_halves_a_lane():
    """16 bytes a lane: 8 bfloat16 values in one cp.async (width 8), counted as one 16-byte
    load a lane; the translation copies 16 bytes."""
    def stage(t, x, out):
        s = t.shared((32, 8), ml_dtypes.bfloat16)
        t.copy_async(s, (t.lane, 0), x, 8 * t.lane, 8)
        t.commit()
        t.wait(0)
        t.syncwarp()
        for j in range(8):
            out[8 * t.lane + j] = s[31 - t.lane, j]
    x = np.arange(256).astype(BF16)
    out = np.zeros(256, BF16)
    r = run(stage, 1, 32, x, out)
    np.testing.assert_array_equal(out.reshape(32, 8), x.reshape(32, 8)[::-1])
    loads = [e for e in r.events if e.kind == "ld.global"]
    assert [(e.width, e.sectors) for e in loads] == [(8, 16)]    # 512 B: 16 sectors
    assert "cp_async<16>(&s[" in str(to_cuda(stage, x, out))

    def wide(t, x, out):
        s = t.shared((32, 8), np.float32)
        t.copy_async(s, (t.lane, 0), x, 8 * t.lane, 8)    # 32 bytes: no cp.async is that wide
    with pytest.raises(KernelError, match="width must make width x 4 B one of them"):
        run(wide, 1, 32, np.zeros(256, np.float32), np.zeros(256, np.float32))
