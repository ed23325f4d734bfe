"""Run translated CUDA C on the CPU: the test suite's stand-in for a GPU.

The source from ``gpu_lessons.kernels.to_cuda`` is compiled as C++20 with g++ after a short prelude
that gives CUDA's names a CPU meaning: each thread of a block is an OS thread, ``__syncthreads()``
and ``__syncwarp()`` are ``std::barrier``s (a thread that returns drops out, as an exited CUDA
thread does), ``__shared__`` variables are function statics (blocks run one after another),
shuffles exchange values through a per-warp buffer between two warp barriers, and atomics hold
one mutex.  ``-ffp-contract=off`` keeps ``a * b + c`` as two roundings, as ``-fmad=false`` does on
the GPU; x86-64 computes float and double in SSE registers of their own width, so ``+ - * /`` and
``sqrt`` round exactly as IEEE 754 (and NumPy) say.

This checks what the translation *means* (types, casts, Python's ``//`` and ``%``, scoping,
control flow, shared memory, shuffles, atomics) bit for bit against the simulator; it says
nothing about speed, and nothing about CUDA-only behaviour such as independent thread
scheduling.  Shuffles follow PTX ``shfl.sync``: the low 5 bits of the offset, lane mask or
source lane; a source past the warp's end gives the lane its own value.  A per-lane ``break`` or
``return`` is the thread's own, as in CUDA; a shuffle or ``__syncwarp()`` that only some lanes
of a warp reach is undefined in CUDA and not emulated (the harness would wait for the others).
Used by tests/kernels/test_cuda_c.py, test_equivalence.py and test_plain_python.py.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

PRELUDE = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
using std::min; using std::max;
struct harness_dim3 { unsigned int x, y, z; };
static thread_local harness_dim3 threadIdx;
static thread_local int harness_linear;
static harness_dim3 blockIdx, blockDim, gridDim;
static unsigned char* harness_dynamic_smem;
static std::barrier<>* harness_block_barrier;
static std::barrier<>* harness_warp_barrier[32];
static uint64_t harness_shfl[32][32];
static std::mutex harness_atomic_mutex;
#define __global__
#define __device__ static
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return {x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return {x, y}; }
static inline void __syncthreads() { harness_block_barrier->arrive_and_wait(); }
static inline void __syncwarp() { harness_warp_barrier[harness_linear / 32]->arrive_and_wait(); }
template <class T> static T harness_shfl_from(T v, int src, bool valid) {
    int lane = harness_linear % 32, w = harness_linear / 32;
    std::memcpy(&harness_shfl[w][lane], &v, sizeof(T));
    harness_warp_barrier[w]->arrive_and_wait();
    T r = v;
    if (valid) std::memcpy(&r, &harness_shfl[w][src], sizeof(T));
    harness_warp_barrier[w]->arrive_and_wait();
    return r;
}
// PTX shfl.sync uses the low 5 bits of the offset, lane mask or source lane (bval[4:0])
template <class T> static T __shfl_down_sync(unsigned, T v, unsigned d) {
    int src = harness_linear % 32 + (int)(d & 31u); return harness_shfl_from(v, src, src < 32); }
template <class T> static T __shfl_up_sync(unsigned, T v, unsigned d) {
    int src = harness_linear % 32 - (int)(d & 31u); return harness_shfl_from(v, src, src >= 0); }
template <class T> static T __shfl_xor_sync(unsigned, T v, int m) {
    int src = (harness_linear % 32) ^ (m & 31); return harness_shfl_from(v, src, true); }
template <class T> static T __shfl_sync(unsigned, T v, int s) {
    return harness_shfl_from(v, s & 31, true); }
template <class T> static T atomicAdd(T* p, T v) {
    std::lock_guard<std::mutex> g(harness_atomic_mutex); T old = *p; *p = old + v; return old; }
template <class T> static T atomicMax(T* p, T v) {
    std::lock_guard<std::mutex> g(harness_atomic_mutex); T old = *p; *p = std::max(old, v);
    return old; }
template <class T> static T atomicCAS(T* p, T c, T v) {
    std::lock_guard<std::mutex> g(harness_atomic_mutex); T old = *p; if (old == c) *p = v;
    return old; }
static inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline int __float_as_int(float v) { int i; std::memcpy(&i, &v, 4); return i; }
static inline double __longlong_as_double(long long v) { double f; std::memcpy(&f, &v, 8); return f; }
static inline double __longlong_as_double(unsigned long long v) {
    double f; std::memcpy(&f, &v, 8); return f; }
static inline long long __double_as_longlong(double v) { long long i; std::memcpy(&i, &v, 8); return i; }
"""

