"""Worked kernels for every puzzle of ``gpu_lessons.puzzles`` (instructors' copy).

These are the answers: they are not part of the package a learner installs.  Each function is
named after its puzzle (``<puzzle id>_kernel``) and is, character for character, the kernel
cell of the matching solution notebook (``tests/test_puzzles.py`` keeps the two in step).
Tests and tools load this file by path::

    spec = importlib.util.spec_from_file_location("puzzle_kernels", "solutions/puzzle_kernels.py")

Every kernel is one self-contained function in the kernel language: its arguments, ``t``,
``np``, numbers and locals.
"""

import ml_dtypes
import numpy as np

# -- lesson 02: threads, warps and SMs ------------------------------------------------------------


def map_kernel(t, a, out):
    i = t.thread_idx.x
    out[i] = a[i] + 10


def zip_kernel(t, a, b, out):
    i = t.thread_idx.x
    out[i] = a[i] + b[i]


def guard_kernel(t, a, out, n):
    i = t.thread_idx.x
    t.return_if(i >= n)
    out[i] = a[i] + 10


def map_2d_kernel(t, a, out, n):
    row = t.thread_idx.y
    col = t.thread_idx.x
    t.return_if((row >= n) | (col >= n))
    out[row * n + col] = a[row * n + col] + 10


def broadcast_kernel(t, a, b, out, n, m):
    i = t.thread_idx.y
    j = t.thread_idx.x
    t.return_if((i >= n) | (j >= m))
    out[i * m + j] = a[i] + b[j]


