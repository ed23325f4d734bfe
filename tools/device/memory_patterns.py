"""One-warp load patterns for Nsight Compute: global sectors/requests, shared wavefronts/conflicts.

Run on a machine with an NVIDIA GPU, CuPy and Nsight Compute:

    python3 tools/device/memory_patterns.py patterns PATTERNS.json   # just list them
    ncu --clock-control none --kernel-name regex:'^(gload|sload)' --csv --page raw \\
        --metrics <see METRICS> --log-file NCU.csv python3 tools/device/memory_patterns.py run
    python3 tools/device/memory_patterns.py merge PATTERNS.json NCU.csv OUT.json

Each pattern launches one block of 32 threads that performs exactly ONE load instruction (global or
shared) whose 32 lane addresses come from a ``__constant__`` table, so the counters report that
single warp-wide access.  Constant-memory reads are not counted by the global/shared load metrics.
"""

import csv
import datetime
import json
import sys

METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smsp__inst_executed_op_shared_ld.sum",
]

TYPES = {1: "unsigned char", 2: "unsigned short", 4: "float", 8: "double", 16: "float4"}
SMEM_BYTES = 48 * 1024

SOURCE = r"""
__constant__ int idx[32];     // element index per lane
__constant__ unsigned mask;   // active lanes
""" + "".join(f"""
extern "C" __global__ void gload_{size}(const {ty}* base, {ty}* out) {{
    int lane = threadIdx.x;
    if ((mask >> lane) & 1u) out[lane] = base[idx[lane]];
}}
extern "C" __global__ void sload_{size}({ty}* out) {{
    __shared__ __align__(16) unsigned char buf[{SMEM_BYTES}];
    for (int i = threadIdx.x; i < {SMEM_BYTES}; i += 32) buf[i] = (unsigned char)i;
    __syncthreads();
    int lane = threadIdx.x;
    if ((mask >> lane) & 1u) out[lane] = reinterpret_cast<const {ty}*>(buf)[idx[lane]];
}}
""" for size, ty in TYPES.items())


def _lanes(fn):
    return [fn(lane) for lane in range(32)]


