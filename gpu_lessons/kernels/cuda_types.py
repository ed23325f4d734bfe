"""CUDA C types, literals, helper functions and the source object of a translated kernel."""

from __future__ import annotations

import ast
import html
import math
from dataclasses import dataclass

import ml_dtypes  # noqa: F401  (registers the bfloat16 dtype with NumPy)
import numpy as np

from .._math import round_up
from .cuda_mma import HALF_CTYPES

#: NVRTC options that make the GPU's float arithmetic round as NumPy's does (no fused
#: multiply-add; division and square root are IEEE-rounded by default).
EXACT_OPTIONS = ("-fmad=false",)
_ATOMIC_FN = {"atomic_add": "atomicAdd", "atomic_max": "atomicMax", "atomic_cas": "atomicCAS"}
#: Each shared array starts at a multiple of this many bytes, as in the simulator.
SHARED_ALIGN = 128
#: Shortest column the Python comments start at, and the longest CUDA line they wait for.
_COMMENT_COLUMN_MAX = 64

_INT_CTYPES = {
    "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int",
    "int64": "long long", "uint64": "unsigned long long", "bool": "bool",
}
_CTYPES = {**_INT_CTYPES, "float32": "float", "float64": "double", **HALF_CTYPES}
#: The 16-bit floats: loaded, stored, moved and converted, never computed with.
HALF_DTYPES = tuple(HALF_CTYPES)
_HALF_C = frozenset(HALF_CTYPES.values())
_SMALL = {"signed char", "unsigned char", "short", "unsigned short", "bool"}
_UNSIGNED = {"unsigned char", "unsigned short", "unsigned int", "unsigned long long"}
_FLOATS = {"float", "double"}
_RANK = {"bool": 0, "signed char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2,
         "int": 3, "unsigned int": 3, "long long": 4, "unsigned long long": 4,
         "float": 5, "double": 6, "half_t": 5, "bf16_t": 5}
_NUMPY_OF_C = {"int": np.int32, "double": np.float64, "float": np.float32,
               "long long": np.int64, "unsigned int": np.uint32,
               "unsigned long long": np.uint64, "short": np.int16, "unsigned short": np.uint16,
               "signed char": np.int8, "unsigned char": np.uint8, "bool": np.bool_}

# Names the generated code uses itself: a learner's variable with one of these names is
# renamed (a trailing _), so it cannot hide a function or keyword.
_RESERVED_WORDS = """
alignas alignof and asm auto bool break case catch char char16_t char32_t class const constexpr
const_cast continue decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not
nullptr operator or private protected public register reinterpret_cast restrict return short
signed sizeof static static_assert static_cast struct switch template this thread_local throw
true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
threadIdx blockIdx blockDim gridDim warpSize dim3 min max abs llabs fabs fabsf sqrt sqrtf exp
expf exp2 exp2f log logf log2 log2f log10 log10f sin sinf cos cosf tan tanf tanh tanhf floor
floorf ceil ceilf trunc truncf pow powf fmod fmodf fmax fmaxf fmin fminf copysign copysignf
isnan atomicAdd atomicMax atomicCAS lane_id warp_id linear_tid py_floordiv py_mod py_ipow
py_maximum py_minimum dynamic_smem half_t bf16_t narrow_rn widen_f16 pack2 mma_m16n8k16
ldmatrix HALF_FN __shfl_sync __shfl_down_sync __shfl_up_sync __shfl_xor_sync
__syncthreads __syncwarp
"""
_RESERVED = frozenset(_RESERVED_WORDS.split())


