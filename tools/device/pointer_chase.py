"""Load-to-use latency of each memory level, by pointer chasing (one thread, dependent loads).

    python3 tools/device/pointer_chase.py OUT.json

A single thread follows a random cyclic chain of 128-byte-spaced nodes spread over a footprint
of the given size; each load's address depends on the previous load, so nothing overlaps and
time per hop = latency.  Footprints well inside L1, inside L2 and far beyond L2 give the three
levels.  Wall time comes from CUDA events (ns per hop) and SM cycles from ``clock64()``.
"""

import json
import sys

import cupy
import numpy

SOURCE = r"""
extern "C" __global__ void chase(const unsigned long long* next, unsigned long long start,
                                 long long hops, unsigned long long* out, long long* cycles) {
    unsigned long long p = start;
    long long t0 = clock64();
    for (long long i = 0; i < hops; ++i) p = next[p];
    cycles[0] = clock64() - t0;
    out[0] = p;
}
"""
NODE = 16  # 8-byte elements per node: 128 bytes apart


def chase(footprint_bytes: int, hops: int, kernel, rng) -> dict:
    nodes = footprint_bytes // (NODE * 8)
    order = rng.permutation(nodes).astype(numpy.uint64) * NODE
    host = numpy.zeros(nodes * NODE, dtype=numpy.uint64)
    host[order] = numpy.roll(order, -1)
    nxt = cupy.asarray(host)
    out = cupy.zeros(1, dtype=cupy.uint64)
    cycles = cupy.zeros(1, dtype=cupy.int64)
    # Warm-up pass; the timed pass starts where it ended, so a footprint smaller than the hops
    # is revisited (cache hits) while a larger one keeps reaching nodes never touched before.
    kernel((1,), (1,), (nxt, numpy.uint64(0), numpy.int64(min(nodes, hops)), out, cycles))
    first = numpy.uint64(int(out.get()[0]))
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    kernel((1,), (1,), (nxt, first, numpy.int64(hops), out, cycles))
    stop.record()
    stop.synchronize()
    ms = cupy.cuda.get_elapsed_time(start, stop)
    return {"footprint_bytes": footprint_bytes, "hops": hops,
            "ns_per_hop": ms * 1e6 / hops, "cycles_per_hop": int(cycles.get()[0]) / hops}


def main(path):
    kernel = cupy.RawKernel(SOURCE, "chase")
    rng = numpy.random.default_rng(0)
    rows = []
    for footprint, hops in [(16 << 10, 200_000), (128 << 10, 200_000), (8 << 20, 100_000),
                            (32 << 20, 100_000), (1 << 30, 50_000), (4 << 30, 50_000)]:
        r = chase(footprint, hops, kernel, rng)
        rows.append(r)
        print(f"{footprint / 2**20:9.3f} MiB: {r['ns_per_hop']:7.1f} ns/hop, "
              f"{r['cycles_per_hop']:7.1f} cycles/hop", flush=True)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    with open(path, "w") as f:
        json.dump({"gpu": props["name"].decode(), "script": "tools/device/pointer_chase.py",
                   "node_bytes": NODE * 8, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
