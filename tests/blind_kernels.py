"""A set of kernels written apart from the performance model's calibration, to test it blind.

Each :class:`Case` is a kernel in the course's kernel language, a launch and an input maker at
two sizes: ``full`` (what the H200 ran, ``tools/device/blind_h200.py``, recorded in
``tests/data/h200_blind.json``) and ``small`` (what ``tests/test_blind_kernels.py`` runs in the
simulator against NumPy).  ``make(size)`` returns ``(grid, block, args)``; ``check(args)``
compares what the kernel wrote with NumPy (a tolerance where float sums run in another order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TB = 32          # transpose tile
BK = 16          # matrix-product tile


def _rng():
    return np.random.default_rng(7)


def _f32(n):
    return _rng().standard_normal(n).astype(np.float32)


def _cdiv(a, b):
    return -(-a // b)


# -- bandwidth-bound ----------------------------------------------------------------------------

def blind_scale_add(t, x, y, out, a, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


def blind_copy_vec4(t, x, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if 4 * i < n:
        v0, v1, v2, v3 = t.vload(x, 4 * i, 4)
        t.vstore(out, 4 * i, (v0, v1, v2, v3))


# -- strided and array-of-structs reads ----------------------------------------------------------

def blind_strided(t, x, out, stride, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        out[i] = x[i * stride]


def blind_aos_field(t, s, out, n):
    # s holds n records {float x, y, z, w}; read the y field of each
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        out[i] = s[4 * i + 1] * 2.0


# -- arithmetic ---------------------------------------------------------------------------------

def blind_fma_chain(t, x, out, iters, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        v = x[i]
        for _k in range(iters):
            v = v * 0.999 + 0.001
        out[i] = v


def blind_fma_ilp4(t, x, out, iters, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        v0 = x[i]
        v1 = v0 + 1.0
        v2 = v0 + 2.0
        v3 = v0 + 3.0
        for _k in range(iters):
            v0 = v0 * 0.999 + 0.001
            v1 = v1 * 0.999 + 0.001
            v2 = v2 * 0.999 + 0.001
            v3 = v3 * 0.999 + 0.001
        out[i] = v0 + v1 + v2 + v3


def blind_sfu(t, x, out, iters, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        v = x[i]
        for _k in range(iters):
            v = np.sin(v) + np.exp(v * -0.5)
        out[i] = v


def blind_divergent_half(t, x, out, iters, n):
    # lanes 0-15 take one loop, lanes 16-31 the other: each warp runs both
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        v = x[i]
        if t.lane < 16:
            for _k in range(iters):
                v = v * 0.999 + 0.001
        else:
            for _k in range(iters):
                v = v * 0.998 - 0.002
        out[i] = v


def blind_divergent_warp(t, x, out, iters, n):
    # the same two loops, chosen per warp: no warp runs both
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        v = x[i]
        if t.warp % 2 == 0:
            for _k in range(iters):
                v = v * 0.999 + 0.001
        else:
            for _k in range(iters):
                v = v * 0.998 - 0.002
        out[i] = v


# -- transposes ---------------------------------------------------------------------------------

def blind_transpose_naive(t, a, out, n):
    x = t.block_idx.x * TB + t.thread_idx.x
    y0 = t.block_idx.y * TB + t.thread_idx.y
    for r in range(0, TB, 8):
        out[x * n + y0 + r] = a[(y0 + r) * n + x]


def blind_transpose_shared(t, a, out, n):
    tile = t.shared((TB, TB), np.float32)
    x = t.block_idx.x * TB + t.thread_idx.x
    y = t.block_idx.y * TB + t.thread_idx.y
    for r in range(0, TB, 8):
        tile[t.thread_idx.y + r, t.thread_idx.x] = a[(y + r) * n + x]
    t.sync()
    x2 = t.block_idx.y * TB + t.thread_idx.x
    y2 = t.block_idx.x * TB + t.thread_idx.y
    for r in range(0, TB, 8):
        out[(y2 + r) * n + x2] = tile[t.thread_idx.x, t.thread_idx.y + r]


def blind_transpose_padded(t, a, out, n):
    tile = t.shared((TB, TB + 1), np.float32)
    x = t.block_idx.x * TB + t.thread_idx.x
    y = t.block_idx.y * TB + t.thread_idx.y
    for r in range(0, TB, 8):
        tile[t.thread_idx.y + r, t.thread_idx.x] = a[(y + r) * n + x]
    t.sync()
    x2 = t.block_idx.y * TB + t.thread_idx.x
    y2 = t.block_idx.x * TB + t.thread_idx.y
    for r in range(0, TB, 8):
        out[(y2 + r) * n + x2] = tile[t.thread_idx.x, t.thread_idx.y + r]


# -- reductions ---------------------------------------------------------------------------------

def blind_reduce_tree(t, x, out, n):
    s = t.shared(256, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    s[tid] = x[i] if i < n else 0.0
    t.sync()
    for h in (128, 64, 32, 16, 8, 4, 2, 1):
        if tid < h:
            s[tid] += s[tid + h]
        t.sync()
    if tid == 0:
        out[t.block_idx.x] = s[0]


def blind_reduce_shfl(t, x, out, n):
    ws = t.shared(8, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * t.block_dim.x + tid
    v = x[i] if i < n else 0.0
    for d in (16, 8, 4, 2, 1):
        v += t.shfl_down(v, d)
    if t.lane == 0:
        ws[t.warp] = v
    t.sync()
    w = ws[t.lane] if t.lane < 8 else 0.0
    for d in (4, 2, 1):
        w += t.shfl_down(w, d)
    if tid == 0:
        out[t.block_idx.x] = w


# -- atomics ------------------------------------------------------------------------------------

def blind_atomic_block(t, y, counts, n):
    # every thread of a block adds to that block's counter
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        t.atomic_add(counts, t.block_idx.x, y[i])


def blind_histogram(t, v, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if i < n:
        t.atomic_add(hist, v[i], 1)


# -- launch shapes ------------------------------------------------------------------------------

def blind_tiny(t, x, out, n):
    i = t.thread_idx.x
    if i < n:
        out[i] = x[i] + 1.0


def blind_few_warps(t, x, out, n):
    # 32 blocks of 64 threads stream the whole array (a grid-stride loop)
    j = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    stride = t.grid_dim.x * t.block_dim.x
    while j < n:
        out[j] = x[j] * 2.0
        j += stride


# -- a tiled matrix product and a stencil ----------------------------------------------------------

def blind_matmul_tiled(t, a, b, c, n):
    sa = t.shared((BK, BK), np.float32)
    sb = t.shared((BK, BK), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * BK + ty
    col = t.block_idx.x * BK + tx
    acc = 0.0
    for k0 in range(0, n, BK):
        sa[ty, tx] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(BK):
            acc += sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


def blind_stencil5(t, a, out, n):
    x = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    y = t.block_idx.y * t.block_dim.y + t.thread_idx.y
    if 0 < x < n - 1 and 0 < y < n - 1:
        c = y * n + x
        out[c] = 0.5 * a[c] + 0.125 * (a[c - 1] + a[c + 1] + a[c - n] + a[c + n])


# -- the cases ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """A kernel, its category, and its launch and inputs at the two sizes."""

    name: str
    category: str
    kernel: object
    full: int
    small: int
    make: object      # size -> (grid, block, args)
    check: object     # args after the run -> None (raises AssertionError)


def _close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _equal(got, want):
    np.testing.assert_array_equal(got, want)


def _ew(n, per_thread=1, block=256):
    return (_cdiv(_cdiv(n, per_thread), block),), (block,)


def _mk_scale_add(n):
    x, y = _f32(n), _f32(n)[::-1].copy()
    return (*_ew(n), (x, y, np.zeros(n, np.float32), np.float32(1.5), n))


def _ck_scale_add(args):
    x, y, out, a, _ = args
    _equal(out, a * x + y)


def _mk_copy4(n):
    return (*_ew(n, 4), (_f32(n), np.zeros(n, np.float32), n))


def _mk_strided(stride):
    def make(n):
        return (*_ew(n), (_f32(n * stride), np.zeros(n, np.float32), stride, n))
    return make


def _ck_strided(args):
    x, out, stride, n = args
    _equal(out, x[::stride][:n])


def _mk_aos(n):
    return (*_ew(n), (_f32(4 * n), np.zeros(n, np.float32), n))


def _chain(v, iters, a, b):
    v = v.copy()
    for _ in range(iters):
        v = (v * np.float32(a)).astype(np.float32) + np.float32(b)
    return v.astype(np.float32)


def _mk_arith(iters):
    def make(n):
        return (*_ew(n), (_f32(n), np.zeros(n, np.float32), iters, n))
    return make


def _ck_chain(args):
    x, out, iters, _ = args
    _equal(out, _chain(x, iters, 0.999, 0.001))


def _ck_ilp4(args):
    x, out, iters, _ = args
    vs = [_chain((x + np.float32(c)).astype(np.float32), iters, 0.999, 0.001) for c in range(4)]
    _equal(out, ((vs[0] + vs[1]) + vs[2]) + vs[3])


def _ck_sfu(args):
    x, out, iters, _ = args
    v = x.copy()
    for _ in range(iters):
        v = (np.sin(v) + np.exp(v * np.float32(-0.5))).astype(np.float32)
    _close(out, v, rtol=1e-4, atol=1e-5)


def _ck_divergent(lanes_of):
    def check(args):
        x, out, iters, n = args
        first = lanes_of(np.arange(n))
        want = np.where(first, _chain(x, iters, 0.999, 0.001), _chain(x, iters, 0.998, -0.002))
        _equal(out, want)
    return check


def _mk_square(n):
    a = _f32(n * n)
    return (n // TB, n // TB), (TB, 8), (a, np.zeros(n * n, np.float32), n)


def _ck_transpose(args):
    a, out, n = args
    _equal(out.reshape(n, n), a.reshape(n, n).T)


def _mk_reduce(n):
    return (*_ew(n), (_f32(n), np.zeros(_cdiv(n, 256), np.float32), n))


def _ck_reduce(args):
    x, out, n = args
    pad = np.zeros(len(out) * 256, np.float32)
    pad[:n] = x
    _close(out, pad.reshape(-1, 256).sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-4)


def _mk_atomic_block(n):
    y = _rng().integers(0, 4, n).astype(np.int32)
    return (*_ew(n), (y, np.zeros(_cdiv(n, 256), np.int32), n))


def _ck_atomic_block(args):
    y, counts, _n = args
    _equal(counts, y.reshape(-1, 256).sum(axis=1))


def _mk_hist(n):
    return (*_ew(n), (_rng().integers(0, 256, n).astype(np.int32), np.zeros(256, np.int32), n))


def _ck_hist(args):
    v, hist, _ = args
    _equal(hist, np.bincount(v, minlength=256))


def _mk_tiny(n):
    return (1,), (n,), (_f32(n), np.zeros(n, np.float32), n)


def _ck_plus1(args):
    x, out, _ = args
    _equal(out, x + np.float32(1.0))


def _mk_few(n):
    return (32,), (64,), (_f32(n), np.zeros(n, np.float32), n)


def _ck_twice(args):
    x, out, _ = args
    _equal(out, x * np.float32(2.0))


def _mk_matmul(n):
    a, b = _f32(n * n), _f32(n * n)[::-1].copy()
    return (n // BK, n // BK), (BK, BK), (a, b, np.zeros(n * n, np.float32), n)


def _ck_matmul(args):
    a, b, c, n = args
    want = a.reshape(n, n).astype(np.float64) @ b.reshape(n, n).astype(np.float64)
    _close(c.reshape(n, n), want, rtol=1e-4, atol=1e-3 * np.sqrt(n))


def _mk_stencil(n):
    return (n // 32, n // 8), (32, 8), (_f32(n * n), np.zeros(n * n, np.float32), n)


def _ck_stencil(args):
    a, out, n = args
    a2, o2 = a.reshape(n, n), out.reshape(n, n)
    f = np.float32
    want = np.zeros((n, n), np.float32)
    want[1:-1, 1:-1] = f(0.5) * a2[1:-1, 1:-1] + f(0.125) * (
        ((a2[1:-1, :-2] + a2[1:-1, 2:]) + a2[:-2, 1:-1]) + a2[2:, 1:-1])
    _equal(o2, want)


CASES = (
    Case("scale_add", "bandwidth", blind_scale_add, 1 << 24, 1000, _mk_scale_add, _ck_scale_add),
    Case("copy_vec4", "bandwidth", blind_copy_vec4, 1 << 25, 1024, _mk_copy4,
         lambda args: _equal(args[1], args[0])),
    Case("stride2", "strided", blind_strided, 1 << 23, 1000, _mk_strided(2), _ck_strided),
    Case("stride32", "strided", blind_strided, 1 << 21, 1000, _mk_strided(32), _ck_strided),
    Case("aos_field", "array of structs", blind_aos_field, 1 << 23, 1000, _mk_aos,
         lambda args: _equal(args[1], args[0][1::4] * np.float32(2.0))),
    Case("fma_chain", "FMA, no ILP", blind_fma_chain, 1 << 16, 512, _mk_arith(4096), _ck_chain),
    Case("fma_ilp4", "FMA, 4 chains", blind_fma_ilp4, 1 << 16, 512, _mk_arith(1024), _ck_ilp4),
    Case("sfu", "SFU (sin, exp)", blind_sfu, 1 << 20, 512, _mk_arith(64), _ck_sfu),
    Case("divergent_half", "divergence", blind_divergent_half, 1 << 20, 512, _mk_arith(256),
         _ck_divergent(lambda i: i % 32 < 16)),
    Case("divergent_warp", "warp-uniform branch", blind_divergent_warp, 1 << 20, 512,
         _mk_arith(256), _ck_divergent(lambda i: (i % 256) // 32 % 2 == 0)),
    Case("transpose_naive", "transpose", blind_transpose_naive, 4096, 64, _mk_square,
         _ck_transpose),
    Case("transpose_shared", "transpose", blind_transpose_shared, 4096, 64, _mk_square,
         _ck_transpose),
    Case("transpose_padded", "transpose", blind_transpose_padded, 4096, 64, _mk_square,
         _ck_transpose),
    Case("reduce_tree", "reduction", blind_reduce_tree, 1 << 24, 1000, _mk_reduce, _ck_reduce),
    Case("reduce_shfl", "reduction", blind_reduce_shfl, 1 << 24, 1000, _mk_reduce, _ck_reduce),
    Case("atomic_block", "atomics", blind_atomic_block, 1 << 22, 1024, _mk_atomic_block,
         _ck_atomic_block),
    Case("histogram", "atomics", blind_histogram, 1 << 24, 1000, _mk_hist, _ck_hist),
    Case("tiny", "tiny launch", blind_tiny, 4, 4, _mk_tiny, _ck_plus1),
    Case("few_warps", "too few warps", blind_few_warps, 1 << 22, 5000, _mk_few, _ck_twice),
    Case("matmul_tiled", "matrix product", blind_matmul_tiled, 2048, 32, _mk_matmul, _ck_matmul),
    Case("stencil5", "stencil", blind_stencil5, 8192, 64, _mk_stencil, _ck_stencil),
)
BY_NAME = {c.name: c for c in CASES}
