"""Print the markdown tables of docs/measured/h200.md from the recorded measurements.

    python tools/device/report_h200.py [tests/data/h200_measurements.json]

Everything is computed by the ``*_from_raw`` functions of ``gpu_lessons.measure.gpu_*`` (and the
models they call),
so the document shows exactly what the tests check.
"""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu_lessons.hardware import gpu as catalog_gpu
from gpu_lessons.measure import gpu, gpu_compute, gpu_memory, gpu_occupancy, gpu_system


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


GEMM_HEADER = ("precision", "n", "data", "mode", "TFLOP/s", "of peak", "SM clock",
               "of peak at that clock", "clock held back by", "rel. error")


def gemm_row(raw):
    r = gpu_compute.gemm_from_raw(raw)
    clock = raw.get("clock") or {}
    lo, hi = clock.get("sm_mhz_min"), clock.get("sm_mhz_max")
    mhz = "—" if lo is None else (f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}") + " MHz"
    at_clock = "—" if not r.clock_peak_flops else (
        f"{100 * r.fraction_of_clock_peak:.0f} % of {r.clock_peak_flops / 1e12:,.0f}")
    return (raw["precision"], raw["n"], raw.get("data", "normal"), raw.get("mode", "—"),
            f"{r.tflops:,.1f}", f"{100 * r.fraction_of_peak:.1f} %", mhz, at_clock,
            ", ".join(clock.get("reasons", [])) or "—", f"{raw['relative_error']:.1e}")


def main(path):
    d = json.loads(Path(path).read_text())
    h200 = catalog_gpu("h200")
    m = d["meta"]
    print(f"date {m['date_utc']}; {m['nvidia_smi']}; CUDA runtime {m['cuda_runtime']}, "
          f"driver API {m['cuda_driver']}; CuPy {m['cupy']}; NumPy {m['numpy']}; "
          f"Python {m['python']}\n")

    rep = gpu.device_report_from_raw(d["device"])
    print("## Device\n")
    print(table(("quantity", "CUDA runtime", "catalog"), rep.rows) + "\n")

    print("## Bandwidth\n")
    rows = []
    for key in ("copy", "triad"):
        b = gpu_memory.bandwidth_from_raw(d[key])
        rows.append((key, f"{b.array_bytes / 2**20:,.0f} MiB", f"{b.gbps:,.0f} GB/s",
                     f"{100 * b.fraction_of(h200.bandwidth):.1f} %"))
    print(table(("kernel", "array", "bandwidth", "of 4,800 GB/s"), rows) + "\n")
    st = gpu_memory.size_sweep_from_raw(d["size_sweep"])
    print(table(("working set", "copy GB/s"),
                [(f"{s / 2**20:,.0f} MiB", f"{v:,.0f}") for s, v in
                 zip(st.working_set, st.gbps, strict=True)]) + "\n")

    print("## GEMM (cupy.matmul -> cuBLAS)\n")
    rows = [gemm_row(raw) for raw in d["gemm"] + d["gemm_sustained"]
            + d["gemm_extra"]["cupy_uniform"]]
    for raw in d["gemm_extra"]["torch"]:
        n, t = raw["n"], float(np.median(raw["timing"]["samples"]))
        tf = 2 * n**3 / t / 1e12
        rows.append((raw["precision"] + " (PyTorch " + raw["torch"] + ")", n, "normal",
                     raw["mode"], f"{tf:,.1f}", f"{100 * tf / h200.peak_tflops[raw['precision']]:.1f} %",
                     "—", "—", "—", "—"))
    print(table(GEMM_HEADER, rows) + "\n")
    repeats = Path(path).with_name("h200_gemm_repeats.json")
    if repeats.exists():
        runs = json.loads(repeats.read_text())["runs"]
        print(f"gemm_flops('fp16', 8192) called {len(runs)} times in a row:\n")
        print(table(GEMM_HEADER, [gemm_row(raw) for raw in runs]) + "\n")

    print("## Strided and misaligned copies vs the memory model\n")
    for sweep in d["stride"] + d["stride_l2fetch"] + d["offset"]:
        sector = gpu_memory.access_sweep_from_raw(sweep, fetch_bytes=32)
        fetch = gpu_memory.access_sweep_from_raw(sweep)  # the granularity the runtime reported
        print(f"{sweep['element_bytes']}-byte elements by {sweep['pattern']}, L2 fetch "
              f"granularity {sweep['l2_fetch_granularity']} B, reference "
              f"{sector.reference_gbps:,.0f} GB/s\n")
        rows = [(x, sr, f"{m:,.0f}", f"{p32:,.0f}", f"{100 * e32:+.0f} %", f"{pf:,.0f}",
                 f"{100 * ef:+.0f} %")
                for x, sr, m, p32, e32, pf, ef in zip(
                    sector.x, sector.sectors_read, sector.measured_gbps, sector.predicted_gbps,
                    sector.relative_error, fetch.predicted_gbps, fetch.relative_error,
                    strict=True)]
        print(table((sweep["pattern"], "sectors/warp", "measured GB/s", "sector model",
                     "error", f"{fetch.fetch_bytes}-B fetch model", "error"), rows) + "\n")

    print("## Shared-memory bank conflicts\n")
    for raw in d["bank"]:
        b = gpu_memory.bank_sweep_from_raw(raw)
        print(f"{b.element_bytes}-byte loads\n")
        print(table(("stride", "model wavefronts", "measured cycles/load", "ratio"),
                    [(s, w, f"{c:.2f}", f"{r:.2f}") for s, w, c, r in
                     zip(b.strides, b.wavefronts, b.cycles_per_load, b.ratio, strict=True)]) + "\n")

    print("## Launch latency, host copies, occupancy, SIMT kernels\n")
    ll = gpu_system.launch_from_raw(d["launch"])
    print(table(("method", "µs per kernel"),
                [(k, f"{v * 1e6:.2f}") for k, v in ll.as_dict().items()]) + "\n")
    tr = gpu_system.transfers_from_raw(d["transfers"])
    print(table(("copy", "GB/s"), [(r.kind, f"{r.gbps:,.1f}") for r in tr.rows]) + "\n")
    occ = gpu_occupancy.occupancy_from_raw(d["occupancy"])
    print(f"occupancy: {len(occ.rows)} configurations, {len(occ.mismatches)} mismatches\n")
    sm = gpu_compute.simt_from_raw(d["simt"])
    print(table(("kernel", "n", "time", "useful GB/s", "correct"),
                [(k, f"{n:,}", f"{t * 1e6:,.1f} µs", f"{gb:,.0f}", ok)
                 for k, n, t, gb, ok in sm.rows]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/h200_measurements.json")
