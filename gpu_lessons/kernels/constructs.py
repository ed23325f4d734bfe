"""The kernel language's constructs, defined once.

Each construct a kernel may use is a :class:`Construct`: the Python a learner writes, what it
means (the simulator computes exactly this), its CUDA C counterpart, and an example whose
translation shows that counterpart.  :mod:`~gpu_lessons.kernels.lang` takes the names it accepts
from the tables here (:data:`NP_FUNCTIONS`, :data:`MATH_FUNCTIONS`, :data:`BUILTINS`,
:data:`T_CALLS`, ...), the translation takes the C names (:data:`MATH_C`), and
``docs/kernel_language.md``'s tables are :func:`markdown_table` of :data:`CONSTRUCTS` (a test
compares them, and translates every example, requiring the C the row shows).

Adding a construct: a :class:`Construct` row here (and a name in a table below if it is a new
function), its check in ``lang._Checker`` if it is new syntax, its C in ``cuda_expr`` or
``cuda_stmt``, and its meaning in the simulator; then regenerate the doc's table with
``python -m gpu_lessons.kernels.constructs``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: NumPy functions a kernel may call (element-wise math; each maps to a CUDA math function).
NP_FUNCTIONS = frozenset({
    "sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh",
    "abs", "absolute", "fabs", "floor", "ceil", "trunc", "maximum", "minimum", "fmax", "fmin",
})
#: ``math`` functions a kernel may call: each means the NumPy function of the same name
#: (``math.floor(x)`` is ``np.floor(x)``, a float for a float, unlike Python's ``math.floor``).
MATH_FUNCTIONS = frozenset({
    "sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "fabs",
    "floor", "ceil", "trunc",
})
#: NumPy dtypes a kernel may name (as ``t.shared``/``t.local`` dtypes, or to convert one number).
NP_DTYPES = frozenset({
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "bool_",
})
#: Dtypes named through ml_dtypes (``ml_dtypes.bfloat16``): NumPy has no bfloat16 of its own.
ML_DTYPES = frozenset({"bfloat16"})
#: Why arithmetic on a 16-bit float is refused, and the form that works (simulator and
#: translation alike).
HALF_ARITHMETIC = ("{dtype} values are loaded, stored, moved and converted, not computed with "
                   "(NumPy would round every step to {dtype}, CUDA computes in float32): "
                   "convert first, x = t.local(h, np.float32), compute in float32, and store "
                   "the result into a {dtype} array (rounded to nearest even)")
#: NumPy (and ``math``) constants a kernel may use (Python floats).
NP_CONSTANTS = frozenset({"inf", "nan", "pi", "e"})
MATH_CONSTANTS = NP_CONSTANTS
#: Builtins a kernel may call.
BUILTINS = frozenset({"range", "len", "min", "max", "abs", "int", "float", "bool", "print"})
#: Arity of each builtin: (min, max); None = any number of positional arguments.
BUILTIN_ARITY = {"range": (1, 3), "len": (1, 1), "min": (2, None), "max": (2, None),
                 "abs": (1, 1), "int": (1, 1), "float": (1, 1), "bool": (1, 1),
                 "print": (0, None)}
NP_ARITY = {name: (2, 2) if name in {"maximum", "minimum", "fmax", "fmin"} else (1, 1)
            for name in NP_FUNCTIONS}

#: The attributes of ``t`` (the warp context), by how they may be used.
T_DIM3 = frozenset({"thread_idx", "block_idx", "block_dim", "grid_dim"})
T_VALUES = frozenset({"lane", "warp", "warp_size"})
#: ``t.`` operations: name -> (min positional args, max positional args, keyword names, where).
#: ``where``: "with" (only ``with t.op(...):``), "for" (only ``for _ in t.op(...)``),
#: "stmt" (a statement of its own), "assign" (a statement or ``name = t.op(...)``),
#: "local" (``name = t.op(...)``), "shared" (``name = t.op(...)`` at the kernel's top level),
#: "expr" (anywhere in an expression), "vector" (only as ``a, b, c, d = t.vload(...)``).
T_CALLS = {
    "if_": (1, 2, {"label"}, "with"),
    "else_": (0, 0, set(), "with"),
    "while_": (1, 2, {"label"}, "for"),
    "return_if": (1, 1, set(), "stmt"),
    "sync": (0, 0, set(), "stmt"),
    "syncwarp": (0, 0, set(), "stmt"),
    "where": (3, 3, set(), "expr"),
    "local": (1, 2, {"dtype"}, "local"),
    "shared": (1, 3, {"dtype", "name"}, "shared"),
    "atomic_add": (3, 3, set(), "assign"),
    "atomic_max": (3, 3, set(), "assign"),
    "atomic_cas": (4, 4, set(), "assign"),
    "shfl_down": (2, 2, set(), "expr"),
    "shfl_up": (2, 2, set(), "expr"),
    "shfl_xor": (2, 2, set(), "expr"),
    "shfl_idx": (2, 2, set(), "expr"),
    "vload": (3, 3, set(), "vector"),
    "vstore": (3, 3, set(), "stmt"),
    "launch_bounds": (1, 2, set(), "stmt"),
    "copy_async": (5, 5, set(), "stmt"),
    "commit": (0, 0, set(), "stmt"),
    "wait": (1, 1, set(), "stmt"),
    "mma": (4, 4, set(), "stmt"),
    "ldmatrix": (4, 4, {"trans"}, "stmt"),
}
#: Calls that must not sit in an operand only some lanes evaluate (``and``/``or``'s right side,
#: an arm of ``a if c else b``) or in ``t.where``'s values, which Python evaluates for every lane.
SIDE_EFFECT_CALLS = frozenset({"atomic_add", "atomic_max", "atomic_cas",
                               "shfl_down", "shfl_up", "shfl_xor", "shfl_idx"})

#: CUDA's single-precision math function for each function name (the double one drops the f).
MATH_C = {"sqrt": "sqrtf", "exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f",
          "log10": "log10f", "sin": "sinf", "cos": "cosf", "tan": "tanf", "tanh": "tanhf",
          "fabs": "fabsf", "floor": "floorf", "ceil": "ceilf", "trunc": "truncf"}


# -- the constructs, as the learner's guide lists them ---------------------------------------

@dataclass(frozen=True)
class Construct:
    """One row of ``docs/kernel_language.md``.

    ``name``: what it is; ``python``: the Python a learner writes (as the table shows it);
    ``cuda``: the C :func:`~gpu_lessons.kernels.to_cuda` writes for ``example`` (each piece
    appears in the translation); ``meaning``: what it does, in the simulator and in CUDA alike;
    ``example``: statements of ``def k(t, x, y, out, n)`` (``x``: float32[64], ``y``: int32[64],
    ``out``: float32[64], ``n = 64``) after ``i = t.block_idx.x * t.block_dim.x +
    t.thread_idx.x``; ``section``: "python" (plain Python) or "t" (the warp context's forms).
    """

    name: str
    python: str
    cuda: tuple[str, ...]
    meaning: str
    example: str
    section: str = "python"


EXAMPLE_HEAD = "def k(t, x, y, out, n):\n    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x\n"

CONSTRUCTS = (
    Construct("if / elif / else", "if x[i] > 0: ... elif x[i] < 0: ... else: ...",
              ("if (x[i] > 0.0f) {", "} else if (x[i] < 0.0f) {", "} else {"),
              "each lane (thread) takes its own branch; the condition may be per lane or the "
              "same for the warp",
              "if x[i] > 0:\n    out[i] = 1.0\nelif x[i] < 0:\n    out[i] = -1.0\nelse:\n"
              "    out[i] = 0.0\n"),
    Construct("while", "while j < n: ...", ("while (j < n) {",),
              "each lane loops until its own condition is false",
              "j = i\nwhile j < n:\n    j += 32\nout[i] = j\n"),
    Construct("break, continue", "break, continue inside if/while/for", ("break;", "continue;"),
              "per lane: a lane that breaks leaves the loop, the others go on",
              "for j in range(n):\n    if x[j] < 0:\n        continue\n    if j > i:\n"
              "        break\n    out[i] += x[j]\n"),
    Construct("return", "if i >= n: return", ("if (i >= n) {", "return;"),
              "ends the kernel for the lanes that run it",
              "if i >= n:\n    return\nout[i] = x[i]\n"),
    Construct("and, or, not", "i < n and not x[i] > 0 or i == 0",
              ("i < n && !(x[i] > 0.0f) || i == 0",),
              "short-circuit per lane: the right side runs only for lanes that need it; the "
              "operands are conditions (a per-lane number is refused: write (v != 0))",
              "if i < n and not x[i] > 0 or i == 0:\n    out[i] = 1.0\n"),
    Construct("conditional expression", "x[i - 1] if i > 0 else 0.0", ("i > 0 ? x[i - 1] : 0.0f",),
              "lazy per lane: the arm not taken is not evaluated (so it reads nothing out of "
              "range); per lane its type is NumPy's promotion of both arms, as np.where's",
              "out[i] = x[i - 1] if i > 0 else 0.0\n"),
    Construct("chained comparison", "0 < x[i] * 2 < 5",
              ("0.0f < (cmp = x[i] * 2.0f) && cmp < 5.0f",),
              "(a < b) and (b < c) with b evaluated once (a temporary unless it is a name or "
              "a number)", "out[i] = 0 < x[i] * 2 < 5\n"),
    Construct("min, max, abs", "min(x[i], 0.5), max(i, n - 1), abs(x[i])",
              ("py_minimum(x[i], 0.5f)", "max(i, n - 1)", "fabsf(x[i])"),
              "on lanes: np.minimum, np.maximum, np.absolute (NaN propagates; types by NumPy's "
              "promotion); on one value per warp: Python's",
              "out[i] = min(x[i], 0.5) + max(i, n - 1) + abs(x[i])\n"),
    Construct("math functions", "math.sqrt(v), math.exp(v), math.floor(v), ...",
              ("sqrtf(v)", "expf(v)", "floorf(v)"),
              "NumPy's function of the same name (math.fabs is np.fabs): float32 in, float32 "
              "out; floor/ceil/trunc give floats, unlike Python's math.floor; of a Python number, "
              "a Python float",
              "v = x[i]\nout[i] = math.sqrt(v) + math.exp(v) + math.floor(v)\n"),
    Construct("tuple assignment", "a, b = b, a", ("float a_new = b;", "b = a;", "a = a_new;"),
              "every value on the right first, in order, then the names left to right",
              "a = x[i]\nb = out[i]\na, b = b, a\nout[i] = a - b\n"),
    Construct("loop over numbers", "for d in (16, 8, 4, 2, 1): ...",
              ("const int d_values[5] = {16, 8, 4, 2, 1};", "#pragma unroll",
               "int d = d_values[d_k];"),
              "unrolled by the compiler; break and continue keep their meaning",
              "v = x[i]\nfor d in (16, 8, 4, 2, 1):\n    v += t.shfl_down(v, d)\nout[i] = v\n"),
    Construct("variables", "acc = 0.0 ... acc += x[i]", ("float acc = 0.0f;", "acc += x[i];"),
              "a per-lane register: lanes that skip an assignment keep their value; its type is "
              "NumPy's promotion of everything assigned (a Python 0.0 then float32 values: "
              "float); a variable first assigned in a branch exists for the lanes that took it",
              "acc = 0.0\nif i < n:\n    acc += x[i]\nout[i] = acc\n"),
    Construct("range loop", "for j in range(0, n, 2):", ("for (int j = 0; j < n; j += 2) {",),
              "the bounds are the same for the whole warp (for a per-lane bound, use while)",
              "for j in range(0, n, 2):\n    out[i] += x[j]\n"),
    Construct("built-ins", "t.thread_idx.x, t.block_idx.y, t.block_dim.x, t.grid_dim.x",
              ("((int)threadIdx.x - 5) * 0.5", "blockIdx.y", "gridDim.x"),
              "unsigned in CUDA: cast to int where a value can be negative, as the simulator's "
              "signed integers are",
              "out[i] = (t.thread_idx.x - 5) * 0.5 + t.block_idx.y + t.grid_dim.x\n"),
    Construct("64-bit index", "j = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x",
              ("long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;",),
              "indices are 32-bit int, and a 32-bit product that overflows is undefined "
              "behaviour in C++; past 2**31, start from an int64",
              "j = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x\n"
              "out[i] = j % 7\n"),
    Construct("lane, warp", "t.lane, t.warp, t.warp_size", ("lane_id()", "warp_id()"),
              "the thread's lane and warp in its block (from its index in the block), 32",
              "out[i] = t.lane + t.warp * t.warp_size\n"),
    Construct("stores", "out[i] = v, tile[y, x] = v", ("out[i] = x[i] * 2.0f;",),
              "arrays are passed flat (row-major); a[y, x] is a[y * ncols + x]",
              "out[i] = x[i] * 2.0\n"),
    Construct("Python's // and %", "x // y, x % y", ("py_floordiv(y[i], 3)", "i % 4"),
              "rounding toward -infinity, the result of % with the divisor's sign; C's / and % "
              "when both sides are known to be >= 0",
              "out[i] = y[i] // 3 + i % 4\n"),
    Construct("NumPy", "np.sqrt(v), np.maximum(a, b), np.float32(n), np.inf",
              ("sqrtf(x[i])", "(float)n"),
              "the element-wise functions NumPy names, conversions of one number, constants",
              "out[i] = np.sqrt(x[i]) + np.float32(n)\n"),
    Construct("print", "print(...)", ("// print(...) runs in the simulator only",),
              "runs in the simulator only", "print(i)\n"),
    Construct("with t.if_ / t.else_", 'with t.if_(c, "name"): ... with t.else_(): ...',
              ("if (i < 16) {", "} else {"),
              "the older form of if/else (the label names the region for stats(region=...)); "
              "break/continue/return are refused inside it: use plain if",
              'with t.if_(i < 16, "low"):\n    out[i] = 1.0\nwith t.else_():\n    out[i] = 2.0\n',
              "t"),
    Construct("t.while_", "for _ in t.while_(lambda: c): ...", ("while (s < 4) {",),
              "the older form of while", "s = t.local(1, np.int32)\n"
              "for _ in t.while_(lambda: s < 4):\n    s[...] = s * 2\nout[i] = s\n", "t"),
    Construct("t.return_if", "t.return_if(i >= n)", ("if (i >= n) return;",),
              "ends the kernel for the lanes where the condition holds",
              "t.return_if(i >= n)\nout[i] = 1.0\n", "t"),
    Construct("t.where", "t.where(c, a, b)", ("i < 32 ? x[i] : (float)n",),
              "c ? a : b per lane; Python evaluates both values (it is a function call)",
              "out[i] = t.where(i < 32, x[i], np.float32(n))\n", "t"),
    Construct("t.local", "y = t.local(0.0, np.float32), y[...] = v", ("float v = 0.0f;",
                                                                     "v = x[i] * 2.0f;"),
              "a per-lane variable of a given type; y[...] = v writes it in the active lanes",
              "v = t.local(0.0, np.float32)\nv[...] = x[i] * 2.0\nout[i] = v\n", "t"),
    Construct("per-thread array", "acc = t.local((4, 4), np.float32), acc[i, j] += v",
              ("float acc[4][4] = {};", "#pragma unroll", "acc[r][c] += x[i];"),
              "each thread's own array, zero to begin with, declared at the top level; every "
              "index is known when the kernel is compiled (numbers, outside constants, variables "
              "of loops with constant bounds, unrolled up to 64 trips), so the array stays in "
              "registers: a runtime index, which would spill it to local memory, is refused",
              "acc = t.local((4, 4), np.float32)\nfor r in range(4):\n    for c in range(4):\n"
              "        acc[r, c] += x[i]\nout[i] = acc[3, 3]\n", "t"),
    Construct("vector load, store", "x0, x1, x2, x3 = t.vload(a, i, 4), t.vstore(a, i, (x0, x1, x2, x3))",
              ("*reinterpret_cast<const float4*>(&x[4 * i]);", "make_float4(v0, v1, v2, v3)"),
              "2 or 4 consecutive elements per lane in one instruction (float2/float4, "
              "int2/int4, double2): one request of 8 or 16 bytes per lane; the first element's "
              "index must be a multiple of the width (the alignment the hardware needs, checked "
              "in the simulator), and shared arrays they touch are declared __align__(16)",
              "v0, v1, v2, v3 = t.vload(x, 4 * i, 4)\nif 4 * i + 3 < n:\n"
              "    t.vstore(out, 4 * i, (v0, v1, v2, v3))\n", "t"),
    Construct("16-bit floats", "t.shared(64, np.float16), ml_dtypes.bfloat16 arrays",
              ("__shared__ half_t h[64];", "h[i] = half_t(x[i]);", "float v = (float)h[i];"),
              "np.float16 and ml_dtypes.bfloat16 arrays (arguments, shared, per-thread) hold "
              "16-bit floats: a store rounds to nearest even, as NumPy and ml_dtypes convert; "
              "t.local(h, np.float32) converts back exactly. Arithmetic on them is refused: "
              "compute in float32. The translation declares its own half_t and bf16_t (no "
              "cuda_fp16.h, which NVRTC's wheels do not ship)",
              "h = t.shared(64, np.float16)\nh[i] = x[i]\nt.sync()\n"
              "v = t.local(h[i], np.float32)\nout[i] = v * 2.0\n", "t"),
    Construct("t.mma", "t.mma(d, a, b, c)", ("mma_m16n8k16(acc, fa, fb, acc);",),
              "D = A B + C on the tensor cores (mma.sync m16n8k16), by the whole warp: a is "
              "each lane's 8 halves of the 16 x 16 A, b its 4 of the 16 x 8 B (float16 or "
              "bfloat16), c and d its 4 floats of C and D, laid out as the PTX ISA says "
              "(kernels.mma_layout shows which lane holds which element); d may be c. Each "
              "output is float32 sums of exact products, c first, k = 0 to 15; the hardware's "
              "internal rounding may differ in the last bits. A lane missing is an error",
              "fa = t.local((8,), np.float16)\nfb = t.local((4,), np.float16)\n"
              "acc = t.local((4,), np.float32)\nfa[0] = x[i]\nfb[0] = x[i]\n"
              "t.mma(acc, fa, fb, acc)\nout[i] = acc[0]\n", "t"),
    Construct("t.ldmatrix", "t.ldmatrix(r, s, (row, col), 4, trans=False)",
              ("ldmatrix<1, false>(r, &s[",),
              "1, 2 or 4 8 x 8 matrices of halves from shared memory into the fragment layout, "
              "by the whole warp (ldmatrix.sync): lanes 8j to 8j + 7 each give the start of a "
              "16-byte row of matrix j, and r[2j], r[2j + 1] receive this lane's two elements "
              "(trans=True: of the transpose); counted as a shared load of 16 bytes a lane",
              "s = t.shared((8, 8), np.float16)\ns[t.lane % 8, t.lane // 8] = x[i]\n"
              "t.syncwarp()\nr = t.local((2,), np.float16)\n"
              "t.ldmatrix(r, s, (t.lane % 8, 0), 1)\nv = t.local(r[0], np.float32)\n"
              "out[i] = v\n",
              "t"),
    Construct("asynchronous copy", "t.copy_async(sa, j, a, i, 4), t.commit(), t.wait(1)",
              ("cp_async<4>(&s[i], &x[i]);", "cp_async_commit();", "cp_async_wait<0>();"),
              "global to shared memory without registers (cp.async, compute capability 8.0 "
              "on): each lane copies 4, 8 or 16 bytes (1, 2 or 4 floats, up to 8 halves); "
              "t.commit() closes the thread's group of copies, t.wait(k) waits until at "
              "most k groups are still in flight; other threads see the data after a "
              "t.sync() that follows the wait. Reading or writing an element before its copy "
              "has landed is an error in the simulator",
              "s = t.shared(64, np.float32)\nt.copy_async(s, i, x, i, 1)\nt.commit()\n"
              "t.wait(0)\nt.sync()\nout[i] = s[i] * 2.0\n", "t"),
    Construct("t.launch_bounds", "t.launch_bounds(256, 2)", ("__launch_bounds__(256, 2)",),
              "at the kernel's top level: blocks have at most 256 threads (a larger launch "
              "fails) and the compiler keeps registers low enough for 2 blocks per SM "
              "(kernels.compile shows the count it chose)",
              "t.launch_bounds(256, 2)\nout[i] = x[i]\n", "t"),
    Construct("t.shared", "t.shared((32, 33), np.float32), t.shared(t.block_dim.x)",
              ("__shared__ float tile[32][33];", "extern __shared__"),
              "a block's shared memory; a shape from t.block_dim is dynamic shared memory sized at "
              "launch", "tile = t.shared((32, 33), np.float32)\ndyn = t.shared(t.block_dim.x)\n"
              "tile[t.warp, t.lane] = x[i]\ndyn[t.thread_idx.x] = x[i]\nt.sync()\n"
              "out[i] = tile[t.warp, t.lane] + dyn[t.thread_idx.x]\n", "t"),
    Construct("t.sync, t.syncwarp", "t.sync(), t.syncwarp()", ("__syncthreads();", "__syncwarp();"),
              "a barrier for the block, for the warp", "t.sync()\nt.syncwarp()\n", "t"),
    Construct("atomics", "t.atomic_add/atomic_max/atomic_cas(a, i, ...)", ("atomicAdd(&out[0], x[i])",),
              "read-modify-write of one element; returns the old value",
              "t.atomic_add(out, 0, x[i])\n", "t"),
    Construct("shuffles", "t.shfl_down/shfl_up/shfl_xor/shfl_idx(v, d)",
              ("__shfl_down_sync(0xffffffff, v, 1)", "__shfl_sync(0xffffffff, v, 0)"),
              "every lane named in the mask (all 32) must execute the call; the offset's low 5 "
              "bits count, as the hardware's",
              "v = x[i]\nout[i] = t.shfl_down(v, 1) + t.shfl_idx(v, 0)\n", "t"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(section: str) -> str:
    """The doc's table of one section ("python" or "t"), one row per construct."""
    rows = ["| construct | Python | CUDA C | meaning |", "|---|---|---|---|"]
    for c in CONSTRUCTS:
        if c.section != section:
            continue
        cuda = ", ".join(f"`{_cell(p)}`" for p in c.cuda)
        rows.append(f"| {c.name} | `{_cell(c.python)}` | {cuda} | {_cell(c.meaning)} |")
    return "\n".join(rows)


if __name__ == "__main__":   # python -m gpu_lessons.kernels.constructs: the doc's two tables
    print(markdown_table("python"))
    print()
    print(markdown_table("t"))