# -- types ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ty:
    """The simulator's type of a value.

    ``np``: a NumPy dtype name, or ``"pyint"``/``"pyfloat"``/``"pybool"`` for plain Python
    numbers (NEP 50's weak scalars); ``lanes``: one value per lane (a ``Lanes``) rather than one
    per warp; ``narrow``: an int64 that holds an index and is a 32-bit ``int`` in CUDA.
    """

    np: str
    lanes: bool = False
    narrow: bool = False

    @property
    def weak(self) -> bool:
        return self.np.startswith("py")

    @property
    def is_bool(self) -> bool:
        return self.np in ("bool", "pybool")

    @property
    def is_float(self) -> bool:
        return self.np in ("float32", "float64", "pyfloat", *HALF_DTYPES)

    @property
    def is_int(self) -> bool:
        return not self.is_float and not self.is_bool

    @property
    def ctype(self) -> str:
        if self.np == "pyint" or (self.np == "int64" and self.narrow):
            return "int"
        if self.np == "pyfloat":
            return "double"
        if self.np == "pybool":
            return "bool"
        return _CTYPES[self.np]

    def dummy(self):
        """A stand-in value NumPy (or Python) computes with to tell the result's type."""
        if self.np == "pyint":
            return 1
        if self.np == "pyfloat":
            return 1.0
        if self.np == "pybool":
            return True
        dt = np.dtype(self.np)
        return np.ones(2, dt) if self.lanes else dt.type(1)

    def text(self) -> str:
        name = {"pyint": "Python int", "pyfloat": "Python float", "pybool": "Python bool"}.get(
            self.np, self.np)
        return f"{name} ({'per lane' if self.lanes else 'one per warp'})"


INDEX = Ty("int64", lanes=True, narrow=True)


def _ty_of_value(value, lanes=False, narrow=True) -> Ty:
    """The type of a Python/NumPy value (an argument or a constant)."""
    if isinstance(value, (bool, np.bool_)) and not isinstance(value, np.bool_):
        return Ty("pybool")
    if isinstance(value, np.bool_):
        return Ty("bool", lanes)
    if isinstance(value, int) and not isinstance(value, np.integer):
        return Ty("pyint")
    if isinstance(value, float) and not isinstance(value, np.floating):
        return Ty("pyfloat")
    if isinstance(value, np.ndarray):
        dt = value.dtype
        return Ty(dt.name, True, narrow=False)
    dt = np.asarray(value).dtype
    return Ty(dt.name, lanes, narrow=False)


def _result_ty(values, lanes: bool, wide: bool) -> Ty:
    """Turn a stand-in result back into a Ty."""
    if isinstance(values, (bool,)):
        return Ty("pybool", lanes)
    if isinstance(values, int) and not isinstance(values, np.integer):
        return Ty("pyint", lanes)
    if isinstance(values, float) and not isinstance(values, np.floating):
        return Ty("pyfloat", lanes)
    name = np.asarray(values).dtype.name
    return Ty(name, lanes, narrow=(name == "int64" and not wide))


def _wide(tys) -> bool:
    """True if an int64 result must stay 64-bit: an operand is a real 64-bit integer (an int64
    array or scalar) or an unsigned 32/64-bit value that may not fit an int."""
    return any((t.np == "int64" and not t.narrow) or t.np in ("uint32", "uint64") for t in tys)


# -- C expressions -------------------------------------------------------------------------------

# C operator precedence, higher binds tighter (C++ standard, [expr]).
P_ATOM, P_UNARY, P_MUL, P_ADD, P_SHIFT, P_REL, P_EQ, P_BAND, P_XOR, P_BOR, P_LAND, P_LOR, P_COND \
    = 16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3


@dataclass(frozen=True)
class E:
    """A translated expression: C text, its precedence, the simulator's type and the C type of
    the text (which differs for CUDA's unsigned built-ins); ``nonneg``: known to be >= 0;
    ``const``: its value when it is a compile-time constant."""

    text: str
    prec: int
    ty: Ty
    cty: str
    nonneg: bool = False
    const: object = None
    effect: bool = False  # contains an atomic (must not be duplicated or reordered)

    def wrap(self, prec: int) -> str:
        return self.text if self.prec >= prec else f"({self.text})"


def _float_literal(value: float, cty: str) -> str:
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)" if cty == "float" else \
            "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(value):
        if cty == "float":
            return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float(0xff800000)"
        return ("__longlong_as_double(0x7ff0000000000000LL)" if value > 0 else
                "__longlong_as_double(0xfff0000000000000LL)")
    if cty == "float":
        text = np.format_float_positional(np.float32(value), unique=True, trim="0")
        if len(text) > 14:
            text = np.format_float_scientific(np.float32(value), unique=True, trim="0")
    else:
        text = repr(float(value))
    if not any(c in text for c in ".en"):
        text += ".0"
    if text.endswith("."):
        text += "0"
    return text + ("f" if cty == "float" else "")


