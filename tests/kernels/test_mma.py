"""Tensor cores in the kernel language: ``t.mma`` (mma.sync m16n8k16, float16 or bfloat16 in,
float32 accumulators) and ``t.ldmatrix``.  The fragment layouts are the PTX ISA's ("Matrix
Fragments for mma.m16n8k16 with floating point type", "Warp-level matrix load instruction:
ldmatrix"), typed here by hand; the simulator's products are NumPy's (exactly, for small
integers); the translation runs bit for bit on the CPU (g++) and compiles to HMMA and LDSM for
sm_80 and sm_90; a partial warp, wrong shapes and misaligned rows are refused."""

import importlib.util
from pathlib import Path

import cuda_cpu as cpu
import ml_dtypes
import numpy as np
import pytest

from gpu_lessons.kernels import compile, mma_layout, nvrtc, run, to_cuda
from gpu_lessons.kernels.simt import KernelError

BF16 = ml_dtypes.bfloat16
needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")
needs_gcc = pytest.mark.skipif(not cpu.available(), reason="g++ is not installed")


def tile_bf16(t, a, b, c, d):
    """d = a @ b + c for one 16 x 16 a and 16 x 8 b, each lane loading its own fragments."""
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(8):
        fa[i] = a[g + 8 * (i // 2 % 2), 2 * q + i % 2 + 8 * (i // 4)]
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
        acc[i] = c[g + 8 * (i // 2), 2 * q + i % 2]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        d[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


#: d = a @ b + c with float16 inputs: the device script's kernel (tools/device/mma_h200.py)
_spec = importlib.util.spec_from_file_location(
    "mma_h200", Path(__file__).resolve().parents[2] / "tools" / "device" / "mma_h200.py")
TOOL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TOOL)
tile_f16 = TOOL.tile_f16


def _inputs(dtype, seed, ints=False):
    rng = np.random.default_rng(seed)
    if ints:
        a, b = rng.integers(-4, 5, (16, 16)), rng.integers(-4, 5, (16, 8))
        c = rng.integers(-4, 5, (16, 8)).astype(np.float32)
    else:
        a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 8))
        c = rng.standard_normal((16, 8)).astype(np.float32)
    return a.astype(dtype), b.astype(dtype), c, np.full((16, 8), np.nan, np.float32)


def test_the_layout_is_the_ptx_isa_s():
    a, b, c = mma_layout("a"), mma_layout("b"), mma_layout("c")
    # groupID = lane >> 2, threadID_in_group = lane % 4; typed from the ISA's figures
    assert a.of_lane(0) == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert a.of_lane(5) == [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]
    assert a.of_lane(31) == [(7, 6), (7, 7), (15, 6), (15, 7), (7, 14), (7, 15), (15, 14),
                             (15, 15)]
    assert b.of_lane(0) == [(0, 0), (1, 0), (8, 0), (9, 0)]
    assert b.of_lane(6) == [(4, 1), (5, 1), (12, 1), (13, 1)]
    assert b.of_lane(31) == [(6, 7), (7, 7), (14, 7), (15, 7)]
    assert c.of_lane(0) == [(0, 0), (0, 1), (8, 0), (8, 1)]
    assert c.of_lane(13) == [(3, 2), (3, 3), (11, 2), (11, 3)]
    for lay, per in ((a, 8), (b, 4), (c, 4)):      # every lane's slots, each once
        pairs = sorted(zip(lay.lane.ravel().tolist(), lay.element.ravel().tolist(),
                           strict=True))
        assert pairs == [(lane, i) for lane in range(32) for i in range(per)]
    assert "L5:a[3]" in repr(a) and "<table>" in a._repr_html_()
    with pytest.raises(ValueError, match="operand must be one of 'a', 'b', 'c'; got 'd'"):
        mma_layout("d")


@pytest.mark.parametrize("kernel, dtype", [(tile_bf16, BF16), (tile_f16, np.float16)])
def test_small_integers_give_numpy_s_product_exactly(kernel, dtype):
    a, b, c, d = _inputs(dtype, 1, ints=True)
    r = run(kernel, 1, 32, a, b, c, d)
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_array_equal(d, want)
    assert sum(e.kind == "mma" for e in r.events) == 1


def test_an_identity_a_gives_b_plus_c():
    """By hand: I @ B + C is B + C, each element one rounding of one addition."""
    b = np.random.default_rng(2).standard_normal((16, 8)).astype(BF16)
    a = np.zeros((16, 16), BF16)
    a[:8, :8] = np.eye(8)
    a[8:, 8:] = np.eye(8)
    a[:8, 8:] = np.eye(8)        # rows 0..7 add b's rows 8..15 too
    c = np.full((16, 8), 0.25, np.float32)
    d = np.zeros((16, 8), np.float32)
    run(tile_bf16, 1, 32, a, b, c, d)
    b32 = b.astype(np.float32)
    np.testing.assert_array_equal(d[8:], b32[8:] + np.float32(0.25))
    # the order of the sums: ((c + b[r]) + b[r + 8]) in float32
    np.testing.assert_array_equal(d[:8], (np.float32(0.25) + b32[:8]) + b32[8:])


@pytest.mark.parametrize("kernel, dtype", [(tile_bf16, BF16), (tile_f16, np.float16)])
def test_random_inputs_are_within_the_float32_rounding_of_the_exact_product(kernel, dtype):
    a, b, c, d = _inputs(dtype, 3)
    run(kernel, 1, 32, a, b, c, d)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    size = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)
    # 16 additions, each within half an ulp of float32 of the running sum's size
    assert np.all(np.abs(d - exact) <= 16 * 2**-24 * size)


