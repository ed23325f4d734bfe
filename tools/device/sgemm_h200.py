"""The matrix-multiply ladder's worked kernels, timed on the GPU beside cuBLAS.

    python tools/device/sgemm_h200.py OUT.json         # on a machine with CuPy and a GPU
    python tools/device/sgemm_h200.py --sass OUT.json  # then here: NVRTC's SASS counts

Every rung of the ladder (``matmul_naive``, ``matmul_tiled``, ``matmul_register``, then the
puzzles ``sgemm_1d_blocktile`` ... ``sgemm_warptile``) is the worked kernel of
``solutions/puzzle_kernels.py``, translated by ``gpu_lessons.kernels.to_cuda``, compiled by
CuPy's NVRTC with its default options (FMA contraction on, the build a CUDA programmer gets)
and launched as its puzzle defines at n = 2048, 4096 and 8192 (m = n = k).  Each is timed with
CUDA events (the median of 10 after a warm-up) beside CuPy's ``a @ b`` (cuBLAS SGEMM; TF32
stays off, CUPY_TF32 is recorded) in the same process, on the same inputs.  The JSON records the
GPU, its clocks, the date, the versions, and per rung and size: seconds, TFLOP/s (2 n³ / t), the
ratio to cuBLAS, the largest error relative to cuBLAS's largest value, and the registers the
driver reports.  ``tests/kernels/test_sgemm_record.py`` replays the record.
"""
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gpu_lessons import puzzles  # noqa: E402
from gpu_lessons.kernels import to_cuda  # noqa: E402

#: Controls that split rung 5's two changes apart (what each alone does on the GPU), and rung 4
#: with its stages filled by cp.async instead of through registers.
CONTROLS = ("rung4_stages_unrolled", "rung5_stages_not_unrolled", "rung4_cp_async")
RUNGS = ("matmul_naive", "matmul_tiled", "matmul_register", "sgemm_1d_blocktile",
         "sgemm_2d_blocktile", "sgemm_vectorized", "sgemm_double_buffered", "sgemm_warptile")
SIZES = (2048, 4096, 8192)


