"""Calibrate and validate the performance model on a GPU (``gpu_lessons.perf``).

    PYTHONUNBUFFERED=1 python3 tools/device/perf_calibration.py OUT_DIR

Three parts, one command:

1. **Microbenchmarks** (the model's constants): kernels in the course's kernel language,
   translated by ``to_cuda`` and compiled with ``-fmad=false`` as ``run_on_gpu`` compiles them,
   each timed with CUDA events (median of 10 after 2 warm-ups; a 256 MiB write between runs
   evicts the L2 where a benchmark reads DRAM).  Launch overhead is timed through
   ``gpu_lessons.kernels.run_on_gpu`` itself, since that is the harness the model predicts.
   -> ``OUT_DIR/perf_microbench.json``
2. **Validation timings**: every kernel of ``tests/perf_kernels.py`` through
   ``gpu_lessons.kernels.run_on_gpu`` at full size (median of 20).
   -> ``OUT_DIR/perf_validation.json``
3. **Nsight Compute**: one launch of each validation kernel and of the 30 worked puzzle
   kernels (``solutions/puzzle_kernels.py`` at each puzzle's ``gpu_size``), under
   ``ncu --csv --clock-control none`` with the metrics ``gpu_lessons.perf.profile`` reports.
   -> ``OUT_DIR/perf_ncu.csv``

``python3 tools/device/perf_calibration.py --dry`` runs everything that needs no GPU: builds
every case's inputs at full size, translates and simulates a small launch of each.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import perf_kernels  # noqa: E402

from gpu_lessons import kernels as cuda  # noqa: E402  (to_cuda, run_on_gpu)
from gpu_lessons.kernels.cuda_types import EXACT_OPTIONS  # noqa: E402
from gpu_lessons.kernels.gpu import launch_args  # noqa: E402
from gpu_lessons.kernels.nvrtc import compile_ptx  # noqa: E402

SMS = 132

NCU_METRICS = (
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "lts__t_sectors_srcunit_tex.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smsp__inst_executed.sum",
    "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__cycles_elapsed.avg.per_second", "launch__occupancy_limit_registers",
    "sm__maximum_warps_per_active_cycle_pct",
)


# -- microbenchmark kernels (the kernel language; each documents what it counts) -----------------


def mb_empty(t, a, n):
    t.return_if(n < 1)
    a[0] = 1


def mb_read(k):
    """Grid-stride read, ``k`` independent 4-byte loads per thread per iteration."""
    if k == 1:
        def mb_read1(t, a, out, n):
            step = t.grid_dim.x * t.block_dim.x
            i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
            s = t.local(0.0, np.float32)
            for _ in t.while_(lambda: i < n):
                s[...] = s + a[i]
                i[...] = i + step
            out[t.block_idx.x * t.block_dim.x + t.thread_idx.x] = s
        return mb_read1

    def mb_read4(t, a, out, n):
        step = t.grid_dim.x * t.block_dim.x
        i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
        s = t.local(0.0, np.float32)
        for _ in t.while_(lambda: i < n):
            s[...] = s + a[i] + a[i + step] + a[i + 2 * step] + a[i + 3 * step]
            i[...] = i + 4 * step
        out[t.block_idx.x * t.block_dim.x + t.thread_idx.x] = s
    return mb_read4


def mb_l2(t, a, out, n):
    step = t.grid_dim.x * t.block_dim.x
    s = t.local(0.0, np.float32)
    for _r in range(16):
        i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
        for _ in t.while_(lambda: i < n):  # noqa: B023 (each pass's own i)
            s[...] = s + a[i] + a[i + step] + a[i + 2 * step] + a[i + 3 * step]
            i[...] = i + 4 * step
    out[t.block_idx.x * t.block_dim.x + t.thread_idx.x] = s


def mb_write(t, out, n):
    step = t.grid_dim.x * t.block_dim.x
    i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        out[i] = 1.5
        out[i + step] = 2.5
        out[i + 2 * step] = 3.5
        out[i + 3 * step] = 4.5
        i[...] = i + 4 * step


def mb_copy(t, a, out, n):
    step = t.grid_dim.x * t.block_dim.x
    i = t.local(t.block_idx.x * t.block_dim.x + t.thread_idx.x)
    for _ in t.while_(lambda: i < n):
        x0 = a[i]
        x1 = a[i + step]
        x2 = a[i + 2 * step]
        x3 = a[i + 3 * step]
        out[i] = x0
        out[i + step] = x1
        out[i + 2 * step] = x2
        out[i + 3 * step] = x3
        i[...] = i + 4 * step


def mb_l1(t, a, out, n):
    """Stride-32 loads that hit in L1 (a 16 KiB array): 32 sectors per request."""
    tid = t.thread_idx.x
    s = t.local(0.0, np.float32)
    for k in range(256):
        s[...] = s + a[(tid * 32 + k) & 4095]
    out[t.block_idx.x * t.block_dim.x + tid] = s


def mb_fp32(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0 = a[i]
    x1 = x0 + 1
    x2 = x0 + 2
    x3 = x0 + 3
    x4 = x0 + 4
    x5 = x0 + 5
    x6 = x0 + 6
    x7 = x0 + 7
    for _k in range(256):
        x0 = x0 * 0.999 + 0.5
        x1 = x1 * 0.999 + 0.5
        x2 = x2 * 0.999 + 0.5
        x3 = x3 * 0.999 + 0.5
        x4 = x4 * 0.999 + 0.5
        x5 = x5 * 0.999 + 0.5
        x6 = x6 * 0.999 + 0.5
        x7 = x7 * 0.999 + 0.5
    out[i] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


def mb_fp32_latency(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x = a[i]
    for _k in range(4096):
        x = x * 0.999 + 0.5
    out[i] = x


def mb_int(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0 = a[i]
    x1 = x0 + 1
    x2 = x0 + 2
    x3 = x0 + 3
    for k in range(256):
        x0 = (x0 ^ k) + 7
        x1 = (x1 ^ k) + 9
        x2 = (x2 ^ k) + 11
        x3 = (x3 ^ k) + 13
    out[i] = x0 + x1 + x2 + x3


def mb_exp(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0 = a[i]
    x1 = x0 + 0.25
    x2 = x0 + 0.5
    x3 = x0 + 0.75
    for _k in range(128):
        x0 = np.exp(x0 * -1.0)
        x1 = np.exp(x1 * -1.0)
        x2 = np.exp(x2 * -1.0)
        x3 = np.exp(x3 * -1.0)
    out[i] = x0 + x1 + x2 + x3


def mb_div(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    x0 = a[i]
    x1 = x0 + 0.25
    x2 = x0 + 0.5
    x3 = x0 + 0.75
    for _k in range(128):
        x0 = 1.5 / x0
        x1 = 1.5 / x1
        x2 = 1.5 / x2
        x3 = 1.5 / x3
    out[i] = x0 + x1 + x2 + x3


def mb_shared_conflict(t, a, out, n):
    """32-way bank conflicts: each load is 32 wavefronts."""
    buf = t.shared(4096, np.float32)
    tid = t.thread_idx.x
    for k in range(16):
        buf[tid + k * 256] = a[tid]
    t.sync()
    s = t.local(0.0, np.float32)
    for k in range(128):
        s[...] = s + buf[(tid * 32 + k) & 4095]
    out[t.block_idx.x * t.block_dim.x + tid] = s


def mb_shared(t, a, out, n):
    """Conflict-free shared loads, one wavefront each."""
    buf = t.shared(4096, np.float32)
    tid = t.thread_idx.x
    for k in range(16):
        buf[tid + k * 256] = a[tid]
    t.sync()
    s = t.local(0.0, np.float32)
    for k in range(128):
        s[...] = s + buf[(tid + k * 32) & 4095]
    out[t.block_idx.x * t.block_dim.x + tid] = s


def mb_atomic_one(t, out, n):
    """Every lane of every warp adds to one address."""
    for _k in range(4):
        t.atomic_add(out, 0, 1)


def mb_atomic_one_lane(t, out, n):
    """One lane per warp adds to one address."""
    with t.if_(t.lane == 0):
        for _k in range(4):
            t.atomic_add(out, 0, 1)


def mb_atomic_distinct(t, out, n):
    """Every lane its own address (no two lanes of the grid share one)."""
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    for _k in range(4):
        t.atomic_add(out, i, 1)


def mb_shared_atomic_one(t, out, n):
    c = t.shared(32, np.int32)
    with t.if_(t.thread_idx.x < 32):
        c[t.thread_idx.x] = 0
    t.sync()
    for _k in range(64):
        t.atomic_add(c, 0, 1)
    t.sync()
    with t.if_(t.thread_idx.x == 0):
        out[t.block_idx.x] = c[0]


def mb_shared_atomic_distinct(t, out, n):
    c = t.shared(256, np.int32)
    c[t.thread_idx.x] = 0
    t.sync()
    for _k in range(64):
        t.atomic_add(c, t.thread_idx.x, 1)
    t.sync()
    out[t.block_idx.x * 256 + t.thread_idx.x] = c[t.thread_idx.x]


def mb_barrier(t, a, out, n):
    tid = t.thread_idx.x
    s = t.local(a[tid])
    for _k in range(512):
        t.sync()
    out[t.block_idx.x * t.block_dim.x + tid] = s


def mb_shfl(t, a, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = a[i]
    for _k in range(128):
        v = v + t.shfl_xor(v, 1)
        v = v + t.shfl_xor(v, 2)
    out[i] = v


def mb_chase(t, a, out, n):
    j = t.local(0)
    for _k in range(2048):
        j[...] = a[j]
    out[0] = j


def mb_atomic_mod(t, out, m):
    """Every warp's lanes add to ``m`` addresses (lane % m) of one sector, the same ``m``
    addresses for the whole grid."""
    for _k in range(4):
        t.atomic_add(out, t.lane % m, 1)


def mb_shared_atomic_mod(t, out, m):
    c = t.shared(32, np.int32)
    with t.if_(t.thread_idx.x < 32):
        c[t.thread_idx.x] = 0
    t.sync()
    for _k in range(64):
        t.atomic_add(c, t.lane % m, 1)
    t.sync()
    with t.if_(t.thread_idx.x == 0):
        out[t.block_idx.x] = c[0]


def mb_read_once(t, a, out, n):
    """One load per thread, no loop: blocks come and go as in most kernels."""
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    v = a[i]
    with t.if_(v == 12345.0):
        out[0] = v


def mb_blocks(t, a, n):
    t.return_if(n < 1)
    a[t.block_idx.x] = 1


def second_microbenchmarks(rng):
    """The second set: block launch rate, atomics on a few addresses, barrier latency."""
    f32 = lambda n: rng.standard_normal(n).astype(np.float32) + 2  # noqa: E731
    cases = {}
    for threads in (32, 128, 256, 1024):
        for blocks in (SMS * 256, SMS * 1024):
            cases[f"blocks_{threads}_{blocks}"] = (mb_blocks, (blocks,), (threads,),
                                                   (np.zeros(8, np.float32), 0),
                                                   {"blocks": blocks, "threads": threads})
    for m in (2, 8, 32):
        blocks = SMS * 4 if m < 32 else SMS * 16
        cases[f"atomic_mod{m}"] = (mb_atomic_mod, (blocks,), (256,),
                                   (np.zeros(32, np.int32), m),
                                   {"warp_ops": blocks * 8 * 4, "addresses": m,
                                    "lanes_per_address": 32 // m})
    for m in (2, 8):
        cases[f"shared_atomic_mod{m}"] = (mb_shared_atomic_mod, (SMS * 16,), (256,),
                                          (np.zeros(SMS * 16, np.int32), m),
                                          {"warp_ops": SMS * 16 * 8 * 64, "addresses": m,
                                           "serialisation": 32 // m})
    big = 1 << 26
    a = f32(big)
    for threads in (128, 256, 1024):
        cases[f"read_once_{threads}"] = (mb_read_once, (big // threads,), (threads,),
                                         (a, np.zeros(1, np.float32), big),
                                         {"bytes_read": 4 * big, "threads": threads,
                                          "dram": True})
    cases["barrier_one_block"] = (mb_barrier, (SMS,), (256,), (f32(256), np.zeros(SMS * 256,
                                                                                   np.float32),
                                                               0),
                                  {"block_barriers": SMS * 512, "warps_per_block": 8,
                                   "resident_blocks": 1})
    return cases


def _fit(n, step):
    """The largest multiple of ``step`` up to ``n`` (a grid-stride loop of ``step`` never
    reads past the end)."""
    return n // step * step


def _chain(rng, nodes, spacing):
    """A random cyclic chain through ``nodes`` nodes ``spacing`` ints apart."""
    order = rng.permutation(nodes)
    a = np.zeros(nodes * spacing, np.int32)
    nxt = np.roll(order, -1)
    a[order * spacing] = nxt * spacing
    return a


def microbenchmarks(rng):
    """name -> (kernel, grid, block, args, counts): ``counts`` says what one launch does."""
    f32 = lambda n: rng.standard_normal(n).astype(np.float32) + 2  # noqa: E731
    full = SMS * 16            # 16 blocks of 128 threads per SM: 64 warps, full occupancy
    out = lambda n: np.zeros(n, np.float32)  # noqa: E731
    big = 1 << 26              # 256 MiB of floats
    cases = {}
    a_big = f32(big)
    for warps_per_sm, block in ((1, 32), (4, 128), (8, 128), (16, 128), (32, 128), (64, 128)):
        blocks = SMS * warps_per_sm * 32 // block
        for k in (1, 4):
            n = _fit(big, k * blocks * block)
            cases[f"read_k{k}_w{warps_per_sm}"] = (
                mb_read(k), (blocks,), (block,), (a_big, out(blocks * block), n),
                {"bytes_read": 4 * n, "warps_per_sm": warps_per_sm, "loads_in_flight": k,
                 "dram": True})
    l2n = 10 << 20             # 40 MiB: inside the L2, beyond every SM's L1
    l2n = _fit(l2n, 4 * full * 128)
    cases["l2_read"] = (mb_l2, (full,), (128,), (f32(l2n), out(full * 128), l2n),
                        {"bytes_read": 16 * 4 * l2n})
    nb = _fit(big, 4 * full * 128)
    cases["write"] = (mb_write, (full,), (128,), (out(big), nb), {"bytes_written": 4 * nb,
                                                                   "dram": True})
    cases["copy"] = (mb_copy, (full,), (128,), (a_big, out(big), nb),
                     {"bytes_read": 4 * nb, "bytes_written": 4 * nb, "dram": True})
    threads = full * 128
    cases["l1_sectors"] = (mb_l1, (full,), (128,), (f32(4096), out(threads), 0),
                           {"warp_loads": threads // 32 * 256, "sectors_per_load": 32})
    arith = (SMS * 64,), (256,)   # 64 blocks per SM over the run
    n = arith[0][0] * 256
    cases["fp32"] = (mb_fp32, *arith, (f32(n), out(n), n), {"warp_ops": n // 32 * 256 * 16})
    cases["fp32_latency"] = (mb_fp32_latency, (SMS,), (128,), (f32(SMS * 128), out(SMS * 128), 0),
                             {"dependent_ops_per_warp": 4096 * 2, "warps_per_smsp": 1})
    cases["fp64"] = (mb_fp32, *arith, (f32(n).astype(np.float64), np.zeros(n), n),
                     {"warp_ops": n // 32 * 256 * 16})
    cases["int"] = (mb_int, *arith, (rng.integers(1, 1000, n).astype(np.int32),
                                     np.zeros(n, np.int32), n),
                    {"warp_ops": n // 32 * 256 * 8})
    cases["exp"] = (mb_exp, *arith, (f32(n), out(n), n),
                    {"warp_exps": n // 32 * 128 * 4, "warp_fp32_ops": n // 32 * 128 * 4})
    cases["div"] = (mb_div, *arith, (f32(n), out(n), n), {"warp_divs": n // 32 * 128 * 4})
    cases["shared_conflict"] = (mb_shared_conflict, *arith, (f32(256), out(n), n),
                                {"wavefronts": n // 32 * 128 * 32})
    cases["shared"] = (mb_shared, *arith, (f32(256), out(n), n), {"wavefronts": n // 32 * 128})
    cases["atomic_one"] = (mb_atomic_one, (SMS * 4,), (256,), (np.zeros(1, np.int32), 0),
                           {"lane_ops": SMS * 4 * 256 * 4, "warp_ops": SMS * 4 * 8 * 4})
    cases["atomic_one_lane"] = (mb_atomic_one_lane, (SMS * 16,), (256,),
                                (np.zeros(1, np.int32), 0),
                                {"warp_ops": SMS * 16 * 8 * 4})
    na = SMS * 64 * 256
    cases["atomic_distinct"] = (mb_atomic_distinct, (SMS * 64,), (256,),
                                (np.zeros(na, np.int32), 0), {"lane_ops": na * 4,
                                                               "warp_ops": na // 32 * 4})
    cases["shared_atomic_one"] = (mb_shared_atomic_one, (SMS * 16,), (256,),
                                  (np.zeros(SMS * 16, np.int32), 0),
                                  {"warp_ops": SMS * 16 * 8 * 64, "serialisation": 32})
    cases["shared_atomic_distinct"] = (mb_shared_atomic_distinct, (SMS * 16,), (256,),
                                       (np.zeros(SMS * 16 * 256, np.int32), 0),
                                       {"warp_ops": SMS * 16 * 8 * 64, "serialisation": 1})
    cases["barrier"] = (mb_barrier, (SMS * 32,), (256,), (f32(256), out(SMS * 32 * 256), 0),
                        {"block_barriers": SMS * 32 * 512, "warps_per_block": 8})
    cases["shfl"] = (mb_shfl, *arith, (f32(n), out(n), n), {"warp_shfls": n // 32 * 256})
    cases["chase_dram"] = (mb_chase, (1,), (1,), (_chain(rng, 1 << 19, 32), np.zeros(1, np.int32),
                                                   0), {"dependent_loads": 2048, "dram": True})
    cases["chase_l2"] = (mb_chase, (1,), (1,), (_chain(rng, 1 << 14, 32), np.zeros(1, np.int32),
                                                 0), {"dependent_loads": 2048})
    return cases


# -- running ----------------------------------------------------------------------------------------


def _time(kernel, grid, block, args, *, flush, repeats=10, warmup=2):
    import cupy as cp

    from gpu_lessons.measure.gpu import compiled

    source = cuda.to_cuda(kernel, *args)
    k = compiled(str(source), source.kernel_name, EXACT_OPTIONS)
    dev = launch_args(source, args)
    scratch = cp.empty(1 << 26, cp.float32) if flush else None
    start, end = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for i in range(warmup + repeats):
        if scratch is not None:
            scratch.fill(i)
        start.record()
        k(grid, block, tuple(dev))
        end.record()
        end.synchronize()
        if i >= warmup:
            samples.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
    cp.cuda.runtime.deviceSynchronize()
    return float(np.median(samples)), samples, int(k.num_regs)


def run_microbenchmarks(out_dir, second=False):
    rng = np.random.default_rng(1)
    record = {"what": "microbenchmarks of gpu_lessons.perf's constants", "cases": {}}
    cases = second_microbenchmarks(rng) if second else microbenchmarks(rng)
    for name, (kernel, grid, block, args, counts) in cases.items():
        t0 = time.time()
        try:
            median, samples, regs = _time(kernel, grid, block, args,
                                          flush=bool(counts.get("dram")))
            record["cases"][name] = {"grid": list(grid), "block": list(block), "counts": counts,
                                     "seconds": median, "samples": samples, "registers": regs}
            print(f"  {name:24s} {median * 1e6:10.1f} us  ({time.time() - t0:.1f} s)")
        except Exception as exc:  # one failed benchmark must not lose the others
            record["cases"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"  {name:24s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
    # launch overhead through run_on_gpu itself: tiny arguments, then a large one to reset
    sizes = ((("launch_small", 4), ("launch_4mib", 4 << 20), ("launch_256mib", 256 << 20))
             if not second else (("launch_16mib", 16 << 20), ("launch_32mib", 32 << 20),
                                 ("launch_64mib", 64 << 20)))
    for label, nbytes in sizes:
        a = np.ones(nbytes // 4, np.float32)
        run = cuda.run_on_gpu(mb_empty, 1, 32, a, 0, repeats=20)
        record["cases"][label] = {"grid": [1], "block": [32], "seconds": run.timing.median,
                                  "samples": list(run.timing.samples),
                                  "counts": {"reset_bytes": nbytes}, "registers": run.registers_per_thread}
        print(f"  {label:24s} {run.timing.median * 1e6:10.1f} us")
    return record


def run_validation(puzzles=False):
    rng = np.random.default_rng(7)
    runs = {}
    todo = ([(n, k, *m(rng), w) for n, (k, m, w) in perf_kernels.CASES.items()] if not puzzles
            else [(n, k, g, b, a, "worked puzzle kernel")
                  for n, (k, g, b, a) in puzzle_cases().items()])
    for name, kernel, grid, block, args, what in todo:
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        block = tuple(block) if isinstance(block, (tuple, list)) else (block,)
        t0 = time.time()
        try:
            run = cuda.run_on_gpu(kernel, grid, block, *args, repeats=20)
            runs[name] = {"grid": list(grid), "block": list(block), "what": what,
                          "measured_us": run.timing.median * 1e6,
                          "samples_us": [s * 1e6 for s in run.timing.samples],
                          "registers": run.registers_per_thread}
            print(f"  {name:24s} {run.timing.median * 1e6:10.1f} us  regs {run.registers_per_thread}"
                  f"  ({time.time() - t0:.1f} s)")
        except Exception as exc:
            runs[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"  {name:24s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
    return runs


def puzzle_cases():
    """The 30 worked puzzle kernels that ``run_on_gpu`` timed (tests/data/h200_puzzle_gpu_runs.json)
    at their GPU sizes: name -> (kernel, grid, block, args).  The matrix-multiply ladder's
    rungs were timed beside cuBLAS with the default build instead
    (gpu_lessons/data/h200_sgemm_ladder.json), and the tensor-core puzzles ran in
    tools/device/mma_h200.py's record and the attention puzzles in tools/device/attention_h200.py's
    (their time is not modelled), so they are not among them."""
    from gpu_lessons import puzzles

    spec = importlib.util.spec_from_file_location(
        "puzzle_kernels", os.path.join(ROOT, "solutions", "puzzle_kernels.py"))
    pk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pk)
    cases = {}
    for p in puzzles.puzzles():
        kernel = getattr(pk, f"{p.id}_kernel", None)
        own_record = ("mma_tile", "hgemm_mma", "flash_attention", "decode_attention")
        if kernel is None or p.id.startswith("sgemm_") or p.id in own_record:
            continue
        choices = {c: getattr(pk, c.upper()) for c in p.choices}
        size = dict(p.gpu_size)
        args = p.make_inputs(size, seed=0)
        grid, block = p.launch(**size, **choices)
        if p.gpu_launch is not None:
            grid, block = p.gpu_launch(SMS, **size, **choices)
        cases[p.id] = (kernel, grid, block, tuple(args.values()))
    return cases


def ncu_launch():
    """Launch each kernel once (the process Nsight Compute profiles)."""
    import cupy as cp

    from gpu_lessons.measure.gpu import compiled

    rng = np.random.default_rng(7)
    todo = [(name, k, *make(rng)) for name, (k, make, _) in perf_kernels.CASES.items()]
    todo += [(name, k, g, b, a) for name, (k, g, b, a) in puzzle_cases().items()]
    for name, kernel, grid, block, args in todo:
        try:
            source = cuda.to_cuda(kernel, *args)
            k = compiled(str(source), source.kernel_name, EXACT_OPTIONS)
            shared = source.dynamic_shared_bytes(block, *args)
            if shared > 48 * 1024:
                k.max_dynamic_shared_size_bytes = shared
            dev = launch_args(source, args)
            g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
            b = tuple(block) if isinstance(block, (tuple, list)) else (block,)
            k(g, b, tuple(dev), shared_mem=shared)
            cp.cuda.runtime.deviceSynchronize()
            print(f"ncu-launched {name}", flush=True)
        except Exception as exc:
            print(f"ncu-launch {name} FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def available_metrics():
    try:
        text = subprocess.run(["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True,
                              text=True, timeout=60).stdout
    except Exception:
        return list(NCU_METRICS)
    names = {line.split()[0] for line in text.splitlines() if line.strip()}
    base = [m for m in NCU_METRICS if m.split(".")[0] in names]
    return base if len(base) >= 8 else list(NCU_METRICS)


def run_ncu(out_dir, budget_s=300):
    metrics = available_metrics()
    cmd = ["ncu", "--csv", "--clock-control", "none", "--metrics", ",".join(metrics),
           "--log-file", os.path.join(out_dir, "perf_ncu.csv"),
           sys.executable, os.path.abspath(__file__), "--ncu-launch"]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s)
        tail = (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        tail = f"ncu stopped after {budget_s} s: {str(exc.stdout)[-2000:]}"
    print(f"ncu: {time.time() - t0:.0f} s, metrics {len(metrics)}")
    return {"metrics": metrics, "command": " ".join(cmd[:6]) + " ...", "tail": tail}


def dry():
    """Everything but the GPU: inputs at full size, translation, a small simulated launch."""
    rng = np.random.default_rng(1)
    for name, (kernel, _grid, _block, args, _) in {**microbenchmarks(rng),
                                                 **second_microbenchmarks(rng)}.items():
        src = cuda.to_cuda(kernel, *args)
        ok = compile_ptx(str(src))
        print(f"  {name}: translated, {'compiles' if ok.ok else ok.log[:300]}")
    for name, (kernel, make, _) in perf_kernels.CASES.items():
        grid, block, args = make(rng)
        src = cuda.to_cuda(kernel, *args)
        print(f"  validation {name}: {'compiles' if compile_ptx(str(src)).ok else 'FAILS'}")
    for name, (kernel, grid, block, args) in puzzle_cases().items():
        src = cuda.to_cuda(kernel, *args)
        print(f"  puzzle {name} {grid} {block}: "
              f"{'compiles' if compile_ptx(str(src)).ok else 'FAILS'}")


def main(argv):
    if "--ncu-launch" in argv:
        ncu_launch()
        return
    if "--dry" in argv:
        dry()
        return
    if "--second" in argv:
        out_dir = argv[2]
        import cupy as cp
        micro = run_microbenchmarks(out_dir, second=True)
        micro["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        micro["cupy"] = cp.__version__
        with open(os.path.join(out_dir, "perf_microbench2.json"), "w") as f:
            json.dump(micro, f, indent=1)
        return
    out_dir = argv[1] if len(argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    import cupy as cp

    from gpu_lessons.measure.gpu import device_name

    head = {"gpu": device_name(cp), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cupy": cp.__version__, "driver": cp.cuda.runtime.driverGetVersion(),
            "runtime": cp.cuda.runtime.runtimeGetVersion(),
            "sm_clock_mhz": cp.cuda.Device().attributes.get("ClockRate", 0) / 1000}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.limit",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        head["nvidia_smi"] = q.stdout.strip()
    except Exception:
        pass
    print("microbenchmarks:")
    micro = run_microbenchmarks(out_dir)
    micro.update(head)
    with open(os.path.join(out_dir, "perf_microbench.json"), "w") as f:
        json.dump(micro, f, indent=1)
    print("validation:")
    val = {"what": "tests/perf_kernels.py through gpu_lessons.kernels.run_on_gpu (exact=True), "
                   "median of 20", "runs": run_validation(), **head}
    with open(os.path.join(out_dir, "perf_validation.json"), "w") as f:
        json.dump(val, f, indent=1)
    print("worked puzzle kernels again:")
    val["puzzle_runs"] = run_validation(puzzles=True)
    with open(os.path.join(out_dir, "perf_validation.json"), "w") as f:
        json.dump(val, f, indent=1)
    print("nsight compute:")
    ncu = run_ncu(out_dir)
    with open(os.path.join(out_dir, "perf_ncu_log.json"), "w") as f:
        json.dump({**ncu, **head}, f, indent=1)
    print(ncu["tail"][-1500:])
    print("\nsummary (us):")
    for name, c in micro["cases"].items():
        print(f"  {name:24s} {c.get('seconds', float('nan')) * 1e6:10.1f}")
    for name, r in val["runs"].items():
        print(f"  {name:24s} {r.get('measured_us', float('nan')):10.1f}")


if __name__ == "__main__":
    main(sys.argv)
