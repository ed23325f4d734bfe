"""Measure how many written bytes reach DRAM within a kernel, under Nsight Compute.

    python tools/device/l2_writeback.py OUT.json        # on the H200, ncu on PATH
    python tools/device/l2_writeback.py --dry           # the plan, without a GPU

Kernels that write ``n`` bytes once (``fill``) or read and write ``n`` bytes (``copy``),
for ``n`` from 1 MiB to 256 MiB, each launched once under ncu's default cache control
(caches flushed before each kernel) with ``--clock-control none``: ``dram__bytes_write.sum``
falls short of ``n`` by the dirty lines the L2 still holds when the kernel ends.  Writes
tests/data/h200_l2_writeback.json's content to OUT.json.
"""

import csv
import io
import json
import subprocess
import sys

SIZES_MIB = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)
SRC = r"""
extern "C" __global__ void probe_fill(float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
extern "C" __global__ void probe_copy(const float* in, float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
"""
METRICS = "dram__bytes_write.sum,dram__bytes_read.sum,gpu__time_duration.sum"


def child():
    import cupy as cp

    mod = cp.RawModule(code=SRC)
    fill, copy = mod.get_function("probe_fill"), mod.get_function("probe_copy")
    for mib in SIZES_MIB:
        n = mib * 2**20 // 4
        a, b = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
        cp.cuda.Device().synchronize()
        grid = ((n + 255) // 256,)
        fill(grid, (256,), (b, cp.int64(n)))
        copy(grid, (256,), (a, b, cp.int64(n)))
        cp.cuda.Device().synchronize()
        del a, b


def parse(text):
    rows = [r for r in csv.reader(io.StringIO(text)) if len(r) > 10]
    head, body = rows[0], rows[1:]
    ix = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit",
                                     "Metric Value")}
    out = {}
    for r in body:
        rec = out.setdefault(int(r[ix["ID"]]), {"kernel": r[ix["Kernel Name"]].split("(")[0]})
        rec[r[ix["Metric Name"]]] = float(r[ix["Metric Value"]].replace(",", ""))
    launches = [out[i] for i in sorted(out)]
    runs = []
    for k, rec in enumerate(launches):
        mib = SIZES_MIB[k // 2]
        runs.append({"kernel": rec["kernel"], "bytes_written": mib * 2**20,
                     "bytes_read": mib * 2**20 if "copy" in rec["kernel"] else 0,
                     "dram__bytes_write.sum": rec["dram__bytes_write.sum"],
                     "dram__bytes_read.sum": rec["dram__bytes_read.sum"],
                     "gpu__time_duration.sum": rec["gpu__time_duration.sum"]})
    return runs


def main():
    if "--child" in sys.argv:
        return child()
    if "--dry" in sys.argv:
        print("sizes (MiB):", SIZES_MIB, "\nkernels:", "probe_fill, probe_copy")
        fake = ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value",'
                + ",".join(f'"x{i}"' for i in range(8)) + "\n")
        for k in range(2 * len(SIZES_MIB)):
            for m in METRICS.split(","):
                name = "probe_copy(float *)" if k % 2 else "probe_fill(float *)"
                fake += f'"{k}","{name}","{m}","byte","1,024",' + ",".join('""' * 8) + "\n"
        print(len(parse(fake)), "launches parsed from a fake report")
        return
    cmd = ["ncu", "--csv", "--clock-control", "none", "-k", "regex:probe_", "--metrics",
           METRICS, sys.executable, __file__, "--child"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    text = res.stdout[res.stdout.find('"ID"'):]
    with open(sys.argv[1] + ".csv", "w") as f:
        f.write(res.stdout + res.stderr)
    rec = {"what": "DRAM bytes written within one kernel that writes n bytes once "
                       "(probe_fill) or copies n bytes (probe_copy), n from 1 MiB to 256 MiB",
               "how": " ".join(cmd[:8]) + " (default cache control: caches flushed before "
                      "each kernel)",
               "gpu": "NVIDIA H200", "script": "tools/device/l2_writeback.py",
               "runs": parse(text), "ncu_stderr_tail": res.stderr[-2000:]}
    with open(sys.argv[1], "w") as f:
        json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