def rung4_stages_unrolled(t, a, b, c, m, n, k):
    """Control: rung 4 (sgemm_double_buffered) with its stage loop unrolled as rung 5's is."""
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
    for k0 in range(0, k, 16):
        for s in range(2):                   # unrolled: each stage's addresses are constants
            kt = k0 + 8 * s
            if kt + 8 < k:                       # start loading the next tile ...
                ga[0], ga[1], ga[2], ga[3] = t.vload(a, (row0 + arow) * k + kt + 8 + acol, 4)
                gb[0], gb[1], gb[2], gb[3] = t.vload(b, (kt + 8 + brow) * n + col0 + bcol, 4)
            for kk in range(8):                  # ... compute on this one while it arrives ...
                ra[0], ra[1], ra[2], ra[3] = t.vload(sa, (s, kk, ty * 4), 4)
                ra[4], ra[5], ra[6], ra[7] = t.vload(sa, (s, kk, 64 + ty * 4), 4)
                rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, kk, tx * 4), 4)
                rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, kk, 64 + tx * 4), 4)
                for i in range(8):
                    for j in range(8):
                        acc[i, j] += ra[i] * rb[j]
            if kt + 8 < k:                       # ... and store it in the other stage
                for q in range(4):
                    sa[1 - s, acol + q, arow] = ga[q]
                t.vstore(sb, (1 - s, brow, bcol), (gb[0], gb[1], gb[2], gb[3]))
            t.sync()                             # one barrier a tile
    for i in range(8):
        r = (row0 + ty * 4 + i % 4 + i // 4 * 64) * n + col0 + tx * 4
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 64, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def rung5_stages_not_unrolled(t, a, b, c, m, n, k):
    """Control: rung 5 (sgemm_warptile) with its stage index computed at run time, as in
    rung 4: the warp tile alone."""
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


def rung4_cp_async(t, a, b, c, m, n, k):
    """Control: rung 4 with asynchronous copies: the tiles go to shared memory without registers, a's
    as it lies in memory (rows of 8), read along k as float4s; one barrier a tile."""
    sa = t.shared((2, 128, 8), np.float32)
    sb = t.shared((2, 8, 128), np.float32)
    acc = t.local((8, 8), np.float32)
    ra = t.local((8, 4), np.float32)
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
    t.copy_async(sa, (0, arow, acol), a, (row0 + arow) * k + acol, 4)
    t.copy_async(sb, (0, brow, bcol), b, brow * n + col0 + bcol, 4)
    t.commit()
    for k0 in range(0, k, 8):
        s = k0 // 8 % 2
        t.wait(0)
        t.sync()
        if k0 + 8 < k:
            t.copy_async(sa, (1 - s, arow, acol), a, (row0 + arow) * k + k0 + 8 + acol, 4)
            t.copy_async(sb, (1 - s, brow, bcol), b, (k0 + 8 + brow) * n + col0 + bcol, 4)
        t.commit()
        for h in range(2):                   # k-steps 4h .. 4h + 3
            for i in range(8):
                r = ty * 4 + i % 4 + i // 4 * 64
                ra[i, 0], ra[i, 1], ra[i, 2], ra[i, 3] = t.vload(sa, (s, r, 4 * h), 4)
            for kk in range(4):
                rb[0], rb[1], rb[2], rb[3] = t.vload(sb, (s, 4 * h + kk, tx * 4), 4)
                rb[4], rb[5], rb[6], rb[7] = t.vload(sb, (s, 4 * h + kk, 64 + tx * 4), 4)
                for i in range(8):
                    for j in range(8):
                        acc[i, j] += ra[i, kk] * rb[j]
    for i in range(8):
        r = (row0 + ty * 4 + i % 4 + i // 4 * 64) * n + col0 + tx * 4
        t.vstore(c, r, (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3]))
        t.vstore(c, r + 64, (acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7]))


def worked_kernels():
    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def size_of(p, n: int) -> dict:
    return {"m": n, "n": n, "k": n} if "m" in p.params else {"n": n}


def launch_args(p, n, a, b, c):
    """The kernel's arguments in the puzzle's order: the arrays flat, then the sizes."""
    arrays = {"a": a, "b": b, "c": c}
    return tuple(arrays[name] if name in arrays else size_of(p, n)[name] for name in p.params)


def timed(cp, fn, reps=10) -> float:
    fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return float(np.median(times))


def _kernel(ref, name):
    """(puzzle whose launch it takes, kernel): a rung's worked kernel, or a control here."""
    if name in CONTROLS:
        pid = "sgemm_double_buffered" if name.startswith("rung4") else "sgemm_warptile"
        return puzzles.find(pid), globals()[name]
    p = puzzles.find(name)
    return p, getattr(ref, p.kernel_name)


