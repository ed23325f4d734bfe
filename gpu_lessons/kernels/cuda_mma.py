"""The C the translation writes for half-precision values and the tensor-core instructions.

NVRTC's wheels ship no ``cuda_fp16.h`` or ``cuda_bf16.h``, so the translation declares its own
``half_t`` (``np.float16``) and ``bf16_t`` (``ml_dtypes.bfloat16``): the 16 bits and their
conversions in plain C++ that NVRTC and the CPU check's g++ compile alike, exact to float and
rounding to nearest even in one step from a float or double, as NumPy and ml_dtypes convert.
``t.mma`` and ``t.ldmatrix`` are inline PTX (``mma.sync.aligned.m16n8k16``,
``ldmatrix.sync.aligned.m8n8``) where the GPU has them; elsewhere (the CPU check, an older GPU)
the same values from the warp's registers, gathered with shuffles, in the simulator's order.
"""

from __future__ import annotations

#: NumPy dtype name -> the C type the translation declares for it.
HALF_CTYPES = {"float16": "half_t", "bfloat16": "bf16_t"}

HALF_TYPES = """\
#if defined(__CUDACC__)
#define HALF_FN __device__ __forceinline__
#else
#define HALF_FN inline
#endif
// np.float16 and ml_dtypes.bfloat16: 16 bits each, converted as NumPy converts (no cuda_fp16.h)
HALF_FN unsigned short narrow_rn(double v, int mbits, int ebits)   // round to nearest even
{
    unsigned long long u = (unsigned long long)__double_as_longlong(v);
    unsigned short sign = (unsigned short)((u >> 48) & 0x8000u);
    int exp = (int)((u >> 52) & 0x7ff), emax = (1 << ebits) - 1;
    unsigned long long full = u & 0xfffffffffffffULL;
    if (exp == 0x7ff) {   // infinity, or a NaN that keeps its top payload bits
        unsigned long long m = full >> (52 - mbits);
        return sign | (unsigned short)(emax << mbits) | (unsigned short)(full && !m ? 1 : m);
    }
    if (exp == 0) return sign;   // a subnormal double is far below the smallest half
    int e = exp - 1023 + (1 << (ebits - 1)) - 1;
    full |= 1ULL << 52;
    int shift = 52 - mbits + (e < 1 ? 1 - e : 0);
    if (shift > 53) return sign;
    unsigned long long q = full >> shift, r = full & ((1ULL << shift) - 1);
    unsigned long long half = 1ULL << (shift - 1);
    if (r > half || (r == half && (q & 1))) ++q;
    if (e < 1) return sign | (unsigned short)q;   // subnormal (or up to the smallest normal)
    if (q >> (mbits + 1)) { q >>= 1; ++e; }
    if (e >= emax) return sign | (unsigned short)(emax << mbits);
    return sign | (unsigned short)(e << mbits) | (unsigned short)(q & ((1ULL << mbits) - 1));
}
HALF_FN float widen_f16(unsigned short h)   // exact
{
    unsigned sign = (unsigned)(h & 0x8000u) << 16, m = h & 1023u;
    int e = (h >> 10) & 31;
    if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
    if (e == 31) return __int_as_float((int)(sign | 0x7f800000u | (m << 13)));
    return __int_as_float((int)(sign | ((unsigned)(e + 112) << 23) | (m << 13)));
}
struct half_t {   // np.float16: 1 sign, 5 exponent, 10 fraction bits
    unsigned short bits;
    static constexpr bool bf16 = false;
    half_t() = default;
    HALF_FN half_t(double v) : bits(narrow_rn(v, 10, 5)) {}
    HALF_FN operator float() const { return widen_f16(bits); }
};
struct bf16_t {   // ml_dtypes.bfloat16: 1 sign, 8 exponent, 7 fraction bits
    unsigned short bits;
    static constexpr bool bf16 = true;
    bf16_t() = default;
    HALF_FN bf16_t(double v) : bits(narrow_rn(v, 7, 8)) {}
    HALF_FN operator float() const { return __int_as_float((int)((unsigned)bits << 16)); }
};
"""

