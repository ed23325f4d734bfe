"""Kernels for the mma_tile puzzle's tests: an honest variant, one breaker per budget, and two
kernels with the fragment layout wrong (each correct in everything but the layout)."""

import ml_dtypes
import numpy as np


def honest_mma_tile_separate_accumulators(t, a, b, c):
    """The worked kernel with C and D apart and the indices spelled out per register."""
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    zero = t.local((4,), np.float32)
    d = t.local((4,), np.float32)
    row = t.lane // 4
    col = t.lane % 4 * 2
    for h in (0, 1):
        fa[h] = a[row, col + h]
        fa[2 + h] = a[row + 8, col + h]
        fa[4 + h] = a[row, col + 8 + h]
        fa[6 + h] = a[row + 8, col + 8 + h]
        fb[h] = b[col + h, row]
        fb[2 + h] = b[col + 8 + h, row]
    t.mma(d, fa, fb, zero)
    for h in (0, 1):
        c[row, col + h] = d[h]
        c[row + 8, col + h] = d[2 + h]


def mma_tile_on_the_fp32_lanes(t, a, b, c):
    """Correct, and no tensor core: each lane sums its 4 outputs' 16 products itself."""
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        r = g + 8 * (i // 2)
        col = 2 * q + i % 2
        acc = 0.0
        for kk in range(16):
            x = t.local(a[r, kk], np.float32)
            y = t.local(b[kk, col], np.float32)
            acc += x * y
        c[r, col] = acc


def mma_tile_k_in_two_halves(t, a, b, c):
    """Correct, with two mma instructions: k = 0..7, then k = 8..15 (the other half zero)."""
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        fa[i] = a[g + 8 * (i // 2), 2 * q + i % 2]
    for i in range(2):
        fb[i] = b[2 * q + i, g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        fa[i] = 0.0
        fa[4 + i] = a[g + 8 * (i // 2), 2 * q + i % 2 + 8]
    for i in range(2):
        fb[i] = 0.0
        fb[2 + i] = b[2 * q + i + 8, g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def mma_tile_loading_a_twice(t, a, b, c):
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(8):
        fa[i] = a[g, 2 * q]
    for i in range(8):
        fa[i] = a[g + 8 * (i // 2 % 2), 2 * q + i % 2 + 8 * (i // 4)]
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def mma_tile_through_ldmatrix(t, a, b, c):
    """Correct: a staged in shared memory, then ldmatrix.x4 gives each lane its fragment (the
    four 8 x 8 quarters in register order: top left, bottom left, top right, bottom right)."""
    sa = t.shared((16, 16), ml_dtypes.bfloat16)
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    for j in range(8):
        sa[t.lane // 2, t.lane % 2 * 8 + j] = a[t.lane // 2, t.lane % 2 * 8 + j]
    t.syncwarp()
    t.ldmatrix(fa, sa, (t.lane % 8 + 8 * (t.lane // 8 % 2), 8 * (t.lane // 16)), 4)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def mma_tile_a_registers_swapped(t, a, b, c):
    """The layout wrong: a1's pair of registers read as rows + 8 where the ISA has cols + 8."""
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(8):
        fa[i] = a[g + 8 * (i // 4), 2 * q + i % 2 + 8 * (i // 2 % 2)]
    for i in range(4):
        fb[i] = b[2 * q + i % 2 + 8 * (i // 2), g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


def mma_tile_b_pairs_split(t, a, b, c):
    """The layout wrong: b's two halves of a register 8 rows apart instead of adjacent."""
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb = t.local((4,), ml_dtypes.bfloat16)
    acc = t.local((4,), np.float32)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(8):
        fa[i] = a[g + 8 * (i // 2 % 2), 2 * q + i % 2 + 8 * (i // 4)]
    for i in range(4):
        fb[i] = b[2 * q + 8 * (i % 2) + i // 2, g]
    t.mma(acc, fa, fb, acc)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * q + i % 2] = acc[i]


# -- hgemm_mma ------------------------------------------------------------------------------

def hgemm_mma_unpadded(t, a, b, c, m, n, k):
    """Rows 32 bytes apart: rows 0 and 4 of each ldmatrix matrix share banks, 2 wavefronts where 1 does."""
    sa = t.shared((2, 32, 16), ml_dtypes.bfloat16)
    sb = t.shared((2, 16, 40), ml_dtypes.bfloat16)   # rows 80 bytes apart
    fa = t.local((8,), ml_dtypes.bfloat16)
    rb = t.local((8,), ml_dtypes.bfloat16)
    fb0 = t.local((4,), ml_dtypes.bfloat16)
    fb1 = t.local((4,), ml_dtypes.bfloat16)
    acc0 = t.local((4,), np.float32)
    acc1 = t.local((4,), np.float32)
    tid = t.thread_idx.x
    row0 = t.block_idx.y * 32
    col0 = t.block_idx.x * 32
    wm = t.warp // 2 * 16                  # this warp's 16 x 16 of the block's 32 x 32
    wn = t.warp % 2 * 16
    if tid < 64:                           # warps 0, 1: a's 32 x 16 tile, 8 halves a thread
        t.copy_async(sa, (0, tid // 2, tid % 2 * 8), a, (row0 + tid // 2) * k + tid % 2 * 8, 8)
    else:                                  # warps 2, 3: b's 16 x 32
        f = tid - 64
        t.copy_async(sb, (0, f // 4, f % 4 * 8), b, (f // 4) * n + col0 + f % 4 * 8, 8)
    t.commit()
    for k0 in range(0, k, 16):
        s = k0 // 16 % 2
        t.wait(0)
        t.sync()                           # tile k0 is in stage s; stage 1 - s is free
        if k0 + 16 < k:
            if tid < 64:
                t.copy_async(sa, (1 - s, tid // 2, tid % 2 * 8), a,
                             (row0 + tid // 2) * k + k0 + 16 + tid % 2 * 8, 8)
            else:
                f = tid - 64
                t.copy_async(sb, (1 - s, f // 4, f % 4 * 8), b,
                             (k0 + 16 + f // 4) * n + col0 + f % 4 * 8, 8)
        t.commit()
        lr = t.lane % 8 + 8 * (t.lane // 8 % 2)
        t.ldmatrix(fa, sa, (s, wm + lr, 8 * (t.lane // 16)), 4)
        t.ldmatrix(rb, sb, (s, lr, wn + 8 * (t.lane // 16)), 4, trans=True)
        for i in range(4):
            fb0[i] = rb[i]
            fb1[i] = rb[4 + i]
        t.mma(acc0, fa, fb0, acc0)
        t.mma(acc1, fa, fb1, acc1)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        r = row0 + wm + g + 8 * (i // 2)
        col = col0 + wn + 2 * q + i % 2
        c[r * n + col] = acc0[i]
        c[r * n + col + 8] = acc1[i]


def hgemm_mma_two_barriers(t, a, b, c, m, n, k):
    """A second barrier after the mma: 2 a tile where 1 does."""
    sa = t.shared((2, 32, 24), ml_dtypes.bfloat16)   # rows 48 bytes apart: ldmatrix conflict-free
    sb = t.shared((2, 16, 40), ml_dtypes.bfloat16)   # rows 80 bytes apart
    fa = t.local((8,), ml_dtypes.bfloat16)
    rb = t.local((8,), ml_dtypes.bfloat16)
    fb0 = t.local((4,), ml_dtypes.bfloat16)
    fb1 = t.local((4,), ml_dtypes.bfloat16)
    acc0 = t.local((4,), np.float32)
    acc1 = t.local((4,), np.float32)
    tid = t.thread_idx.x
    row0 = t.block_idx.y * 32
    col0 = t.block_idx.x * 32
    wm = t.warp // 2 * 16                  # this warp's 16 x 16 of the block's 32 x 32
    wn = t.warp % 2 * 16
    if tid < 64:                           # warps 0, 1: a's 32 x 16 tile, 8 halves a thread
        t.copy_async(sa, (0, tid // 2, tid % 2 * 8), a, (row0 + tid // 2) * k + tid % 2 * 8, 8)
    else:                                  # warps 2, 3: b's 16 x 32
        f = tid - 64
        t.copy_async(sb, (0, f // 4, f % 4 * 8), b, (f // 4) * n + col0 + f % 4 * 8, 8)
    t.commit()
    for k0 in range(0, k, 16):
        s = k0 // 16 % 2
        t.wait(0)
        t.sync()                           # tile k0 is in stage s; stage 1 - s is free
        if k0 + 16 < k:
            if tid < 64:
                t.copy_async(sa, (1 - s, tid // 2, tid % 2 * 8), a,
                             (row0 + tid // 2) * k + k0 + 16 + tid % 2 * 8, 8)
            else:
                f = tid - 64
                t.copy_async(sb, (1 - s, f // 4, f % 4 * 8), b,
                             (k0 + 16 + f // 4) * n + col0 + f % 4 * 8, 8)
        t.commit()
        lr = t.lane % 8 + 8 * (t.lane // 8 % 2)
        t.ldmatrix(fa, sa, (s, wm + lr, 8 * (t.lane // 16)), 4)
        t.ldmatrix(rb, sb, (s, lr, wn + 8 * (t.lane // 16)), 4, trans=True)
        for i in range(4):
            fb0[i] = rb[i]
            fb1[i] = rb[4 + i]
        t.mma(acc0, fa, fb0, acc0)
        t.mma(acc1, fa, fb1, acc1)
        t.sync()
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        r = row0 + wm + g + 8 * (i // 2)
        col = col0 + wn + 2 * q + i % 2
        c[r * n + col] = acc0[i]
        c[r * n + col + 8] = acc1[i]


def honest_hgemm_mma_x2_loads(t, a, b, c, m, n, k):
    """b's fragments by two ldmatrix.x2.trans, straight into fb0 and fb1."""
    sa = t.shared((2, 32, 24), ml_dtypes.bfloat16)   # rows 48 bytes apart: ldmatrix conflict-free
    sb = t.shared((2, 16, 40), ml_dtypes.bfloat16)   # rows 80 bytes apart
    fa = t.local((8,), ml_dtypes.bfloat16)
    fb0 = t.local((4,), ml_dtypes.bfloat16)
    fb1 = t.local((4,), ml_dtypes.bfloat16)
    acc0 = t.local((4,), np.float32)
    acc1 = t.local((4,), np.float32)
    tid = t.thread_idx.x
    row0 = t.block_idx.y * 32
    col0 = t.block_idx.x * 32
    wm = t.warp // 2 * 16                  # this warp's 16 x 16 of the block's 32 x 32
    wn = t.warp % 2 * 16
    if tid < 64:                           # warps 0, 1: a's 32 x 16 tile, 8 halves a thread
        t.copy_async(sa, (0, tid // 2, tid % 2 * 8), a, (row0 + tid // 2) * k + tid % 2 * 8, 8)
    else:                                  # warps 2, 3: b's 16 x 32
        f = tid - 64
        t.copy_async(sb, (0, f // 4, f % 4 * 8), b, (f // 4) * n + col0 + f % 4 * 8, 8)
    t.commit()
    for k0 in range(0, k, 16):
        s = k0 // 16 % 2
        t.wait(0)
        t.sync()                           # tile k0 is in stage s; stage 1 - s is free
        if k0 + 16 < k:
            if tid < 64:
                t.copy_async(sa, (1 - s, tid // 2, tid % 2 * 8), a,
                             (row0 + tid // 2) * k + k0 + 16 + tid % 2 * 8, 8)
            else:
                f = tid - 64
                t.copy_async(sb, (1 - s, f // 4, f % 4 * 8), b,
                             (k0 + 16 + f // 4) * n + col0 + f % 4 * 8, 8)
        t.commit()
        lr = t.lane % 8 + 8 * (t.lane // 8 % 2)
        t.ldmatrix(fa, sa, (s, wm + lr, 8 * (t.lane // 16)), 4)
        t.ldmatrix(fb0, sb, (s, t.lane % 16, wn), 2, trans=True)
        t.ldmatrix(fb1, sb, (s, t.lane % 16, wn + 8), 2, trans=True)
        t.mma(acc0, fa, fb0, acc0)
        t.mma(acc1, fa, fb1, acc1)
    g = t.lane // 4
    q = t.lane % 4
    for i in range(4):
        r = row0 + wm + g + 8 * (i // 2)
        col = col0 + wn + 2 * q + i % 2
        c[r * n + col] = acc0[i]
        c[r * n + col + 8] = acc1[i]
