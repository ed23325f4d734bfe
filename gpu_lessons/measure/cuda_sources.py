"""CUDA C sources for the GPU measurements (compiled by CuPy's ``RawKernel`` with NVRTC).

Each kernel is as small as the effect it measures, so a learner can read it next to the
number it produced.  Every kernel is ``extern "C"`` so CuPy can find it by name.

* ``copy_f4`` / ``triad_f4``: streaming bandwidth with 16-byte loads and stores (one
  ``float4`` per thread per step, a grid-stride loop).
* ``strided_copy_{4,8,16}``: ``dst[i] = src[i*stride + offset]`` for 4-, 8- and 16-byte
  elements, 8 elements per thread.  The reads are strided (or misaligned by ``offset``
  elements), the writes contiguous, so the reads alone carry the pattern the memory model
  predicts.
* ``smem_{4,8,16}``: every lane of every warp reads element ``(lane * stride) mod 2048`` of
  a shared array over and over, with ``ld.volatile.shared`` in inline PTX.  ``asm volatile``
  alone only stops the C++ compiler; ptxas would still merge repeated loads of one address
  (a version without ``.volatile`` measured 0.26 cycles per load at every stride).
  ``clock64()`` around the loop gives SM cycles, so the result needs no clock rate.
* ``empty_kernel``: nothing, for launch latency.
* ``occ_*``: kernels with chosen register and static shared-memory needs, for comparing the
  CUDA runtime's occupancy answer with the calculator.
"""

from __future__ import annotations

STREAM_SOURCE = r"""
extern "C" __global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst,
                                   long long n) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step)
        dst[i] = src[i];
}

extern "C" __global__ void triad_f4(float4* __restrict__ a, const float4* __restrict__ b,
                                    const float4* __restrict__ c, float s, long long n) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}
"""

#: element size in bytes -> the CUDA type a thread moves in one load
ELEMENT_TYPES = {4: "float", 8: "float2", 16: "float4"}

#: elements each thread of the strided copy moves: all its loads are issued before its stores,
#: so enough bytes are in flight to saturate DRAM even with 4-byte elements (Little's law)
STRIDED_UNROLL = 8

_STRIDED = r"""
extern "C" __global__ void strided_copy_{bytes}(const {T}* __restrict__ src, {T}* __restrict__ dst,
                                                long long n, long long stride, long long offset) {{
    // element i = base + j * blockDim.x: for each j the 32 lanes of a warp take 32
    // consecutive i, so every load instruction has the pattern the memory model is given.
    // n must be a multiple of blockDim.x * {unroll}: no bounds checks, so that the compiler
    // issues all the loads before the first store
    long long base = (long long)blockIdx.x * blockDim.x * {unroll} + threadIdx.x;
    {T} v[{unroll}];
    #pragma unroll
    for (int j = 0; j < {unroll}; ++j) {{
        long long i = base + (long long)j * blockDim.x;
        v[j] = src[i * stride + offset];
    }}
    #pragma unroll
    for (int j = 0; j < {unroll}; ++j) {{
        long long i = base + (long long)j * blockDim.x;
        dst[i] = v[j];
    }}
}}
"""

STRIDED_SOURCE = "".join(_STRIDED.format(bytes=b, T=t, unroll=STRIDED_UNROLL)
                         for b, t in ELEMENT_TYPES.items())

#: elements in each shared-memory buffer (a power of two, so ``& (N-1)`` is ``mod N``)
SMEM_ELEMENTS = 2048
#: loads per loop trip in the shared-memory kernels (unrolled)
SMEM_UNROLL = 8

_SMEM_LOAD = {
    4: ('float v; asm volatile("ld.volatile.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));', "v"),
    8: ('float v, w; asm volatile("ld.volatile.shared.v2.f32 {%0, %1}, [%2];" '
        ': "=f"(v), "=f"(w) : "r"(addr));', "v + w"),
    16: ('float v, w, x, y; asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];" '
         ': "=f"(v), "=f"(w), "=f"(x), "=f"(y) : "r"(addr));', "v + w + x + y"),
}