MMA = """\
template <class T>
HALF_FN unsigned pack2(T lo, T hi) { return (unsigned)lo.bits | ((unsigned)hi.bits << 16); }
template <class T>   // t.mma(d, a, b, c): D = A B + C, 16 x 8 x 16, by the whole warp
HALF_FN void mma_m16n8k16(float* d, const T* a, const T* b, const float* c)
{
    unsigned A[4] = {pack2(a[0], a[1]), pack2(a[2], a[3]), pack2(a[4], a[5]), pack2(a[6], a[7])};
    unsigned B[2] = {pack2(b[0], b[1]), pack2(b[2], b[3])};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float D[4];
#define MMA_ASM(TY) asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 "   \\
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\\n"                 \\
        : "=f"(D[0]), "=f"(D[1]), "=f"(D[2]), "=f"(D[3]) : "r"(A[0]), "r"(A[1]), "r"(A[2]),    \\
          "r"(A[3]), "r"(B[0]), "r"(B[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]))
    if (T::bf16) MMA_ASM("bf16"); else MMA_ASM("f16");
#undef MMA_ASM
    for (int j = 0; j < 4; ++j) d[j] = D[j];
#else
    // no tensor cores: the warp's fragments through shuffles, the simulator's sums
    unsigned wa[32][4], wb[32][2];
    for (int s = 0; s < 32; ++s) {
        for (int r = 0; r < 4; ++r) wa[s][r] = __shfl_sync(0xffffffffu, A[r], s);
        for (int r = 0; r < 2; ++r) wb[s][r] = __shfl_sync(0xffffffffu, B[r], s);
    }
    int lane = lane_id();
    for (int j = 0; j < 4; ++j) {
        int m = lane / 4 + 8 * (j / 2), n = lane % 4 * 2 + j % 2;
        float acc = c[j];
        for (int k = 0; k < 16; ++k) {
            T x, y;
            x.bits = (unsigned short)(wa[m % 8 * 4 + k % 8 / 2][m / 8 + 2 * (k / 8)] >> (16 * (k % 2)));
            y.bits = (unsigned short)(wb[n * 4 + k % 8 / 2][k / 8] >> (16 * (k % 2)));
            acc = acc + (float)x * (float)y;
        }
        d[j] = acc;
    }
#endif
}
"""

_LDMATRIX = """\
template <int N, bool TRANS, class T>   // t.ldmatrix(r, s, index, N, trans=TRANS)
HALF_FN void ldmatrix(T* r, const T* row)
{
    unsigned R[4] = {0u, 0u, 0u, 0u};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
{asm}
#else
    // no ldmatrix: each lane's row address through shuffles, the elements the PTX ISA says
    unsigned long long p = (unsigned long long)row;
    int lane = lane_id();
    for (int j = 0; j < N; ++j)
        for (int e = 0; e < 2; ++e) {
            int src = TRANS ? lane % 4 * 2 + e : lane / 4, col = TRANS ? lane / 4 : lane % 4 * 2 + e;
            const T* q = (const T*)__shfl_sync(0xffffffffu, p, j * 8 + src);
            R[j] |= (unsigned)q[col].bits << (16 * e);
        }
#endif
    for (int j = 0; j < N; ++j) {
        r[2 * j].bits = (unsigned short)(R[j] & 0xffffu);
        r[2 * j + 1].bits = (unsigned short)(R[j] >> 16);
    }
}
"""


def _ldsm(n: int, trans: bool) -> str:
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ", ".join(f'"=r"(R[{i}])' for i in range(n))
    return (f'asm volatile("ldmatrix.sync.aligned.m8n8.x{n}{".trans" if trans else ""}.shared.b16 '
            f'{{{regs}}}, [%{n}];\\n" : {outs} : "r"(s));')


LDMATRIX = _LDMATRIX.replace("{asm}", "\n    else ".join(
    f"    if (N == {n} && TRANS == {str(tr).lower()})\n        {_ldsm(n, tr)}"
    .replace("    if", "if", 1 if (n, tr) != (1, False) else 0)
    for n in (1, 2, 4) for tr in (False, True)))
