"""Re-measure the capstone's filter (mystery 6) on an NVIDIA GPU: time, SASS, Nsight Compute.

One command, on a machine with CuPy, nvcc, cuobjdump and Nsight Compute (ncu) on the PATH:

    python3 tools/device/capstone_fir.py            # writes $OUT/capstone_fir.json (or ./)

What it does, each kernel over 2^26 floats (x read once, y written once, 512 MiB together):

* ``fir40_v1``  the mystery: 40 taps computed per thread (``w[k] = a·k + b``, ``s[k] = c·k``),
  one float per thread, launched with 120 KiB of dynamic shared memory per block that it never
  touches: one 256-thread block, 8 warps, per SM (its 16 registers would allow 64);
* ``fir40_v2``  taps in shared memory, loaded once per block;
* ``fir40_v3``  taps in ``__constant__`` memory, one float per thread;
* ``fir40_v4``  taps in ``__constant__`` memory, float4 loads, ``__launch_bounds__(256, 8)``
  (the lesson's fix);
* ``copy_f4``   a float4 copy of the same bytes;
* ``ldc_probe`` indexed ``__constant__`` loads (LDC.64) with little else, to measure the
  constant-load rate, which NVIDIA does not document (the run of 2026-12-01 measured 0.444
  warp-wide LDC per SM per clock; ``gpu_lessons/data/compute_capabilities.toml`` takes it from
  there).

For each: outputs checked against NumPy (float64 reference, relative error < 1e-4), the median
of 20 timed runs with CUDA events after 3 warm-ups, registers as the CUDA runtime reports them,
executed SASS instructions per thread by opcode (``nvcc -cubin`` + ``cuobjdump -sass``: every
loop is unrolled, so each listed instruction runs once per thread), and Nsight Compute's
SM throughput, DRAM throughput, issue-slot and pipe utilisation (``--clock-control none``).
The JSON has the shape of ``tests/data/h200_capstone_fir.json`` (``kernels.NAME.median_s``,
``kernels.NAME.ncu``) plus the raw samples and the SASS counts.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

N = 1 << 26
TAPS = 40
THREADS = 256
V1_PAD_SHARED = 120 * 1024      # one block per SM: 8 warps
LDC_ITERS = 4096

SOURCE = r"""
__constant__ float w[40], s[40];
__constant__ float tab[4096 + 64];

extern "C" __global__ void fir40_v1(const float* __restrict__ x, float* __restrict__ y, long n,
                                    float a, float b, float c) {
    // the launch asks for 120 KiB of dynamic shared memory it never touches: residency only
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wr[40], sr[40];
    #pragma unroll
    for (int k = 0; k < 40; ++k) { wr[k] = fmaf(a, (float)k, b); sr[k] = c * k; }
    float v = x[i], acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc = fmaf(wr[k], v + sr[k], acc);
    y[i] = acc;
}

extern "C" __global__ void fir40_v2(const float* __restrict__ x, float* __restrict__ y, long n,
                                    const float* __restrict__ taps) {
    __shared__ float ws[40], ss[40];
    if (threadIdx.x < 40) { ws[threadIdx.x] = taps[threadIdx.x]; ss[threadIdx.x] = taps[40 + threadIdx.x]; }
    __syncthreads();
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc = fmaf(ws[k], v + ss[k], acc);
    y[i] = acc;
}

extern "C" __global__ void fir40_v3(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc = fmaf(w[k], v + s[k], acc);
    y[i] = acc;
}

extern "C" __global__ void __launch_bounds__(256, 8)
fir40_v4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = x[i], acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < 40; ++k) {
        acc.x = fmaf(w[k], v.x + s[k], acc.x);
        acc.y = fmaf(w[k], v.y + s[k], acc.y);
        acc.z = fmaf(w[k], v.z + s[k], acc.z);
        acc.w = fmaf(w[k], v.w + s[k], acc.w);
    }
    y[i] = acc;
}

extern "C" __global__ void copy_f4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n4) y[i] = x[i];
}