LAUNCHER = r"""
extern "C" void harness_launch(void** args, int gx, int gy, int gz, int bx, int by, int bz,
                               long shmem)
{
    std::vector<unsigned char> dyn(shmem + 16, 0);
    harness_dynamic_smem = dyn.data();
    blockDim = {(unsigned)bx, (unsigned)by, (unsigned)bz};
    gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
    int n = bx * by * bz;
    for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {
        blockIdx = {(unsigned)x, (unsigned)y, (unsigned)z};
        std::barrier<> block(n);
        harness_block_barrier = &block;
        std::vector<std::barrier<>*> warps;
        for (int w = 0; w * 32 < n; ++w) {
            warps.push_back(new std::barrier<>(std::min(32, n - 32 * w)));
            harness_warp_barrier[w] = warps.back();
        }
        std::vector<std::thread> threads;
        for (int t = 0; t < n; ++t) threads.emplace_back([&, t] {
            threadIdx = {(unsigned)(t % bx), (unsigned)(t / bx % by), (unsigned)(t / (bx * by))};
            harness_linear = t;
            KERNEL_CALL;
            harness_block_barrier->arrive_and_drop();
            harness_warp_barrier[t / 32]->arrive_and_drop();
        });
        for (auto& th : threads) th.join();
        for (auto* b : warps) delete b;
    }
}
"""

_CACHE = Path(tempfile.gettempdir()) / "gpu_lessons_cuda_cpu"


def available() -> bool:
    return shutil.which("g++") is not None


def _build(source: str) -> ctypes.CDLL:
    _CACHE.mkdir(exist_ok=True)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    lib = _CACHE / f"k_{digest}.so"
    if not lib.exists():
        cpp = _CACHE / f"k_{digest}.cpp"
        cpp.write_text(source)
        proc = subprocess.run(["g++", "-std=c++20", "-O0", "-ffp-contract=off",
                               "-fno-strict-aliasing", "-shared", "-fPIC", "-pthread", "-w",
                               "-o", str(lib), str(cpp)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"g++ failed:\n{proc.stderr[:4000]}\n--- source ---\n{source}")
    return ctypes.CDLL(str(lib))


def _unit(k: int, source) -> str:
    """One kernel as a namespace of the shared library, with its launcher."""
    text = str(source).replace(
        "extern __shared__ __align__(128) unsigned char dynamic_smem[];",
        "unsigned char* dynamic_smem = harness_dynamic_smem;").replace(
        'extern "C" __global__', "__global__")
    call = []
    for i, p in enumerate(source.params):
        call.append(f"({p.ctype}*)args[{i}]" if p.kind == "array" else f"*({p.ctype}*)args[{i}]")
    launcher = LAUNCHER.replace("KERNEL_CALL", f"{source.kernel_name}({', '.join(call)})")
    launcher = launcher.replace('extern "C" void harness_launch', f"void launch_{k}")
    return (f"namespace k{k} {{\n{text}\n}}\nnamespace k{k} {{\n{launcher}\n}}\n"
            f'extern "C" void harness_launch_{k}(void** a, int gx, int gy, int gz, int bx, '
            f"int by, int bz, long s) {{ k{k}::launch_{k}(a, gx, gy, gz, bx, by, bz, s); }}\n")


def build(sources) -> list:
    """Compile several translated kernels in one g++ run (the prelude's headers dominate the
    time); returns a launcher per source for :func:`run_cpu`."""
    lib = _build(PRELUDE + "".join(_unit(k, s) for k, s in enumerate(sources)))
    return [(getattr(lib, f"harness_launch_{k}"), s) for k, s in enumerate(sources)]


def run_cpu(source, grid, block, *args, launcher=None) -> None:
    """Run ``to_cuda``'s source on the CPU, writing results back into the NumPy arrays.

    ``launcher``: one entry of :func:`build`'s list (else the source is compiled on its own).
    """
    from gpu_lessons.kernels.cuda_types import _NUMPY_OF_C

    if launcher is None:
        launcher = build([source])[0]
    fn, source = launcher
    grid = tuple(grid) if isinstance(grid, tuple) else (grid,)
    block = tuple(block) if isinstance(block, tuple) else (block,)
    grid, block = (*grid, 1, 1)[:3], (*block, 1, 1)[:3]
    keep, ptrs, flat = [], [], []
    for p, a in zip(source.params, args, strict=True):
        if p.kind == "array":
            buf = np.ascontiguousarray(a).reshape(-1).copy()
            flat.append((a, buf))
        else:
            buf = np.array([a], dtype=_NUMPY_OF_C[p.ctype])
        keep.append(buf)
        ptrs.append(buf.ctypes.data_as(ctypes.c_void_p))
    arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
    fn(arr, *grid, *block, ctypes.c_long(source.dynamic_shared_bytes(block, *args)))
    for a, buf in flat:
        a[...] = buf.reshape(a.shape)
