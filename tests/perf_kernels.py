"""The performance model's validation kernels: written apart from the puzzles, one for each
mechanism the model claims to capture, each with its full-size launch and inputs.

``tools/device/perf_calibration.py`` times every one on a GPU with
``gpu_lessons.kernels.run_on_gpu`` (and profiles it with Nsight Compute); the record is
``tests/data/h200_perf_validation.json`` and ``tests/test_perf_model.py`` replays it against
``gpu_lessons.predict_time``.  Nothing in the model is fitted to these times.

``CASES``: name -> (kernel, make(rng) -> (grid, block, args)).  Inputs are random, never zeros.
"""

import numpy as np

# -- streaming ------------------------------------------------------------------------------------


def pv_copy(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    out[i] = a[i]


def pv_copy_ilp4(t, a, out, n):
    base = t.block_idx.x * 1024 + t.thread_idx.x
    x0 = a[base]
    x1 = a[base + 256]
    x2 = a[base + 512]
    x3 = a[base + 768]
    out[base] = x0 * 3
    out[base + 256] = x1 * 3
    out[base + 512] = x2 * 3
    out[base + 768] = x3 * 3


def pv_strided(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    out[i] = a[i * 8] + 1


def pv_aos(t, pts, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    x = pts[i * 4]
    y = pts[i * 4 + 1]
    z = pts[i * 4 + 2]
    out[i] = x * x + y * y + z * z


def pv_stencil(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if((i < 3) | (i >= n - 3))
    out[i] = (a[i - 3] + a[i - 2] + a[i - 1] + a[i] + a[i + 1] + a[i + 2] + a[i + 3]) * 0.25


def pv_few_warps(t, a, out, n):
    step = t.grid_dim.x * t.block_dim.x
    i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        out[i] = a[i] * 2
        i[...] = i + step


def pv_tiny(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    out[i] = a[i] * 2 + 1


# -- arithmetic -----------------------------------------------------------------------------------


def pv_fma_chain(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = a[i]
    for _k in range(512):
        x = x * 0.999 + 0.5
    out[i] = x


def pv_fma_ilp(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0 = a[i]
    x1 = x0 + 1
    x2 = x0 + 2
    x3 = x0 + 3
    for _k in range(128):
        x0 = x0 * 0.999 + 0.5
        x1 = x1 * 0.999 + 0.5
        x2 = x2 * 0.999 + 0.5
        x3 = x3 * 0.999 + 0.5
    out[i] = x0 + x1 + x2 + x3


def pv_fma_chain_few(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = a[i]
    for _k in range(4096):
        x = x * 0.999 + 0.5
    out[i] = x


def pv_sfu(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = a[i]
    s = x * 0
    for _k in range(32):
        s = s + np.exp(x * -0.5)
        x = x + 0.125
    out[i] = s


def pv_fp64(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = a[i]
    y = x + 1
    for _k in range(128):
        x = x * 0.999 + 0.5
        y = y * 0.999 + 0.25
    out[i] = x + y


def pv_divergent(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = t.local(a[i])
    with t.if_(t.thread_idx.x % 32 < 8):
        for _k in range(64):
            x[...] = x * 0.999 + 0.5
    with t.else_():
        for _k in range(64):
            x[...] = x * 0.998 + 0.25
    out[i] = x


# -- shared memory, barriers ------------------------------------------------------------------------


def pv_transpose_naive(t, a, out, n):
    col = t.block_idx.x * 32 + t.thread_idx.x
    row = t.block_idx.y * 32 + t.thread_idx.y
    out[col * n + row] = a[row * n + col]


def pv_transpose_conflicts(t, a, out, n):
    tile = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty]


def pv_transpose_padded(t, a, out, n):
    tile = t.shared((32, 33), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty]


def pv_block_reduce(t, x, out, n):
    buf = t.shared(512, np.float32)
    tid = t.thread_idx.x
    i = t.block_idx.x * 1024 + tid
    buf[tid] = x[i] + x[i + 512]
    t.sync()
    s = 256
    while s > 0:
        with t.if_(tid < s):
            buf[tid] = buf[tid] + buf[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = buf[0]


def pv_matmul_tiled(t, a, b, c, n):
    sa = t.shared((32, 32), np.float32)
    sb = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 32 + ty
    col = t.block_idx.x * 32 + tx
    acc = t.local(0.0, np.float32)
    for k0 in range(0, n, 32):
        sa[ty, tx] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(32):
            acc[...] = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


# -- atomics --------------------------------------------------------------------------------------


def pv_atomic_bins(t, x, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    t.atomic_add(hist, x[i], 1)


def pv_atomic_spread(t, x, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    t.atomic_add(hist, x[i], 1)


def pv_shared_hist(t, x, hist, n):
    bins = t.shared(256, np.int32)
    tid = t.thread_idx.x
    bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 1024 + tid
    for k in range(4):
        t.atomic_add(bins, x[i + k * 256], 1)
    t.sync()
    t.atomic_add(hist, tid, bins[tid])


def _f32(rng, n):
    return rng.standard_normal(n).astype(np.float32) + 2


def _copy(rng):
    n = 1 << 25
    return (n // 256,), (256,), (_f32(rng, n), np.full(n, -1, np.float32), n)


def _copy_ilp4(rng):
    n = 1 << 25
    return (n // 1024,), (256,), (_f32(rng, n), np.full(n, -1, np.float32), n)


def _strided(rng):
    n = 1 << 22
    return (n // 256,), (256,), (_f32(rng, 8 * n), np.full(n, -1, np.float32), n)


def _aos(rng):
    n = 1 << 23
    return (n // 256,), (256,), (_f32(rng, 4 * n), np.full(n, -1, np.float32), n)


def _stencil(rng):
    n = 1 << 25
    return (n // 256,), (256,), (_f32(rng, n), np.full(n, -1, np.float32), n)


def _few_warps(rng):
    n = 1 << 23
    return (132,), (32,), (_f32(rng, n), np.full(n, -1, np.float32), n)


def _tiny(rng):
    n = 1000
    return (4,), (256,), (_f32(rng, n), np.full(n, -1, np.float32), n)


def _arith(blocks, threads):
    def make(rng):
        n = blocks * threads
        return (blocks,), (threads,), (_f32(rng, n), np.full(n, -1, np.float32), n)
    return make


def _fp64(rng):
    n = 1 << 20
    return (n // 256,), (256,), (rng.standard_normal(n) + 2, np.full(n, -1.0), n)


def _transpose(rng):
    n = 4096
    return (n // 32, n // 32), (32, 32), (_f32(rng, n * n), np.full(n * n, -1, np.float32), n)


def _block_reduce(rng):
    n = 1 << 25
    return (n // 1024,), (512,), (_f32(rng, n), np.full(n // 1024, -1, np.float32), n)


def _matmul(rng):
    n = 2048
    return ((n // 32, n // 32), (32, 32),
            (_f32(rng, n * n), _f32(rng, n * n), np.full(n * n, -1, np.float32), n))


def _bins(nbins, n=1 << 24):
    def make(rng):
        x = rng.integers(0, nbins, n).astype(np.int32)
        return (n // 256,), (256,), (x, np.zeros(nbins, np.int32), n)
    return make


def _shared_hist(rng):
    n = 1 << 24
    x = rng.integers(0, 256, n).astype(np.int32)
    return (n // 1024,), (256,), (x, np.zeros(256, np.int32), n)


#: name -> (kernel, make(rng) -> (grid, block, args), the mechanism it stands for)
CASES = {
    "copy": (pv_copy, _copy, "bandwidth-bound, one load per thread"),
    "copy_ilp4": (pv_copy_ilp4, _copy_ilp4, "bandwidth-bound, four loads in flight per thread"),
    "strided": (pv_strided, _strided, "stride-8 reads: 8 sectors for every one used"),
    "aos": (pv_aos, _aos, "array of structures: three of four fields read"),
    "stencil": (pv_stencil, _stencil, "7-point stencil from global memory (L1/L2 reuse)"),
    "few_warps": (pv_few_warps, _few_warps, "one warp per SM: too little parallelism"),
    "tiny": (pv_tiny, _tiny, "a tiny launch: the launch overhead"),
    "fma_chain": (pv_fma_chain, _arith(4096, 256), "one dependent multiply-add chain"),
    "fma_ilp": (pv_fma_ilp, _arith(4096, 256), "four independent multiply-add chains"),
    "fma_chain_few": (pv_fma_chain_few, _arith(132, 128), "a dependent chain, 4 warps per SM"),
    "sfu": (pv_sfu, _arith(4096, 256), "exp-heavy"),
    "fp64": (pv_fp64, _fp64, "float64 multiply-add chains"),
    "divergent": (pv_divergent, _arith(4096, 256), "both sides of a branch in every warp"),
    "transpose_naive": (pv_transpose_naive, _transpose, "transpose, uncoalesced writes"),
    "transpose_conflicts": (pv_transpose_conflicts, _transpose,
                            "shared-memory transpose, 32-way bank conflicts"),
    "transpose_padded": (pv_transpose_padded, _transpose, "shared-memory transpose, padded"),
    "block_reduce": (pv_block_reduce, _block_reduce, "shared-memory tree reduction"),
    "matmul_tiled": (pv_matmul_tiled, _matmul, "32 x 32 tiled matrix product, n = 2048"),
    "atomic_bins": (pv_atomic_bins, _bins(64), "global atomics on 64 bins"),
    "atomic_spread": (pv_atomic_spread, _bins(1 << 20), "global atomics on a million bins"),
    "shared_hist": (pv_shared_hist, _shared_hist, "shared-memory atomics, 256 bins"),
}