def blocks_kernel(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    out[i] = a[i] + 10


def blocks_2d_kernel(t, a, out, rows, cols):
    row = t.block_idx.y * 16 + t.thread_idx.y
    col = t.block_idx.x * 16 + t.thread_idx.x
    t.return_if((row >= rows) | (col >= cols))
    out[row * cols + col] = a[row * cols + col] * 2


def split_work_kernel(t, a, b, out_a, out_b, n):
    g = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    # n is a multiple of 32: threads 0..n-1 fill whole warps, so no warp runs both paths
    with t.if_(g < n):
        out_a[g] = a[g] * 2
    with t.else_():
        j = g - n
        out_b[j] = b[j] + 1


# -- lesson 03: the memory hierarchy ------------------------------------------------------------


def stencil_kernel(t, x, out, n):
    tile = t.shared(130, np.float32)          # the block's 128 values and one on each side
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    tile[tid + 1] = x[i]
    with t.if_((tid == 0) & (i > 0)):
        tile[0] = x[i - 1]
    with t.if_((tid == 0) & (i == 0)):
        tile[0] = 0.0
    last = (tid == 127) | (i == n - 1)        # the block's last thread that has a value
    with t.if_(last & (i + 1 < n)):
        tile[tid + 2] = x[i + 1]
    with t.if_(last & (i + 1 >= n)):
        tile[tid + 2] = 0.0
    t.sync()
    out[i] = tile[tid] + tile[tid + 1] + tile[tid + 2]


def dot_kernel(t, a, b, out):
    cache = t.shared(t.block_dim.x, np.float32)
    tid = t.thread_idx.x
    cache[tid] = a[tid] * b[tid]
    s = t.block_dim.x // 2
    while s > 0:
        t.sync()                              # the values this step reads are written
        with t.if_(tid < s):
            cache[tid] = cache[tid] + cache[tid + s]
        s //= 2
    with t.if_(tid == 0):
        out[0] = cache[0]


def histogram_global_kernel(t, x, hist, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    t.atomic_add(hist, x[i], 1)


def histogram_shared_kernel(t, x, hist, n):
    bins = t.shared(16, np.int32)             # this block's private histogram
    tid = t.thread_idx.x
    with t.if_(tid < 16):
        bins[tid] = 0
    t.sync()
    i = t.block_idx.x * 128 + tid
    with t.if_(i < n):
        t.atomic_add(bins, x[i], 1)
    t.sync()
    with t.if_(tid < 16):                     # one global atomic per bin, all different
        t.atomic_add(hist, tid, bins[tid])


# -- lesson 04: coalescing and banks ------------------------------------------------------------


def aos_to_soa_kernel(t, aos, x, y, z, n):
    tile = t.shared(384, np.float32)          # the block's 128 structs as they lie in memory
    tid = t.thread_idx.x
    first = t.block_idx.x * 384
    for k in range(3):                        # consecutive lanes copy consecutive floats
        j = k * 128 + tid
        with t.if_(first + j < 3 * n):
            tile[j] = aos[first + j]
    t.sync()
    i = t.block_idx.x * 128 + tid
    t.return_if(i >= n)
    x[i] = tile[3 * tid]                      # stride 3 words: 32 different banks
    y[i] = tile[3 * tid + 1]
    z[i] = tile[3 * tid + 2]


def transpose_naive_kernel(t, a, out, n):
    i = t.block_idx.y * 32 + t.thread_idx.y    # row of a
    j = t.block_idx.x * 32 + t.thread_idx.x    # column of a: lanes read along a row
    out[j * n + i] = a[i * n + j]


def transpose_tiled_kernel(t, a, out, n):
    tile = t.shared((32, 32), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty]


def transpose_kernel(t, a, out, n):
    tile = t.shared((32, 33), np.float32)     # one spare column: a tile column spans 32 banks
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    tile[ty, tx] = a[(t.block_idx.y * 32 + ty) * n + t.block_idx.x * 32 + tx]
    t.sync()
    out[(t.block_idx.x * 32 + ty) * n + t.block_idx.y * 32 + tx] = tile[tx, ty]


# -- lesson 05: roofline ------------------------------------------------------------------------


def matmul_naive_kernel(t, a, b, c, n):
    row = t.block_idx.y * 16 + t.thread_idx.y
    col = t.block_idx.x * 16 + t.thread_idx.x
    t.return_if((row >= n) | (col >= n))
    acc = 0.0
    for k in range(n):
        acc = acc + a[row * n + k] * b[k * n + col]
    c[row * n + col] = acc


def matmul_tiled_kernel(t, a, b, c, n):
    sa = t.shared((16, 16), np.float32)
    sb = t.shared((16, 16), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty
    col = t.block_idx.x * 16 + tx
    acc = 0.0
    for k0 in range(0, n, 16):
        sa[ty, tx] = a[row * n + k0 + tx]
        sb[ty, tx] = b[(k0 + ty) * n + col]
        t.sync()
        for k in range(16):
            acc = acc + sa[ty, k] * sb[k, tx]
        t.sync()
    c[row * n + col] = acc


# -- lesson 06: occupancy and latency hiding ----------------------------------------------------


def ilp_kernel(t, x, out, n):
    i = t.block_idx.x * 512 + t.thread_idx.x  # elements i, i + 128, i + 256, i + 384
    x0 = x[i]
    x1 = x[i + 128]
    x2 = x[i + 256]
    x3 = x[i + 384]
    out[i] = x0 * 2 + 1
    out[i + 128] = x1 * 2 + 1
    out[i + 256] = x2 * 2 + 1
    out[i + 384] = x3 * 2 + 1


BLOCK = 256  # threads per block: all 64 warps resident at its 20 registers


def occupancy_kernel(t, x, out, n):
    size = t.block_dim.x
    tile = t.shared(size + 8, np.float32)     # the block's values and 4 more on each side
    tid = t.thread_idx.x
    start = t.block_idx.x * size
    i = start + tid
    with t.if_(i < n):
        tile[tid + 4] = x[i]
    with t.else_():
        tile[tid + 4] = 0.0
    with t.if_(tid < 4):
        left = start - 4 + tid
        with t.if_(left >= 0):
            tile[tid] = x[left]
        with t.else_():
            tile[tid] = 0.0
        right = start + size + tid
        with t.if_(right < n):
            tile[size + 4 + tid] = x[right]
        with t.else_():
            tile[size + 4 + tid] = 0.0
    t.sync()
    with t.if_(i < n):
        acc = tile[tid]
        for k in range(1, 9):
            acc = acc + tile[tid + k]
        out[i] = acc


# -- lesson 07: the optimisation playbook -------------------------------------------------------


def reduce_tree_kernel(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    s = 1
    while s < 256:
        t.sync()                              # the values this step reads are written
        with t.if_(tid % (2 * s) == 0):       # correct, but lanes of every warp idle
            sdata[tid] = sdata[tid] + sdata[tid + s]
        s *= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_warp_uniform_kernel(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    s = 1
    while s < 256:
        t.sync()
        index = 2 * s * tid                   # threads 0, 1, 2, ... do the additions
        with t.if_(index < 256):
            sdata[index] = sdata[index] + sdata[index + s]
        s *= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_kernel(t, x, out):
    sdata = t.shared(256, np.float32)
    tid = t.thread_idx.x
    sdata[tid] = x[t.block_idx.x * 256 + tid]
    s = 128
    while s > 0:
        t.sync()
        with t.if_(tid < s):                  # a warp reads 32 consecutive words
            sdata[tid] = sdata[tid] + sdata[tid + s]
        s //= 2
    with t.if_(tid == 0):
        out[t.block_idx.x] = sdata[0]


def reduce_shuffle_kernel(t, x, out):
    totals = t.shared(8, np.float32)          # one total per warp
    tid = t.thread_idx.x
    v = x[t.block_idx.x * 256 + tid]
    d = 16
    while d > 0:                              # the warp's 32 values, in registers
        v = v + t.shfl_down(v, d)
        d //= 2
    with t.if_(t.lane == 0):
        totals[t.warp] = v
    t.sync()
    with t.if_(t.warp == 0):
        w = t.local(0.0, np.float32)
        with t.if_(tid < 8):
            w[...] = totals[tid]
        d = 4
        while d > 0:
            w[...] = w + t.shfl_down(w, d)
            d //= 2
        with t.if_(tid == 0):
            out[t.block_idx.x] = w


def scan_hillis_steele_kernel(t, x, out):
    buf = t.shared((2, 128), np.float32)      # read one row, write the other, then swap
    tid = t.thread_idx.x
    i = t.block_idx.x * 128 + tid
    buf[0, tid] = x[i]
    src = 0
    offset = 1
    while offset < 128:
        t.sync()                              # row src is written
        dst = 1 - src
        with t.if_(tid >= offset):
            buf[dst, tid] = buf[src, tid] + buf[src, tid - offset]
        with t.else_():
            buf[dst, tid] = buf[src, tid]
        src = dst
        offset *= 2
    out[i] = buf[src, tid]


def scan_blelloch_kernel(t, x, out):
    # one spare word after every 32 (GPU Gems 3, chapter 39): the tree's strided pairs
    # would otherwise land on a few banks
    temp = t.shared(132, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * 128
    temp[tid + tid // 32] = x[base + tid]
    temp[tid + 64 + (tid + 64) // 32] = x[base + tid + 64]
    offset = 1
    d = 64
    while d > 0:                              # up-sweep: partial sums up the tree
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            temp[bi + bi // 32] = temp[bi + bi // 32] + temp[ai + ai // 32]
        offset *= 2
        d //= 2
    with t.if_(tid == 0):
        temp[127 + 127 // 32] = 0.0
    d = 1
    while d < 128:                            # down-sweep: prefix sums down the tree
        offset //= 2
        t.sync()
        with t.if_(tid < d):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            ai = ai + ai // 32
            bi = bi + bi // 32
            left = temp[ai]
            right = temp[bi]
            temp[ai] = right
            temp[bi] = right + left
        d *= 2
    t.sync()
    out[base + tid] = temp[tid + tid // 32]
    out[base + tid + 64] = temp[tid + 64 + (tid + 64) // 32]


def matmul_register_kernel(t, a, b, c, n):
    # rows 24 words apart: the 4 rows of 8 a warp stores start at banks 0, 24, 16 and 8,
    # and the 4 rows of sa it reads (ty = 0..3) fall in 4 different banks
    sa = t.shared((16, 24), np.float32)
    sb = t.shared((16, 24), np.float32)
    tx = t.thread_idx.x
    ty = t.thread_idx.y
    row = t.block_idx.y * 16 + ty             # this thread's rows: row, row + 8
    col = t.block_idx.x * 16 + tx             # its columns: col, col + 8
    c00 = 0.0
    c01 = 0.0
    c10 = 0.0
    c11 = 0.0
    for k0 in range(0, n, 16):
        for di in range(0, 16, 8):
            for dj in range(0, 16, 8):
                sa[ty + di, tx + dj] = a[(row + di) * n + k0 + tx + dj]
                sb[ty + di, tx + dj] = b[(k0 + ty + di) * n + col + dj]
        t.sync()
        for k in range(16):
            a0 = sa[ty, k]
            a1 = sa[ty + 8, k]
            b0 = sb[k, tx]
            b1 = sb[k, tx + 8]
            c00 = c00 + a0 * b0
            c01 = c01 + a0 * b1
            c10 = c10 + a1 * b0
            c11 = c11 + a1 * b1
        t.sync()
    c[row * n + col] = c00
    c[row * n + col + 8] = c01
    c[(row + 8) * n + col] = c10
    c[(row + 8) * n + col + 8] = c11


# -- lesson 07: the matrix-multiply ladder (c = a @ b, a m x k, b k x n, row by row) -------------


def sgemm_1d_blocktile_kernel(t, a, b, c, m, n, k):
    sa = t.shared((64, 8), np.float32)
    sb = t.shared((8, 64), np.float32)
    acc = t.local((8,), np.float32)          # 8 results in registers
    tid = t.thread_idx.x
    row = tid // 64 * 8                      # this thread's rows: row .. row + 7 of the tile
    col = tid % 64                           # and its one column
    row0 = t.block_idx.y * 64
    col0 = t.block_idx.x * 64
    for k0 in range(0, k, 8):
        sa[tid // 8, tid % 8] = a[(row0 + tid // 8) * k + k0 + tid % 8]
        sb[tid // 64, col] = b[(k0 + tid // 64) * n + col0 + col]
        t.sync()
        for kk in range(8):
            bv = sb[kk, col]                 # one load of b feeds 8 multiply-adds
            for i in range(8):
                acc[i] += sa[row + i, kk] * bv
        t.sync()
    for i in range(8):
        c[(row0 + row + i) * n + col0 + col] = acc[i]


def sgemm_2d_blocktile_kernel(t, a, b, c, m, n, k):
    t.launch_bounds(256, 2)                  # 2 blocks an SM: at most 128 registers
    sa = t.shared((128, 8), np.float32)
    sb = t.shared((8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16            # rows ty, ty + 16, ..., ty + 112: a warp's 2 rows are 8 words apart
    tx = tid % 16             # columns tx, tx + 16, ...: 16 consecutive words per load
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    for k0 in range(0, k, 8):
        for p in range(4):
            sa[tid // 8 + 32 * p, tid % 8] = a[(row0 + tid // 8 + 32 * p) * k + k0 + tid % 8]
            sb[tid // 128 + 2 * p, tid % 128] = b[(k0 + tid // 128 + 2 * p) * n + col0
                                                  + tid % 128]
        t.sync()
        for kk in range(8):
            for i in range(8):
                ra[i] = sa[ty + 16 * i, kk]
                rb[i] = sb[kk, tx + 16 * i]
            for i in range(8):              # 16 loads feed 64 multiply-adds
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(8):
        for j in range(8):
            c[(row0 + ty + 16 * i) * n + col0 + tx + 16 * j] = acc[i, j]


def sgemm_vectorized_kernel(t, a, b, c, m, n, k):
    t.launch_bounds(256, 2)                  # 2 blocks an SM: at most 128 registers
    sa = t.shared((8, 132), np.float32)      # a's tile transposed, 4 spare words a row
    sb = t.shared((8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16                           # rows ty * 4 + 0..3 and 64 + ty * 4 + 0..3
    tx = tid % 16                            # likewise the columns
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    arow = tid // 2                          # each thread loads 4 floats of a and 4 of b
    acol = tid % 2 * 4
    brow = tid // 32
    bcol = tid % 32 * 4
    for k0 in range(0, k, 8):
        x0, x1, x2, x3 = t.vload(a, (row0 + arow) * k + k0 + acol, 4)
        sa[acol, arow] = x0
        sa[acol + 1, arow] = x1
        sa[acol + 2, arow] = x2
        sa[acol + 3, arow] = x3
        y0, y1, y2, y3 = t.vload(b, (k0 + brow) * n + col0 + bcol, 4)
        t.vstore(sb, (brow, bcol), (y0, y1, y2, y3))
        t.sync()
        for kk in range(8):
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (kk, ty * 4), 4)
            ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (kk, 64 + ty * 4), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (kk, tx * 4), 4)
            rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (kk, 64 + tx * 4), 4)
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(8):
        r = (row0 + ty * 4 + i % 4 + i // 4 * 64) * n + col0 + tx * 4
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 64, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def sgemm_double_buffered_kernel(t, a, b, c, m, n, k):
    t.launch_bounds(256, 2)                  # 2 blocks an SM: at most 128 registers
    sa = t.shared((2, 8, 132), np.float32)   # two stages: compute on one, fill the other
    sb = t.shared((2, 8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    ga = t.local((4,), np.float32)           # the next tile, on its way through registers
    gb = t.local((4,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16
    tx = tid % 16
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    arow = tid // 2
    acol = tid % 2 * 4
    brow = tid // 32
    bcol = tid % 32 * 4
    ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + acol, 4)
    gb[0], gb[1], gb[2], gb[3] = t.vload(b, brow * n + col0 + bcol, 4)
    for q in range(4):
        sa[0, acol + q, arow] = ga[q]
    t.vstore(sb, (0, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
    t.sync()
    for k0 in range(0, k, 8):
        s = k0 // 8 % 2
        if k0 + 8 < k:                       # start loading the next tile ...
            ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + k0 + 8 + acol, 4)
            gb[0], gb[1], gb[2], gb[3] = t.vload(b, (k0 + 8 + brow) * n + col0 + bcol, 4)
        for kk in range(8):                  # ... compute on this one while it arrives ...
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (s, kk, ty * 4), 4)
            ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (s, kk, 64 + ty * 4), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, kk, tx * 4), 4)
            rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, kk, 64 + tx * 4), 4)
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        if k0 + 8 < k:                       # ... and store it in the other stage
            for q in range(4):
                sa[1 - s, acol + q, arow] = ga[q]
            t.vstore(sb, (1 - s, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
        t.sync()                             # one barrier a tile
    for i in range(8):
        r = (row0 + ty * 4 + i % 4 + i // 4 * 64) * n + col0 + tx * 4
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 64, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def sgemm_warptile_kernel(t, a, b, c, m, n, k):
    t.launch_bounds(256, 2)
    sa = t.shared((2, 8, 132), np.float32)
    sb = t.shared((2, 8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    ga = t.local((4,), np.float32)
    gb = t.local((4,), np.float32)
    tid = t.thread_idx.x
    wr = tid // 64 * 32                      # the warp's 32 x 64 tile of the block's 128 x 128
    wc = tid // 32 % 2 * 64
    # lanes as 4 x 8: rows wr + lr + 0..3 (+ 16), columns wc + lc + 0..3 (+ 32); lanes i and
    # i ^ 1 share a's float4 and lanes i and i ^ 2 share b's, so each half-warp's LDS.128 is
    # one wavefront
    lr = (tid % 32 // 16 * 2 + tid // 2 % 2) * 4
    lc = (tid % 2 + tid % 16 // 4 * 2) * 4
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    arow = tid // 2
    acol = tid % 2 * 4
    brow = tid // 32
    bcol = tid % 32 * 4
    ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + acol, 4)
    gb[0], gb[1], gb[2], gb[3] = t.vload(b, brow * n + col0 + bcol, 4)
    for q in range(4):
        sa[0, acol + q, arow] = ga[q]
    t.vstore(sb, (0, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
    t.sync()
    for k0 in range(0, k, 16):
        for s in range(2):                   # unrolled: each stage's addresses are constants
            kt = k0 + 8 * s
            if kt + 8 < k:
                ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + kt + 8 + acol, 4)
                gb[0], gb[1], gb[2], gb[3] = t.vload(b, (kt + 8 + brow) * n + col0 + bcol, 4)
            for kk in range(8):              # a warp reads 4 + 4 of a's and 8 + 8 of b's float4s
                ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (s, kk, wr + lr), 4)
                ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (s, kk, wr + 16 + lr), 4)
                rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, kk, wc + lc), 4)
                rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, kk, wc + 32 + lc), 4)
                for i in range(8):
                    for j in range(8):
                        acc[i, j] += ra[i] * rb[j]
            if kt + 8 < k:
                for q in range(4):
                    sa[1 - s, acol + q, arow] = ga[q]
                t.vstore(sb, (1 - s, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
            t.sync()
    for i in range(8):
        r = (row0 + wr + i % 4 + i // 4 * 16 + lr) * n + col0 + wc + lc
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 32, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))




# -- lesson 07: tensor cores ------------------------------------------------------------------------


def mma_tile_kernel(t, a, b, c):
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4                    # groupID: rows g and g + 8 of a and c, column g of b
    q = t.lane % 4                     # threadID_in_group: columns 2q, 2q + 1 (and 8 more)
    for i in range(8):
        fa[i] = a[g + 8 * (i // 2 % 2), 2 * q + i % 2 + 8 * (i // 4)]
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def hgemm_mma_kernel(t, a, b, c, m, n, k):
    BM, BN = 128, 128                      # the block's tile of c: (BM / 64) x (BN / 32) warps
    THREADS = BM * BN // 64                # each warp a 64 x 32 tile: 4 x 4 mma tiles
    sa = t.shared((2, BM, 40), ml_dtypes.bfloat16)      # k step 32; rows 80 bytes apart
    sb = t.shared((2, 32, BN + 8), ml_dtypes.bfloat16)  # rows 16 bytes off a bank cycle
    fa0 = t.local((8,), ml_dtypes.bfloat16)
    fa1 = t.local((8,), ml_dtypes.bfloat16)
    fa2 = t.local((8,), ml_dtypes.bfloat16)
    fa3 = t.local((8,), ml_dtypes.bfloat16)
    rb0 = t.local((8,), ml_dtypes.bfloat16)
    rb1 = t.local((8,), ml_dtypes.bfloat16)
    fb0 = t.local((4,), ml_dtypes.bfloat16)
    fb1 = t.local((4,), ml_dtypes.bfloat16)
    fb2 = t.local((4,), ml_dtypes.bfloat16)
    fb3 = t.local((4,), ml_dtypes.bfloat16)
    c00 = t.local((4,), np.float32)
    c01 = t.local((4,), np.float32)
    c02 = t.local((4,), np.float32)
    c03 = t.local((4,), np.float32)
    c10 = t.local((4,), np.float32)
    c11 = t.local((4,), np.float32)
    c12 = t.local((4,), np.float32)
    c13 = t.local((4,), np.float32)
    c20 = t.local((4,), np.float32)
    c21 = t.local((4,), np.float32)
    c22 = t.local((4,), np.float32)
    c23 = t.local((4,), np.float32)
    c30 = t.local((4,), np.float32)
    c31 = t.local((4,), np.float32)
    c32 = t.local((4,), np.float32)
    c33 = t.local((4,), np.float32)
    tid = t.thread_idx.x
    row0 = t.block_idx.y * BM
    col0 = t.block_idx.x * BN
    wm = t.warp // (BN // 32) * 64         # this warp's 64 x 32 of the block's tile
    wn = t.warp % (BN // 32) * 32
    lr = t.lane % 8 + 8 * (t.lane // 8 % 2)
    lc = 8 * (t.lane // 16)
    for j in range(BM * 4 // THREADS):     # a's BM x 32 tile: 4 copies of 8 halves a row
        f = tid + j * THREADS
        t.copy_async(sa, (0, f // 4, f % 4 * 8), a, (row0 + f // 4) * k + f % 4 * 8, 8)
    for j in range(BN * 4 // THREADS):     # b's 32 x BN tile: BN / 8 copies a row
        f = tid + j * THREADS
        t.copy_async(sb, (0, f // (BN // 8), f % (BN // 8) * 8), b,
                     f // (BN // 8) * n + col0 + f % (BN // 8) * 8, 8)
    t.commit()
    for k0 in range(0, k, 32):
        s = k0 // 32 % 2
        t.wait(0)
        t.sync()                           # tile k0 is in stage s; stage 1 - s is free
        if k0 + 32 < k:
            for j in range(BM * 4 // THREADS):
                f = tid + j * THREADS
                t.copy_async(sa, (1 - s, f // 4, f % 4 * 8), a,
                             (row0 + f // 4) * k + k0 + 32 + f % 4 * 8, 8)
            for j in range(BN * 4 // THREADS):
                f = tid + j * THREADS
                t.copy_async(sb, (1 - s, f // (BN // 8), f % (BN // 8) * 8), b,
                             (k0 + 32 + f // (BN // 8)) * n + col0 + f % (BN // 8) * 8, 8)
        t.commit()
        for kk in (0, 16):
            t.ldmatrix(fa0, sa, (s, wm + lr, kk + lc), 4)
            t.ldmatrix(fa1, sa, (s, wm + 16 + lr, kk + lc), 4)
            t.ldmatrix(fa2, sa, (s, wm + 32 + lr, kk + lc), 4)
            t.ldmatrix(fa3, sa, (s, wm + 48 + lr, kk + lc), 4)
            t.ldmatrix(rb0, sb, (s, kk + lr, wn + lc), 4, trans=True)
            t.ldmatrix(rb1, sb, (s, kk + lr, wn + 16 + lc), 4, trans=True)
            for i in range(4):
                fb0[i] = rb0[i]
                fb1[i] = rb0[4 + i]
                fb2[i] = rb1[i]
                fb3[i] = rb1[4 + i]
            t.mma(c00, fa0, fb0, c00)
            t.mma(c01, fa0, fb1, c01)
            t.mma(c02, fa0, fb2, c02)
            t.mma(c03, fa0, fb3, c03)
            t.mma(c10, fa1, fb0, c10)
            t.mma(c11, fa1, fb1, c11)
            t.mma(c12, fa1, fb2, c12)
            t.mma(c13, fa1, fb3, c13)
            t.mma(c20, fa2, fb0, c20)
            t.mma(c21, fa2, fb1, c21)
            t.mma(c22, fa2, fb2, c22)
            t.mma(c23, fa2, fb3, c23)
            t.mma(c30, fa3, fb0, c30)
            t.mma(c31, fa3, fb1, c31)
            t.mma(c32, fa3, fb2, c32)
            t.mma(c33, fa3, fb3, c33)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        r = (row0 + wm + g + 8 * (i // 2)) * n + col0 + wn + 2 * q + i % 2
        c[r] = c00[i]
        c[r + 8] = c01[i]
        c[r + 16] = c02[i]
        c[r + 24] = c03[i]
        c[r + 16 * n] = c10[i]
        c[r + 16 * n + 8] = c11[i]
        c[r + 16 * n + 16] = c12[i]
        c[r + 16 * n + 24] = c13[i]
        c[r + 32 * n] = c20[i]
        c[r + 32 * n + 8] = c21[i]
        c[r + 32 * n + 16] = c22[i]
        c[r + 32 * n + 24] = c23[i]
        c[r + 48 * n] = c30[i]
        c[r + 48 * n + 8] = c31[i]
        c[r + 48 * n + 16] = c32[i]
        c[r + 48 * n + 24] = c33[i]



def flash_attention_kernel(t, q, k, v, o, seq, heads):
    sk = t.shared((64, 136), ml_dtypes.bfloat16)   # rows 272 bytes apart: ldmatrix conflict-free
    sv = t.shared((64, 136), ml_dtypes.bfloat16)   # Q's tile first, then each V tile
    qf = t.local((64,), ml_dtypes.bfloat16)        # this warp's 16 x 128 of Q: 8 A fragments
    s = t.local((32,), np.float32)                 # its 16 x 64 scores, then probabilities
    acc = t.local((64,), np.float32)               # its 16 x 128 of O, 16 C fragments
    fa = t.local((8,), ml_dtypes.bfloat16)
    rb = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    c = t.local((4,), np.float32)
    tid = t.thread_idx.x
    head = t.block_idx.y * seq * 128
    q0 = t.block_idx.x * 64
    wm = t.warp * 16
    lr = t.lane % 8 + 8 * (t.lane // 8 % 2)        # ldmatrix row of A (and of B with .trans)
    kr = t.lane % 8 + 8 * (t.lane // 16)           # ldmatrix row of B from K, two n8 tiles
    for i in range(8):                             # Q's 64 x 128 tile, 8 halves a copy
        f = tid + 128 * i
        t.copy_async(sv, (f // 16, f % 16 * 8), q, head + (q0 + f // 16) * 128 + f % 16 * 8, 8)
    t.commit()
    for i in range(8):
        f = tid + 128 * i
        t.copy_async(sk, (f // 16, f % 16 * 8), k, head + (f // 16) * 128 + f % 16 * 8, 8)
    t.commit()
    t.wait(1)
    t.sync()
    for kk in range(8):
        t.ldmatrix(fa, sv, (wm + lr, 16 * kk + 8 * (t.lane // 16)), 4)
        for i in range(8):
            qf[8 * kk + i] = fa[i]
    m0 = t.local(-np.inf, np.float32)              # running max of rows g and g + 8 (log2 units)
    m1 = t.local(-np.inf, np.float32)
    l0 = t.local(0.0, np.float32)                  # this lane's share of their running sums
    l1 = t.local(0.0, np.float32)
    scale = 1.4426950408889634 / 128 ** 0.5        # log2(e) / sqrt(d): exp(x) = exp2(x log2 e)
    t.sync()                                       # Q read: sv is free for V
    for j in range(0, seq, 64):
        for i in range(8):
            f = tid + 128 * i
            t.copy_async(sv, (f // 16, f % 16 * 8), v, head + (j + f // 16) * 128 + f % 16 * 8, 8)
        t.commit()
        t.wait(1)
        t.sync()                                   # K tile j is in sk
        for i in range(32):
            s[i] = 0.0
        for kk in range(8):                        # S = Q K^T, 16 x 64 a warp
            for i in range(8):
                fa[i] = qf[8 * kk + i]
            for nt in range(0, 8, 2):
                t.ldmatrix(rb, sk, (8 * nt + kr, 16 * kk + 8 * (t.lane // 8 % 2)), 4)
                for h in range(2):
                    for i in range(4):
                        fb[i] = rb[4 * h + i]
                        c[i] = s[4 * (nt + h) + i]
                    t.mma(c, fa, fb, c)
                    for i in range(4):
                        s[4 * (nt + h) + i] = c[i]
        x0 = t.local(-np.inf, np.float32)
        x1 = t.local(-np.inf, np.float32)
        for nt in range(8):
            for i in range(2):
                s[4 * nt + i] = s[4 * nt + i] * scale
                s[4 * nt + 2 + i] = s[4 * nt + 2 + i] * scale
                x0[...] = np.maximum(x0, s[4 * nt + i])
                x1[...] = np.maximum(x1, s[4 * nt + 2 + i])
        for d in (1, 2):                           # the quad 4g .. 4g + 3 holds rows g, g + 8
            y0 = t.shfl_xor(x0, d)
            y1 = t.shfl_xor(x1, d)
            x0[...] = np.maximum(x0, y0)
            x1[...] = np.maximum(x1, y1)
        x0[...] = np.maximum(m0, x0)
        x1[...] = np.maximum(m1, x1)
        a0 = np.exp2(m0 - x0)                      # rescale what came before
        a1 = np.exp2(m1 - x1)
        m0[...] = x0
        m1[...] = x1
        l0[...] = l0 * a0
        l1[...] = l1 * a1
        for nt in range(16):
            for i in range(2):
                acc[4 * nt + i] = acc[4 * nt + i] * a0
                acc[4 * nt + 2 + i] = acc[4 * nt + 2 + i] * a1
        for nt in range(8):
            for i in range(2):
                s[4 * nt + i] = np.exp2(s[4 * nt + i] - m0)
                s[4 * nt + 2 + i] = np.exp2(s[4 * nt + 2 + i] - m1)
                l0[...] = l0 + s[4 * nt + i]
                l1[...] = l1 + s[4 * nt + 2 + i]
        t.sync()                                   # everyone is done with sk
        if j + 64 < seq:
            for i in range(8):
                f = tid + 128 * i
                t.copy_async(sk, (f // 16, f % 16 * 8), k,
                             head + (j + 64 + f // 16) * 128 + f % 16 * 8, 8)
        t.commit()
        t.wait(1)
        t.sync()                                   # V tile j is in sv
        for ks in range(4):                        # O += P V: two C tiles of P are an A tile
            for i in range(8):
                fa[i] = s[8 * ks + i]
            for nt in range(0, 16, 2):
                t.ldmatrix(rb, sv, (16 * ks + lr, 8 * nt + 8 * (t.lane // 16)), 4, trans=True)
                for h in range(2):
                    for i in range(4):
                        fb[i] = rb[4 * h + i]
                        c[i] = acc[4 * (nt + h) + i]
                    t.mma(c, fa, fb, c)
                    for i in range(4):
                        acc[4 * (nt + h) + i] = c[i]
        t.sync()                                   # everyone is done with sv
    for d in (1, 2):
        y0 = t.shfl_xor(l0, d)
        y1 = t.shfl_xor(l1, d)
        l0[...] = l0 + y0
        l1[...] = l1 + y1
    r0 = head + (q0 + wm + t.lane // 4) * 128 + 2 * (t.lane % 4)
    for nt in range(16):
        t.vstore(o, r0 + 8 * nt, (acc[4 * nt] / l0, acc[4 * nt + 1] / l0))
        t.vstore(o, r0 + 1024 + 8 * nt, (acc[4 * nt + 2] / l1, acc[4 * nt + 3] / l1))


def decode_attention_kernel(t, q, k, v, o, seq, heads):
    sq = t.shared(128, ml_dtypes.bfloat16)
    sk = t.shared((2, 32, 144), ml_dtypes.bfloat16)   # two stages of 32 keys, rows 8 banks apart
    sv = t.shared((2, 32, 144), ml_dtypes.bfloat16)
    part = t.shared((16, 144), np.float32)            # each group's weighted sum of V
    stat = t.shared((2, 16), np.float32)              # each group's maximum and sum
    qf = t.local((8,), np.float32)
    acc = t.local((8,), np.float32)
    tid = t.thread_idx.x
    head = t.block_idx.x * seq * 128
    r = tid // 16                                     # this thread's keys: r and r + 16 of a tile
    c = tid % 16                                      # its dimensions: c, c + 16, ..., c + 112
    if tid < 16:
        t.copy_async(sq, tid * 8, q, t.block_idx.x * 128 + tid * 8, 8)
    for h in range(2):                                # tile 0: 8 halves a copy, two of K and V
        f = tid + 256 * h
        t.copy_async(sk, (0, f // 16, f % 16 * 8), k, head + f * 8, 8)
        t.copy_async(sv, (0, f // 16, f % 16 * 8), v, head + f * 8, 8)
    t.commit()
    m = t.local(-np.inf, np.float32)                  # log2 units, as exp2 wants
    lsum = t.local(0.0, np.float32)
    scale = 1.4426950408889634 / 128 ** 0.5
    for j in range(0, seq, 32):
        s = j // 32 % 2
        t.wait(0)
        t.sync()                                      # tile j is in stage s; 1 - s is free
        if j + 32 < seq:
            for h in range(2):
                f = tid + 256 * h
                t.copy_async(sk, (1 - s, f // 16, f % 16 * 8), k, head + (j + 32) * 128 + f * 8, 8)
                t.copy_async(sv, (1 - s, f // 16, f % 16 * 8), v, head + (j + 32) * 128 + f * 8, 8)
        t.commit()
        if j == 0:
            for e in range(8):
                qf[e] = sq[c + 16 * e]
        for h in range(2):
            x = t.local(0.0, np.float32)
            for e in range(8):
                kv = t.local(sk[s, r + 16 * h, c + 16 * e], np.float32)
                x[...] = x + qf[e] * kv
            for d in (8, 4, 2, 1):                    # the 16 lanes of one key
                y = t.shfl_xor(x, d)
                x[...] = x + y
            x[...] = x * scale
            mn = np.maximum(m, x)
            a = np.exp2(m - mn)
            p = np.exp2(x - mn)
            lsum[...] = lsum * a + p
            for e in range(8):
                vv = t.local(sv[s, r + 16 * h, c + 16 * e], np.float32)
                acc[e] = acc[e] * a + p * vv
            m[...] = mn
    for e in range(8):
        part[r, c + 16 * e] = acc[e]
    if c == 0:
        stat[0, r] = m
        stat[1, r] = lsum
    t.sync()
    if tid < 128:                                     # combine the 16 groups, one dimension a thread
        top = t.local(-np.inf, np.float32)
        for g in range(16):
            top[...] = np.maximum(top, stat[0, g])
        num = t.local(0.0, np.float32)
        den = t.local(0.0, np.float32)
        for g in range(16):
            w = np.exp2(stat[0, g] - top)
            num[...] = num + part[g, tid] * w
            den[...] = den + stat[1, g] * w
        o[t.block_idx.x * 128 + tid] = num / den


# -- lesson 08: system level --------------------------------------------------------------------


def grid_stride_kernel(t, x, out, n):
    stride = t.grid_dim.x * t.block_dim.x
    i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        out[i] = 2 * x[i] + 1
        i[...] = i + stride


def segmented_sum_kernel(t, x, offsets, out):
    part = t.shared(128, np.float32)
    tid = t.thread_idx.x
    seg = t.block_idx.x
    end = offsets[seg + 1]
    acc = t.local(0.0, np.float32)
    i = t.local(offsets[seg] + tid)
    for _ in t.while_(lambda: i < end):       # stride over this segment, 128 at a time
        acc[...] = acc + x[i]
        i[...] = i + 128
    part[tid] = acc
    t.sync()
    s = 64
    while s > 0:
        with t.if_(tid < s):
            part[tid] = part[tid] + part[tid + s]
        t.sync()
        s //= 2
    with t.if_(tid == 0):
        out[seg] = part[0]


def softmax_kernel(t, x, out, cols):
    row = t.shared(1024, np.float32)          # the whole row, read from global memory once
    red = t.shared(128, np.float32)
    tid = t.thread_idx.x
    base = t.block_idx.x * cols
    m = t.local(-np.inf, np.float32)
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            v = x[base + j]
            row[j] = v
            m[...] = np.maximum(m, v)
    red[tid] = m
    t.sync()
    s = 64
    while s > 0:                              # the row's maximum
        with t.if_(tid < s):
            red[tid] = np.maximum(red[tid], red[tid + s])
        t.sync()
        s //= 2
    top = red[0]
    t.sync()                                  # everyone has read it before red is reused
    total = t.local(0.0, np.float32)
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            e = np.exp(row[j] - top)
            row[j] = e
            total[...] = total + e
    red[tid] = total
    t.sync()
    s = 64
    while s > 0:                              # the row's sum
        with t.if_(tid < s):
            red[tid] = red[tid] + red[tid + s]
        t.sync()
        s //= 2
    scale = 1.0 / red[0]
    for j0 in range(0, cols, 128):
        j = j0 + tid
        with t.if_(j < cols):
            out[base + j] = row[j] * scale
