"""The hgemm_mma puzzle's worked kernel against cuBLAS BF16 on an H200 (one run).

    PYTHONUNBUFFERED=1 python3 tools/device/hgemm_h200.py OUT.json
    python3 tools/device/hgemm_h200.py --dry

The worked kernel (``solutions/puzzle_kernels.py``: 32 x 32 tiles, a block of four warps,
cp.async stages, ``t.ldmatrix`` and two ``t.mma`` a k step), translated by ``to_cuda`` and timed
with ``gpu_lessons.kernels.run_on_gpu`` (CuPy's NVRTC, default build: FMA contraction on, as
cuBLAS is built; median of 10 CUDA-event timings after 2 warm-ups), at n = 2048 and 4096 on
random bfloat16 inputs with float32 output; beside it ``torch.matmul`` on the same bfloat16
matrices (cuBLAS, bfloat16 output, median of 10 after 3 warm-ups).  The record keeps both times,
TFLOP/s (2 n^3 FLOPs), the kernel's share of cuBLAS and its largest error against a float32
product of the same inputs, relative to that product's largest value.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gpu_lessons import kernels  # noqa: E402

SIZES = (2048, 4096)


def _worked():
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.hgemm_mma_kernel


def _inputs(n, rng):
    a = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    return a, b, np.zeros(n * n, np.float32)


def main(argv):
    kernel = _worked()
    rng = np.random.default_rng(0)
    if "--dry" in argv:
        a, b, c = _inputs(64, rng)
        kernels.run(kernel, (2, 2), 128, a, b, c, 64, 64, 64)
        want = a.astype(np.float32).reshape(64, 64) @ b.astype(np.float32).reshape(64, 64)
        print("simulated 64^3, largest error", float(np.abs(c.reshape(64, 64) - want).max()))
        kernels.to_cuda(kernel, a, b, c, 64, 64, 64)
        return
    import cupy as cp
    import torch

    record = {"what": __doc__.strip().splitlines()[0], "how": "tools/device/hgemm_h200.py",
              "gpu": torch.cuda.get_device_name(0), "cupy": cp.__version__,
              "torch": torch.__version__, "driver": cp.cuda.runtime.driverGetVersion(),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sizes": []}
    for n in SIZES:
        a, b, c = _inputs(n, rng)
        run = kernels.run_on_gpu(kernel, (n // 32, n // 32), 128, a, b, c, n, n, n,
                                 repeats=10, exact=False)
        ta = torch.from_numpy(a.view(np.int16).reshape(n, n)).cuda().view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16).reshape(n, n)).cuda().view(torch.bfloat16)
        ref = (ta.float() @ tb.float()).cpu().numpy()
        err = float(np.abs(c.reshape(n, n) - ref).max() / np.abs(ref).max())
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for i in range(13):
            start.record()
            torch.matmul(ta, tb)
            end.record()
            end.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end) * 1e-3)
        cublas = float(np.median(times))
        mine = run.timing.median
        flops = 2 * n ** 3
        row = {"n": n, "kernel_s": mine, "kernel_samples_s": list(run.timing.samples),
               "kernel_tflops": flops / mine / 1e12, "registers": run.registers_per_thread,
               "cublas_s": cublas, "cublas_samples_s": times,
               "cublas_tflops": flops / cublas / 1e12, "of_cublas": cublas / mine,
               "max_rel_error": err}
        record["sizes"].append(row)
        print(f"  n = {n}: kernel {row['kernel_tflops']:.1f} TFLOP/s, cuBLAS "
              f"{row['cublas_tflops']:.1f} TFLOP/s ({row['of_cublas']:.1%}), error {err:.2e}")
    Path(argv[1]).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main(sys.argv)