@needs_gcc
def test_the_translation_computes_the_simulator_s_bits_on_the_cpu():
    sources, runs = [], []
    for kernel, dtype, seed in ((tile_bf16, BF16, 4), (tile_f16, np.float16, 5)):
        sim, gcc = _inputs(dtype, seed), _inputs(dtype, seed)
        run(kernel, 1, 32, *sim)
        sources.append(to_cuda(kernel, *gcc))
        runs.append((sim, gcc))
    assert "mma_m16n8k16(acc, fa, fb, acc);" in str(sources[0])
    for launcher, (sim, gcc) in zip(cpu.build(sources), runs, strict=True):
        cpu.run_cpu(launcher[1], 1, 32, *gcc, launcher=launcher)
        np.testing.assert_array_equal(gcc[3].view(np.uint32), sim[3].view(np.uint32))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_makes_one_hmma_of_each_type(arch):
    for kernel, dtype, sass_name in ((tile_bf16, BF16, "HMMA.16816.F32.BF16"),
                                     (tile_f16, np.float16, "HMMA.16816.F32")):
        ck = compile(kernel, *_inputs(dtype, 0), arch=arch)
        hmma = [line.text for line in ck.sass if "HMMA" in line.text]
        assert len(hmma) == 1 and sass_name in hmma[0]
        assert ck.local_bytes == 0


def test_a_partial_warp_or_wrong_fragments_are_refused():
    def partial(t, a, b, c, d):
        fa = t.local((8,), ml_dtypes.bfloat16)
        fb = t.local((4,), ml_dtypes.bfloat16)
        acc = t.local((4,), np.float32)
        if t.lane < 16:
            t.mma(acc, fa, fb, acc)
    with pytest.raises(KernelError, match=r"t.mma is executed by the whole warp, but lanes "
                                          r"\[16, 17"):
        run(partial, 1, 32, *_inputs(BF16, 0))

    def mixed(t, a, b, c, d):
        fa = t.local((8,), ml_dtypes.bfloat16)
        fb = t.local((4,), np.float16)
        acc = t.local((4,), np.float32)
        t.mma(acc, fa, fb, acc)
    with pytest.raises(KernelError, match="a and b hold one type"):
        run(mixed, 1, 32, *_inputs(BF16, 0))

    def short(t, a, b, c, d):
        fa = t.local((4,), ml_dtypes.bfloat16)
        fb = t.local((4,), ml_dtypes.bfloat16)
        acc = t.local((4,), np.float32)
        t.mma(acc, fa, fb, acc)
    with pytest.raises(KernelError, match=r"a must be a per-thread array of 8 float16 or "
                                          r"bfloat16"):
        run(short, 1, 32, *_inputs(BF16, 0))


# -- ldmatrix ---------------------------------------------------------------------------------