def _literal(value, ty: Ty, cty: str | None = None) -> E:
    """A number as a C literal of C type ``cty`` (default: the type's own)."""
    cty = cty or ty.ctype
    if cty in _FLOATS:
        text = _float_literal(float(value), cty)
    elif cty == "bool":
        text = "true" if value else "false"
    else:
        v = int(value)
        if cty in ("long long", "unsigned long long"):
            text = f"{v}LL" if cty == "long long" else f"{v}ULL"
        else:
            text = str(v)
            if cty in _UNSIGNED:
                text += "u"
            if not -(2**31) <= v < 2**31:
                raise ValueError(f"the constant {v} does not fit a 32-bit int")
    prec = P_UNARY if text.startswith("-") else P_ATOM
    return E(text, prec, ty, cty, nonneg=not (isinstance(value, (int, float)) and value < 0),
             const=value)


def _c_common(a: str, b: str) -> str:
    """The type C's usual arithmetic conversions give ``a op b`` (C++ [expr.arith.conv])."""
    if "double" in (a, b):
        return "double"
    if "float" in (a, b):
        return "float"
    a = "int" if _RANK[a] < 3 else a
    b = "int" if _RANK[b] < 3 else b
    if a == b:
        return a
    ra, rb = _RANK[a], _RANK[b]
    ua, ub = a in _UNSIGNED, b in _UNSIGNED
    if ua == ub:
        return a if ra > rb else b
    u, s = (a, b) if ua else (b, a)
    if _RANK[u] >= _RANK[s]:
        return u
    return s  # long long holds every unsigned int


def _cast(e: E, cty: str) -> E:
    if e.cty == cty:
        return e
    if e.const is not None and not isinstance(e.const, bool) and cty != "bool":
        return _literal(e.const, e.ty, cty)
    return E(f"({cty}){e.wrap(P_UNARY)}", P_UNARY, e.ty, cty, e.nonneg, None, e.effect)


def _signed(e: E) -> E:
    """An unsigned built-in (threadIdx.x, ...) as a signed int where its sign could matter."""
    if e.cty == "unsigned int" and e.ty.ctype == "int" and not e.nonneg:
        return _cast(e, "int")
    return e


def _int(e: E) -> E:
    """An unsigned built-in (threadIdx.x, ...) as the signed int the simulator computes with,
    before an operation whose result (or other operand) can be negative: C's usual arithmetic
    conversions would otherwise turn ``threadIdx.x - 5`` into 4294967291."""
    if e.cty == "unsigned int" and e.ty.ctype == "int":
        return _cast(e, "int")
    return e


def _assignable(e: E, cty: str) -> E:
    """``e`` as the right side of an assignment to a ``cty``: C converts integers to a wider or
    same-size integer by itself (unsigned built-ins wrap to the same int), other changes are
    written as casts so the reader sees them."""
    if e.cty == cty:
        return e
    if cty in _HALF_C or e.cty in _HALF_C:
        return _to(e, cty)
    if (e.cty not in _FLOATS and cty not in _FLOATS and cty != "bool" and e.cty != "bool"
            and _RANK[cty] >= _RANK[e.cty] and _RANK[cty] >= 3):
        return e
    return _to(e, cty)


def _to(e: E, cty: str) -> E:
    """``e`` converted to C type ``cty`` where C's implicit conversion would not be exact, or
    would not happen inside an expression; literals are rewritten in the new type."""
    if e.cty == cty:
        return e
    if cty in _HALF_C:   # the type's constructor rounds (to nearest even) from a double
        inner = _to(e, "double") if e.const is not None else e
        return E(f"{cty}({inner.text})", P_ATOM, e.ty, cty, False, None, e.effect)
    if e.const is not None and not isinstance(e.const, bool):
        return _literal(e.const, e.ty, cty)
    return _cast(_signed(e), cty)


# -- helpers emitted into the source ------------------------------------------------------------