def patterns():
    """(kind, name, bytes_per_thread, 32 element indices or None for inactive lanes)."""
    out = []
    g = lambda name, size, idx: out.append(("global", name, size, idx))  # noqa: E731
    s = lambda name, size, idx: out.append(("shared", name, size, idx))  # noqa: E731
    for size in (4, 8, 16):
        for stride in (1, 2, 3, 4, 8, 16, 32, 33):
            g(f"stride{stride}", size, _lanes(lambda i, st=stride: i * st))
        g("broadcast", size, [0] * 32)
        g("reversed", size, _lanes(lambda i: 31 - i))
        g("half_warp_active", size, _lanes(lambda i: i if i < 16 else None))
        g("odd_lanes_active", size, _lanes(lambda i: i if i % 2 else None))
        g("two_far_halves", size, _lanes(lambda i, sz=size: i if i < 16 else 4096 // sz + i))
        g("pairs_same_element", size, _lanes(lambda i: i // 2))
    for off in (1, 2, 3, 8, 16, 31, 32):
        g(f"float_offset{off}", 4, _lanes(lambda i, o=off: i + o))
    for off in (1, 3, 4):
        g(f"double_offset{off}", 8, _lanes(lambda i, o=off: i + o))
    g("float4_offset1", 16, _lanes(lambda i: i + 1))
    g("aos_12B_field1", 4, _lanes(lambda i: 3 * i + 1))   # struct {float x, y, z}: read .y
    g("aos_16B_field0", 4, _lanes(lambda i: 4 * i))
    g("column_ld33", 4, _lanes(lambda i: 33 * i))          # a column of a row-major 33-wide matrix
    g("permuted_in_128B", 4, _lanes(lambda i: (i * 7) % 32))
    g("scatter_8_per_sector", 4, _lanes(lambda i: (i % 8) + 256 * (i // 8)))
    for size in (1, 2):
        for stride in (1, 2, 4, 32):
            g(f"stride{stride}", size, _lanes(lambda i, st=stride: i * st))
        g("offset1", size, _lanes(lambda i: i + 1))
    for size in (4,):
        for stride in (1, 2, 3, 4, 5, 8, 16, 17, 31, 32, 33, 64):
            s(f"stride{stride}", size, _lanes(lambda i, st=stride: i * st))
        s("broadcast", size, [0] * 32)
        s("four_words_8_lanes_each", size, _lanes(lambda i: i // 8))
        s("same_bank_two_words", size, _lanes(lambda i: 32 * (i % 2)))
        s("half_warp_active_stride2", size, _lanes(lambda i: 2 * i if i < 16 else None))
        s("column_tile32", size, _lanes(lambda i: 32 * i))     # tile[32][32], read a column
        s("column_tile33", size, _lanes(lambda i: 33 * i))     # padded by one column
        s("permuted", size, _lanes(lambda i: (i * 7) % 32))
        s("two_lanes_per_word_stride", size, _lanes(lambda i: (i // 2) * 32))
    for size in (8, 16):
        for stride in (1, 2, 3, 4, 8, 16, 32):
            s(f"stride{stride}", size, _lanes(lambda i, st=stride: i * st))
        s("broadcast", size, [0] * 32)
        s("reversed", size, _lanes(lambda i: 31 - i))
        s("half_warp_active", size, _lanes(lambda i: i if i < 16 else None))
        s("pairs_same_element", size, _lanes(lambda i: i // 2))
    for size in (1, 2):
        s("stride1", size, _lanes(lambda i: i))
        s("stride4", size, _lanes(lambda i: 4 * i))
    return out


def run():
    import cupy
    import numpy

    mod = cupy.RawModule(code=SOURCE, options=("-std=c++17",))
    idx_ptr, mask_ptr = mod.get_global("idx"), mod.get_global("mask")
    idx_dev = cupy.ndarray((32,), cupy.int32, idx_ptr)
    mask_dev = cupy.ndarray((1,), cupy.uint32, mask_ptr)
    base = cupy.zeros(4 << 20, dtype=cupy.uint8)
    out = cupy.zeros(32 * 16, dtype=cupy.uint8)
    for kind, _name, size, idx in patterns():
        idx_dev.set(numpy.array([0 if i is None else i for i in idx], dtype=numpy.int32))
        m = sum(1 << lane for lane, i in enumerate(idx) if i is not None)
        mask_dev.set(numpy.array([m], dtype=numpy.uint32))
        cupy.cuda.Device().synchronize()
        if kind == "global":
            mod.get_function(f"gload_{size}")((1,), (32,), (base, out))
        else:
            mod.get_function(f"sload_{size}")((1,), (32,), (out,))
        cupy.cuda.Device().synchronize()
    print("launched", len(patterns()), "patterns")


def merge(patterns_path, ncu_csv, out_path):
    with open(patterns_path) as f:
        pats = json.load(f)
    with open(ncu_csv) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.DictReader(lines[start:]))
    rows = [r for r in rows if r["ID"].isdigit()]  # drop the units row
    assert len(rows) == len(pats["patterns"]), (len(rows), len(pats["patterns"]))
    result = {"meta": pats["meta"], "global": [], "shared": []}
    for (kind, name, size, idx), r in zip(pats["patterns"], rows, strict=True):
        assert r["Kernel Name"].startswith("gload" if kind == "global" else "sload"), r
        addrs = [None if i is None else i * size for i in idx]

        def num(metric, row=r):
            return int(float(row[metric].replace(",", "")))

        if kind == "global":
            result["global"].append({"name": name, "bytes_per_thread": size, "addresses": addrs,
                                     "sectors": num(METRICS[0]), "requests": num(METRICS[1])})
        else:
            result["shared"].append({"name": name, "bytes_per_thread": size, "addresses": addrs,
                                     "wavefronts": num(METRICS[2]),
                                     "bank_conflicts": num(METRICS[3]),
                                     "instructions": num(METRICS[4])})
        result["meta"]["device"] = r.get("Device", "")
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print("merged", len(rows), "kernels into", out_path)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "patterns":
        meta = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
                "tool": "Nsight Compute --clock-control none", "metrics": METRICS,
                "script": "tools/device/memory_patterns.py",
                "note": "one block of 32 threads, one load instruction per kernel; addresses are "
                        "byte offsets from a 256-byte-aligned base"}
        with open(sys.argv[2], "w") as f:
            json.dump({"meta": meta, "patterns": patterns()}, f)
        print(len(patterns()), "patterns")
    elif cmd == "run":
        run()
    elif cmd == "merge":
        merge(*sys.argv[2:5])
