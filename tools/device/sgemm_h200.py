"""A matrix product written in the kernel language, timed on the GPU beside cuBLAS.

    python tools/device/sgemm_h200.py OUT.json      # on a machine with CuPy and a GPU

:func:`blocktile_8x8` (a 128 x 128 tile of C per block of 256 threads, 8 x 8 results per thread
in registers, A transposed in shared memory, float4 loads and stores) is checked in the
simulator against NumPy at n = 128, translated with ``gpu_lessons.kernels.to_cuda``, compiled
by CuPy's NVRTC with its default options (FMA contraction on) and timed at n = 2048, 4096 and
8192 with CUDA events (median of 10 after a warm-up) beside CuPy's ``a @ b`` (cuBLAS SGEMM;
TF32 stays off unless CUPY_TF32 is set) in the same process.  The JSON records the GPU, the
date, TFLOP/s (2 n^3 / t), the ratio to cuBLAS, the largest relative error and the registers.
tests/kernels/test_sgemm_tool.py checks the kernel in the simulator and with NVRTC on the CPU.
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())
from gpu_lessons.kernels import run, to_cuda


def blocktile_8x8(t, a, b, c, n):
    """C = A @ B, 128 x 128 per block of 256 threads, 8 x 8 per thread (rows ty*4 + 0..3 and
    64 + ty*4 + 0..3, likewise columns), A transposed in shared memory, float4 everywhere."""
    t.launch_bounds(256, 2)
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
    acol = (tid % 2) * 4
    brow = tid // 32
    bcol = (tid % 32) * 4
    for k0 in range(0, n, 8):
        x0, x1, x2, x3 = t.vload(a, (row0 + arow) * n + k0 + acol, 4)
        sa[acol, arow] = x0
        sa[acol + 1, arow] = x1
        sa[acol + 2, arow] = x2
        sa[acol + 3, arow] = x3
        y0, y1, y2, y3 = t.vload(b, (k0 + brow) * n + col0 + bcol, 4)
        t.vstore(sb, (brow, bcol), (y0, y1, y2, y3))
        t.sync()
        for k in range(8):
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (k, ty * 4), 4)
            ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (k, 64 + ty * 4), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (k, tx * 4), 4)
            rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (k, 64 + tx * 4), 4)
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        t.sync()
    for i in range(8):
        r = row0 + ty * 4 + i % 4 + (i // 4) * 64
        t.vstore(c, r * n + col0 + tx * 4, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r * n + col0 + 64 + tx * 4, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def double_buffered(t, a, b, c, n):
    """:func:`blocktile_8x8` with two shared stages: the next k-tile is loaded into registers
    before this one is computed and stored into the other stage after, one barrier a tile."""
    t.launch_bounds(256, 2)
    sa = t.shared((2, 8, 128), np.float32)
    sb = t.shared((2, 8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8,), np.float32)
    rb = t.local((8,), np.float32)
    ga = t.local((4,), np.float32)
    gb = t.local((4,), np.float32)
    tid = t.thread_idx.x
    ty = tid // 16
    tx = tid % 16
    row0 = t.block_idx.y * 128
    col0 = t.block_idx.x * 128
    arow = tid // 2
    acol = (tid % 2) * 4
    brow = tid // 32
    bcol = (tid % 32) * 4
    ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * n + acol, 4)
    gb[0], gb[1], gb[2], gb[3] = t.vload(b, brow * n + col0 + bcol, 4)
    for q in range(4):
        sa[0, acol + q, arow] = ga[q]
    t.vstore(sb, (0, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
    t.sync()
    for k0 in range(0, n, 8):
        s = (k0 // 8) % 2
        if k0 + 8 < n:
            ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * n + k0 + 8 + acol, 4)
            gb[0], gb[1], gb[2], gb[3] = t.vload(b, (k0 + 8 + brow) * n + col0 + bcol, 4)
        for k in range(8):
            ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (s, k, ty * 4), 4)
            ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (s, k, 64 + ty * 4), 4)
            rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, k, tx * 4), 4)
            rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, k, 64 + tx * 4), 4)
            for i in range(8):
                for j in range(8):
                    acc[i, j] += ra[i] * rb[j]
        if k0 + 8 < n:
            for q in range(4):
                sa[1 - s, acol + q, arow] = ga[q]
            t.vstore(sb, (1 - s, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
        t.sync()
    for i in range(8):
        r = row0 + ty * 4 + i % 4 + (i // 4) * 64
        t.vstore(c, r * n + col0 + tx * 4, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r * n + col0 + 64 + tx * 4, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


#: (name, kernel, tile of C per block, threads per block)
RUNGS = [("blocktile_8x8 (128 x 128 tile, 256 threads, float4)", blocktile_8x8, 128, 256),
         ("double_buffered (blocktile_8x8, two shared stages)", double_buffered, 128, 256)]


def main(out):
    import cupy as cp
    rng = np.random.default_rng(0)
    record = {"date": time.strftime("%Y-%m-%d"), "gpu": cp.cuda.runtime.getDeviceProperties(0)
              ["name"].decode(), "cupy": cp.__version__, "build": "CuPy RawModule default "
              "options (FMA contraction on)", "rungs": []}
    for name, k, tile, threads in RUNGS:   # the simulator first, at n = 128
        n = 128
        a = rng.integers(-4, 5, (n, n)).astype(np.float32)
        b = rng.integers(-4, 5, (n, n)).astype(np.float32)
        c = np.zeros((n, n), np.float32)
        t0 = time.perf_counter()
        run(k, (n // tile, n // tile), threads, a.ravel(), b.ravel(), c.ravel(), n)
        print(name, "simulator n=128 matches NumPy:", np.array_equal(c, a @ b),
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    for n in (2048, 4096, 8192):
        a = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        b = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        ref = a @ b

        def timed(fn, reps=10):
            fn()
            cp.cuda.Device().synchronize()
            s, e = cp.cuda.Event(), cp.cuda.Event()
            ts = []
            for _ in range(reps):
                s.record()
                fn()
                e.record()
                e.synchronize()
                ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
            return float(np.median(ts))
        t_cublas = timed(lambda a=a, b=b: a @ b)
        row = {"n": n, "cublas_s": t_cublas, "cublas_tflops": 2 * n**3 / t_cublas / 1e12,
               "kernels": []}
        for name, k, tile, threads in RUNGS:
            c = cp.zeros((n, n), np.float32)
            src = to_cuda(k, np.zeros(n * n, np.float32), np.zeros(n * n, np.float32),
                          np.zeros(n * n, np.float32), n)
            f = cp.RawModule(code=str(src)).get_function(src.kernel_name)
            args = (a.ravel(), b.ravel(), c.ravel(), np.int32(n))
            grid = (n // tile, n // tile)
            t = timed(lambda f=f, args=args, grid=grid, threads=threads:
                      f(grid, (threads,), args))
            err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
            row["kernels"].append({"name": name, "seconds": t, "tflops": 2 * n**3 / t / 1e12,
                                   "of_cublas": t_cublas / t, "max_rel_error": err,
                                   "registers": int(f.num_regs)})
            print(n, name, f"{2 * n**3 / t / 1e12:.1f} TFLOP/s = {100 * t_cublas / t:.0f} % "
                  f"of cuBLAS {2 * n**3 / t_cublas / 1e12:.1f}; err {err:.1e}; "
                  f"{f.num_regs} regs", flush=True)
        record["rungs"].append(row)
    with open(out, "w") as fh:
        json.dump(record, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
