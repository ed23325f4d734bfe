"""The hgemm_mma puzzle's worked kernel against cuBLAS BF16 on an H200 (one run).

    PYTHONUNBUFFERED=1 python3 tools/device/hgemm_h200.py OUT.json
    python3 tools/device/hgemm_h200.py --dry

The worked kernel (``solutions/puzzle_kernels.py``: 128 x 128 tiles of c a block of eight
warps, each warp 64 x 32 of them in 16 float32 accumulator fragments, two cp.async stages of a
k step of 32, ``t.ldmatrix`` x4 for a and x4 .trans for b, 16 ``t.mma`` a k step of 16),
translated by ``to_cuda`` and timed with ``gpu_lessons.kernels.run_on_gpu`` (CuPy's NVRTC,
default build: FMA contraction on, as cuBLAS is built; median of 10 CUDA-event timings after 2
warm-ups), at n = 2048 and 4096 on random bfloat16 inputs with float32 output; beside it
``torch.matmul`` on the same bfloat16 matrices (cuBLAS, bfloat16 output, median of 10 after 3
warm-ups).  The record keeps both times, TFLOP/s (2 n^3 FLOPs), the kernel's share of cuBLAS,
its largest error against a float32 product of the same inputs, relative to that product's
largest value, and the kernel's source.  ``configs`` holds the variants of the same kernel
tried in the run at n = 4096 (the block tile, the warps, ``t.launch_bounds``): the tile line
of the worked kernel's source rewritten, everything else the same.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gpu_lessons import kernels  # noqa: E402
from gpu_lessons.kernels.lang import compile_kernel  # noqa: E402

SIZES = (2048, 4096)
#: The worked kernel's tile line, and the variants tried beside it: (BM, BN, blocks per SM
#: asked of the compiler through t.launch_bounds, or 0 for none).
TILE_LINE = "    BM, BN = 128, 128"
CONFIGS = ((128, 128, 0), (128, 128, 2), (64, 128, 0), (128, 64, 0), (64, 128, 3),
           (128, 64, 3), (64, 64, 0))
#: Text edits that turn the worked kernel's two stages into three, in dynamic shared memory
#: (56,832 B for 128 x 128: over the 48 KB of a static array): the shapes read t.block_dim,
#: tile k0 + 64 is copied while tile k0 is used, and t.wait(1) leaves one group in flight.
THREE_STAGES = (
    ("t.shared((2, BM, 40)", "t.shared((3, t.block_dim.x // 2, 40)"),
    ("t.shared((2, 32, BN + 8)", "t.shared((3, 32, t.block_dim.x // 2 + 8)"),
    ("""    t.commit()
    for k0 in range(0, k, 32):
        s = k0 // 32 % 2
        t.wait(0)