def main(out, rounds=3):
    import cupy as cp

    ref = worked_kernels()
    props = cp.cuda.runtime.getDeviceProperties(0)
    record = {
        "date": time.strftime("%Y-%m-%d"), "gpu": props["name"].decode(),
        "sm_count": props["multiProcessorCount"], "clock_khz": props["clockRate"],
        "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "driver": cp.cuda.runtime.driverGetVersion(),
        "cupy_tf32": os.environ.get("CUPY_TF32", ""),
        "build": "CuPy RawModule, default NVRTC options (FMA contraction on)",
        "timing": (f"CUDA events; per round the median of 10 launches after one warm-up; "
                   f"{rounds} rounds, cuBLAS and every kernel in turn; seconds: the median "
                   f"round"),
        "sizes": [],
    }
    rng = np.random.default_rng(0)
    for n in SIZES:
        a = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        b = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        want = a @ b
        scale = float(cp.abs(want).max())
        runs = {}
        for name in RUNGS + CONTROLS:
            p, kernel = _kernel(ref, name)
            c = cp.zeros((n, n), np.float32)
            host = np.zeros(1, np.float32)
            src = to_cuda(kernel, *launch_args(p, n, host, host, host))
            f = cp.RawModule(code=str(src)).get_function(src.kernel_name)
            grid, block = p.launch(**size_of(p, n))
            grid = grid if isinstance(grid, tuple) else (grid,)
            block = block if isinstance(block, tuple) else (block,)
            args = tuple(np.int32(v) if isinstance(v, int) else v.ravel()
                         for v in launch_args(p, n, a, b, c))
            f(grid, block, args)
            err = float(cp.abs(c - want).max()) / scale
            runs[name] = (f, grid, block, args, err)
        times = {name: [] for name in ("cublas", *runs)}
        for _ in range(rounds):
            times["cublas"].append(timed(cp, lambda a=a, b=b: a @ b))
            for name, (f, grid, block, args, _) in runs.items():
                times[name].append(timed(cp, lambda f=f, g=grid, bl=block, ar=args:
                                         f(g, bl, ar)))
        t_cublas = float(np.median(times["cublas"]))
        row = {"n": n, "cublas_s": t_cublas, "cublas_tflops": 2 * n**3 / t_cublas / 1e12,
               "cublas_rounds_s": times["cublas"], "rungs": [], "controls": []}
        for name, (f, grid, block, _, err) in runs.items():
            t = float(np.median(times[name]))
            entry = {"kernel": name, "grid": list(grid), "block": list(block), "seconds": t,
                     "rounds_s": times[name], "tflops": 2 * n**3 / t / 1e12,
                     "of_cublas": t_cublas / t, "max_rel_error": err,
                     "registers": int(f.num_regs),
                     "local_bytes": int(f.attributes["local_size_bytes"])}
            row["controls" if name in CONTROLS else "rungs"].append(entry)
            print(f"n={n} {name}: {2 * n**3 / t / 1e12:.2f} TFLOP/s = "
                  f"{100 * t_cublas / t:.1f} % of cuBLAS {2 * n**3 / t_cublas / 1e12:.2f}; "
                  f"error {err:.1e}; {f.num_regs} registers, "
                  f"{f.attributes['local_size_bytes']} B local", flush=True)
        record["sizes"].append(row)
        with open(out, "w") as fh:   # what is measured so far survives a timeout
            json.dump(record, fh, indent=1)


def add_sass(path):
    """Add what NVRTC makes of each rung for sm_90 (default build, no GPU needed): registers,
    local memory, SASS instructions, FFMA and shared loads (LDS, of them LDS.128) in the
    kernel, per rung, under ``"sass"`` with the compiler's version."""
    from gpu_lessons.kernels import compile as compile_kernel

    ref = worked_kernels()
    with open(path) as fh:
        record = json.load(fh)
    rows, compiler = [], None
    for name in RUNGS + CONTROLS:
        p, kernel = _kernel(ref, name)
        z = np.zeros(1, np.float32)
        ck = compile_kernel(kernel, *launch_args(p, 128, z, z, z), exact=False)
        sass = [line.text for line in ck.sass]
        compiler = f"NVRTC {ck.nvrtc}, {' '.join(ck.options)}"
        rows.append({"kernel": name, "registers": ck.registers_per_thread,
                     "local_bytes": ck.local_bytes, "instructions": len(sass),
                     "ffma": sum("FFMA" in t for t in sass),
                     "lds": sum("LDS" in t for t in sass),
                     "lds128": sum("LDS.128" in t for t in sass)})
    record["sass"] = {"compiler": compiler, "arch": "sm_90", "kernels": rows}
    with open(path, "w") as fh:
        json.dump(record, fh, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--sass":
        add_sass(sys.argv[2])
    else:
        main(sys.argv[1])