def load_matrices(t, m, out, out_t):
    """Four 8 x 8 matrices of a 16 x 16 shared tile (row stride PITCH halves), as ldmatrix.x4
    and .x4.trans give them to each lane."""
    s = t.shared((16, PITCH), np.float16)
    for j in range(8):
        s[t.lane // 2, t.lane % 2 * 8 + j] = m[t.lane // 2, t.lane % 2 * 8 + j]
    t.syncwarp()
    r = t.local((8,), np.float16)
    rt = t.local((8,), np.float16)
    # lanes 8j .. 8j + 7 give matrix j's rows: j = 0 top left, 1 bottom left, 2 top right, ...
    row = t.lane % 8 + 8 * (t.lane // 8 % 2)
    col = 8 * (t.lane // 16)
    t.ldmatrix(r, s, (row, col), 4)
    t.ldmatrix(rt, s, (row, col), 4, trans=True)
    for i in range(8):
        out[t.lane, i] = r[i]
        out_t[t.lane, i] = rt[i]


PITCH = 16


def _ld_args():
    m = (np.arange(256).reshape(16, 16) % 2048).astype(np.float16)
    return m, np.zeros((32, 8), np.float16), np.zeros((32, 8), np.float16)


def test_ldmatrix_gives_each_lane_the_isa_s_elements():
    m, out, out_t = _ld_args()
    run(load_matrices, 1, 32, m, out, out_t)
    blocks = [m[:8, :8], m[8:, :8], m[:8, 8:], m[8:, 8:]]
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for j, blk in enumerate(blocks):
            assert list(out[lane, 2 * j:2 * j + 2]) == [blk[g, 2 * q], blk[g, 2 * q + 1]]
            assert list(out_t[lane, 2 * j:2 * j + 2]) == [blk[2 * q, g], blk[2 * q + 1, g]]


@pytest.mark.parametrize("pitch, wavefronts", [(16, 2), (24, 1)])
def test_ldmatrix_counts_wavefronts_as_shared_loads_do(pitch, wavefronts):
    """A row of 16 halves is 32 bytes: rows 0 and 4 of a matrix fall in the same four banks,
    two wavefronts a matrix; a pitch of 24 halves (48 bytes) spreads the 8 rows over all 32
    banks, one wavefront a matrix (8 lanes x 16 bytes = 128 bytes)."""
    global PITCH
    PITCH, old = pitch, PITCH
    try:
        r = run(load_matrices, 1, 32, *_ld_args())
    finally:
        PITCH = old
    loads = [e for e in r.events if e.kind == "ld.shared"]
    assert [e.wavefronts for e in loads] == [4 * wavefronts, 4 * wavefronts]


def test_ldmatrix_x1_reads_eight_addresses_and_refuses_a_misaligned_row():
    def one(t, m, out):
        s = t.shared((8, 8), np.float16)
        for j in range(2):
            s[t.lane // 4, t.lane % 4 * 2 + j] = m[t.lane // 4, t.lane % 4 * 2 + j]
        t.syncwarp()
        r = t.local((2,), np.float16)
        t.ldmatrix(r, s, (t.lane % 8, 0), 1)      # lanes 8..31 give addresses nobody reads
        out[t.lane, 0] = r[0]
        out[t.lane, 1] = r[1]
    m = np.arange(64).reshape(8, 8).astype(np.float16)
    out = np.zeros((32, 2), np.float16)
    res = run(one, 1, 32, m, out)
    np.testing.assert_array_equal(out, m.reshape(32, 2))
    assert [e.wavefronts for e in res.events if e.kind == "ld.shared"] == [1]

    def misaligned(t, m, out):
        s = t.shared((8, 8), np.float16)
        r = t.local((2,), np.float16)
        t.ldmatrix(r, s, (t.lane % 8, 1), 1)
    with pytest.raises(KernelError, match="16-byte aligned"):
        run(misaligned, 1, 32, m, out)


@needs_gcc
def test_ldmatrix_translates_bit_for_bit_on_the_cpu():
    sim, gcc = _ld_args(), _ld_args()
    run(load_matrices, 1, 32, *sim)
    src = to_cuda(load_matrices, *gcc)
    assert "ldmatrix<4, true>(rt, &s[" in str(src)
    cpu.run_cpu(src, 1, 32, *gcc)
    for a, b in zip(sim[1:], gcc[1:], strict=True):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_makes_ldsm(arch):
    ck = compile(load_matrices, *_ld_args(), arch=arch)
    sass = [line.text for line in ck.sass]
    assert any("LDSM.16.M88.4" in s for s in sass)
    assert any("LDSM.16.MT88.4" in s for s in sass)


@needs_gcc
def test_the_hgemm_puzzle_s_kernel_runs_bit_for_bit_on_the_cpu():
    """cp.async stages, ldmatrix (x4 and x4.trans) and 16 mma a step, 8 warps a block of
    128 x 128: random bfloat16 inputs, so every rounding of the simulator's sums must come out
    the same."""
    kernel = TOOL.worked("hgemm_mma")
    m, n, k = 128, 256, 64
    rng = np.random.default_rng(9)
    a = rng.standard_normal(m * k).astype(BF16)
    b = rng.standard_normal(k * n).astype(BF16)
    sim, gcc = np.full(m * n, np.nan, np.float32), np.full(m * n, np.nan, np.float32)
    run(kernel, (n // 128, m // 128), 256, a, b, sim, m, n, k)
    src = to_cuda(kernel, a, b, gcc, m, n, k)
    assert "cp_async<16>(" in str(src) and "ldmatrix<4, true>(" in str(src)
    cpu.run_cpu(src, (n // 128, m // 128), 256, a, b, gcc, m, n, k)
    np.testing.assert_array_equal(gcc.view(np.uint32), sim.view(np.uint32))
    exact = a.astype(np.float64).reshape(m, k) @ b.astype(np.float64).reshape(k, n)
    assert np.abs(sim.reshape(m, n) - exact).max() < 1e-4
