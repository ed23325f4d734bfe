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
    """a's rows 64 bytes apart: rows 0, 2, 4 and 6 of each ldmatrix matrix share banks."""
    BM, BN = 128, 128                      # the block's tile of c: (BM / 64) x (BN / 32) warps
    THREADS = BM * BN // 64                # each warp a 64 x 32 tile: 4 x 4 mma tiles
    sa = t.shared((2, BM, 32), ml_dtypes.bfloat16)      # rows 64 bytes apart
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


def hgemm_mma_two_barriers(t, a, b, c, m, n, k):
    """A second barrier after each tile's mma: two a tile where one does."""
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
        t.sync()                           # a second barrier a tile, not needed
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


def honest_hgemm_mma_x2_loads(t, a, b, c, m, n, k):
    """b's fragments by four ldmatrix.x2.trans, straight into fb0 to fb3."""
    BM, BN = 128, 128                      # the block's tile of c: (BM / 64) x (BN / 32) warps
    THREADS = BM * BN // 64                # each warp a 64 x 32 tile: 4 x 4 mma tiles
    sa = t.shared((2, BM, 40), ml_dtypes.bfloat16)      # k step 32; rows 80 bytes apart
    sb = t.shared((2, 32, BN + 8), ml_dtypes.bfloat16)  # rows 16 bytes off a bank cycle
    fa0 = t.local((8,), ml_dtypes.bfloat16)
    fa1 = t.local((8,), ml_dtypes.bfloat16)
    fa2 = t.local((8,), ml_dtypes.bfloat16)
    fa3 = t.local((8,), ml_dtypes.bfloat16)
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
            t.ldmatrix(fb0, sb, (s, kk + t.lane % 16, wn), 2, trans=True)
            t.ldmatrix(fb1, sb, (s, kk + t.lane % 16, wn + 8), 2, trans=True)
            t.ldmatrix(fb2, sb, (s, kk + t.lane % 16, wn + 16), 2, trans=True)
            t.ldmatrix(fb3, sb, (s, kk + t.lane % 16, wn + 24), 2, trans=True)
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
