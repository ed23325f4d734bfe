"""Vector loads and stores (``t.vload``/``t.vstore``): values against NumPy, the memory
model's counts for a 16-byte access, the alignment check, the translation to float4 and the
128-bit instructions NVRTC makes of it (gpu_lessons/kernels/simt/vectors.py)."""

import cuda_cpu as cpu
import numpy as np
import pytest
from test_register_arrays import BK, BM, BN, TM, TN, _problem, blocktile_2d

from gpu_lessons.kernels import KernelLanguageError, compile, nvrtc, run, to_cuda, validate

needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")


def reverse4(t, a, out):
    s = t.shared((2, 128), np.float32)
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0, x1, x2, x3 = t.vload(a, 4 * i, 4)
    t.vstore(s, (1, 4 * t.thread_idx.x), (x3, x2, x1, x0))
    t.sync()
    y0, y1, y2, y3 = t.vload(s, (1, 4 * t.thread_idx.x), 4)
    t.vstore(out, 4 * i, (y0 * 2.0, y1, y2, y3))


def _reverse_args():
    return np.arange(256, dtype=np.float32), np.zeros(256, np.float32)


def test_vector_values_match_numpy():
    a, out = _reverse_args()
    run(reverse4, 2, 32, a, out)
    want = a.reshape(-1, 4)[:, ::-1].copy()
    want[:, 0] *= 2
    np.testing.assert_array_equal(out, want.ravel())


def test_a_warp_s_float4_load_is_one_request_of_sixteen_sectors():
    # 32 lanes x 16 bytes = 512 bytes: 16 sectors of 32 B in one request (gpu_lessons.memory);
    # in shared memory 512 bytes take 4 wavefronts of 128 B, with no bank conflict
    r = run(reverse4, 1, 32, *_reverse_args())
    ev = [e for e in r.events if e.kind in ("ld.global", "st.shared", "ld.shared", "st.global")]
    assert [e.width for e in ev] == [4, 4, 4, 4]
    assert (ev[0].sectors, ev[0].requests, ev[0].requested_bytes) == (16, 1, 512)
    assert (ev[1].wavefronts, ev[1].ideal_wavefronts, ev[1].bank_conflicts) == (4, 4, 0)


def test_a_misaligned_vector_is_refused_with_the_lane_and_the_fix():
    def k(t, a, out):
        x0, x1 = t.vload(a, 2 * t.thread_idx.x + 1, 2)
        out[t.thread_idx.x] = x0 + x1
    with pytest.raises(ValueError, match=r"lane 0 .* element 1 .* multiple of 2.*8 bytes"):
        run(k, 1, 32, np.zeros(80, np.float32), np.zeros(32, np.float32))


def test_a_vector_past_the_row_is_refused():
    def k(t, a, out):
        x0, x1, x2, x3 = t.vload(a, (t.thread_idx.x, 4), 4)
        out[t.thread_idx.x] = x0 + x1 + x2 + x3
    with pytest.raises(IndexError, match="past the end of its last dimension"):
        run(k, 1, 32, np.zeros((32, 6), np.float32), np.zeros(32, np.float32))


def test_the_translation_is_a_float4_and_aligns_the_shared_array():
    src = to_cuda(reverse4, *_reverse_args())
    assert "__shared__ __align__(16) float s[2][128];" in src
    assert "*reinterpret_cast<const float4*>(&a[4 * i]);" in src
    assert "make_float4(y0 * 2.0f, y1, y2, y3);" in src


@pytest.mark.parametrize("body, words", [
    ("    v = t.vload(a, 0, 4)\n    out[0] = 1.0\n", "only as x0, x1, x2, x3 = t.vload"),
    ("    x0, x1, x2 = t.vload(a, 0, 3)\n    out[0] = x0\n", "the number 2 or 4"),
    ("    x0, x1 = t.vload(a, 0, 4)\n    out[0] = x0\n", "one name or element per value"),
    ("    t.vstore(out, 0, [1.0, 2.0])\n", "tuple of 2 or 4"),
])
def test_misused_vectors_are_refused(body, words):
    with pytest.raises(KernelLanguageError, match=words):
        validate("def k(t, a, out):\n" + body)


def vectorized_2d(t, a, b, c, n):
    """The 4 x 4 register tile of test_register_arrays.blocktile_2d, with each k step's
    operands and each row of results moved as float4."""
    sa = t.shared((BK, BM), np.float32)
    sb = t.shared((BK, BN), np.float32)
    acc = t.local((TM, TN), np.float32)
    ra = t.local((TM,), np.float32)
    rb = t.local((TN,), np.float32)
    tid = t.thread_idx.x
    row0 = t.block_idx.y * BM
    col0 = t.block_idx.x * BN
    ty = tid // (BN // TN)
    tx = tid % (BN // TN)
    for k0 in range(0, n, BK):
        for q in range(4):
            e = tid + q * 64
            sa[e % BK, e // BK] = a[(row0 + e // BK) * n + k0 + e % BK]
            sb[e // BN, e % BN] = b[(k0 + e // BN) * n + col0 + e % BN]
        t.sync()
        for k in range(BK):
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (k, ty * TM), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (k, tx * TN), 4)
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(TM):
        t.vstore(c, (row0 + ty * TM + i) * n + col0 + tx * TN,
                 (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))


def _flat():
    a, b, c, n = _problem()
    return a.ravel(), b.ravel(), c.ravel(), n


def test_the_vectorised_tile_matches_numpy_with_a_quarter_of_the_shared_loads():
    a, b, c, n = _problem()
    r = run(vectorized_2d, (n // BN, n // BM), 64, a.ravel(), b.ravel(), c.ravel(), n)
    np.testing.assert_array_equal(c, a @ b)
    loads = [e for e in r.events if e.kind == "ld.shared"]
    # per k step each warp loads its 4 A and 4 B operands as 2 float4s, not 8 floats
    warps, steps = (n // BN) * (n // BM) * 2, n
    assert len(loads) == warps * steps * 2
    assert {e.width for e in loads} == {4}


@needs_nvrtc
def test_nvrtc_makes_128_bit_instructions_of_them():
    ck = compile(vectorized_2d, *_flat(), exact=False)
    sass = [line.text for line in ck.sass]
    assert any("LDS.128" in s for s in sass)
    assert any("STG.E.128" in s for s in sass)
    assert ck.local_bytes == 0


@pytest.mark.skipif(not cpu.available(), reason="g++ is not installed")
@pytest.mark.parametrize("kernel, tile, threads, n", [
    (blocktile_2d, 32, 64, 64), (vectorized_2d, 32, 64, 64)])
def test_the_translation_computes_what_the_simulator_computes(kernel, tile, threads, n):
    # random floats, not integers: every rounding of every multiply and add must agree
    rng = np.random.default_rng(3)
    a = rng.standard_normal(n * n).astype(np.float32)
    b = rng.standard_normal(n * n).astype(np.float32)
    c_sim, c_cpu = np.zeros(n * n, np.float32), np.zeros(n * n, np.float32)
    run(kernel, (n // tile, n // tile), threads, a, b, c_sim, n)
    cpu.run_cpu(to_cuda(kernel, a, b, c_cpu, n), (n // tile, n // tile), threads, a, b, c_cpu, n)
    np.testing.assert_array_equal(c_cpu.view(np.uint32), c_sim.view(np.uint32))
