"""The seven mystery kernels of notebook 10, one small function each, and their fixes.

Every kernel's time says where it comes from (``time_source``): measured on an H200
(:mod:`gpu_lessons.capstone.measured`) or derived from one of the course's models.  Every
instruction mix says where its counts come from: for the kernels written out in CUDA, the SASS
``nvcc -arch=sm_90`` produces (executed instructions per thread, every loop unrolled, so each
instruction runs once; the filter's as recorded with its H200 run); for cuBLAS and the decoder
layer, a model of the algorithm, stated beside it.
"""

from __future__ import annotations

from dataclasses import replace

from .. import _validate, costs, memory, system
from .._format import duration
from ..costs import KernelCost
from .kernel import Launch, MysteryKernel, WarpAccess
from .measured import measured, source
from .pipes import InstructionMix

#: The GPU every mystery ran on.
GPU = "H200 SXM"

_SASS = "SASS of nvcc 13.0 for sm_90, executed instructions per thread"


def _elementwise_cost(name, n, flops_per_element=0, dtype="fp32") -> KernelCost:
    return costs.elementwise(n, flops_per_element=flops_per_element, reads=1, writes=1,
                             dtype=dtype, name=name)


# -- 1. One field of an array of 32-byte structs: lanes 32 bytes apart ---------------------------

_FIELD_N = 62_914_560


def _soa_field() -> MysteryKernel:
    n = _FIELD_N
    return MysteryKernel(
        key="aos_field (fixed)", title="Read one field stored as its own array (SoA)",
        code=r"""
__global__ void get_x(const float* __restrict__ px, float* __restrict__ x) {
    long base = blockIdx.x * 256L * 8 + threadIdx.x;
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = px[base + 256 * j];    // lanes 4 bytes apart
    for (int j = 0; j < 8; ++j) x[base + 256 * j] = v[j];
}""",
        gpu=GPU, precision="fp32", sizes=f"{n:,} floats (240 MiB in, 240 MiB out)",
        cost=_elementwise_cost("copy one field", n),
        seconds=measured("strided_copy_4_stride1"), measured=True,
        time_source=source("strided_copy_4_stride1"),
        accesses=(WarpAccess("load px[i]", tuple(memory.strided(1))),
                  WarpAccess("store x[i]", tuple(memory.strided(1)))),
        # 8 LDG, 8 STG, 2 S2R; 3 IMAD, 4 IADD3, 1 SHF; 3 ULDC; 1 LDC; EXIT
        instructions=InstructionMix.per_thread(
            n // 8, {"lsu": 18, "int": 8, "uniform": 3, "constant": 1, "other": 1},
            source=_SASS))


def aos_field() -> MysteryKernel:
    """Mystery 1: one float field of 32-byte structs, read by a warp 32 bytes apart."""
    n = _FIELD_N
    return MysteryKernel(
        key="aos_field", title="Read one field of an array of structs",
        code=r"""
struct Particle { float x, y, z, vx, vy, vz, mass, charge; };   // 32 bytes

__global__ void get_x(const Particle* __restrict__ p, float* __restrict__ x) {
    // 256 threads per block, 8 particles per thread, all loads issued before the stores
    long base = blockIdx.x * 256L * 8 + threadIdx.x;
    float v[8];
    for (int j = 0; j < 8; ++j) v[j] = p[base + 256 * j].x;   // lanes 32 bytes apart
    for (int j = 0; j < 8; ++j) x[base + 256 * j] = v[j];
}""",
        gpu=GPU, precision="fp32",
        sizes=f"{n:,} particles (x: 240 MiB out, the structs 1.875 GiB)",
        cost=_elementwise_cost("copy one field", n),
        seconds=measured("strided_copy_4_stride8"), measured=True,
        time_source=(source("strided_copy_4_stride8") + " — the same warp access pattern as "
                     "p[i].x with 32-byte structs"),
        accesses=(WarpAccess("load p[i].x", tuple(memory.aos_field(32, 0))),
                  WarpAccess("store x[i]", tuple(memory.strided(1)))),
        # 8 LDG, 8 STG, 2 S2R; 2 IMAD, 4 LEA; 3 ULDC; 1 LDC; EXIT
        instructions=InstructionMix.per_thread(
            n // 8, {"lsu": 18, "int": 6, "uniform": 3, "constant": 1, "other": 1},
            source=_SASS),
        fix=("structure of arrays: keep x in its own float array, so a warp reads 128 "
             "consecutive bytes (4 sectors instead of 32)"),
        after=_soa_field())