def _helper_floordiv(cty: str) -> str:
    if cty in _FLOATS:
        f = "f" if cty == "float" else ""
        return f"""\
__device__ {cty} py_floordiv({cty} a, {cty} b)   // Python's a // b on floats (NumPy's npy_divmod)
{{
    {cty} mod = fmod{f}(a, b);
    if (b == 0) return a / b;
    {cty} div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return copysign{f}(0, a / b);
    {cty} fl = floor{f}(div);
    return (div - fl > 0.5{'f' if f else ''}) ? fl + 1 : fl;
}}
"""
    return f"""\
__device__ {cty} py_floordiv({cty} a, {cty} b)   // Python's a // b: rounds toward -infinity
{{
    {cty} q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
"""


def _helper_mod(cty: str) -> str:
    if cty in _FLOATS:
        f = "f" if cty == "float" else ""
        return f"""\
__device__ {cty} py_mod({cty} a, {cty} b)   // Python's a % b on floats (NumPy's npy_divmod)
{{
    {cty} mod = fmod{f}(a, b);
    if (b == 0) return mod;
    if (mod != 0) {{ if ((b < 0) != (mod < 0)) mod += b; }}
    else mod = copysign{f}(0, b);
    return mod;
}}
"""
    return f"""\
__device__ {cty} py_mod({cty} a, {cty} b)   // Python's a % b: the result takes b's sign
{{
    {cty} r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
"""


def _helper_ipow(cty: str) -> str:
    return f"""\
__device__ {cty} py_ipow({cty} base, int exp)   // integer power, exp >= 0
{{
    {cty} result = 1;
    for (; exp > 0; --exp) result *= base;
    return result;
}}
"""


def _helper_minmax(cty: str, which: str) -> str:
    op = ">" if which == "maximum" else "<"
    return f"""\
__device__ {cty} py_{which}({cty} a, {cty} b)   // np.{which}: a NaN in either gives NaN, b of two zeros
{{
    return (a {op} b || a != a) ? a : b;
}}
"""


#: t.copy_async, t.commit, t.wait: cp.async (PTX ISA 7.0, sm_80 and later) through inline PTX;
#: ``.cg`` (L2 only) where it may, for 16 bytes.  Where there is no cp.async (an older GPU, or
#: the C++ of a CPU check) the copy is a plain one and the commit and wait do nothing: a kernel
#: the simulator accepts never reads a copy before its wait and barrier, so both compute the same.
CP_ASYNC = """\
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem)   // t.copy_async
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n"
                     :: "r"(s), "l"(gmem) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\\n"
                     :: "r"(s), "l"(gmem), "n"(BYTES) : "memory");
#else
    for (int b = 0; b < BYTES; ++b)
        static_cast<char*>(smem)[b] = static_cast<const char*>(gmem)[b];
#endif
}
__device__ __forceinline__ void cp_async_commit()   // t.commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
#endif
}
template <int GROUPS>
__device__ __forceinline__ void cp_async_wait()   // t.wait(GROUPS)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(GROUPS) : "memory");
#endif
}
"""

_LINEAR_TID = """\
__device__ __forceinline__ int linear_tid()   // the thread's index within its block
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
"""
_LANE_ID = """\
__device__ __forceinline__ int lane_id() { return linear_tid() % 32; }   // t.lane
"""
_WARP_ID = """\
__device__ __forceinline__ int warp_id() { return linear_tid() / 32; }   // t.warp
"""


# -- arrays --------------------------------------------------------------------------------------

@dataclass
class _Array:
    """An array the kernel indexes: a global argument or a shared declaration."""

    name: str          # C name
    space: str         # "global", "shared", "dynamic", "local" (a per-thread array)
    dtype: str         # NumPy dtype name
    dims: list         # list of E (C text + const) per dimension
    written: bool = False
    node: ast.AST | None = None

    @property
    def cty(self) -> str:
        return _CTYPES[self.dtype]


@dataclass(frozen=True)
class Param:
    """One kernel parameter as CUDA receives it."""

    name: str        # the Python parameter name
    cname: str       # its name in the CUDA source
    kind: str        # "array" or "scalar"
    ctype: str       # "float", "int", ... (the element type for arrays)
    dtype: str       # NumPy dtype of the array or of the scalar passed
    shape: tuple = ()
    written: bool = False