extern "C" __global__ void ldc_probe(float* __restrict__ y, int iters) {
    int j = (threadIdx.x >> 5) * 8;                    // the same in a warp, not provably uniform
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    for (int i = 0; i < iters; i += 4) {
        a0 += tab[j + i]; a1 += tab[j + i + 1]; a2 += tab[j + i + 2]; a3 += tab[j + i + 3];
    }
    y[blockIdx.x * (long)blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}
"""

NCU_METRICS = [
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
]
NCU_CORE = NCU_METRICS[:5]

KERNELS = ("fir40_v1", "fir40_v2", "fir40_v3", "fir40_v4", "copy_f4", "ldc_probe")


def _taps():
    import numpy as np

    k = np.arange(TAPS, dtype=np.float64)
    a, b, c = 0.01, 0.02, 0.03
    return (a, b, c), np.float32(a * k + b), np.float32(c * k)


def _launch(cp, mod, name, x, y):
    """Launch kernel ``name`` once; returns the callable that does it."""
    (a, b, c), w, s = _taps()
    kern = mod.get_function(name)
    if name in ("fir40_v4", "copy_f4"):
        n4 = N // 4
        return lambda: kern(((n4 + THREADS - 1) // THREADS,), (THREADS,), (x, y, cp.int64(n4)))
    grid = ((N + THREADS - 1) // THREADS,)
    if name == "fir40_v1":
        # above 48 KiB of dynamic shared memory a kernel must opt in (cudaFuncSetAttribute)
        kern.max_dynamic_shared_size_bytes = V1_PAD_SHARED
        args = (x, y, cp.int64(N), cp.float32(a), cp.float32(b), cp.float32(c))
        return lambda: kern(grid, (THREADS,), args, shared_mem=V1_PAD_SHARED)
    if name == "fir40_v2":
        taps = cp.asarray(list(w) + list(s), dtype=cp.float32)
        return lambda: kern(grid, (THREADS,), (x, y, cp.int64(N), taps))
    if name == "fir40_v3":
        return lambda: kern(grid, (THREADS,), (x, y, cp.int64(N)))
    if name == "ldc_probe":
        return lambda: kern(grid, (THREADS,), (y, cp.int32(LDC_ITERS)))
    raise ValueError(name)


def _module(cp):
    import numpy as np

    mod = cp.RawModule(code=SOURCE, options=("-std=c++17",))
    _, w, s = _taps()
    for name, values in (("w", w), ("s", s), ("tab", np.linspace(0, 1, 4096 + 64))):
        ptr = mod.get_global(name)
        arr = cp.ndarray((len(values),), cp.float32, ptr)
        arr[...] = cp.asarray(values, dtype=cp.float32)
    return mod


def _check(cp, name, x, y):
    import numpy as np

    if name == "ldc_probe":
        return True
    xh = cp.asnumpy(x).astype(np.float64)
    yh = cp.asnumpy(y).astype(np.float64)
    if name == "copy_f4":
        return bool(np.array_equal(xh, yh))
    _, w, s = _taps()
    ref = xh * float(np.sum(w, dtype=np.float64)) + float(np.dot(w.astype(np.float64), s))
    return bool(np.max(np.abs(yh - ref) / np.maximum(np.abs(ref), 1.0)) < 1e-4)


def run_once():
    """Launch every kernel once (what Nsight Compute profiles)."""
    import cupy as cp

    mod = _module(cp)
    x = cp.random.default_rng(1).random(N, dtype=cp.float32) + 0.5
    y = cp.empty_like(x)
    for name in KERNELS:
        _launch(cp, mod, name, x, y)()
    cp.cuda.runtime.deviceSynchronize()


def time_all():
    import cupy as cp

    mod = _module(cp)
    x = cp.random.default_rng(1).random(N, dtype=cp.float32) + 0.5
    y = cp.empty_like(x)
    out = {}
    for name in KERNELS:
        go = _launch(cp, mod, name, x, y)
        for _ in range(3):
            go()
        cp.cuda.runtime.deviceSynchronize()
        ok = _check(cp, name, x, y)
        samples = []
        for _ in range(20):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            go()
            stop.record()
            stop.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
        kern = mod.get_function(name)
        out[name] = {"median_s": statistics.median(samples), "samples_s": samples,
                     "correct": ok, "registers": kern.num_regs,
                     "bytes_moved": 0 if name == "ldc_probe" else 2 * N * 4}
    props = cp.cuda.runtime.getDeviceProperties(0)
    device = {"name": props["name"].decode(), "cc": f"{props['major']}.{props['minor']}",
              "sms": props["multiProcessorCount"],
              "runtime": cp.cuda.runtime.runtimeGetVersion(),
              "driver": cp.cuda.runtime.driverGetVersion(), "cupy": cp.__version__,
              "nvcc": _nvcc_version()}
    return device, out


def _nvcc_version():
    """The last line of ``nvcc --version`` ("Build cuda_13.0.r13.0/..."), or None."""
    if not shutil.which("nvcc"):
        return None
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else None


def sass_counts(cc: str):
    """Executed SASS instructions per thread by opcode (NOPs and the trailing self-branch
    left out), from nvcc -cubin and cuobjdump -sass."""
    arch = "sm_" + cc.replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp) / "fir.cu", Path(tmp) / "fir.cubin"
        src.write_text(SOURCE)
        subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(src)],
                       check=True, capture_output=True, text=True)
        listing = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True,
                                 capture_output=True, text=True).stdout
    counts, current = {}, None
    for line in listing.splitlines():
        m = re.search(r"Function : (\w+)", line)
        if m:
            current = counts.setdefault(m.group(1), Counter())
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if m and current is not None:
            words = m.group(1).split()
            op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
            if op != "NOP":
                current[op] += 1
    for c in counts.values():       # the `BRA` to itself after the last EXIT never runs
        if c.get("BRA"):
            c["BRA"] -= 1
    return {k: dict(v) for k, v in counts.items()}


def profile(script: Path):
    """Nsight Compute over one launch of each kernel; {kernel: {metric: value}}."""
    errors = []
    for metrics in (NCU_METRICS, NCU_CORE):
        cmd = ["ncu", "--clock-control", "none", "--csv", "--page", "raw",
               "--kernel-name", "regex:^(fir40|copy_f4|ldc_probe)",
               "--metrics", ",".join(metrics), sys.executable, str(script), "--once"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode == 0:
            break
        errors.append(res.stderr[-2000:] + res.stdout[-2000:])
    else:
        return {}, errors
    text = res.stdout[res.stdout.find('"ID"'):]
    rows = list(csv.DictReader(io.StringIO(text)))
    out = {}
    for row in rows[1:] if rows and not rows[0].get("ID", "").isdigit() else rows:
        name = row.get("Kernel Name", "")
        vals = {}
        for m in metrics:
            try:
                vals[m] = float(row[m].replace(",", ""))
            except (KeyError, ValueError):
                vals[m] = row.get(m)
        out[name] = vals
    return out, errors


def main():
    if "--once" in sys.argv:
        run_once()
        return
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    device, kernels = time_all()
    result = {"meta": {"date_utc": datetime.datetime.now(datetime.UTC).isoformat(),
                       "script": "tools/device/capstone_fir.py", "device": device,
                       "n_floats": N, "bytes_moved": 2 * N * 4, "ldc_iters": LDC_ITERS,
                       "v1_pad_shared_bytes": V1_PAD_SHARED, "errors": []},
              "kernels": kernels}
    if shutil.which("nvcc") and shutil.which("cuobjdump"):
        try:
            for name, c in sass_counts(device["cc"]).items():
                if name in kernels:
                    kernels[name]["sass_per_thread"] = c
        except subprocess.CalledProcessError as e:
            result["meta"]["errors"].append(f"sass: {e.stderr[-2000:]}")
    if shutil.which("ncu"):
        ncu, errors = profile(Path(__file__).resolve())
        result["meta"]["errors"] += errors
        for name, vals in ncu.items():
            key = next((k for k in kernels if name.startswith(k)), None)
            if key is None:
                continue
            kernels[key]["ncu_raw"] = vals
            sm = vals.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
            dram = vals.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")
            kernels[key]["ncu"] = {"sm_throughput_pct": sm, "dram_throughput_pct": dram}
    path = out_dir / "capstone_fir.json"
    path.write_text(json.dumps(result, indent=1))
    for name, k in kernels.items():
        print(f"{name:10s} {k['median_s'] * 1e6:9.1f} µs  correct={k['correct']}  "
              f"regs={k['registers']}  ncu={k.get('ncu')}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