_SMEM = r"""
extern "C" __global__ void smem_{bytes}(float* out, long long* cycles, int stride, int iters) {{
    __shared__ __align__(16) float buf[{elements} * {words}];
    for (int i = threadIdx.x; i < {elements} * {words}; i += blockDim.x) buf[i] = (float)(i & 255);
    __syncthreads();
    unsigned lane = threadIdx.x & 31u;
    unsigned elem = (lane * (unsigned)stride) & {mask}u;
    unsigned addr = (unsigned)__cvta_generic_to_shared(buf) + elem * {bytes}u;
    float acc0 = 0.f, acc1 = 0.f;
    long long t0 = clock64();
    for (int k = 0; k < iters; ++k) {{
        #pragma unroll
        for (int u = 0; u < {unroll}; u += 2) {{
            {{ {load} acc0 += {use}; }}
            {{ {load} acc1 += {use}; }}
        }}
    }}
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (acc0 + acc1 == -1.0f) out[blockIdx.x] = acc0;  // never true; keeps the loads alive
}}
"""

SMEM_SOURCE = "".join(
    _SMEM.format(bytes=b, words=b // 4, elements=SMEM_ELEMENTS, mask=SMEM_ELEMENTS - 1,
                 unroll=SMEM_UNROLL, load=_SMEM_LOAD[b][0], use=_SMEM_LOAD[b][1])
    for b in ELEMENT_TYPES)

EMPTY_SOURCE = r"""
extern "C" __global__ void empty_kernel() {}
"""

#: live values the register-hungry kernel keeps; ``--maxrregcount`` then caps its registers
OCC_LIVE_VALUES = 160

OCCUPANCY_SOURCE = r"""
extern "C" __global__ void occ_light(float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

#define LIVE @LIVE@
extern "C" __global__ void occ_regs(const float* __restrict__ in, float* __restrict__ out, int n) {
    float v[LIVE];
    #pragma unroll
    for (int j = 0; j < LIVE; ++j) v[j] = in[(threadIdx.x * LIVE + j) % n];
    for (int it = 0; it < n; ++it) {
        #pragma unroll
        for (int j = 0; j < LIVE; ++j) v[j] = fmaf(v[j], v[(j + 7) % LIVE], 1.0f);
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < LIVE; ++j) s += v[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

#define OCC_SMEM(NAME, FLOATS)                                                     \
extern "C" __global__ void NAME(float* out) {                                      \
    __shared__ float tile[FLOATS];                                                 \
    for (int i = threadIdx.x; i < FLOATS; i += blockDim.x) tile[i] = (float)i;     \
    __syncthreads();                                                               \
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x * 7) % FLOATS]; \
}
OCC_SMEM(occ_smem_1k, 256)
OCC_SMEM(occ_smem_12k, 3072)
OCC_SMEM(occ_smem_40k, 10240)
OCC_SMEM(occ_smem_48k, 12288)

extern "C" __global__ void occ_dynamic(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}
""".replace("@LIVE@", str(OCC_LIVE_VALUES))

#: (label, source, kernel name, NVRTC options) for the occupancy comparison
OCCUPANCY_KERNELS = (
    [("occ_light", OCCUPANCY_SOURCE, "occ_light", ())]
    + [(f"occ_regs maxrreg={r}", OCCUPANCY_SOURCE, "occ_regs", (f"--maxrregcount={r}",))
       for r in (24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 255)]
    + [(name, OCCUPANCY_SOURCE, name, ())
       for name in ("occ_smem_1k", "occ_smem_12k", "occ_smem_40k", "occ_smem_48k")]
    + [("occ_dynamic", OCCUPANCY_SOURCE, "occ_dynamic", ())]
    + [("copy_f4", STREAM_SOURCE, "copy_f4", ()), ("triad_f4", STREAM_SOURCE, "triad_f4", ())]
    + [(f"strided_copy_{b}", STRIDED_SOURCE, f"strided_copy_{b}", ()) for b in ELEMENT_TYPES]
    + [(f"smem_{b}", SMEM_SOURCE, f"smem_{b}", ()) for b in ELEMENT_TYPES]
)
