"""Record every GPU measurement of ``gpu_lessons.measure`` on one machine, as raw JSON.

Run from the repository root on a machine with an NVIDIA GPU and CuPy:

    PYTHONUNBUFFERED=1 python3 tools/device/measure_h200.py OUT_DIR [SECTION ...]

It writes ``OUT_DIR/h200_measurements.json`` after every section (so a run cut short still
leaves what it finished) and prints a short summary last.  Each section is the raw half of a
measurement (``measure_*_raw``); the ``*_from_raw`` beside it turns it into GB/s,
TFLOP/s or cycles next to the models, here and in ``tests/measure/test_measure.py``.
Sections that fail are recorded with their traceback; the others still run.
"""

import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from gpu_lessons.measure import cpu, gpu, gpu_compute, gpu_memory, gpu_occupancy, gpu_system


def _cmd(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def meta():
    import cupy
    import numpy

    smi = _cmd(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,"
                "clocks.sm,clocks.mem,temperature.gpu,power.draw,pstate",
                "--format=csv,noheader"])
    return {"date_utc": gpu.timestamp(), "python": platform.python_version(),
            "numpy": numpy.__version__, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "nvidia_smi": smi, "nvidia_smi_header": _cmd(["nvidia-smi"]).splitlines()[:4],
            "cpu": cpu.cpu_label(), "cores": os.cpu_count(), "kernel": platform.release(),
            "cupy_tf32": os.environ.get("CUPY_TF32", ""),
            "gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
            "script": "tools/device/measure_h200.py"}


def _gemm_all():
    """Every precision and size at full clock (``mode="burst"``: 1 s idle before timing)."""
    runs = []
    for precision, sizes in (("fp32", (2048, 4096, 8192)),
                             ("fp16", (1024, 2048, 4096, 8192, 16384)),
                             ("bf16", (1024, 2048, 4096, 8192, 16384))):
        for n in sizes:
            try:
                runs.append(gpu_compute.measure_gemm_raw(precision, n, mode="burst"))
            except Exception as exc:
                runs.append({"precision": precision, "n": n, "error": repr(exc)[:500]})
            print(f"    gemm {precision} n={n} done", flush=True)
    return runs


def _gemm_sustained():
    """8192^3 after 2 s of back-to-back products: the rate at the power limit."""
    return [gpu_compute.measure_gemm_raw(p, 8192, mode="sustained", repeats=20)
            for p in ("fp32", "fp16", "bf16")]


