"""Per-thread arrays (``t.local((8, 8), np.float32)``) and unrolled loops: the simulator's
results against NumPy, the translation (``float acc[8][8] = {};`` and ``#pragma unroll``),
NVRTC's register count (no local memory) and the refusals of indices not known at compile
time (gpu_lessons/kernels/registers.py)."""

import numpy as np
import pytest

from gpu_lessons.kernels import KernelLanguageError, compile, nvrtc, run, to_cuda, validate

needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")

BM = BN = 32   # the block's tile of C
BK = 8         # the k-slice in shared memory
TM = TN = 4    # each thread's tile of C: 16 accumulators in registers


def blocktile_2d(t, a, b, c, n):
    """C = A @ B (row-major n x n, n a multiple of 32); 64 threads, each a 4 x 4 tile of C."""
    sa = t.shared((BK, BM), np.float32)   # A's slice, transposed: sa[k, m]
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
        for q in range(4):   # 64 threads load 32 x 8 of A and 8 x 32 of B, 4 elements each
            e = tid + q * 64
            sa[e % BK, e // BK] = a[(row0 + e // BK) * n + k0 + e % BK]
            sb[e // BN, e % BN] = b[(k0 + e // BN) * n + col0 + e % BN]
        t.sync()
        for k in range(BK):
            for i in range(TM):
                ra[i] = sa[k, ty * TM + i]
            for j in range(TN):
                rb[j] = sb[k, tx * TN + j]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(TM):
        for j in range(TN):
            c[(row0 + ty * TM + i) * n + col0 + tx * TN + j] = acc[i, j]


def _flat(n=64):
    a, b, c, n = _problem(n)
    return a.ravel(), b.ravel(), c.ravel(), n


def _problem(n=64, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (n, n)).astype(np.float32)   # small integers: sums are exact
    b = rng.integers(-4, 5, (n, n)).astype(np.float32)
    return a, b, np.zeros((n, n), np.float32), n


def test_a_register_tiled_matrix_product_matches_numpy():
    a, b, c, n = _problem()
    run(blocktile_2d, (n // BN, n // BM), 64, a.ravel(), b.ravel(), c.ravel(), n)
    np.testing.assert_array_equal(c, a @ b)


def test_lanes_switched_off_keep_their_elements():
    def k(t, out):
        acc = t.local((2,), np.int32)
        i = t.thread_idx.x
        acc[1] = 5
        if i % 3 == 0:
            acc[0] = i
            acc[1] = -1
        out[2 * i] = acc[0]
        out[2 * i + 1] = acc[1]
    out = np.zeros(64, np.int32)
    run(k, 1, 32, out)
    i = np.arange(32)
    np.testing.assert_array_equal(out[0::2], np.where(i % 3 == 0, i, 0))
    np.testing.assert_array_equal(out[1::2], np.where(i % 3 == 0, -1, 5))


def test_the_translation_declares_the_array_and_unrolls_its_loops():
    src = to_cuda(blocktile_2d, *_flat())
    assert "float acc[4][4] = {};" in src
    assert "float ra[4] = {};" in src
    assert "acc[i][j] += ra[i] * rb[j];" in src
    # the k0 loop runs n / BK times (n is known only at launch): a loop, not unrolled
    k0_line = next(line for line in src.splitlines() if "for (int k0" in line)
    before = src.splitlines()[src.splitlines().index(k0_line) - 1]
    assert "#pragma unroll" not in before
    assert src.count("#pragma unroll") == 8   # q, k, i, j, i, (i, j), (i, j) at the end


@needs_nvrtc
def test_nvrtc_keeps_the_per_thread_arrays_in_registers():
    ck = compile(blocktile_2d, *_flat(), exact=False)
    assert ck.local_bytes == 0 and ck.spill_store_bytes == 0
    # 16 accumulators, 8 operands and the addresses fit well under the 255 a thread may have
    assert 24 <= ck.registers_per_thread <= 128


def _refusal(source: str) -> str:
    with pytest.raises(KernelLanguageError) as info:
        validate(source, {"TM": 4})
    return str(info.value)


def test_a_runtime_index_is_refused_with_the_reason_and_the_form_that_works():
    msg = _refusal("def k(t, out, n):\n    acc = t.local((4,), np.float32)\n"
                   "    for j in range(n):\n        acc[j] += 1.0\n    out[0] = acc[0]\n")
    assert "line 4" in msg and "not unrolled" in msg and "range(n)" in msg
    assert "local memory" in msg and "for i in range(TM)" in msg
    msg = _refusal("def k(t, out):\n    acc = t.local((4,), np.float32)\n"
                   "    acc[t.thread_idx.x % 4] = 1.0\n    out[0] = acc[0]\n")
    assert "line 3" in msg and "computed when the kernel runs" in msg


def test_a_long_loop_is_not_unrolled_and_its_variable_cannot_index():
    msg = _refusal("def k(t, out):\n    acc = t.local((4,), np.float32)\n"
                   "    for j in range(100):\n        acc[j % 4] += 1.0\n    out[0] = acc[0]\n")
    assert "runs 100 times" in msg and "64" in msg


@pytest.mark.parametrize("body, words", [
    ("    if n > 0:\n        acc = t.local((4,), np.float32)\n        acc[0] = 1.0\n",
     "top level"),
    ("    acc = t.local((n, 4), np.float32)\n    acc[0, 0] = 1.0\n", "known when the kernel is"),
    ("    acc = t.local((16, 16), np.float32)\n    acc[0, 0] = 1.0\n", "256 elements"),
    ("    acc = t.local((4,), np.float32)\n    out[0] = acc\n", "not the array itself"),
])
def test_declarations_are_checked(body, words):
    assert words in _refusal("def k(t, out, n):\n" + body)


def test_a_name_assigned_once_from_constants_can_size_and_index():
    def k(t, out):
        width = 2 * 2
        acc = t.local((width,), np.float32)
        for j in range(width):
            acc[j] = j * 1.5
        out[t.thread_idx.x] = acc[width - 1]
    out = np.zeros(32, np.float32)
    run(k, 1, 32, out)
    np.testing.assert_array_equal(out, np.full(32, 4.5, np.float32))
    assert "float acc[2 * 2] = {};" in to_cuda(k, out)


def bounded(t, a, b, c, n):
    t.launch_bounds(256, 4)
    acc = t.local((8, 8), np.float32)
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    for k in range(n):
        for r in range(8):
            for q in range(8):
                acc[r, q] += a[k * 8 + r] * b[k * 8 + q] * i
    for r in range(8):
        for q in range(8):
            c[i * 64 + r * 8 + q] = acc[r, q]


def _bounded_args(n=4):
    return (np.ones(8 * n, np.float32), np.ones(8 * n, np.float32),
            np.zeros(256 * 64, np.float32), n)


def test_launch_bounds_reach_the_signature_and_refuse_a_bigger_block():
    src = to_cuda(bounded, *_bounded_args())
    assert 'void __launch_bounds__(256, 4) bounded(' in src and src.kernel_name == "bounded"
    a, b, c, n = _bounded_args()
    run(bounded, 1, 256, a, b, c, n)
    np.testing.assert_array_equal(c.reshape(256, 64), np.repeat(np.arange(256.0)[:, None] * n,
                                                                 64, axis=1))
    with pytest.raises(ValueError, match=r"more than the t\.launch_bounds\(256\)"):
        run(bounded, 1, 512, *_bounded_args())


@needs_nvrtc
def test_launch_bounds_cap_the_registers_nvrtc_gives():
    # 4 blocks of 256 threads on an SM of 65,536 registers leave 64 per thread
    assert compile(bounded, *_bounded_args(), exact=False).registers_per_thread <= 64


def test_launch_bounds_belong_at_the_top_level():
    with pytest.raises(KernelLanguageError, match="top level"):
        validate("def k(t, out, n):\n    if n > 0:\n        t.launch_bounds(128)\n"
                 "    out[0] = 1.0\n")
    with pytest.raises(KernelLanguageError, match=r"known when"):
        validate("def k(t, out, n):\n    t.launch_bounds(n)\n    out[0] = 1.0\n")