""", """    t.commit()
    for j in range(BM * 4 // THREADS):
        f = tid + j * THREADS
        t.copy_async(sa, (1, f // 4, f % 4 * 8), a, (row0 + f // 4) * k + 32 + f % 4 * 8, 8)
    for j in range(BN * 4 // THREADS):
        f = tid + j * THREADS
        t.copy_async(sb, (1, f // (BN // 8), f % (BN // 8) * 8), b,
                     (32 + f // (BN // 8)) * n + col0 + f % (BN // 8) * 8, 8)
    t.commit()
    for k0 in range(0, k, 32):
        s = k0 // 32 % 3
        t.wait(1)
"""),
    ("if k0 + 32 < k:", "if k0 + 64 < k:"),
    ("(1 - s, ", "((s + 2) % 3, "),
    ("k0 + 32 +", "k0 + 64 +"),
)


def three_stages(worked):
    """The worked 128 x 128 kernel with three cp.async stages (k a multiple of 32, >= 64)."""
    source = inspect.getsource(worked)
    for old, new in THREE_STAGES:
        if old not in source:
            raise ValueError(f"the worked kernel has no {old.strip()!r} to change")
        source = source.replace(old, new)
    return compile_kernel(source)


def _worked():
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.hgemm_mma_kernel


def variant(worked, bm, bn, per_sm):
    """The worked kernel with a bm x bn block tile (and ``t.launch_bounds`` if per_sm)."""
    source = inspect.getsource(worked)
    if TILE_LINE not in source:
        raise ValueError(f"the worked kernel has no line {TILE_LINE.strip()!r} to vary")
    line = f"    BM, BN = {bm}, {bn}"
    if per_sm:
        line += f"\n    t.launch_bounds({bm * bn // 64}, {per_sm})"
    return compile_kernel(source.replace(TILE_LINE, line))


def shared_bytes(bm, bn):
    """Its two stages of a (bm x 40) and b (32 x (bn + 8)), 2 bytes an element."""
    return 2 * (bm * 40 + 32 * (bn + 8)) * 2


def _inputs(n, rng):
    a = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    return a, b, np.full(n * n, np.nan, np.float32)


def _launch(bm, bn, n):
    return (n // bn, n // bm), bm * bn // 64


def main(argv):
    worked = _worked()
    rng = np.random.default_rng(0)
    if "--dry" in argv:
        for bm, bn, per_sm in CONFIGS:
            kernel = variant(worked, bm, bn, per_sm)
            n = 256
            a, b, c = _inputs(n, rng)
            kernels.run(kernel, *_launch(bm, bn, n), a, b, c, n, n, n)
            want = a.astype(np.float32).reshape(n, n) @ b.astype(np.float32).reshape(n, n)
            err = float(np.abs(c.reshape(n, n) - want).max() / np.abs(want).max())
            ck = kernels.compile(kernel, a, b, c, n, n, n, arch="sm_90")
            print(f"{bm} x {bn} (launch_bounds {per_sm}): simulated 256^3, error {err:.1e}, "
                  f"{ck.registers} registers, {ck.local_bytes} B local, "
                  f"{ck.static_shared_bytes} B shared (counted {shared_bytes(bm, bn)})")
        n = 256
        a, b, c = _inputs(n, rng)
        kernel = three_stages(worked)     # the simulator holds a block to 48 KB: GPU only
        src = kernels.to_cuda(kernel, a, b, c, n, n, n)
        ck = kernels.compile(kernel, a, b, c, n, n, n, arch="sm_90")
        print(f"three stages: {ck.registers} registers, {ck.local_bytes} B local, dynamic shared "
              f"{src.dynamic_shared_bytes(_launch(128, 128, n)[1], a, b, c, n, n, n)} B")
        return
    import cupy as cp
    import torch

    record = {"what": __doc__.strip().splitlines()[0], "how": "tools/device/hgemm_h200.py",
              "gpu": torch.cuda.get_device_name(0), "cupy": cp.__version__,
              "torch": torch.__version__, "driver": cp.cuda.runtime.driverGetVersion(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "kernel_source": inspect.getsource(worked), "tile": [128, 128, 32], "stages": 2,
              "threads": 256, "shared_bytes": shared_bytes(128, 128), "sizes": [],
              "configs": []}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def measure(kernel, bm, bn, n, a, b, c, ta, tb, ref):
        run = kernels.run_on_gpu(kernel, *_launch(bm, bn, n), a, b, c, n, n, n,
                                 repeats=10, exact=False)
        err = float(np.abs(c.reshape(n, n) - ref).max() / np.abs(ref).max())
        return run, err

    for n in SIZES:
        a, b, c = _inputs(n, rng)
        ta = torch.from_numpy(a.view(np.int16).reshape(n, n)).cuda().view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16).reshape(n, n)).cuda().view(torch.bfloat16)
        ref = (ta.float() @ tb.float()).cpu().numpy()
        times = []
        for i in range(13):
            start.record()
            torch.matmul(ta, tb)
            end.record()
            end.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end) * 1e-3)
        cublas = float(np.median(times))
        flops = 2 * n ** 3
        run, err = measure(worked, 128, 128, n, a, b, c, ta, tb, ref)
        mine = run.timing.median
        row = {"n": n, "kernel_s": mine, "kernel_samples_s": list(run.timing.samples),
               "kernel_tflops": flops / mine / 1e12, "registers": run.registers_per_thread,
               "cublas_s": cublas, "cublas_samples_s": times,
               "cublas_tflops": flops / cublas / 1e12, "of_cublas": cublas / mine,
               "max_rel_error": err}
        record["sizes"].append(row)
        print(f"  n = {n}: kernel {row['kernel_tflops']:.1f} TFLOP/s, cuBLAS "
              f"{row['cublas_tflops']:.1f} TFLOP/s ({row['of_cublas']:.1%}), error {err:.2e}, "
              f"{row['registers']} registers", flush=True)
        if n != 4096:
            continue
        for bm, bn, per_sm in CONFIGS:
            c[...] = np.nan
            run, err = measure(variant(worked, bm, bn, per_sm), bm, bn, n, a, b, c, ta, tb, ref)
            s = run.timing.median
            cfg = {"tile": [bm, bn, 32], "threads": bm * bn // 64, "stages": 2,
                   "launch_bounds_blocks": per_sm, "shared_bytes": shared_bytes(bm, bn),
                   "registers": run.registers_per_thread, "n": n, "kernel_s": s,
                   "kernel_samples_s": list(run.timing.samples), "kernel_tflops": flops / s / 1e12,
                   "of_cublas": cublas / s, "max_rel_error": err}
            record["configs"].append(cfg)
            print(f"    {bm} x {bn}, launch_bounds {per_sm}: {cfg['kernel_tflops']:.1f} TFLOP/s "
                  f"({cfg['of_cublas']:.1%}), {cfg['registers']} registers, error {err:.2e}",
                  flush=True)
        c[...] = np.nan
        run, err = measure(three_stages(worked), 128, 128, n, a, b, c, ta, tb, ref)
        s = run.timing.median
        cfg = {"tile": [128, 128, 32], "threads": 256, "stages": 3, "launch_bounds_blocks": 0,
               "shared_bytes": run.dynamic_shared_bytes, "registers": run.registers_per_thread, "n": n,
               "kernel_s": s, "kernel_samples_s": list(run.timing.samples),
               "kernel_tflops": flops / s / 1e12, "of_cublas": cublas / s, "max_rel_error": err}
        record["configs"].append(cfg)
        print(f"    128 x 128, three stages, {cfg['shared_bytes']} B dynamic shared: "
              f"{cfg['kernel_tflops']:.1f} TFLOP/s ({cfg['of_cublas']:.1%}), "
              f"{cfg['registers']} registers, error {err:.2e}", flush=True)
    Path(argv[1]).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main(sys.argv)