def _torch_gemm(torch, dtype, n, mode):
    """PyTorch's ``a @ b`` settled and timed as ``measure_gemm_raw`` does, on one allocation."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)
    b = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    if mode == "burst":
        time.sleep(1.0)
    else:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
    torch.matmul(a, b, out=c)  # one warm-up, as time_cuda does
    samples = []
    for _ in range(10 if mode == "burst" else 20):
        s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        torch.matmul(a, b, out=c)
        s1.record()
        s1.synchronize()
        samples.append(s0.elapsed_time(s1) * 1e-3)
    return {"timing": {"samples": samples, "warmup": 1, "method": "torch.cuda.Event"},
            "mode": mode, "n": n}


def _gemm_extra():
    """FP16/BF16 8192^3 on uniform [0, 1) data, the same through PyTorch, and the clocks."""
    runs = [gpu_compute.measure_gemm_raw(p, 8192, data="uniform") for p in ("fp16", "bf16")]
    out = {"cupy_uniform": runs, "torch": []}
    try:
        import torch

        for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            for mode in ("burst", "sustained"):
                out["torch"].append({"precision": name, "torch": torch.__version__,
                                     **_torch_gemm(torch, dtype, 8192, mode)})
    except Exception as exc:
        out["torch_error"] = repr(exc)[:500]
    out["nvidia_smi_after"] = _cmd(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,"
                                    "power.limit,temperature.gpu,clocks_event_reasons.active",
                                    "--format=csv"])
    return out


def _access_all(pattern):
    return [gpu_memory.measure_access_raw(pattern, element_bytes=eb) for eb in (4, 8, 16)]


def _bank_all():
    return [gpu_memory.measure_bank_raw(element_bytes=eb, iters=1024) for eb in (4, 8, 16)]


def _cpu_all():
    out = {"note": "the GPU machine's own CPU, for the record"}
    for kind in ("copy", "triad"):
        b = cpu.cpu_bandwidth(kind)
        out[kind] = {"device": b.device, "kind": kind, "bytes_moved": b.bytes_moved,
                     "array_bytes": b.array_bytes, "timing": b.timing.to_raw(), "note": b.note}
    g = cpu.cpu_gemm(4096)
    out["gemm"] = {"name": g.name, "flops": g.flops, "min_bytes": g.min_bytes,
                   "timing": g.timing.to_raw()}
    return out


SECTIONS = {
    "device": gpu.measure_device_raw,
    "copy": lambda: gpu_memory.measure_bandwidth_raw("copy"),
    "triad": lambda: gpu_memory.measure_bandwidth_raw("triad"),
    "size_sweep": gpu_memory.measure_size_sweep_raw,
    "stride": lambda: _access_all("stride"),
    "offset": lambda: _access_all("offset"),
    "stride_l2fetch": lambda: [gpu_memory.measure_access_raw("stride", element_bytes=eb,
                                                            l2_fetch_granularity=g)
                               for eb, g in ((4, 32), (4, 128), (8, 32), (16, 32))],
    "bank": _bank_all,
    "gemm": _gemm_all,
    "gemm_sustained": _gemm_sustained,
    "gemm_extra": _gemm_extra,
    "launch": gpu_system.measure_launch_raw,
    "transfers": gpu_system.measure_transfers_raw,
    "occupancy": gpu_occupancy.measure_occupancy_raw,
    "simt": gpu_compute.measure_simt_raw,
    "cpu": _cpu_all,
}


def summary(result):
    lines = []
    if "copy" in result:
        for k in ("copy", "triad"):
            if k in result:
                b = gpu_memory.bandwidth_from_raw(result[k])
                lines.append(f"{k}: {b.gbps:,.0f} GB/s = {100 * b.gbps / 4800:.1f} % of 4800")
    for g in result.get("gemm", []) + result.get("gemm_sustained", []):
        if "error" in g:
            lines.append(f"gemm {g['precision']} n={g['n']}: ERROR {g['error'][:100]}")
        else:
            r = gpu_compute.gemm_from_raw(g)
            pct = f"{100 * r.fraction_of_peak:.0f} %" if r.peak_flops else "?"
            lines.append(f"gemm {g['precision']} n={g['n']} {g['mode']}: {r.tflops:,.1f} TFLOP/s"
                         f" ({pct}), err {g['relative_error']:.1e}; {r.conditions}")
    for sweep in result.get("stride", []) + result.get("offset", []) + \
            result.get("stride_l2fetch", []):
        n, eb = sweep["n_elements"], sweep["element_bytes"]
        pts = []
        for p in sweep["points"]:
            t = sorted(p["timing"]["samples"])[len(p["timing"]["samples"]) // 2]
            x = p["stride"] if sweep["pattern"] == "stride" else p["offset"]
            pts.append(f"{x}:{2 * n * eb / t / 1e9:,.0f}")
        lines.append(f"{sweep['pattern']} {eb}B (L2 fetch {sweep.get('l2_fetch_granularity')} B)"
                     " useful GB/s " + " ".join(pts))
    for b in result.get("bank", []):
        loads = b["warps_per_block"] * b["iters"] * b["loads_per_iter"]
        pts = " ".join(f"{p['stride']}:{float(np.median(p['block_cycles'])) / loads:.2f}"
                       for p in b["points"])
        lines.append(f"bank {b['element_bytes']}B cycles/load {pts}")
    extra = result.get("gemm_extra", {})
    for g in extra.get("cupy_uniform", []):
        lines.append(f"gemm uniform {g['precision']}: {gpu_compute.gemm_from_raw(g).tflops:,.1f} TFLOP/s")
    for g in extra.get("torch", []):
        t = float(np.median(g["timing"]["samples"]))
        lines.append(f"torch {g['precision']} n={g['n']} {g['mode']}: "
                     f"{2 * g['n'] ** 3 / t / 1e12:,.1f} TFLOP/s")
    if extra:
        lines.append(str(extra.get("nvidia_smi_after")) + " " + str(extra.get("torch_error", "")))
    if "size_sweep" in result:
        lines.append(repr(gpu_memory.size_sweep_from_raw(result["size_sweep"])))
    if "launch" in result:
        lines.append(repr(gpu_system.launch_from_raw(result["launch"])))
    if "transfers" in result:
        lines.append(repr(gpu_system.transfers_from_raw(result["transfers"])))
    if "occupancy" in result:
        occ = result["occupancy"]
        lines.append(f"occupancy: {len(occ['rows'])} rows, {len(occ['errors'])} errors")
    if "simt" in result:
        lines.append(repr(gpu_compute.simt_from_raw(result["simt"])))
    return "\n".join(lines)


def main(argv):
    try:
        import cupy  # noqa: F401 - every section measures through CuPy
    except ImportError:
        sys.exit("measure_h200.py needs CuPy and an NVIDIA GPU (pip install cupy-cuda12x); "
                 "nothing was measured")
    out_dir = Path(argv[1] if len(argv) > 1 else ".")
    wanted = argv[2:] or list(SECTIONS)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "h200_measurements.json"
    result = {"meta": meta(), "errors": {}, "seconds": {}}
    start = time.perf_counter()
    for name in wanted:
        t0 = time.perf_counter()
        print(f"[{t0 - start:6.1f} s] {name} ...", flush=True)
        try:
            result[name] = SECTIONS[name]()
        except Exception:
            result["errors"][name] = traceback.format_exc()[-3000:]
            print(result["errors"][name], flush=True)
        result["seconds"][name] = round(time.perf_counter() - t0, 2)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(path)
    print(f"[{time.perf_counter() - start:6.1f} s] done; wrote {path}", flush=True)
    try:
        print(summary(result))
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    main(sys.argv)
