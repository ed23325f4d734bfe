"""The blind set (``tests/blind_kernels.py``) timed and profiled on a GPU.

    python3 tools/device/blind_h200.py OUT.json          # on a machine with a GPU, CuPy and ncu
    python3 tools/device/blind_h200.py OUT.json --dry    # everything but the GPU
    python3 tools/device/blind_h200.py --once            # what ncu runs: each kernel launched once

For every kernel at its full size: (a) ``gpu_lessons.kernels.run_on_gpu`` as the course times a
kernel by default (translation compiled with ``-fmad=false``, inputs reset before each launch
outside the timed window, 2 warm-up launches, 20 launches timed with CUDA events, the median),
its output checked against NumPy; (b) Nsight Compute on a second process that launches each
kernel once (the same translation and options), its rows matched to the kernels by their CUDA
names (the Python function's name, ``blind_*``).  The record (``tests/data/h200_blind.json``)
keeps the launch, the sizes, every timed sample, ncu's metrics and its raw CSV, and each
kernel's Python source with the SHA-256 of its CUDA C.
"""

import csv
import datetime
import hashlib
import inspect
import io
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import blind_kernels  # noqa: E402

from gpu_lessons.kernels import run_on_gpu, to_cuda  # noqa: E402

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sectors_srcunit_tex.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "smsp__inst_executed.sum", "launch__registers_per_thread",
           "sm__warps_active.avg.pct_of_peak_sustained_active"]
REPEATS, WARMUP = 20, 2


def ncu_command(csv_path):
    return ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
            "--kernel-name", "regex:^blind_", "--metrics", ",".join(METRICS),
            "--log-file", csv_path, sys.executable, os.path.abspath(__file__), "--once"]


def once():
    """Each kernel launched once, as run_on_gpu compiles it (ncu profiles these launches)."""
    import cupy as cp

    from gpu_lessons.kernels.cuda_types import EXACT_OPTIONS
    from gpu_lessons.kernels.gpu import launch_args
    from gpu_lessons.measure.gpu import compiled

    for case in blind_kernels.CASES:
        grid, block, args = case.make(case.full)
        source = to_cuda(case.kernel, *args)
        k = compiled(str(source), source.kernel_name, EXACT_OPTIONS)
        k(tuple(grid), tuple(block), tuple(launch_args(source, args)),
          shared_mem=source.dynamic_shared_bytes(tuple(block) + (1,) * (3 - len(block)), *args))
        cp.cuda.Device().synchronize()
        print(case.name, "launched", flush=True)


def parse_ncu(text):
    """ncu's raw page (--csv --page raw): a header, a units row, one row per launch."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[2:]
    out = {}      # kernel name -> its launches' metrics, in launch order
    for r in body:
        d = dict(zip(header, r, strict=False))
        name = d.get("Kernel Name", "").split("(")[0]
        vals = {}
        for m in METRICS:
            v = d.get(m, "").replace(",", "")
            try:
                vals[m] = float(v)
            except ValueError:
                vals[m] = None
        out.setdefault(name, []).append(vals)
    return out


def main(path, dry):
    started = time.time()
    record = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "timing": f"gpu_lessons.kernels.run_on_gpu defaults: -fmad=false, {WARMUP} warm-up "
                        f"launches, {REPEATS} launches timed with CUDA events, inputs reset "
                        "before each outside the timed window; us = median",
              "ncu_command": " ".join(ncu_command("NCU.csv")), "kernels": []}
    if not dry:
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(0)
        record["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        record["cupy"] = cp.__version__
        record["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
        record["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True)
        record["nvidia_smi"] = smi.stdout.strip()
        ver = subprocess.run(["ncu", "--version"], capture_output=True, text=True)
        record["ncu_version"] = ver.stdout.strip().splitlines()[-1] if ver.stdout else ver.stderr
    for case in blind_kernels.CASES:
        grid, block, args = case.make(case.full)
        source = to_cuda(case.kernel, *args)
        entry = {"name": case.name, "category": case.category, "kernel": case.kernel.__name__,
                 "size": case.full, "grid": list(grid), "block": list(block),
                 "scalars": [a.item() if hasattr(a, "item") else a for a in args
                             if not hasattr(a, "shape") or a.shape == ()],
                 "arrays": [[a.dtype.name, int(a.size)] for a in args
                            if hasattr(a, "shape") and a.shape != ()],
                 "cuda_sha256": hashlib.sha256(str(source).encode()).hexdigest(),
                 "python_source": inspect.getsource(case.kernel)}
        if not dry:
            r = run_on_gpu(case.kernel, grid, block, *args, repeats=REPEATS, warmup=WARMUP)
            entry["us"] = r.us
            entry["samples_us"] = [s * 1e6 for s in r.timing.samples]
            entry["registers"] = r.registers_per_thread
            try:
                case.check(args)
                entry["matches_numpy"] = True
            except AssertionError as exc:
                entry["matches_numpy"] = str(exc)[:300]
            print(f"{case.name:18s} {r.us:10.2f} us  {entry['matches_numpy']}", flush=True)
        record["kernels"].append(entry)
    record["timing_seconds"] = time.time() - started
    if dry:
        print("dry: would run", record["ncu_command"])
    else:
        csv_path = os.path.join(os.path.dirname(os.path.abspath(path)), "ncu_blind.csv")
        t0 = time.time()
        p = subprocess.run(ncu_command(csv_path), capture_output=True, text=True)
        record["ncu_seconds"] = time.time() - t0
        record["ncu_stdout_tail"] = (p.stdout + p.stderr)[-2000:]
        text = ""
        if os.path.exists(csv_path):
            with open(csv_path) as f:
                text = f.read()
        record["ncu_csv"] = text
        try:
            metrics = parse_ncu(text)
        except Exception as exc:   # keep the raw CSV whatever happens
            metrics = {}
            record["ncu_parse_error"] = repr(exc)
        for entry in record["kernels"]:     # a kernel launched twice (two strides): in order
            rows = metrics.get(entry["kernel"]) or [None]
            entry["ncu"] = rows.pop(0) if len(rows) > 1 else rows[0]
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {path} ({len(record['kernels'])} kernels, {time.time() - started:.1f} s)")


if __name__ == "__main__":
    if "--once" in sys.argv:
        once()
    else:
        main(sys.argv[1], "--dry" in sys.argv)