# -- 2. Tiled transpose with a 32-way bank conflict on the column read ---------------------------

_TRANSPOSE_N = 8192
_TRANSPOSE_CODE = r"""
__global__ void transpose_tiled(const float* a, float* out) {   // block 32 x 8
    __shared__ float tile[32][32{pad}];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    int width = gridDim.x * 32;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = a[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;  y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}"""
# Executed instructions per thread (4 elements each): 4 LDG, 4 STS, 4 LDS, 4 STG and 4-5 S2R;
# 20-22 integer (IMAD, LEA, SHF, MOV); ULDC/S2UR/UMOV/ULEA; 4 LDC; BAR and EXIT.
_TRANSPOSE_SASS = {
    0: {"lsu": 20, "int": 20, "uniform": 4, "constant": 4, "other": 2},
    1: {"lsu": 21, "int": 22, "uniform": 1, "constant": 4, "other": 2},
}


def _transpose(pad: int) -> MysteryKernel:
    n = _TRANSPOSE_N
    tiles = n * n // 32   # warp instructions for each of the tile's store and load
    timed = "transpose_tiled_padded" if pad else "transpose_tiled"
    return MysteryKernel(
        key="transpose_tiled" + (" (fixed)" if pad else ""),
        title="Transpose through a shared-memory tile" + (", padded" if pad else ""),
        code=_TRANSPOSE_CODE.replace("{pad}", " + 1" if pad else ""),
        gpu=GPU, precision="fp32", sizes=f"{n:,} × {n:,} floats (256 MiB each way)",
        cost=_elementwise_cost("transpose", n * n),
        seconds=measured(timed), measured=True, time_source=source(timed),
        # registers and blocks/SM as the CUDA runtime reported them in the same H200 run
        launch=Launch(blocks=(n // 32) ** 2, threads_per_block=256, registers_per_thread=28,
                      shared_mem_per_block=32 * (32 + pad) * 4, bytes_in_flight_per_thread=16),
        accesses=(WarpAccess("load a (row)", tuple(memory.strided(1))),
                  WarpAccess("store out (row)", tuple(memory.strided(1))),
                  WarpAccess("tile store (row)", tuple(memory.matrix_row(0, ld=32 + pad)),
                             space="shared", count=tiles),
                  WarpAccess("tile load (column)",
                             tuple(memory.tile_column(0, width=32, padding=pad)),
                             space="shared", count=tiles)),
        instructions=InstructionMix.per_thread(n * n // 4, _TRANSPOSE_SASS[pad], source=_SASS))


def transpose_tiled() -> MysteryKernel:
    """Mystery 2: a tiled transpose whose column read hits one bank 32 times."""
    return replace(_transpose(0), after=_transpose(1),
                   fix="pad the tile to [32][33]: a column then spans all 32 banks "
                       "(1 wavefront, not 32)")


# -- 3. FP32 GEMM on the CUDA cores; 4. the same product on the tensor cores ---------------------

_GEMM_N = 8192


def _sgemm_mix(n: int) -> InstructionMix:
    """cuBLAS's FP32 kernel is closed source; this is the classic register-blocked SGEMM it is
    built like (128 × 128 block tiles, 256 threads, 8 × 8 outputs per thread, k-steps of 8):
    per thread and k-step 64 FFMA, 4 LDS.128 (8 values of A and 8 of B from shared memory),
    half an LDG + STS (the next tile: 8 floats per thread per 8 k-steps) and about one
    integer instruction (addresses, loop)."""
    return InstructionMix.per_thread(
        n * n // 64, {"fp32": 64 * n, "lsu": 4.5 * n, "int": n},
        source="model of a register-blocked SGEMM (8 × 8 outputs per thread): per k-step "
               "64 FFMA, 4 LDS, 0.5 LDG/STS, 1 integer")


def _hgemm() -> MysteryKernel:
    n = _GEMM_N
    cost = costs.gemm(n, n, n, dtype="fp16")
    return MysteryKernel(
        key="hgemm", title="Half-precision matrix multiply on tensor cores (cuBLAS)",
        code=r"""
// C = A @ B with FP16 inputs, FP32 accumulate: cuBLAS picks a tiled tensor-core kernel
cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, CUDA_R_16F, n,
             A, CUDA_R_16F, n, &zero, C, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);""",
        gpu=GPU, precision="fp16", sizes=f"{n:,} × {n:,} times {n:,} × {n:,}, FP16",
        cost=cost, seconds=measured("hgemm_8192"), measured=True,
        time_source=source("hgemm_8192"),
        # every multiply-add on the tensor cores; the copies and barriers around them are a
        # few instructions per 64 x 256 x 16 warpgroup MMA, left out
        instructions=InstructionMix((), tensor_flops=cost.flops,
                                    source="model: every FLOP on the tensor cores"),
        fix=("nothing big left in this kernel: about 75 % of a peak that assumes a 1830 MHz "
             "tensor clock is what cuBLAS reaches on this GPU at full clock (and about 65 % once "
             "the 700 W power cap pulls the clock to ~1,440 MHz). Do fewer FLOPs, or move to "
             "FP8 (a 2× higher roof) if the model tolerates it"))


def sgemm() -> MysteryKernel:
    """Mystery 3: an FP32 matrix product on the CUDA cores (cuBLAS)."""
    n = _GEMM_N
    return MysteryKernel(
        key="sgemm", title="Single-precision matrix multiply (cuBLAS)",
        code=r"""
// C = A @ B in FP32: cupy.matmul calls cuBLAS (no tensor cores: TF32 is off by default)
cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n);""",
        gpu=GPU, precision="fp32", sizes=f"{n:,} × {n:,} times {n:,} × {n:,}, FP32",
        cost=costs.gemm(n, n, n, dtype="fp32"),
        seconds=measured("sgemm_8192"), measured=True, time_source=source("sgemm_8192"),
        instructions=_sgemm_mix(n),
        fix=("change the roof: run the product on the tensor cores (BF16/FP16 inputs with FP32 "
             "accumulate, or TF32) when the accuracy allows (relative error 2e-4 instead of "
             "2e-6 in this run)"),
        after=replace(_hgemm(), key="sgemm (fixed)", fix=""))


def hgemm() -> MysteryKernel:
    """Mystery 4: the same product in FP16 on the tensor cores (cuBLAS)."""
    return _hgemm()


# -- 5. A decoder layer at decode time, small batch, long context ------------------------------

_DECODE_CODE = r"""
// per layer, per generated token (batch 8, each sequence with 8,192 cached tokens):
qkv  = x @ W_qkv;            // [8 x 4096] @ [4096 x 12288]   (GEMM, m = batch = 8)
kv_cache.append(k, v);       // K and V cache in {kv}
o    = attention(q, K_cache, V_cache);   // each query reads its sequence's whole cache
x    = x + o @ W_o;
x    = x + (silu(x @ W_gate) * (x @ W_up)) @ W_down;"""


def _sum_costs(name: str, parts: list[KernelCost], notes: str) -> KernelCost:
    return KernelCost(name, sum(p.flops for p in parts), sum(p.bytes for p in parts),
                      notes=notes, parts=tuple((p.name, p.flops, p.bytes) for p in parts))


def _decode_layer_cost(batch, context, kv_dtype="fp16") -> KernelCost:
    """One Llama-2-7B-shaped decoder layer at decode time (one new token per sequence), FP16.

    Weights h = 4096, SwiGLU i = 11008 (Touvron et al. 2023, arXiv 2307.09288): the four
    projections and three MLP GEMMs read every weight once for the whole batch
    (``costs.gemm`` with m = batch); attention reads each sequence's K and V cache
    (``costs.attention_decode``, 32 heads of 128) stored in ``kv_dtype``.
    """
    h, i = 4096, 11008
    shapes = [("QKV projection", 3 * h, h), ("output projection", h, h),
              ("MLP gate + up", 2 * i, h), ("MLP down", h, i)]
    gemms = []
    for name, n, k in shapes:
        c = costs.gemm(batch, n, k, dtype="fp16")
        gemms.append(KernelCost(name, c.flops, c.bytes))
    attn = costs.attention_decode(context, n_heads=32, head_dim=128, batch=batch,
                                  dtype=kv_dtype)
    kv = "" if kv_dtype == "fp16" else f", {kv_dtype} KV cache"
    return _sum_costs(f"decode layer (batch {batch}, context {context:,}{kv})", [*gemms, attn],
                      "weights read once per step for the whole batch; K and V caches read "
                      "once per sequence")


def _decode(kv_dtype: str, batch: int = 8, context: int = 8192) -> MysteryKernel:
    bw = measured("copy_bandwidth")
    cost = _decode_layer_cost(batch, context, kv_dtype=kv_dtype)
    return MysteryKernel(
        key="decode_layer" + ("" if kv_dtype == "fp16" else " (fixed)"),
        title="One decoder layer of a 7B model, generating one token",
        code=_DECODE_CODE.replace("{kv}", kv_dtype.upper()),
        gpu=GPU, precision="fp16",
        sizes=("Llama-2-7B shapes (h = 4096, 32 heads × 128, SwiGLU 11008), FP16 weights, "
               f"{kv_dtype.upper()} KV cache, batch {batch}, context {context:,}"),
        cost=cost, seconds=cost.bytes / bw, measured=False,
        time_source=("model-derived: the layer's bytes (weights once, every K and V cache "
                     "entry once) at the copy bandwidth measured on an H200 (4,205 GB/s); "
                     "a real decode step adds launch gaps and is slower"),
        # the products on the tensor cores; every byte through a 16-byte load or store
        # (512 bytes per warp instruction)
        instructions=InstructionMix({"lsu": cost.bytes / 512}, tensor_flops=cost.flops,
                                    source="model: FLOPs on the tensor cores, 16-byte "
                                           "loads for every byte"))


def decode_layer() -> MysteryKernel:
    """Mystery 5: one decoder layer of a 7B model generating a token, batch 8."""
    return replace(
        _decode("fp16"), after=_decode("fp8"),
        fix=("move fewer bytes per token: store the KV cache in FP8 (half the bytes, no "
             "retraining); a model trained with grouped-query attention (8 KV heads) would read "
             "4× less. A bigger batch raises the GEMMs' intensity but not attention's: every "
             "sequence has its own cache"))


# -- 6. A filter with too few resident warps ---------------------------------------------------

_FIR_N = 1 << 26
#: One tap of the filter is ``acc = fmaf(w[k], v + s[k], acc)``: an add and a multiply-add,
#: 3 FLOPs; 40 taps, 120 FLOPs per element.
FIR_TAPS = 40
FIR_FLOPS_PER_ELEMENT = 3 * FIR_TAPS
#: FP32 instructions per element of the fixed filter (an FADD and an FFMA per tap) ...
FIR_FP32_PER_ELEMENT = 2 * FIR_TAPS
#: ... and of the mystery, which computes each tap per thread: nvcc turns a tap into three
#: FFMAs (w = a·k + b, v + c·k, and the accumulation), 119 FFMA and one FADD in all.
FIR_V1_FP32_PER_ELEMENT = 3 * FIR_TAPS

#: SASS instructions per thread by opcode, as recorded with the H200 run
#: (``tests/data/h200_capstone_fir.json``, ``kernels.NAME.sass_per_thread``; nvcc for sm_90,
#: every loop unrolled, so each runs once per thread).
FIR_SASS = {
    "fir40_v1": {"LDC": 4, "S2R": 1, "S2UR": 1, "HFMA2": 1, "IMAD": 1, "ULDC": 4, "ISETP": 2,
                 "EXIT": 2, "SHF": 2, "IADD3": 4, "LDG": 1, "FFMA": 119, "FADD": 1, "STG": 1},
    "fir40_v4": {"LDC": 2, "S2R": 1, "S2UR": 1, "HFMA2": 1, "IMAD": 1, "ULDC": 44, "ISETP": 2,
                 "EXIT": 2, "SHF": 2, "IADD3": 4, "LDG": 1, "FADD": 160, "FFMA": 160, "STG": 1},
}
#: Dynamic shared memory the mystery's launch asks for (and never uses), bytes.
FIR_V1_SHARED = 120 * 1024
_FIR_RECORD = ("SASS recorded with the H200 run (nvcc for sm_90, cuobjdump), executed "
               "instructions per thread")


def _fir40_v4() -> MysteryKernel:
    n = _FIR_N
    return MysteryKernel(
        key="fir_filter (fixed)", title="The filter with its taps in constant memory, float4",
        code=r"""
// ptxas -v: 28 registers; the 40 taps live in __constant__ memory (the same for all threads)
__constant__ float w[40], s[40];
__global__ void __launch_bounds__(256, 8) fir40_v4(const float4* x, float4* y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = x[i], acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < 40; ++k) { acc.x = fmaf(w[k], v.x + s[k], acc.x); /* .y .z .w alike */ }
    y[i] = acc;
}""",
        gpu=GPU, precision="fp32", sizes=f"{n:,} floats in, {n:,} out (256 MiB each)",
        cost=_elementwise_cost("40-tap filter", n, flops_per_element=FIR_FLOPS_PER_ELEMENT),
        seconds=measured("fir40_v4"), measured=True, time_source=source("fir40_v4"),
        launch=Launch(blocks=n // 4 // 256, threads_per_block=256, registers_per_thread=28,
                      bytes_in_flight_per_thread=16),
        accesses=(WarpAccess("load x[i] (float4)", tuple(memory.strided(1, element_bytes=16)),
                             bytes_per_thread=16),
                  WarpAccess("store y[i] (float4)", tuple(memory.strided(1, element_bytes=16)),
                             bytes_per_thread=16)),
        # per thread (4 elements): 160 FADD, 160 FFMA, 1 HFMA2; 44 ULDC (the taps, two at a
        # time, as uniform operands) + S2UR; 2 LDC; LDG.128, STG.128, S2R; 9 integer; 2 EXIT
        instructions=InstructionMix.from_sass(n // 4, FIR_SASS["fir40_v4"], source=_FIR_RECORD),
        fix=("do fewer instructions: w·(v + s) = w·v + w·s, so precompute w·s and each tap is "
             "one FFMA (40 instead of 80 per element); summed over the taps the filter is even "
             "v·Σw + Σw·s, one FFMA per element"))


def fir_filter() -> MysteryKernel:
    """Mystery 6: a 40-tap filter launched with 120 KiB of shared memory per block it never
    uses, so one 256-thread block (8 warps) fits per SM; each thread computes the taps.

    Measured on an H200 (``fir40_v1`` of ``tools/device/capstone_fir.py``), as is its fix.
    :func:`gpu_lessons.capstone.latency_prediction` gives the latency model's time for it
    (1.48 ms against the measured 1.50 ms) and says what that model leaves out.
    """
    n = _FIR_N
    return MysteryKernel(
        key="fir_filter", title="A 40-tap filter",
        code=r"""
// launched as fir40<<<n / 256, 256, 120 * 1024>>>(x, y, n, a, b, c): 120 KiB of dynamic
// shared memory per block, which the kernel never uses.  ptxas -v: 16 registers.
__global__ void fir40(const float* __restrict__ x, float* __restrict__ y, long n,
                      float a, float b, float c) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float w[40], s[40];                      // the taps: the same for every thread
    #pragma unroll
    for (int k = 0; k < 40; ++k) { w[k] = fmaf(a, (float)k, b); s[k] = c * k; }
    float v = x[i], acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc = fmaf(w[k], v + s[k], acc);
    y[i] = acc;
}""",
        gpu=GPU, precision="fp32", sizes=f"{n:,} floats in, {n:,} out (256 MiB each)",
        cost=_elementwise_cost("40-tap filter", n, flops_per_element=FIR_FLOPS_PER_ELEMENT),
        seconds=measured("fir40_v1"), measured=True, time_source=source("fir40_v1"),
        launch=Launch(blocks=n // 256, threads_per_block=256, registers_per_thread=16,
                      shared_mem_per_block=FIR_V1_SHARED),
        accesses=(WarpAccess("load x[i]", tuple(memory.strided(1))),
                  WarpAccess("store y[i]", tuple(memory.strided(1)))),
        # per thread: 119 FFMA + 1 FADD (three FFMAs per tap); 4 LDC, 4 ULDC + S2UR (the
        # parameters); LDG, STG, S2R; 9 integer; 2 EXIT
        instructions=InstructionMix.from_sass(n, FIR_SASS["fir40_v1"], source=_FIR_RECORD),
        fix=("give the SM more warps: launch without the 120 KiB nobody uses (then 8 blocks, 64 "
             "warps, fit per SM); the taps are the same for every thread, so read them from "
             "__constant__ memory instead of computing them (80 FP32 instructions per element "
             "instead of 120); load float4 so each thread has 16 bytes in flight"),
        after=_fir40_v4())


# -- 7. A chain of tiny elementwise kernels --------------------------------------------------------

_CHAIN_N, _CHAIN_LENGTH = 1 << 20, 10
# Executed instructions per thread of `y[i] = x[i] * s` (LDG, STG, S2R; 10 integer; 6 uniform;
# 2 LDC; FMUL; 2 EXIT), of `y[i] = tanhf(x[i])` (10 FP32 and 2 MUFU instead of the FMUL) and of
# the fused kernel below (15 FP32, 2 MUFU, 16 integer, 5 LDC for the parameters).
_ELEMENTWISE_SASS = {"lsu": 3, "int": 10, "uniform": 6, "constant": 2, "fp32": 1, "other": 2}
_TANH_SASS = {"lsu": 3, "int": 15, "uniform": 5, "constant": 2, "fp32": 10, "xu": 2,
              "other": 2}
_FUSED_SASS = {"lsu": 3, "int": 16, "uniform": 6, "constant": 5, "fp32": 15, "xu": 2,
               "other": 2}


def _launch_text(fig) -> str:
    return (f"launch {duration(fig.launch_us * 1e-6)} and sync {duration(fig.sync_us * 1e-6)} from "
            "gpu_lessons.system.LAUNCH_FIGURES['H200'] (measured on an H200)")


def _fused_chain() -> MysteryKernel:
    n, chain = _CHAIN_N, _CHAIN_LENGTH
    bw = measured("copy_bandwidth")
    fig = system.launch_figures("H200")
    cost = _elementwise_cost("fused kernel", n, flops_per_element=chain)
    return MysteryKernel(
        key="kernel_chain (fixed)", title="The ten operations fused into one kernel",
        code=r"""
__global__ void fused(const float* x, float* y, Params p, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    float v = tanhf(x[i] * p.scale + p.bias) * 0.5f + 0.5f;              // ops 1-5
    y[i] = ((v * p.gate - p.mean) * p.inv_std) * p.gamma + p.beta;      // ops 6-10
}""",
        gpu=GPU, precision="fp32", sizes=f"one kernel over {n:,} floats", cost=cost,
        seconds=system.kernel_sequence(1, cost.bytes / bw * 1e6, figures=fig).step_us * 1e-6,
        measured=False,
        time_source=("model-derived: gpu_lessons.system.kernel_sequence for one launch and a "
                     f"sync ({_launch_text(fig)}); one pass over 8 MiB at the measured "
                     "4,205 GB/s"),
        instructions=InstructionMix.per_thread(n, _FUSED_SASS, source=_SASS),
        launches=1, gpu_busy_seconds=cost.bytes / bw, launch_overhead_s=fig.launch_us * 1e-6)


def kernel_chain() -> MysteryKernel:
    """Mystery 7: ten elementwise kernels over 1 M floats, launched one after another."""
    n, chain = _CHAIN_N, _CHAIN_LENGTH
    bw = measured("copy_bandwidth")
    fig = system.launch_figures("H200")
    one = _elementwise_cost("one elementwise op", n, flops_per_element=1)
    per_kernel = one.bytes / bw
    cost = KernelCost(f"{chain} elementwise kernels", chain * one.flops, chain * one.bytes,
                      parts=tuple((f"kernel {j + 1}", one.flops, one.bytes)
                                  for j in range(chain)))
    counts = {p: (chain - 1) * _ELEMENTWISE_SASS.get(p, 0) + _TANH_SASS.get(p, 0)
              for p in dict.fromkeys([*_ELEMENTWISE_SASS, *_TANH_SASS])}
    return MysteryKernel(
        key="kernel_chain", title="Ten small elementwise kernels in a row",
        code=r"""
# PyTorch-style eager code: every operation is one kernel launch over 1M floats
y = x * scale;  y = y + bias;  y = torch.tanh(y);  y = y * 0.5;  y = y + 0.5
y = y * gate;   y = y - mean;  y = y * inv_std;    y = y * gamma; y = y + beta
torch.cuda.synchronize()""",
        gpu=GPU, precision="fp32",
        sizes=f"{chain} kernels, each over {n:,} floats (4 MiB in, 4 MiB out)", cost=cost,
        seconds=system.kernel_sequence(chain, per_kernel * 1e6, figures=fig).step_us * 1e-6,
        measured=False,
        time_source=("model-derived: gpu_lessons.system.kernel_sequence (launches back to back, "
                     f"one sync at the end; {_launch_text(fig)}); each kernel "
                     f"{duration(per_kernel)} of GPU work, its 8 MiB at the measured "
                     "4,205 GB/s"),
        instructions=InstructionMix.per_thread(
            n, counts, source=_SASS + " (nine kernels like y = x * s, one tanhf)"),
        launches=chain, gpu_busy_seconds=chain * per_kernel,
        launch_overhead_s=fig.launch_us * 1e-6,
        fix=("launch less: fuse the ten operations into one kernel (one read of x, one write of "
             "y, one launch), or capture the chain in a CUDA graph (one launch, then "
             f"{duration(fig.graph_node_us * 1e-6)} per kernel on the GPU)"),
        after=_fused_chain())


# -- the catalogue ----------------------------------------------------------------------------------

_BUILDERS = (aos_field, transpose_tiled, sgemm, hgemm, decode_layer, fir_filter, kernel_chain)

#: The mystery kernels in the order notebook 10 shows them, by key.
MYSTERIES: dict[str, MysteryKernel] = {k.key: k for k in (b() for b in _BUILDERS)}


def mystery(key: str) -> MysteryKernel:
    """The mystery kernel named ``key`` (see :data:`MYSTERIES`)."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, one of {', '.join(MYSTERIES)}; got {key!r}")
    return MYSTERIES[_validate.choice("key", key, MYSTERIES)]


def roofline_points(keys=None) -> tuple[list[str], list[float], list[float]]:
    """``(names, intensities, FLOP/s)`` of the mystery kernels that do floating-point work, as
    they ran, for ``RooflineExplorer.add_points`` (kernels that only move data have no place on
    a log-scale FLOP/s axis).  ``keys``: which kernels (default: all of :data:`MYSTERIES`)."""
    keys = list(MYSTERIES) if keys is None else [keys] if isinstance(keys, str) else list(keys)
    names, xs, ys = [], [], []
    for key in keys:
        k = mystery(key)
        if k.cost.flops > 0:
            names.append(k.key)
            xs.append(k.cost.intensity)
            ys.append(k.cost.flops / k.seconds)
    return names, xs, ys