@dataclass(frozen=True)
class _DynShared:
    name: str
    itemsize: int
    dims: tuple      # ast nodes of each dimension
    constants: tuple


class CudaSource(str):
    """CUDA C source (a ``str``) with what launching it needs.

    ``kernel_name``; ``params`` (:class:`Param`, in order); ``body`` (the kernel without the
    header and helpers); :meth:`dynamic_shared_bytes`; ``options`` (NVRTC options for results
    bit-identical to the simulator); ``python_lines``: for each line of the text, the learner's
    Python line it comes from (``None`` for the header, helpers and braces).  In a notebook it
    shows with syntax highlighting.
    """

    kernel_name: str
    params: tuple
    body: str
    options: tuple
    python_lines: tuple
    _dynamic: tuple
    _ctx: str

    def __new__(cls, text, *, kernel_name, params, body, dynamic, ctx, python_lines=()):
        obj = super().__new__(cls, text)
        obj.python_lines = tuple(python_lines)
        obj.kernel_name = kernel_name
        obj.params = tuple(params)
        obj.body = body
        obj.options = EXACT_OPTIONS
        obj._dynamic = tuple(dynamic)
        obj._ctx = ctx
        return obj

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import CudaLexer
        except ImportError:  # pragma: no cover - pygments comes with IPython
            return f"<pre>{html.escape(str(self))}</pre>"
        fmt = HtmlFormatter(noclasses=True, style="default")
        return highlight(str(self), CudaLexer(), fmt)

    def dynamic_shared_bytes(self, block, *args) -> int:
        """Bytes of dynamic shared memory a launch with ``block`` (int or (x, y, z)) needs:
        each ``extern __shared__`` array's size rounded up to :data:`SHARED_ALIGN`, in order."""
        if isinstance(block, (int, np.integer)):
            block = (int(block),)
        bx, by, bz = (*(int(b) for b in block), 1, 1)[:3]
        env = {"block_dim": (bx, by, bz)}
        scalars = {p.name: a for p, a in zip(self.params, args, strict=False)
                   if p.kind == "scalar"}
        total = 0
        for d in self._dynamic:
            n = 1
            for node in d.dims:
                n *= _eval_int(node, env, scalars, dict(d.constants), self._ctx)
            total = round_up(total, SHARED_ALIGN) + n * d.itemsize
        return total


def _eval_int(node, env, scalars, constants, ctx) -> int:
    """Evaluate a shared-memory size expression at launch (ints, block_dim, scalar args)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.Name):
        if node.id in scalars:
            return int(scalars[node.id])
        return int(constants[node.id])
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == ctx
            and node.value.attr == "block_dim"):
        return env["block_dim"]["xyz".index(node.attr)]
    if isinstance(node, ast.BinOp):
        a = _eval_int(node.left, env, scalars, constants, ctx)
        b = _eval_int(node.right, env, scalars, constants, ctx)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}
        return ops[type(node.op)]()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        vals = [_eval_int(a, env, scalars, constants, ctx) for a in node.args]
        return {"min": min, "max": max}[node.func.id](vals)
    raise ValueError("cannot evaluate a shared-memory size")


# Python operators: C spelling, the NumPy ufunc the simulator calls, C precedence
_BINOPS = {ast.Add: ("+", np.add, P_ADD), ast.Sub: ("-", np.subtract, P_ADD),
           ast.Mult: ("*", np.multiply, P_MUL), ast.Div: ("/", np.true_divide, P_MUL),
           ast.FloorDiv: ("//", np.floor_divide, P_MUL), ast.Mod: ("%", np.remainder, P_MUL),
           ast.Pow: ("**", np.power, P_ATOM), ast.LShift: ("<<", np.left_shift, P_SHIFT),
           ast.RShift: (">>", np.right_shift, P_SHIFT),
           ast.BitAnd: ("&", np.bitwise_and, P_BAND), ast.BitOr: ("|", np.bitwise_or, P_BOR),
           ast.BitXor: ("^", np.bitwise_xor, P_XOR)}

_PYOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
          ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
          ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
          ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b,
          ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
          ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b}

_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
        ast.NotEq: "!="}


