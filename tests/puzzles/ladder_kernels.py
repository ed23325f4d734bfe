"""Matrix products for the ladder's tests: correct kernels that miss one rung's budget (in
``test_puzzles.BREAKERS``: each fails the budget its rung is about, by name), and sound kernels
written another way than the worked ones (in ``HONEST_VARIANTS``: each passes)."""

import numpy as np


def sgemm_1d_reloading_b(t, a, b, c, m, n, k):
    """Rung 1 without reuse: b's value is loaded again for each of the 8 multiply-adds."""
    sa = t.shared((64, 8), np.float32)
    sb = t.shared((8, 64), np.float32)
    acc = t.local((8,), np.float32)
    tid = t.thread_idx.x
    row = tid // 64 * 8
    col = tid % 64
    row0 = t.block_idx.y * 64
    col0 = t.block_idx.x * 64
    for k0 in range(0, k, 8):
        sa[tid // 8, tid % 8] = a[(row0 + tid // 8) * k + k0 + tid % 8]
        sb[tid // 64, col] = b[(k0 + tid // 64) * n + col0 + col]
        t.sync()
        for kk in range(8):
            for i in range(8):
                acc[i] += sa[row + i, kk] * sb[kk, col]
        t.sync()
    for i in range(8):
        c[(row0 + row + i) * n + col0 + col] = acc[i]


def sgemm_2d_contiguous_rows(t, a, b, c, m, n, k):
    """Rung 2 with each thread's 8 rows side by side: a warp's two rows of the a tile are then
    8 rows = 64 words apart, in the same bank."""
    sa = t.shared((128, 8), np.float32)
    sb = t.shared((8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16
    tx = tid % 16
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
                ra[i] = sa[ty * 8 + i, kk]
                rb[i] = sb[kk, tx + 16 * i]
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(8):
        for j in range(8):
            c[(row0 + ty * 8 + i) * n + col0 + tx + 16 * j] = acc[i, j]


def sgemm_2d_contiguous_columns(t, a, b, c, m, n, k):
    """Rung 2 with each thread's 8 columns side by side: a warp's stores of c touch 16
    columns 8 words apart, a sector for each 4 bytes."""
    sa = t.shared((128, 8), np.float32)
    sb = t.shared((8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16
    tx = tid % 16
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
                rb[i] = sb[kk, tx * 8 + i]
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(8):
        for j in range(8):
            c[(row0 + ty + 16 * i) * n + col0 + tx * 8 + j] = acc[i, j]


def sgemm_vectorized_unpadded(t, a, b, c, m, n, k):
    """Rung 3 with the transposed tile's rows 128 words long: the two lanes that load one row
    of a store its values 4 rows apart, 512 words, in the same bank."""
    sa = t.shared((8, 128), np.float32)
    sb = t.shared((8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16
    tx = tid % 16
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    arow = tid // 2
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


def sgemm_1d_loading_a_down_columns(t, a, b, c, m, n, k):
    """Rung 1 with the a tile loaded down its columns: each lane of a warp reads another row of
    a, a sector for 4 bytes."""
    sa = t.shared((64, 8), np.float32)
    sb = t.shared((8, 64), np.float32)
    acc = t.local((8,), np.float32)
    tid = t.thread_idx.x
    row = tid // 64 * 8
    col = tid % 64
    row0 = t.block_idx.y * 64
    col0 = t.block_idx.x * 64
    for k0 in range(0, k, 8):
        sa[tid % 64, tid // 64] = a[(row0 + tid % 64) * k + k0 + tid // 64]
        sb[tid // 64, col] = b[(k0 + tid // 64) * n + col0 + col]
        t.sync()
        for kk in range(8):
            bv = sb[kk, col]
            for i in range(8):
                acc[i] += sa[row + i, kk] * bv
        t.sync()
    for i in range(8):
        c[(row0 + row + i) * n + col0 + col] = acc[i]



def honest_sgemm_1d_strided_rows(t, a, b, c, m, n, k):
    """Rung 1 with a thread's 8 rows 8 apart (rows r, r + 8, ..., r + 56) and the tiles'
    tiles' indices as tuple assignments."""
    sa = t.shared((64, 8), np.float32)
    sb = t.shared((8, 64), np.float32)
    acc = t.local((8,), np.float32)
    tid = t.thread_idx.x
    row = tid // 64
    col = tid % 64
    row0 = t.block_idx.y * 64
    col0 = t.block_idx.x * 64
    for k0 in range(0, k, 8):
        r, q = tid // 8, tid % 8
        sa[r, q] = a[(row0 + r) * k + k0 + q]
        r, q = tid // 64, tid % 64
        sb[r, q] = b[(k0 + r) * n + col0 + q]
        t.sync()
        for kk in range(8):
            bv = sb[kk, col]
            for i in range(8):
                acc[i] = acc[i] + sa[row + 8 * i, kk] * bv
        t.sync()
    for i in range(8):
        c[(row0 + row + 8 * i) * n + col0 + col] = acc[i]


def honest_sgemm_warptile_other_pairs(t, a, b, c, m, n, k):
    """Rung 5 with the lane pairs the other way round: i ^ 2 for a, i ^ 1 for b."""
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
    lr = (tid % 32 // 16 * 2 + tid % 2) * 4         # lanes i and i ^ 2 share a's float4,
    lc = tid % 16 // 2 * 4                           # lanes i and i ^ 1 share b's
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
        if k0 + 8 < k:
            ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + k0 + 8 + acol, 4)
            gb[0], gb[1], gb[2], gb[3] = t.vload(b, (k0 + 8 + brow) * n + col0 + bcol, 4)
        for kk in range(8):                  # a warp reads 4 + 4 of a and 8 + 8 of b's float4s
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (s, kk, wr + lr), 4)
            ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (s, kk, wr + 16 + lr), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, kk, wc + lc), 4)
            rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, kk, wc + 32 + lc), 4)
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        if k0 + 8 < k:
            for q in range(4):
                sa[1 - s, acol + q, arow] = ga[q]
            t.vstore(sb, (1 - s, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
        t.sync()
    for i in range(8):
        r = (row0 + wr + i % 4 + i // 4 * 16 + lr) * n + col0 + wc + lc
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 32, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def _tool_kernel(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "device" / "sgemm_h200.py"
    spec = importlib.util.spec_from_file_location("sgemm_h200", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return getattr(tool, name)


#: Rung 4 with cp.async filling its stages: a control of the H200 record, written there.
honest_sgemm_double_buffered_cp_async = _tool_kernel("rung4_cp_async")
