"""From simulator to silicon: a simulator kernel as CUDA C, compiled and run on a real GPU.

:func:`to_cuda` translates a kernel written for :func:`gpu_lessons.simt.run` (in the kernel
language of :mod:`gpu_lessons.kernel_lang`) into CUDA C, with the Python line beside each CUDA
line; :func:`run_on_gpu` compiles that source with NVRTC through CuPy, runs it on the same
NumPy arrays the simulator takes, copies the results back into them and returns the measured
kernel time; :func:`beside_simulator` does both on the same inputs and sets the GPU's time beside
the simulator's counts and the memory model's time.  Without a GPU they print the course's one
skip line and return ``None``.

>>> import numpy as np
>>> def scale(t, x, out, n):
...     i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
...     t.return_if(i >= n)
...     out[i] = x[i] * 2.0
>>> x, out = np.ones(256, np.float32), np.zeros(256, np.float32)
>>> print(to_cuda(scale, x, out, 256).body)  # doctest: +NORMALIZE_WHITESPACE
extern "C" __global__ void scale(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    if (i >= n) return;                             // t.return_if(i >= n)
    out[i] = x[i] * 2.0f;                           // out[i] = x[i] * 2.0
}

Translation rules
-----------------
* **Kernel and arguments.**  The kernel becomes ``extern "C" __global__`` (so NVRTC keeps its
  name).  An array argument becomes a pointer to its element type (float32 → ``float``, int32 →
  ``int``, int64 → ``long long``, float64 → ``double``, uint32 → ``unsigned int``, ...), ``const``
  when the kernel never writes it.  An n-D array is passed flattened (row-major, C order) and
  ``a[i, j]`` becomes ``a[i * ncols + j]`` with the shape taken from the argument and written into
  the source (the header says so).  A Python int argument becomes ``int``, a Python float
  ``double``, a NumPy scalar its own type.
* **Integers are 32-bit.**  The simulator computes thread indices in int64; CUDA code computes
  them in ``int`` (and so does every hand-written kernel of the course), so index arithmetic is as
  fast as it should be.  Arrays of 2**31 elements or more are refused.  Arrays of int64 stay
  ``long long``.  ``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` are unsigned in CUDA and
  signed (Python ints) in the simulator; the translation casts them to ``int`` wherever the sign
  could matter (a comparison, a division, an index, a conversion to float) and the value is not
  known to be non-negative.
* **Types follow NumPy.**  Each expression's type is the one NumPy gives the simulator
  (NEP 50: Python numbers are "weak" and take the array's type), worked out by asking NumPy
  itself on stand-in values.  So ``x[i] * 2.0`` is ``float`` arithmetic with the literal written
  ``2.0f``, while ``x[i] * i`` (float32 times an int64 index) is ``double`` arithmetic, as in
  NumPy, with explicit casts.  A Python float literal in float32 arithmetic is written as the
  shortest decimal that reads back as NumPy's float32 rounding of it, so both sides use the same
  number.  ``t.local(0.0)`` is a float64 variable (``np.asarray(0.0).dtype``): write
  ``t.local(0.0, np.float32)`` for a ``float``.
* **Python's division.**  ``/`` is true division (two ints give a ``double``, as in Python and
  NumPy); ``//`` and ``%`` are floor division and the modulo with the divisor's sign.  CUDA's
  ``/`` and ``%`` truncate toward zero, so the translation calls small ``__device__`` helpers
  (``py_floordiv``, ``py_mod``; the float versions follow NumPy's ``npy_divmod``) unless both
  sides are known to be non-negative (thread indices, sizes, loop counters over non-negative
  ranges), where C's operators give the same answer and are used as they are.
* **Control flow.**  ``with t.if_(c):``/``with t.else_():`` → ``if (c) { } else { }``;
  ``for _ in t.while_(lambda: c):`` → ``while (c) { }``; ``t.return_if(c)`` →
  ``if (c) return;``; ``t.where(c, a, b)`` → ``c ? a : b``; ``for i in range(a, b, s)`` →
  ``for (int i = a; i < b; i += s)``; Python ``if``/``while`` on warp-uniform values stay
  ``if``/``while``.  Logical ``&``, ``|``, ``~`` on conditions become ``&&``, ``||``, ``!``.
  A variable is declared in the innermost block that holds all its uses, with the type NumPy
  gives it (a variable that starts as a Python number and later holds float32 values is a
  ``float`` from the start, as ``float acc = 0.0f;``).
* **Memory and synchronisation.**  ``t.shared`` of a fixed shape → ``__shared__ float
  tile[32][33];``; one whose shape depends on ``t.block_dim`` (or a scalar argument) →
  ``extern __shared__`` dynamic shared memory, each array starting at a multiple of 128 bytes as
  in the simulator, with the byte count computed at launch (:meth:`CudaSource.dynamic_shared_bytes`).
  ``t.sync()`` → ``__syncthreads()``, ``t.syncwarp()`` → ``__syncwarp()``.
  (CUDA C++ Programming Guide: "Variable Memory Space Specifiers" (``__shared__``, ``extern``),
  "Synchronization Functions".)
* **Atomics and shuffles.**  ``t.atomic_add``/``t.atomic_max``/``t.atomic_cas(a, i, compare,
  value)`` → ``atomicAdd``/``atomicMax``/``atomicCAS`` (Programming Guide, "Atomic Functions"),
  for the element types CUDA has them for (:data:`gpu_lessons.simt.ATOMIC_DTYPES`: no float
  ``atomicMax``, no 64-bit signed ``atomicAdd``; the simulator refuses the others too).
  ``t.shfl_down/up/xor/idx`` → ``__shfl_down_sync/__shfl_up_sync/__shfl_xor_sync/
  __shfl_sync(0xffffffff, v, x)`` (Guide, "Warp Shuffle Functions"): every lane of the warp must
  take part, as the simulator's notes warn.
* **Rounding.**  Compile with ``-fmad=false`` (:data:`EXACT_OPTIONS`, what :func:`run_on_gpu`
  does by default) and ``+ - * /`` and ``sqrt`` give bit-identical results to NumPy: CUDA's
  defaults are IEEE-rounded division and square root, and without ``-fmad=false`` the compiler
  fuses ``a * b + c`` into one rounding (Guide, "Floating-Point Standard"; CUDA Best Practices
  Guide, "Math Libraries").  ``exp``, ``log``, ``sin``, ``pow``... are within a few units in the
  last place of NumPy's, not bit-identical (Guide, "Mathematical Functions", error bounds).
  Sums in a different order (atomics, a different reduction tree) round differently.
* **What is refused** (:class:`~gpu_lessons.kernel_lang.KernelLanguageError` naming the
  construct and line, never a silently different kernel): everything outside the kernel
  language, and what the simulator would also reject when it runs: a per-lane value steering a
  Python ``if``/``while``/``range``/``and``, a plain Python value assigned inside ``t.if_``
  (Python runs that body for every warp, whatever the lanes), a variable that changes type,
  arrays of float16 or complex numbers.  ``print(...)`` runs in the simulator only: the CUDA
  source shows it as a comment.
"""

from __future__ import annotations

import ast
import html
import itertools
import math
import re
import tokenize
from dataclasses import dataclass, field

import numpy as np

from . import _validate
from .kernel_lang import (
    NP_DTYPES,
    Kernel,
    KernelLanguageError,
    validate,
)
from .simt import ATOMIC_DTYPES, MAX_BLOCK_DIM, MAX_GRID_DIM

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
_CTYPES = {**_INT_CTYPES, "float32": "float", "float64": "double"}
_SMALL = {"signed char", "unsigned char", "short", "unsigned short", "bool"}
_UNSIGNED = {"unsigned char", "unsigned short", "unsigned int", "unsigned long long"}
_FLOATS = {"float", "double"}
_RANK = {"bool": 0, "signed char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2,
         "int": 3, "unsigned int": 3, "long long": 4, "unsigned long long": 4,
         "float": 5, "double": 6}
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
py_maximum py_minimum dynamic_smem
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
        return self.np in ("float32", "float64", "pyfloat")

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


def _assignable(e: E, cty: str) -> E:
    """``e`` as the right side of an assignment to a ``cty``: C converts integers to a wider or
    same-size integer by itself (unsigned built-ins wrap to the same int), other changes are
    written as casts so the reader sees them."""
    if e.cty == cty:
        return e
    if (e.cty not in _FLOATS and cty not in _FLOATS and cty != "bool" and e.cty != "bool"
            and _RANK[cty] >= _RANK[e.cty] and _RANK[cty] >= 3):
        return e
    return _to(e, cty)


def _to(e: E, cty: str) -> E:
    """``e`` converted to C type ``cty`` where C's implicit conversion would not be exact, or
    would not happen inside an expression; literals are rewritten in the new type."""
    if e.cty == cty:
        return e
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
    op = ">=" if which == "maximum" else "<="
    return f"""\
__device__ {cty} py_{which}({cty} a, {cty} b)   // np.{which}: a NaN in either gives NaN
{{
    return (a {op} b || a != a) ? a : b;
}}
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
    space: str         # "global", "shared", "dynamic"
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
    bit-identical to the simulator).  In a notebook it shows with syntax highlighting.
    """

    kernel_name: str
    params: tuple
    body: str
    options: tuple
    _dynamic: tuple
    _ctx: str

    def __new__(cls, text, *, kernel_name, params, body, dynamic, ctx):
        obj = super().__new__(cls, text)
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
            total = -(-total // SHARED_ALIGN) * SHARED_ALIGN + n * d.itemsize
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


# -- the translator's view of a kernel: structured statements -------------------------------------

@dataclass
class _S:
    """A statement: ``kind`` is one of simple, if_lanes, if_uniform, for_range, while_lanes,
    while_uniform; ``blocks`` are its bodies."""

    kind: str
    node: ast.AST
    blocks: list = field(default_factory=list)
    else_node: ast.AST | None = None
    lanes_body: bool = False


def _structure(stmts, ctx) -> list[_S]:
    out, i = [], 0
    while i < len(stmts):
        s = stmts[i]
        if isinstance(s, ast.With):
            call = s.items[0].context_expr
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            if (nxt is not None and isinstance(nxt, ast.With)
                    and nxt.items[0].context_expr.func.attr == "else_"):
                out.append(_S("if_lanes", s, [_structure(s.body, ctx), _structure(nxt.body, ctx)],
                              else_node=nxt, lanes_body=True))
                i += 2
                continue
            assert call.func.attr == "if_"
            out.append(_S("if_lanes", s, [_structure(s.body, ctx)], lanes_body=True))
        elif isinstance(s, ast.If):
            blocks = [_structure(s.body, ctx)]
            if s.orelse:
                blocks.append(_structure(s.orelse, ctx))
            out.append(_S("if_uniform", s, blocks))
        elif isinstance(s, ast.For):
            it = s.iter
            if isinstance(it.func, ast.Attribute):
                out.append(_S("while_lanes", s, [_structure(s.body, ctx)], lanes_body=True))
            else:
                out.append(_S("for_range", s, [_structure(s.body, ctx)]))
        elif isinstance(s, ast.While):
            out.append(_S("while_uniform", s, [_structure(s.body, ctx)]))
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            pass  # a docstring
        else:
            out.append(_S("simple", s))
        i += 1
    return out


def _header_nodes(s: _S) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (its condition, its range)."""
    n = s.node
    if s.kind == "if_lanes":
        return [n.items[0].context_expr]
    if s.kind == "if_uniform" or s.kind == "while_uniform":
        return [n.test]
    if s.kind == "for_range":
        return [n.target, n.iter]
    if s.kind == "while_lanes":
        return [n.iter]
    return [n]


def _own_nodes(s: _S) -> list[ast.AST]:
    """The syntax a statement holds itself, without its nested bodies."""
    if s.kind == "simple":
        return [s.node]
    return _header_nodes(s)


def _names(nodes) -> set[str]:
    found = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                found.add(sub.id)
    return found


def _occurs(name: str, s: _S) -> bool:
    if name in _names(_header_nodes(s)):
        return True
    return any(_occurs(name, c) for b in s.blocks for c in b)


def _first_access(name: str, stmts: list[_S]) -> str | None:
    """How ``stmts`` first touch ``name`` on some path: "read" if any path may read it before
    writing it, "write" if every path writes it first, None if they may not touch it."""
    for s in stmts:
        if s.kind == "simple":
            n = s.node
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) \
                    and n.targets[0].id == name:
                if name in _names([n.value]):
                    return "read"
                return "write"
            if name in _names([n]):
                return "read"
            continue
        if s.kind == "for_range" and s.node.target.id == name:
            return "read"  # a loop variable shared with other code: declared outside
        if name in _names(_header_nodes(s)):
            return "read"
        results = [_first_access(name, b) for b in s.blocks]
        if "read" in results:
            return "read"
        if s.kind in ("if_lanes", "if_uniform") and len(results) == 2 and \
                all(r == "write" for r in results):
            return "write"
    return None


# -- the translator ------------------------------------------------------------------------------

class _Unknown(Exception):
    """A variable's type is not known yet (the type inference runs again)."""


@dataclass
class _Var:
    name: str
    cname: str
    ty: Ty | None = None
    nonneg: bool = True
    param: bool = False
    first: ast.AST | None = None   # where its type was first seen (for messages)
    lane_body: object = None       # the innermost per-lane body that declares it


class _Translator:
    def __init__(self, k: Kernel, args):
        self.k = k
        self.ctx = k.ctx
        self.helpers: dict[str, str] = {}
        self.lines: list[tuple[int, str, str]] = []   # (indent, code, python comment)
        self.arrays: dict[str, _Array] = {}
        self.vars: dict[str, _Var] = {}
        self.cnames: set[str] = set()
        self.dynamic: list[_DynShared] = []
        self.dyn_offset: E | None = None
        self.params: list[Param] = []
        self._bind_args(args)
        self.body = _structure(k.tree.body, self.ctx)
        self.decls: dict[int, list[str]] = {}     # id(block list) -> names declared there
        self.decl_at: dict[tuple[int, int], list[str]] = {}
        self.loop_vars: set[str] = set()
        self.inferring = True
        self.changed = self.pending = False

    # -- errors --
    def refuse(self, node, construct: str, why: str):
        line = self.k.lineno(node) if hasattr(node, "lineno") else None
        snippet = ast.unparse(node).splitlines()[0] if node is not None else ""
        snippet = re.sub(r"#\d+", "", snippet)
        why = re.sub(r"#\d+", "", why)
        if len(snippet) > 60:
            snippet = snippet[:57] + "..."
        where = f"line {line}: " if line is not None else ""
        raise KernelLanguageError(f"{where}`{snippet}` cannot be translated to CUDA: {why}",
                                  construct=construct, lineno=line)

    def cname(self, name: str) -> str:
        c = name
        while c in _RESERVED or c in self.cnames:
            c += "_"
        self.cnames.add(c)
        return c

    # -- arguments --
    def _bind_args(self, args):
        k = self.k
        if len(args) != len(k.params):
            raise TypeError(f"{k.name} takes {len(k.params)} argument(s) after t "
                            f"({', '.join(k.params)}), got {len(args)}")
        for name, a in zip(k.params, args, strict=True):
            cn = self.cname(name)
            if isinstance(a, np.ndarray):
                if a.dtype.kind not in "biuf" or a.dtype.name == "float16" \
                        or a.dtype.name not in _CTYPES:
                    raise TypeError(f"{name}: arrays of {a.dtype} cannot be translated; CUDA "
                                    f"arrays here hold {', '.join(sorted(_CTYPES))}")
                if a.ndim == 0 or a.size == 0:
                    raise ValueError(f"{name}: arrays must have at least one element and one "
                                     f"dimension, got shape {a.shape}")
                if a.size >= 2**31:
                    raise ValueError(f"{name}: {a.size} elements; the translation indexes "
                                     f"with 32-bit ints, so arrays must have fewer than 2**31")
                dims = [_literal(int(s), Ty("pyint")) for s in a.shape]
                self.arrays[name] = _Array(cn, "global", a.dtype.name, dims)
                self.params.append(Param(name, cn, "array", _CTYPES[a.dtype.name],
                                         a.dtype.name, tuple(a.shape)))
            elif isinstance(a, (bool, int, float, np.integer, np.floating, np.bool_)):
                ty = _ty_of_value(a)
                if ty.np == "pyint" and not -(2**31) <= a < 2**31:
                    raise ValueError(f"{name}={a} does not fit the 32-bit int the CUDA kernel "
                                     f"takes")
                if ty.np == "float16":
                    raise TypeError(f"{name}: float16 scalars cannot be translated")
                cty = "int" if ty.np == "pybool" else ty.ctype
                v = _Var(name, cn, ty, nonneg=False, param=True)
                self.vars[name] = v
                self.params.append(Param(name, cn, "scalar", cty,
                                         np.dtype(_NUMPY_OF_C[cty]).name))
            else:
                raise TypeError(f"{name}: kernel arguments must be NumPy arrays or numbers, "
                                f"got {type(a).__name__}")

    # -- expressions --
    def expr(self, e: ast.AST) -> E:
        m = getattr(self, "x_" + type(e).__name__, None)
        if m is None:
            self.refuse(e, type(e).__name__.lower(), "not part of the kernel language")
        return m(e)

    def x_Constant(self, e):
        v = e.value
        if isinstance(v, bool):
            return E("true" if v else "false", P_ATOM, Ty("pybool"), "bool", True, v)
        ty = _ty_of_value(v)
        if ty.np == "pyint" and not -(2**31) <= v < 2**31:
            self.refuse(e, "constant", f"{v} does not fit a 32-bit int, the type Python "
                                       f"integers get in CUDA here")
        return _literal(v, ty)

    def x_Name(self, e):
        n = e.id
        if n in self.arrays:
            self.refuse(e, "array value", "an array is used by indexing it (a[i]), len(a) or "
                                          "a.shape; it is not a number")
        if n in self.vars:
            v = self.vars[n]
            if v.ty is None:
                raise _Unknown(n)
            return E(v.cname, P_ATOM, v.ty, v.ty.ctype if not v.param or v.ty.np != "pybool"
                     else "int", v.nonneg and v.ty.is_int)
        if n in self.k.constants:
            value = self.k.constants[n]
            ty = _ty_of_value(value)
            if ty.np == "pyint" and not -(2**31) <= value < 2**31:
                self.refuse(e, "constant", f"{n} = {value} does not fit a 32-bit int")
            return _literal(value, ty)
        raise _Unknown(n)

    def x_Attribute(self, e):
        base = e.value
        if isinstance(base, ast.Name) and base.id == self.ctx:
            if e.attr == "lane":
                self.need("linear_tid", _LINEAR_TID)
                self.need("lane_id", _LANE_ID)
                return E("lane_id()", P_ATOM, INDEX, "int", True)
            if e.attr == "warp":
                self.need("linear_tid", _LINEAR_TID)
                self.need("warp_id", _WARP_ID)
                return E("warp_id()", P_ATOM, Ty("pyint"), "int", True)
            if e.attr == "warp_size":
                return E("32", P_ATOM, Ty("pyint"), "int", True, 32)
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                and base.value.id == self.ctx:
            cuda = {"thread_idx": "threadIdx", "block_idx": "blockIdx", "block_dim": "blockDim",
                    "grid_dim": "gridDim"}[base.attr]
            ty = INDEX if base.attr == "thread_idx" else Ty("pyint")
            return E(f"{cuda}.{e.attr}", P_ATOM, ty, "unsigned int", True)
        if isinstance(base, ast.Name) and base.id == "np":
            value = {"inf": math.inf, "nan": math.nan, "pi": math.pi, "e": math.e}[e.attr]
            lit = _literal(value, Ty("pyfloat"))
            return E(lit.text, lit.prec, lit.ty, lit.cty, value >= 0, value)
        self.refuse(e, "attribute", "not part of the kernel language")

    def array(self, node) -> _Array:
        if not isinstance(node, ast.Name) or node.id not in self.arrays:
            self.refuse(node, "array", "expected an array argument or a t.shared array")
        return self.arrays[node.id]

    def flat_index(self, arr: _Array, idx_node, node) -> str:
        parts = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        if len(parts) != len(arr.dims):
            self.refuse(node, "index", f"{arr.name} has {len(arr.dims)} dimension(s); index it "
                                       f"with {len(arr.dims)} index(es), got {len(parts)}")
        idx = []
        for p in parts:
            ie = self.expr(p)
            if not ie.ty.is_int or ie.ty.is_bool:
                self.refuse(p, "index", f"an index must be an integer, got {ie.ty.text()}")
            idx.append(_signed(ie))
        if arr.space == "shared":   # a fixed-size __shared__ array keeps its C dimensions
            return arr.name + "".join(f"[{i.text}]" for i in idx)
        if len(idx) == 1:
            return f"{arr.name}[{idx[0].text}]"
        flat = idx[0]
        for d, i in zip(arr.dims[1:], idx[1:], strict=True):
            mul = self.binop_c(flat, "*", d, "int", P_MUL)
            flat = self.binop_c(mul, "+", i, "int", P_ADD)
        return f"{arr.name}[{flat.text}]"

    def binop_c(self, a: E, op: str, b: E, cty: str, prec: int) -> E:
        text = f"{a.wrap(prec)} {op} {b.wrap(prec + 1)}"
        return E(text, prec, Ty("pyint"), cty, a.nonneg and b.nonneg)

    def x_Subscript(self, e):
        if isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
            arr = self.array(e.value.value)
            k = e.slice.value
            if not 0 <= k < len(arr.dims):
                self.refuse(e, "shape", f"{arr.name} has {len(arr.dims)} dimension(s)")
            d = arr.dims[k]
            return E(d.text, d.prec, Ty("pyint"), "int", True, d.const)
        arr = self.array(e.value)
        text = self.flat_index(arr, e.slice, e)
        return E(text, P_ATOM, Ty(arr.dtype, lanes=True, narrow=False), arr.cty,
                 arr.dtype.startswith("uint") or arr.dtype == "bool")

    # arithmetic

    def result_ty(self, node, fn, tys, pyfn=None) -> Ty:
        lanes = any(t.lanes for t in tys)
        dummies = [t.dummy() for t in tys]
        try:
            with np.errstate(all="ignore"):
                python = all(t.weak for t in tys) and pyfn is not None
                value = pyfn(*dummies) if python else fn(*dummies)
        except (TypeError, ValueError, OverflowError) as exc:
            self.refuse(node, "types", f"NumPy refuses this for {', '.join(t.text() for t in tys)}"
                                       f" ({exc})")
        return _result_ty(value, lanes, _wide(tys))

    def x_BinOp(self, e):
        a, b = self.expr(e.left), self.expr(e.right)
        return self.binop(e, type(e.op), a, b)

    def binop(self, node, op_type, a: E, b: E) -> E:
        sym, ufunc, prec = _BINOPS[op_type]
        pyop = _PYOPS[op_type]
        if op_type is ast.Pow and all(t.weak for t in (a.ty, b.ty)) and a.ty.np == "pyint" \
                and b.ty.np == "pyint" and not (b.const is not None and b.const >= 0):
            self.refuse(node, "power", "an int ** int needs a non-negative constant exponent "
                                       "(Python gives a float for a negative one)")
        r = self.result_ty(node, ufunc, [a.ty, b.ty], pyop)
        const = None
        if a.const is not None and b.const is not None and a.ty.weak and b.ty.weak:
            try:
                const = pyop(a.const, b.const)
            except (ZeroDivisionError, OverflowError, ValueError):
                const = None
        effect = a.effect or b.effect
        if r.is_bool:
            # & | ^ on conditions: the logical operators read better and mean the same on bools
            logical = {ast.BitAnd: ("&&", P_LAND), ast.BitOr: ("||", P_LOR),
                       ast.BitXor: ("!=", P_EQ)}
            if op_type in logical:
                s, p = logical[op_type]
                a2, b2 = _to(a, "bool"), _to(b, "bool")
                return E(f"{a2.wrap(p)} {s} {b2.wrap(p + 1)}", p, r, "bool", True, const, effect)
            text = f"{_to(a, 'int').wrap(prec)} {sym} {_to(b, 'int').wrap(prec + 1)}"
            return E(f"(bool)({text})", P_UNARY, r, "bool", True, const, effect)
        T = r.ctype
        if op_type is ast.Pow:
            return self.power(node, a, b, r, const)
        nonneg = self.nonneg_of(op_type, a, b)
        if op_type in (ast.FloorDiv, ast.Mod):
            # C's / and % truncate toward zero: the same as Python's only when both sides are
            # >= 0 (or unsigned); otherwise Python's rounding toward -infinity needs a helper
            if T in _FLOATS or (T not in _UNSIGNED and not (a.nonneg and b.nonneg)):
                name = "py_floordiv" if op_type is ast.FloorDiv else "py_mod"
                maker = _helper_floordiv if op_type is ast.FloorDiv else _helper_mod
                self.need(f"{name}<{T}>", maker(T))
                a2, b2 = _to(_signed(a), T), _to(_signed(b), T)
                return E(f"{name}({a2.text}, {b2.text})", P_ATOM, r, T, nonneg, const,
                         effect)
            sym = "/" if op_type is ast.FloorDiv else "%"
        if op_type in (ast.Div, ast.FloorDiv, ast.Mod, ast.RShift):
            a, b = _signed(a), _signed(b)
        a2, b2 = self.operands(a, b, T)
        text = f"{a2.wrap(prec)} {sym} {b2.wrap(prec + 1)}"
        cty = _c_common(a2.cty, b2.cty)
        if T in _SMALL:
            return E(f"({T})({text})", P_UNARY, r, T, nonneg, const, effect)
        if cty != T and not (T == "int" and cty == "unsigned int"):
            text = f"({T})({text})"
            return E(text, P_UNARY, r, T, nonneg, const, effect)
        return E(text, prec, r, cty, nonneg, const, effect)

    def operands(self, a: E, b: E, T: str) -> tuple[E, E]:
        """Cast ``a`` and ``b`` so that C evaluates ``a op b`` in type ``T``."""
        def fix(x):
            if x.const is not None and not isinstance(x.const, bool):
                return _literal(x.const, x.ty, T if T not in _SMALL else "int")
            if x.cty in _FLOATS and (T not in _FLOATS or _RANK[x.cty] > _RANK[T]):
                return _cast(x, T)
            return x
        a, b = fix(a), fix(b)
        common = _c_common(a.cty, b.cty)
        if common != T and T not in _SMALL and not (T == "int" and common == "unsigned int"):
            if a.cty != T and a.const is None:
                a = _to(a, T)
            elif b.cty != T:
                b = _to(b, T)
            if _c_common(a.cty, b.cty) != T and b.cty != T:
                b = _to(b, T)
        return a, b

    def nonneg_of(self, op_type, a: E, b: E) -> bool:
        if not (a.ty.is_int or a.ty.is_bool) or not (b.ty.is_int or b.ty.is_bool):
            return False
        if op_type in (ast.Add, ast.Mult, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr,
                       ast.BitXor, ast.RShift, ast.LShift, ast.Pow):
            if op_type is ast.BitAnd:
                return a.nonneg or b.nonneg
            return a.nonneg and b.nonneg
        if op_type is ast.Sub and a.const is not None and b.const is not None:
            return a.const - b.const >= 0
        return False

    def power(self, node, a: E, b: E, r: Ty, const) -> E:
        T = r.ctype
        if T in _FLOATS:
            fn = "powf" if T == "float" else "pow"
            return E(f"{fn}({_to(a, T).text}, {_to(b, T).text})", P_ATOM, r, T, False, const)
        if b.const is None or not isinstance(b.const, int) or b.const < 0:
            self.refuse(node, "power", "an integer power needs a non-negative constant "
                                       "exponent")
        self.need(f"py_ipow<{T}>", _helper_ipow(T))
        return E(f"py_ipow({_to(a, T).text}, {b.const})", P_ATOM, r, T, a.nonneg, const)

    def x_UnaryOp(self, e):
        a = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            if a.ty.lanes:
                self.refuse(e, "not on lanes", "`not` needs one truth value; for a per-lane "
                                               "condition write ~cond")
            return E(f"!{a.wrap(P_UNARY)}", P_UNARY, Ty("pybool"), "bool", True, None, a.effect)
        if isinstance(e.op, ast.UAdd):
            return a
        if isinstance(e.op, ast.Invert) and a.ty.is_bool:
            r = a.ty if a.ty.np == "bool" else (Ty("pyint") if a.ty.np == "pybool" else a.ty)
            if a.ty.np == "pybool":   # Python: ~True == -2
                return E(f"~(int){a.wrap(P_UNARY)}", P_UNARY, r, "int", False)
            return E(f"!{a.wrap(P_UNARY)}", P_UNARY, r, "bool", True, None, a.effect)
        fn = np.negative if isinstance(e.op, ast.USub) else np.invert
        pyfn = (lambda v: -v) if isinstance(e.op, ast.USub) else (lambda v: ~v)
        if a.ty.is_float and isinstance(e.op, ast.Invert):
            self.refuse(e, "types", "~ needs an integer or a condition")
        r = self.result_ty(e, fn, [a.ty], pyfn)
        sym = "-" if isinstance(e.op, ast.USub) else "~"
        const = None if a.const is None else pyfn(a.const)
        if const is not None and isinstance(e.op, ast.USub) and r.weak:
            return _literal(const, r)
        x = _to(_signed(a), r.ctype) if r.ctype != a.cty else _signed(a)
        text = f"{sym}{x.wrap(P_UNARY)}"
        if r.ctype in _SMALL:
            return E(f"({r.ctype})({text})", P_UNARY, r, r.ctype, False, const)
        return E(text, P_UNARY, r, x.cty if x.cty != "bool" else "int", False, const, a.effect)


    def x_Compare(self, e):
        ops = list(zip(e.ops, [e.left, *e.comparators][:-1], e.comparators, strict=True))
        parts = []
        lanes = False
        for op, left, right in ops:
            a, b = self.expr(left), self.expr(right)
            lanes = lanes or a.ty.lanes or b.ty.lanes
            parts.append(self.compare(e, op, a, b))
        if len(parts) > 1:
            if lanes:
                self.refuse(e, "chained comparison on lanes",
                            "a chained comparison is Python's `and`, which needs one truth "
                            "value; for per-lane values write (a < b) & (b < c)")
            text = " && ".join(p.wrap(P_LAND + 1) for p in parts)
            return E(text, P_LAND, Ty("pybool"), "bool", True)
        return parts[0]

    def compare(self, node, op, a: E, b: E) -> E:
        tys = [a.ty, b.ty]
        lanes = a.ty.lanes or b.ty.lanes
        if all(t.weak for t in tys):
            common = "double" if any(t.np == "pyfloat" for t in tys) else "int"
            r = Ty("pybool", lanes)
        else:
            try:
                common_dt = np.result_type(*[t.dummy() for t in tys])
            except TypeError as exc:
                self.refuse(node, "types", f"NumPy cannot compare these ({exc})")
            common = Ty(common_dt.name, narrow=not _wide(tys)).ctype
            r = Ty("bool", lanes)
        if a.ty.is_bool and b.ty.is_bool:
            common = "bool"
        if "unsigned int" in (a.cty, b.cty) and not (a.nonneg and b.nonneg):
            a, b = _signed(a), _signed(b)
        if common not in ("bool",):
            a, b = self.operands(a, b, common)
        sym = _CMP[type(op)]
        prec = P_REL if sym in ("<", "<=", ">", ">=") else P_EQ
        return E(f"{a.wrap(prec)} {sym} {b.wrap(prec + 1)}", prec, r, "bool", True, None,
                 a.effect or b.effect)

    def x_BoolOp(self, e):
        vals = [self.expr(v) for v in e.values]
        for node, v in zip(e.values, vals, strict=True):
            if v.ty.lanes:
                self.refuse(node, "and/or on lanes",
                            "`and`/`or` need one truth value; for per-lane conditions write "
                            "(a) & (b) or (a) | (b)")
            if not v.ty.is_bool:
                self.refuse(node, "and/or value", "`and`/`or` here combine conditions "
                                                  "(comparisons or bools)")
        sym, prec = ("&&", P_LAND) if isinstance(e.op, ast.And) else ("||", P_LOR)
        text = f" {sym} ".join(v.wrap(prec + 1) for v in vals)
        return E(text, prec, Ty("pybool"), "bool", True)

    def x_IfExp(self, e):
        c = self.expr(e.test)
        if c.ty.lanes:
            self.refuse(e, "conditional on lanes", "`a if cond else b` needs one truth value; "
                                                   "for per-lane values use t.where(cond, a, b)")
        a, b = self.expr(e.body), self.expr(e.orelse)
        r = self.join(e, a.ty, b.ty)
        a2, b2 = _to(a, r.ctype), _to(b, r.ctype)
        return E(f"{c.wrap(P_LOR)} ? {a2.wrap(P_COND)} : {b2.wrap(P_COND)}", P_COND, r, r.ctype,
                 a.nonneg and b.nonneg)

    def cond(self, node) -> E:
        c = self.expr(node)
        return c

    # calls
    def x_Call(self, e):
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == self.ctx:
                return getattr(self, "t_" + f.attr)(e)
            if f.value.id == "np":
                return self.np_call(e)
        if isinstance(f, ast.Name):
            return getattr(self, "b_" + f.id)(e)
        self.refuse(e, "call", "not part of the kernel language")

    def np_call(self, e):
        name = e.func.attr
        args = [self.expr(a) for a in e.args]
        if name in NP_DTYPES:
            a = args[0]
            if a.ty.lanes:
                self.refuse(e, "conversion of lanes",
                            f"np.{name}(v) converts one number; for per-lane values write "
                            f"t.local(v, np.{name}) (the simulator refuses this too)")
            dt = np.dtype(name if name != "bool_" else "bool")
            r = Ty(dt.name, False, narrow=False)
            if dt.name == "bool":
                return E(f"({a.wrap(P_EQ)} != 0)", P_ATOM, r, "bool", True)
            return _to(a, r.ctype).__class__(*(_to(a, r.ctype).text, P_UNARY, r, r.ctype,
                                              a.nonneg if r.is_int else False, None))
        fn = getattr(np, name)
        r = self.result_ty(e, fn, [a.ty for a in args])
        T = r.ctype
        if name in ("maximum", "minimum", "fmax", "fmin"):
            a, b = (_to(_signed(x), T) for x in args)
            if T in _FLOATS:
                if name.startswith("f"):
                    fname = name + ("f" if T == "float" else "")
                else:
                    fname = f"py_{name}"
                    self.need(f"{fname}<{T}>", _helper_minmax(T, name))
                return E(f"{fname}({a.text}, {b.text})", P_ATOM, r, T)
            fname = "max" if name in ("maximum", "fmax") else "min"
            return E(f"{fname}({a.text}, {b.text})", P_ATOM, r, T, args[0].nonneg or
                     args[1].nonneg if fname == "max" else args[0].nonneg and args[1].nonneg)
        a = args[0]
        if name in ("abs", "absolute", "fabs"):
            if T in _FLOATS:
                return E(f"{'fabsf' if T == 'float' else 'fabs'}({_to(a, T).text})", P_ATOM, r,
                         T)
            if T in _UNSIGNED or T == "bool":
                return _to(a, T)
            fn_c = "llabs" if T == "long long" else "abs"
            return E(f"{fn_c}({_to(_signed(a), T).text})", P_ATOM, r, T)
        if name in ("floor", "ceil", "trunc") and T not in _FLOATS:
            return _to(a, T)   # NumPy keeps integers as they are
        suffix = "f" if T == "float" else ""
        return E(f"{name}{suffix}({_to(_signed(a), T).text})", P_ATOM, r, T)

    def b_len(self, e):
        arr = self.array(e.args[0])
        d = arr.dims[0]
        return E(d.text, d.prec, Ty("pyint"), "int", True, d.const)

    def b_abs(self, e):
        a = self.expr(e.args[0])
        if a.ty.lanes:
            return self.np_call(ast.Call(func=ast.Attribute(value=ast.Name("np"), attr="absolute"),
                                         args=e.args, keywords=[]))
        if a.ty.is_float:
            return E(f"fabs({_to(a, 'double').text})", P_ATOM, a.ty, "double", True)
        return E(f"abs({_signed(a).text})", P_ATOM, a.ty, a.ty.ctype, True)

    def _minmax(self, e, which):
        vals = [self.expr(a) for a in e.args]
        for node, v in zip(e.args, vals, strict=True):
            if v.ty.lanes:
                self.refuse(node, f"{which} on lanes",
                            f"Python's {which} compares with `<`, which needs one truth value; "
                            f"for per-lane values use np.{'minimum' if which == 'min' else 'maximum'}")
        r = vals[0].ty
        for node, v in zip(e.args[1:], vals[1:], strict=True):
            if v.ty != r:
                self.refuse(node, f"{which} of mixed types",
                            f"{which} of a {r.text()} and a {v.ty.text()} returns whichever "
                            f"wins, so its type depends on the values")
        T = r.ctype
        acc = _to(_signed(vals[0]), T)
        for v in vals[1:]:
            b = _to(_signed(v), T)
            if T in _FLOATS:   # Python: min(a, b) is b only if b < a
                op = "<" if which == "min" else ">"
                acc = E(f"({b.wrap(P_REL)} {op} {acc.wrap(P_REL + 1)} ? {b.wrap(P_COND)} : "
                        f"{acc.wrap(P_COND)})", P_ATOM, r, T)
            else:
                acc = E(f"{which}({acc.text}, {b.text})", P_ATOM, r, T,
                        acc.nonneg or b.nonneg if which == "max" else acc.nonneg and b.nonneg)
        return acc

    def b_min(self, e):
        return self._minmax(e, "min")

    def b_max(self, e):
        return self._minmax(e, "max")

    def _convert(self, e, pyty):
        a = self.expr(e.args[0])
        if a.ty.lanes:
            self.refuse(e, "conversion of lanes",
                        f"{e.func.id}() of a per-lane value needs one number; use "
                        f"t.local(v, np.<dtype>) (the simulator refuses this too)")
        r = Ty(pyty)
        if pyty == "pybool":
            return E(f"({a.wrap(P_EQ)} != 0)", P_ATOM, r, "bool", True)
        x = _to(_signed(a), r.ctype)
        return E(x.text, x.prec, r, r.ctype, a.nonneg, None)

    def b_int(self, e):
        return self._convert(e, "pyint")

    def b_float(self, e):
        return self._convert(e, "pyfloat")

    def b_bool(self, e):
        return self._convert(e, "pybool")

    def b_range(self, e):
        self.refuse(e, "range", "range(...) is only the iterable of a for loop")

    def b_print(self, e):
        self.refuse(e, "print placement", "print(...) is a statement of its own")

    # the warp context's operations
    def t_where(self, e):
        c = self.expr(e.args[0])
        a, b = self.expr(e.args[1]), self.expr(e.args[2])
        lanes = True
        dummies = [np.ones(2, bool), a.ty.dummy(), b.ty.dummy()]
        value = np.where(*dummies)
        r = Ty(value.dtype.name, lanes, narrow=value.dtype.name == "int64"
               and not _wide([a.ty, b.ty]))
        T = r.ctype
        c2 = _to(c, "bool") if c.cty != "bool" else c
        return E(f"{c2.wrap(P_LOR)} ? {_to(a, T).wrap(P_COND)} : {_to(b, T).wrap(P_COND)}",
                 P_COND, r, T, a.nonneg and b.nonneg)

    def t_shfl(self, e, fn):
        v, x = self.expr(e.args[0]), self.expr(e.args[1])
        if x.ty.is_float:
            self.refuse(e.args[1], "shuffle", "the lane offset of a shuffle is an integer")
        r = Ty(v.ty.np, True, v.ty.narrow) if not v.ty.weak else _result_ty(
            np.asarray(v.ty.dummy()), True, False)
        T = r.ctype
        carrier = "int" if T in _SMALL else T
        text = f"{fn}(0xffffffff, {_to(v, carrier).text}, {_signed(x).text})"
        if carrier != T:
            text = f"({T}){text}"
        return E(text, P_ATOM if carrier == T else P_UNARY, r, T, (v.nonneg and
                 fn != "__shfl_sync") or v.nonneg)

    def t_shfl_down(self, e):
        return self.t_shfl(e, "__shfl_down_sync")

    def t_shfl_up(self, e):
        return self.t_shfl(e, "__shfl_up_sync")

    def t_shfl_xor(self, e):
        return self.t_shfl(e, "__shfl_xor_sync")

    def t_shfl_idx(self, e):
        return self.t_shfl(e, "__shfl_sync")

    def atomic(self, e):
        op = e.func.attr
        arr = self.array(e.args[0])
        if arr.dtype not in ATOMIC_DTYPES[op]:
            self.refuse(e, "atomic type",
                        f"CUDA has no {_ATOMIC_FN[op]} for {arr.dtype} elements; the array must "
                        f"hold one of {', '.join(ATOMIC_DTYPES[op])} (the simulator refuses "
                        f"this too)")
        arr.written = True
        ref = self.flat_index(arr, e.args[1], e)
        T = arr.cty
        r = Ty(arr.dtype, True, narrow=False)
        vals = [_to(_signed(self.expr(a)), T) for a in e.args[2:]]
        text = f"{_ATOMIC_FN[op]}(&{ref}, {', '.join(v.text for v in vals)})"
        return E(text, P_ATOM, r, T, False, None, True)

    t_atomic_add = t_atomic_max = t_atomic_cas = atomic

    def t_local(self, e):
        v = self.expr(e.args[0])
        dtype = e.args[1] if len(e.args) > 1 else next(
            (kw.value for kw in e.keywords if kw.arg == "dtype"), None)
        if dtype is not None:
            name = dtype.attr if dtype.attr != "bool_" else "bool"
            r = Ty(np.dtype(name).name, True, narrow=False)
        else:
            dt = np.asarray(v.ty.dummy()).dtype
            r = Ty(dt.name, True, narrow=dt.name == "int64" and not _wide([v.ty]))
        x = _to(_signed(v), r.ctype)
        return E(x.text, x.prec, r, r.ctype, v.nonneg and r.is_int, None)

    def t_generic(self, e):
        self.refuse(e, f"t.{e.func.attr} placement", "this operation is a statement")

    t_sync = t_syncwarp = t_return_if = t_shared = t_if_ = t_else_ = t_while_ = t_generic

    # -- types of variables --
    def join(self, node, a: Ty, b: Ty) -> Ty:
        if a == b:
            return a
        lanes = a.lanes or b.lanes
        sa, sb = Ty(a.np, False, a.narrow), Ty(b.np, False, b.narrow)
        if sa == sb:
            return Ty(a.np, lanes, a.narrow)
        for weak, strong in ((a, b), (b, a)):
            if weak.weak and not strong.weak:
                ok = (weak.np == "pybool" or (weak.np == "pyint" and not strong.is_bool)
                      or (weak.np == "pyfloat" and strong.is_float))
                if ok:
                    return Ty(strong.np, lanes, strong.narrow)
        if {a.np, b.np} == {"pyint", "pybool"}:
            return Ty("pyint", lanes)
        if a.np == b.np == "int64":   # a narrow index and a real int64: keep 64 bits
            return Ty("int64", lanes, False)
        return None

    # -- statements --
    def need(self, key: str, text: str):
        self.helpers.setdefault(key, text)

    def emit(self, indent: int, code: str, node=None, comment: str | None = None):
        if self.inferring:
            return
        if comment is None and node is not None:
            comment = self.py_line(node)
        self.lines.append((indent, code, comment or ""))

    def py_line(self, node) -> str:
        text = _strip_comment(self.k.source_line(node)).strip()
        end = getattr(node, "end_lineno", node.lineno)
        compound = isinstance(node, (ast.With, ast.For, ast.While, ast.If))
        if end != node.lineno and not compound:
            text += " …"
        return text

    def assign_var(self, node, name: str, value: E, indent: int, lanes_depth: int,
                   declare: bool, augmented: str | None = None, masked: bool = False):
        v = self.vars[name]
        if masked:
            if v.ty is None:
                raise _Unknown(name)
            new_ty = v.ty
        elif v.ty is None:
            new_ty = value.ty
        else:
            new_ty = self.join(node, v.ty, value.ty)
            if new_ty is None:
                self.refuse(node, "variable type",
                            f"`{name}` holds {v.ty.text()} values"
                            f"{f' (line {self.k.lineno(v.first)})' if v.first else ''} and "
                            f"{value.ty.text()} values here; a CUDA variable has one type: use "
                            f"another name, or convert with np.float32(...)/t.local(v, dtype)")
            if v.param and new_ty.ctype != v.ty.ctype:
                self.refuse(node, "variable type", f"the parameter `{name}` is a "
                                                   f"{v.ty.ctype} in CUDA; assign a new "
                                                   f"variable instead")
        if new_ty != v.ty:
            if v.ty is not None:
                self.changed = True
            else:
                self.changed = True
                v.first = node
            v.ty = new_ty
        if v.nonneg and not (value.nonneg and value.ty.is_int) and new_ty.is_int:
            v.nonneg = False
            self.changed = True
        # Python runs a t.if_/t.else_/t.while_ body for every warp, whatever its lanes: a plain
        # Python value assigned there to a variable from outside changes for all lanes.
        if v.lane_body is not None and lanes_depth > v.lane_body and not value.ty.lanes \
                and not masked:
            self.refuse(node, "uniform assignment in a lane branch",
                        f"`{name}` is assigned a value that is the same for the whole warp "
                        f"inside t.if_/t.else_/t.while_, which Python runs for every warp "
                        f"whatever the lanes' conditions (so every lane would see the change, "
                        f"in CUDA only the lanes that took the branch); declare it per lane "
                        f"with {name} = t.local(...) before the branch and write "
                        f"{name}[...] = ... inside")
        T = v.ty.ctype if not (v.param and v.ty.np == "pybool") else "int"
        if augmented is not None:
            self.emit(indent, f"{v.cname} {augmented}= {value.text};", node)
            return
        x = _assignable(value, T)
        if declare:
            self.emit(indent, f"{T} {v.cname} = {x.text};", node)
        else:
            self.emit(indent, f"{v.cname} = {x.text};", node)

    def block(self, stmts: list[_S], indent: int, lanes_depth: int):
        decl_here = self.block_decls.get(id(stmts), {})
        for i, s in enumerate(stmts):
            for name in decl_here.get(i, ()):
                v = self.vars[name]
                v.lane_body = lanes_depth
                merged = self.merge_decl.get((id(stmts), i))
                if merged != name and not self.inferring:
                    if v.ty is None:
                        raise _Unknown(name)
                    self.emit(indent, f"{v.ty.ctype} {v.cname};", None,
                              f"({name} is first assigned below)")
            if self.inferring:
                try:
                    self.stmt(s, indent, lanes_depth,
                              merged_name=self.merge_decl.get((id(stmts), i)))
                except _Unknown:
                    self.pending = True   # a type not known yet: the next pass tries again
                continue
            self.stmt(s, indent, lanes_depth, merged_name=self.merge_decl.get((id(stmts), i)))

    def stmt(self, s: _S, indent: int, lanes_depth: int, merged_name=None):
        n = s.node
        if s.kind == "simple":
            return self.simple(n, indent, lanes_depth, merged_name)
        if s.kind == "if_lanes":
            c = self.expr(n.items[0].context_expr.args[0])
            self.emit(indent, f"if ({_cond_text(c)}) {{", n)
            self.block(s.blocks[0], indent + 1, lanes_depth + 1)
            if len(s.blocks) > 1:
                self.emit(indent, "} else {", s.else_node)
                self.block(s.blocks[1], indent + 1, lanes_depth + 1)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "if_uniform":
            c = self.expr(n.test)
            self.uniform(n.test, c, "a Python if", "with t.if_(cond):")
            self.emit(indent, f"if ({_cond_text(c)}) {{", n)
            self.block(s.blocks[0], indent + 1, lanes_depth)
            if len(s.blocks) > 1:
                self.emit(indent, "} else {", None, "else:")
                self.block(s.blocks[1], indent + 1, lanes_depth)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "while_uniform":
            c = self.expr(n.test)
            self.uniform(n.test, c, "a Python while", "for _ in t.while_(lambda: cond):")
            self.emit(indent, f"while ({_cond_text(c)}) {{", n)
            self.block(s.blocks[0], indent + 1, lanes_depth)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "while_lanes":
            c = self.expr(n.iter.args[0].body)
            self.emit(indent, f"while ({_cond_text(c)}) {{", n)
            self.block(s.blocks[0], indent + 1, lanes_depth + 1)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "for_range":
            return self.for_range(s, indent, lanes_depth)
        raise AssertionError(s.kind)

    def uniform(self, node, c: E, what: str, instead: str):
        if c.ty.lanes:
            self.refuse(node, "per-lane condition",
                        f"{what} needs one truth value for the whole warp, and this condition "
                        f"is per lane; write {instead} (the simulator refuses this too)")

    def for_range(self, s: _S, indent: int, lanes_depth: int):
        n = s.node
        var = n.target.id
        args = [self.expr(a) for a in n.iter.args]
        for node, a in zip(n.iter.args, args, strict=True):
            self.uniform(node, a, "range()", "a t.while_ loop")
            if not a.ty.is_int:
                self.refuse(node, "range", f"range() takes integers, got {a.ty.text()}")
        if len(args) == 1:
            start, stop, step = _literal(0, Ty("pyint")), args[0], _literal(1, Ty("pyint"))
        elif len(args) == 2:
            (start, stop), step = args, _literal(1, Ty("pyint"))
        else:
            start, stop, step = args
        if step.const == 0:
            self.refuse(n.iter, "range", "range() step must not be zero")
        v = self.vars[var]
        v.ty = Ty("pyint")
        v.nonneg = start.nonneg and step.const is not None and step.const > 0
        v.lane_body = lanes_depth
        cv = v.cname
        assigned = _assigned_names(s.blocks[0])
        stop_s = _signed(stop)
        start_s = _to(_signed(start), "int")
        init = f"int {cv} = {start_s.text}"
        if _names([n.iter.args[1 if len(args) > 1 else 0]]) & assigned or stop.effect:
            end = self.cname(f"{var}_end")
            init += f", {end} = {_to(stop_s, 'int').text}"
            stop_text = end
        else:
            stop_text = stop_s.wrap(P_REL + 1)
        if step.const is not None:
            test = f"{cv} {'<' if step.const > 0 else '>'} {stop_text}"
            incr = f"++{cv}" if step.const == 1 else (f"--{cv}" if step.const == -1 else
                                                      f"{cv} += {step.text}")
        else:
            st = _to(_signed(step), "int").wrap(P_REL)
            test = f"({st} > 0 ? {cv} < {stop_text} : {cv} > {stop_text})"
            incr = f"{cv} += {st}"
        self.emit(indent, f"for ({init}; {test}; {incr}) {{", n)
        self.block(s.blocks[0], indent + 1, lanes_depth)
        self.emit(indent, "}", None, "")

    def simple(self, n, indent: int, lanes_depth: int, merged_name):
        if isinstance(n, ast.Pass):
            self.emit(indent, ";", n)
            return
        if isinstance(n, (ast.Break, ast.Continue)):
            self.emit(indent, "break;" if isinstance(n, ast.Break) else "continue;", n)
            return
        if isinstance(n, ast.Return):
            self.emit(indent, "return;", n)
            return
        if isinstance(n, ast.Expr):
            call = n.value
            if isinstance(call.func, ast.Name) and call.func.id == "print":
                self.emit(indent, "// print(...) runs in the simulator only", n)
                return
            op = call.func.attr
            if op == "sync":
                self.emit(indent, "__syncthreads();", n)
            elif op == "syncwarp":
                self.emit(indent, "__syncwarp();", n)
            elif op == "return_if":
                c = self.expr(call.args[0])
                self.emit(indent, f"if ({_cond_text(c)}) return;", n)
            else:   # an atomic whose old value is not needed
                self.emit(indent, self.atomic(call).text.removeprefix("(long long)") + ";", n)
            return
        if isinstance(n, ast.Assign):
            tgt = n.targets[0]
            if isinstance(tgt, ast.Name):
                return self.assign_name(n, tgt.id, n.value, indent, lanes_depth,
                                        merged_name == tgt.id)
            return self.store(n, tgt, self.expr(n.value), indent)
        if isinstance(n, ast.AugAssign):
            op = type(n.op)
            if isinstance(n.target, ast.Name):
                cur = self.expr(n.target)
                value = self.binop(n, op, cur, self.expr(n.value))
                v = self.vars[n.target.id]
                aug = None
                csym = _leading_op(value.text, cur.text)
                if not self.inferring and value.ty == v.ty and csym is not None:
                    aug_text = value.text[len(cur.text) + len(csym) + 2:]
                    value = E(aug_text, P_ATOM, value.ty, value.cty, value.nonneg)
                    aug = csym
                return self.assign_var(n, n.target.id, value, indent, lanes_depth, False,
                                       augmented=aug)
            arr = self.array(n.target.value)
            load = self.expr(n.target)
            value = self.binop(n, op, load, self.expr(n.value))
            csym = _leading_op(value.text, load.text)
            if value.ty.np == arr.dtype and csym is not None:
                arr.written = True
                rest = value.text[len(load.text) + len(csym) + 2:]
                self.emit(indent, f"{load.text} {csym}= {rest};", n)
                return
            return self.store(n, n.target, value, indent)
        raise AssertionError(type(n).__name__)

    def assign_name(self, n, name, value_node, indent, lanes_depth, declare):
        if name in self.arrays and isinstance(value_node, ast.Call) and \
                self.is_t(value_node, "shared"):
            return self.shared_decl(n, name, value_node, indent)
        if isinstance(value_node, ast.Name) and value_node.id in self.arrays:
            self.refuse(n, "array alias", "give arrays one name: index the argument itself")
        value = self.expr(value_node)
        if isinstance(value_node, ast.Call) and self.is_t(value_node, "local"):
            v = self.vars[name]
            if v.ty is None or self.inferring:
                pass
        self.assign_var(n, name, value, indent, lanes_depth, declare)

    def is_t(self, node, op):
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == self.ctx
                and node.func.attr == op)

    def store(self, n, tgt: ast.Subscript, value: E, indent: int):
        if isinstance(tgt.slice, ast.Constant) and tgt.slice.value is Ellipsis:
            name = tgt.value.id
            lanes_depth = 10**6   # masked moves are per lane by construction
            return self.assign_var(n, name, value, indent, lanes_depth, False, masked=True)
        arr = self.array(tgt.value)
        arr.written = True
        ref = self.flat_index(arr, tgt.slice, tgt)
        x = _assignable(value, arr.cty)
        self.emit(indent, f"{ref} = {x.text};", n)

    def shared_decl(self, n, name, call, indent):
        if self.inferring:
            return
        lines = self._shared_lines[name]
        for extra in lines[:-1]:
            self.emit(indent, extra, None, "sizes set at launch")
        self.emit(indent, lines[-1], n)

    # -- the whole kernel --
    def prepare_shared(self):
        """Declare each t.shared array (all at the kernel's top level)."""
        self._shared_lines = {}
        offset = None
        counts = {}
        for st in _walk(self.body):
            for name in _assigned_names([st]) if st.kind == "simple" else ():
                counts[name] = counts.get(name, 0) + 1
        single = {}   # top-level locals assigned once: a shared shape may use them
        for s in self.body:
            n = s.node
            if (s.kind == "simple" and isinstance(n, ast.Assign)
                    and isinstance(n.targets[0], ast.Name) and counts.get(n.targets[0].id) == 1
                    and not self.is_t(n.value, "shared")):
                single[n.targets[0].id] = n.value
            if not (s.kind == "simple" and isinstance(n, ast.Assign)
                    and isinstance(n.targets[0], ast.Name) and self.is_t(n.value, "shared")):
                continue
            name = n.targets[0].id
            if name in self.arrays or name in self.k.params:
                self.refuse(n, "array alias", f"`{name}` names an array already; give each "
                                              f"shared array its own name")
            call = n.value
            args = call.args
            dtype_node = args[1] if len(args) > 1 else next(
                (kw.value for kw in call.keywords if kw.arg == "dtype"), None)
            dtype = "float32" if dtype_node is None else np.dtype(
                dtype_node.attr if dtype_node.attr != "bool_" else "bool").name
            shape_node = self.inline_uniform(args[0], single)
            parts = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
            dims = []
            for p in parts:
                d = self.expr(p)
                if not d.ty.is_int or d.ty.lanes:
                    self.refuse(p, "shared shape", "a shared array's shape is made of integers "
                                                   "that are the same for the whole block")
                dims.append(d)
            cn = self.cname(name)
            cty = _CTYPES[dtype]
            if all(d.const is not None for d in dims):
                arr = _Array(cn, "shared", dtype, dims, node=n)
                shape_c = "".join(f"[{d.text}]" for d in dims)
                self._shared_lines[name] = [f"__shared__ {cty} {cn}{shape_c};"]
            else:
                arr = _Array(cn, "dynamic", dtype, [_signed(d) for d in dims], node=n)
                size = None
                for d in dims:
                    d2 = _to(_signed(d), "int")
                    size = d2 if size is None else self.binop_c(size, "*", d2, "int", P_MUL)
                first = offset is None
                lines = []
                if first:
                    lines.append(f"extern __shared__ __align__({SHARED_ALIGN}) unsigned char "
                                 f"dynamic_smem[];")
                    lines.append(f"{cty}* {cn} = ({cty}*)dynamic_smem;")
                    self._shared_lines[name] = [lines[0], lines[1]]
                else:
                    off = offset.text
                    self._shared_lines[name] = [
                        f"{cty}* {cn} = ({cty}*)(dynamic_smem + ({off} + {SHARED_ALIGN - 1}) / "
                        f"{SHARED_ALIGN} * {SHARED_ALIGN});"]
                    offset = E(f"({off} + {SHARED_ALIGN - 1}) / {SHARED_ALIGN} * {SHARED_ALIGN}",
                               P_MUL, Ty("pyint"), "int", True)
                end = f"{size.wrap(P_MUL)} * {np.dtype(dtype).itemsize}"
                offset = E(end if first else f"{offset.text} + {end}", P_ADD, Ty("pyint"),
                           "int", True)
                self.dynamic.append(_DynShared(name, np.dtype(dtype).itemsize, tuple(parts),
                                               tuple(self.k.constants.items())))
            self.arrays[name] = arr

    def split_webs(self):
        """Give a reused Python name a fresh variable where its old value is dead: after
        ``d = 16; ...`` at the top, a ``d = 4`` inside ``with t.if_(...)`` that nothing outside
        reads is a separate variable, declared inside that body (as one would write it in C)."""
        protected = set(self.k.params) | set(self.arrays) | {
            s.node.target.id for s in _walk(self.body) if s.kind == "for_range"}
        counter = itertools.count(2)
        loops = ("for_range", "while_uniform", "while_lanes")

        def live_after(name, path):
            for stmts, i in reversed(path):
                st = stmts[i]
                if st.kind in loops and (name in _names(_header_nodes(st))
                                         or _first_access(name, st.blocks[0]) == "read"):
                    return True
                fa = _first_access(name, stmts[i + 1:])
                if fa is not None:
                    return fa == "read"
            return False

        def occurrences(stmts, name):
            return sum(1 for st in _walk(stmts) for node in _own_nodes(st)
                       for sub in ast.walk(node) if isinstance(sub, ast.Name) and sub.id == name)

        def walk(stmts, path, loop_body):
            for i, st in enumerate(stmts):
                n = st.node
                if st.kind == "simple" and isinstance(n, ast.Assign) and \
                        isinstance(n.targets[0], ast.Name):
                    name = n.targets[0].id
                    if (name not in protected and name not in _names([n.value])
                            and occurrences(self.body, name) > occurrences(stmts[i:], name)
                            and not live_after(name, path)
                            and not (loop_body and _first_access(name, stmts) == "read")):
                        new = f"{name}#{next(counter)}"
                        for later in _walk(stmts[i:]):
                            for node in _own_nodes(later):
                                for sub in ast.walk(node):
                                    if isinstance(sub, ast.Name) and sub.id == name:
                                        sub.id = new
                for b in st.blocks:
                    walk(b, [*path, (stmts, i)], st.kind in loops)

        walk(self.body, [], False)

    def inline_uniform(self, node, single):
        """``node`` with locals from ``single`` replaced by the expressions they hold."""
        import copy

        node = copy.deepcopy(node)

        class Inline(ast.NodeTransformer):
            def visit_Name(self, n):
                if n.id in single:
                    return Inline().visit(copy.deepcopy(single[n.id]))
                return n
        return ast.fix_missing_locations(Inline().visit(node))

    def plan_declarations(self):
        """Where each local variable is declared: the innermost block holding all its uses."""
        self.block_decls: dict[int, dict[int, list[str]]] = {}
        self.merge_decl: dict[tuple[int, int], str] = {}
        names = sorted(_assigned_names(self.body) - set(self.arrays) - set(self.k.params))
        loop_vars = set()
        for s in _walk(self.body):
            if s.kind == "for_range":
                loop_vars.add(s.node.target.id)
        for name in names:
            self.vars[name] = _Var(name, self.cname(name.split("#")[0]))
            if name in loop_vars:
                self.check_loop_var(name)
                continue
            self.place(name, self.body)

    def check_loop_var(self, name):
        for s in _walk(self.body):
            if s.kind == "for_range" and s.node.target.id == name:
                continue
        # every occurrence must be inside a loop that binds it
        def outside(stmts, inside):
            for s in stmts:
                if s.kind == "for_range" and s.node.target.id == name:
                    if name in _names([s.node.iter]):
                        return s.node
                    if name in _assigned_names(s.blocks[0]):
                        return s.node
                    continue
                if not inside and name in _names(_header_nodes(s) if s.kind != "simple"
                                                  else [s.node]):
                    return s.node
                for b in s.blocks:
                    r = outside(b, inside)
                    if r is not None:
                        return r
            return None
        bad = outside(self.body, False)
        if bad is not None:
            self.refuse(bad, "loop variable",
                        f"`{name}` is a for-loop variable and is also used (or assigned) "
                        f"outside its loop; in CUDA it exists only inside the loop: use "
                        f"another name")

    def place(self, name, stmts):
        occ = [i for i, s in enumerate(stmts) if _occurs(name, s)]
        if not occ:
            return
        if len(occ) == 1 and stmts[occ[0]].kind != "simple" and \
                name not in _names(_header_nodes(stmts[occ[0]])):
            s = stmts[occ[0]]
            inner = [b for b in s.blocks if any(_occurs(name, x) for x in b)]
            if all(_first_access(name, b) != "read" for b in inner):
                for b in inner:
                    self.place(name, b)
                return
        i = occ[0]
        self.block_decls.setdefault(id(stmts), {}).setdefault(i, []).append(name)
        s = stmts[i]
        if s.kind == "simple" and isinstance(s.node, ast.Assign) and \
                isinstance(s.node.targets[0], ast.Name) and s.node.targets[0].id == name \
                and name not in _names([s.node.value]):
            self.merge_decl[(id(stmts), i)] = name

    def run(self) -> None:
        self.prepare_shared()
        self.split_webs()
        self.plan_declarations()
        for _ in range(30):
            self.changed = self.pending = False
            self.lines = []
            self.block(self.body, 1, 0)
            if not self.changed:
                break
        else:  # pragma: no cover - the type lattice is finite
            raise KernelLanguageError("the variable types did not settle", construct="types")
        self.inferring = False
        self.lines = []
        try:
            self.block(self.body, 1, 0)
        except _Unknown as exc:
            name = exc.args[0]
            raise KernelLanguageError(
                f"`{name}` is used before it is given a value", construct="name") from None


def _walk(stmts):
    for s in stmts:
        yield s
        for b in s.blocks:
            yield from _walk(b)


def _assigned_names(stmts) -> set[str]:
    found = set()
    for s in _walk(stmts):
        n = s.node
        if s.kind == "simple":
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
                found.add(n.targets[0].id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                found.add(n.target.id)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                tgt = n.targets[0] if isinstance(n, ast.Assign) else n.target
                if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name):
                    found.add(tgt.value.id)
        elif s.kind == "for_range":
            found.add(n.target.id)
    return found


def _leading_op(text: str, left: str) -> str | None:
    """The C operator in ``text`` == ``left op rest``, when ``left op= rest`` means the same."""
    for op in ("<<", ">>", "+", "-", "*", "/", "%", "&", "|", "^"):
        if text.startswith(f"{left} {op} ") and not text.startswith(f"{left} {op}{op}"):
            return op
    return None


def _cond_text(c: E) -> str:
    return c.text


def _strip_comment(line: str) -> str:
    """A source line without its trailing ``# comment`` (strings are left alone)."""
    if "#" not in line:
        return line
    try:
        tokens = list(tokenize.generate_tokens(iter([line + "\n"]).__next__))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            return line[:tok.start[1]].rstrip()
    return line


# -- the public functions ------------------------------------------------------------------------

def _format(lines) -> str:
    width = min(_COMMENT_COLUMN_MAX, max((4 * i + len(c) for i, c, _ in lines if _), default=0))
    out = []
    for indent, code, comment in lines:
        text = "    " * indent + code
        if comment:
            text = text.ljust(width) + "  // " + comment
        out.append(text.rstrip())
    return "\n".join(out)


def to_cuda(kernel, *args) -> CudaSource:
    """CUDA C source of simulator kernel ``kernel`` for arguments like ``args``.

    ``kernel``: a function ``def k(t, ...)`` in the kernel language
    (:mod:`gpu_lessons.kernel_lang`); ``args``: the arguments you would give
    :func:`gpu_lessons.simt.run` after the launch shape (arrays give element types and shapes,
    numbers their types; the values are not used).  Returns a :class:`CudaSource` (a ``str``)
    whose lines end with the Python line each came from.  Raises
    :class:`~gpu_lessons.kernel_lang.KernelLanguageError` for what cannot be translated.
    """
    try:
        k = validate(kernel)
        tr = _Translator(k, args)
        tr.run()
    except KernelLanguageError as exc:
        # The message names the learner's line; the translator's frames would only bury it.
        raise exc.with_traceback(None) from None
    params = []
    for p in tr.params:
        if p.kind == "array":
            p = Param(p.name, p.cname, p.kind, p.ctype, p.dtype, p.shape,
                      tr.arrays[p.name].written)
        params.append(p)
    sig = []
    for p in params:
        if p.kind == "array":
            sig.append(f"{'' if p.written else 'const '}{p.ctype}* {p.cname}")
        else:
            sig.append(f"{p.ctype} {p.cname}")
    kname = k.name if k.name not in _RESERVED else k.name + "_"
    body_lines = [(0, f'extern "C" __global__ void {kname}({", ".join(sig)})', ""), (0, "{", "")]
    body_lines += tr.lines
    body_lines.append((0, "}", ""))
    body = _format(body_lines)
    header = [f"// {kname}: translated from the simulator kernel by gpu_lessons.cuda.to_cuda;",
              "// each line ends with the Python line it comes from."]
    for p in params:
        if p.kind == "array":
            shape = ", ".join(str(s) for s in p.shape)
            note = ""
            if len(p.shape) > 1:
                idx = ", ".join("ijk"[:len(p.shape)]) if len(p.shape) <= 3 else "..."
                strides = [int(np.prod(p.shape[d + 1:])) for d in range(len(p.shape))]
                flat = " + ".join(f"{v} * {s}" if s != 1 else v
                                  for v, s in zip("ijk", strides, strict=False))
                note = f", flattened row-major: {p.name}[{idx}] is {p.cname}[{flat}]"
            header.append(f"//   {p.name}: {p.dtype}[{shape}] -> {'' if p.written else 'const '}"
                          f"{p.ctype}*{note}")
    header.append("// Integers (indices, Python ints) are 32-bit int; Python floats are double.")
    header.append("// Compile with -fmad=false for results bit-identical to the simulator's "
                  "(NumPy rounds")
    header.append("// a * b + c twice; a fused multiply-add rounds once).")
    helpers = [h for h in tr.helpers.values()]
    text = "\n".join(header) + "\n\n" + ("\n".join(helpers) + "\n" if helpers else "") + body + "\n"
    return CudaSource(text, kernel_name=kname, params=params, body=body, dynamic=tr.dynamic,
                      ctx=k.ctx)


def show_cuda(kernel, *args) -> CudaSource:
    """The same as :func:`to_cuda`: in a notebook the result shows highlighted, with the Python
    lines as an aligned comment column."""
    return to_cuda(kernel, *args)


# -- running on a GPU -----------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuRun:
    """A kernel run on a GPU: its launch, its measured time and where it ran.

    ``timing``: CUDA-event times of the timed launches (:class:`gpu_lessons.measure.Timing`);
    ``exact``: compiled with ``-fmad=false`` (float results bit-identical to the simulator's).
    """

    kernel: str
    grid: tuple
    block: tuple
    device: str
    timing: object
    dynamic_shared_bytes: int
    registers_per_thread: int
    exact: bool = True

    @property
    def us(self) -> float:
        """Median kernel time in µs."""
        return self.timing.median * 1e6

    def __repr__(self) -> str:
        return (f"GpuRun({self.kernel}<<<{_dims_text(self.grid)}, {_dims_text(self.block)}>>> on "
                f"{self.device}: {self.us:,.2f} µs median of {self.timing.repeats} runs after "
                f"{self.timing.warmup} warm-up, CUDA events; {self.registers_per_thread} "
                f"registers/thread{'' if self.exact else ', fused multiply-adds allowed'})")

    def _repr_html_(self) -> str:
        from ._format import html_table

        rows = [("median kernel time", f"{self.us:,.2f} µs"),
                ("timed runs", f"{self.timing.repeats} after {self.timing.warmup} warm-up, "
                               "CUDA events"),
                ("launch", f"&lt;&lt;&lt;{_dims_text(self.grid)}, {_dims_text(self.block)}"
                           f"&gt;&gt;&gt;"),
                ("registers / thread", str(self.registers_per_thread)),
                ("dynamic shared memory", f"{self.dynamic_shared_bytes} B")]
        return html_table(f"{self.kernel} on {self.device}", ("quantity", "value"), rows)


def _dims_text(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return str(d[0]) if len(d) == 1 else str(d)


def launch_args(source: CudaSource, args) -> list:
    """The arguments for ``RawKernel`` in parameter order: device copies of the arrays (flat,
    C order) and NumPy scalars of the exact C types.  Needs CuPy."""
    import cupy as cp

    out = []
    for p, a in zip(source.params, args, strict=True):
        if p.kind == "array":
            out.append(cp.asarray(np.ascontiguousarray(a).reshape(-1)))
        else:
            out.append(_NUMPY_OF_C[p.ctype](a))
    return out


def run_on_gpu(kernel, grid, block, *args, repeats: int = 20, warmup: int = 2,
               exact: bool = True):
    """Translate ``kernel`` (:func:`to_cuda`), compile it with NVRTC, run it on ``args``.

    Like ``gpu_lessons.simt.run(kernel, grid, block, *args)`` but on the GPU: the arrays are
    copied to the device, the kernel runs once, and what it wrote is copied back **into the
    NumPy arrays**.  Then it is timed on separate device copies (reset before every run, so
    kernels that accumulate or use atomics time the same work each time and cannot change the
    result you got): ``warmup`` untimed launches, then ``repeats`` launches timed with CUDA
    events; the median is reported (:class:`GpuRun`).  ``exact``: compile with ``-fmad=false``
    so float results match the simulator's bit for bit where the arithmetic allows.

    Without a GPU it prints the course's one skip line and returns ``None`` (the translation
    still runs first, so a kernel the GPU could not take is reported either way).
    """
    source = to_cuda(kernel, *args)
    grid3 = _validate.launch_dims("grid", grid, high=MAX_GRID_DIM)
    block3 = _validate.launch_dims("block", block, high=MAX_BLOCK_DIM)
    threads = block3[0] * block3[1] * block3[2]
    if threads > 1024:
        raise ValueError(f"block={block3} has {threads} threads; a block may have at most 1024")
    repeats = _validate.integer("repeats", repeats, low=1, high=10_000)
    warmup = _validate.integer("warmup", warmup, low=0, high=1000)
    from .measure.gpu import FAIL_LINE, _cuda_errors, skip_line

    line = skip_line()
    if line is not None:
        print(line)
        return None
    try:
        return _run(source, grid3, block3, args, repeats, warmup, exact)
    except _cuda_errors() as exc:
        print(FAIL_LINE.format(why=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
        return None


def _run(source: CudaSource, grid, block, args, repeats, warmup, exact) -> GpuRun:
    import cupy as cp

    from .measure.gpu import compiled, device_name
    from .measure.timing import Timing

    k = compiled(str(source), source.kernel_name, EXACT_OPTIONS if exact else ())
    shared = source.dynamic_shared_bytes(block, *args)
    if shared > 48 * 1024:
        k.max_dynamic_shared_size_bytes = shared
    fresh = launch_args(source, args)
    result = [a.copy() if isinstance(a, cp.ndarray) else a for a in fresh]
    k(grid, block, tuple(result), shared_mem=shared)
    scratch = [a.copy() if isinstance(a, cp.ndarray) else a for a in fresh]
    pairs = [(s, f) for s, f in zip(scratch, fresh, strict=True) if isinstance(s, cp.ndarray)]
    start, end = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for i in range(warmup + repeats):
        for s, f in pairs:
            s[...] = f     # the same inputs every run, outside the timed window
        start.record()
        k(grid, block, tuple(scratch), shared_mem=shared)
        end.record()
        end.synchronize()
        if i >= warmup:
            samples.append(max(cp.cuda.get_elapsed_time(start, end) * 1e-3, 1e-9))
    for p, a, d in zip(source.params, args, result, strict=True):
        if p.kind == "array" and p.written:
            a[...] = cp.asnumpy(d).reshape(a.shape)
    return GpuRun(source.kernel_name, grid, block, device_name(cp),
                  Timing(tuple(samples), warmup, "CUDA events"), shared, int(k.num_regs), exact)


#: Below this, a kernel's measured time is its launch and the timing events, not its traffic
#: (an empty kernel measured 6 µs per launch on the H200; lesson 08, "launch overhead").
LAUNCH_BOUND_SECONDS = 1e-6


def memory_model_text(measured: float, predicted: float, bandwidth_bps: float) -> str:
    """The memory model's time beside a measured one, as the GPU cells print it: the model's
    time, the bandwidth, the ratio, and - where the model predicts under a microsecond - that
    the measurement is the launch's, so the ratio says nothing about memory."""
    from ._format import bandwidth, duration, ratio

    text = (f"{duration(predicted)} at {bandwidth(bandwidth_bps)} "
            f"(measured / predicted = {ratio(measured / predicted)})")
    if predicted < LAUNCH_BOUND_SECONDS:
        text += ("; at this size the measured time is the launch's (a few µs however little "
                 "a kernel moves, lesson 08), not memory's")
    return text


@dataclass(frozen=True)
class BesideSimulator:
    """One kernel on the same inputs in the simulator and on a GPU, with the models' predictions.

    ``matches``: every array the kernel writes holds the simulator's values bit for bit
    (compiled with ``-fmad=false``); ``difference``: the first element that differs.  The
    memory model's time is the bytes the simulator's sectors move (32 B each) over the catalog
    bandwidth of the GPU it ran on (``None`` for a GPU not in the catalog).
    """

    gpu: GpuRun
    matches: bool
    difference: str | None
    sectors_per_request: float
    shared_wavefronts: int
    bank_conflicts: int
    simt_efficiency: float
    moved_bytes: float
    predicted_seconds: float | None
    bandwidth: float | None

    def _rows(self):
        from ._format import percent

        spr = self.sectors_per_request
        rows = [("output", "the simulator's, bit for bit" if self.matches
                 else f"DIFFERS from the simulator's: {self.difference}"),
                ("measured kernel time", f"{self.gpu.us:,.2f} µs (median of "
                                         f"{self.gpu.timing.repeats}, CUDA events)"),
                ("simulator: global sectors / request", "–" if spr != spr else f"{spr:.2f}"),
                ("simulator: shared wavefronts (bank conflicts)",
                 f"{self.shared_wavefronts:,} ({self.bank_conflicts:,})"),
                ("simulator: SIMT efficiency", percent(self.simt_efficiency)),
                ("memory model: bytes moved", f"{self.moved_bytes:,.0f} B (32 B per sector)")]
        if self.predicted_seconds is None:
            rows.append(("memory model: time", f"{self.gpu.device} is not in the course's GPU "
                                               "catalog, so no bandwidth to divide by"))
        else:
            rows.append(("memory model: time at the catalog bandwidth",
                         memory_model_text(self.gpu.timing.median, self.predicted_seconds,
                                           self.bandwidth)))
        return rows

    def __repr__(self) -> str:
        head = (f"{self.gpu.kernel}<<<{_dims_text(self.gpu.grid)}, {_dims_text(self.gpu.block)}"
                f">>> on {self.gpu.device}:")
        return "\n".join([head, *(f"  {k}: {v}" for k, v in self._rows())])

    def _repr_html_(self) -> str:
        from ._format import html_table

        return html_table(f"{html.escape(self.gpu.kernel)} on {html.escape(self.gpu.device)}: "
                          "GPU beside the simulator", ("quantity", "value"), self._rows())


def beside_simulator(kernel, grid, block, *args, repeats: int = 20, warmup: int = 2):
    """Run ``kernel`` in the simulator and on the GPU on the same inputs, compare what both
    wrote, and set the GPU's measured time beside the simulator's counts and the memory
    model's time (:class:`BesideSimulator`).

    The GPU's results are copied back into ``args`` (as :func:`run_on_gpu` does); the simulator
    runs on copies, the same launch, every thread: keep the problem lesson-sized (thousands of
    threads, not millions; ``puzzles.run_on_gpu`` times a large size against a small simulated
    one).  Without a GPU it prints the course's one skip line and returns ``None`` (the
    translation still runs first).
    """
    from . import roofline, simt
    from .measure.gpu import catalog_gpu, skip_line

    source = to_cuda(kernel, *args)
    line = skip_line()
    if line is not None:
        print(line)
        return None
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    sim = simt.run(kernel, grid, block, *copies)
    run = run_on_gpu(kernel, grid, block, *args, repeats=repeats, warmup=warmup)
    if run is None:      # a CUDA error, reported in one line
        return None
    difference = None
    for p, got, want in zip(source.params, args, copies, strict=True):
        if p.kind == "array" and p.written and not np.array_equal(got, want, equal_nan=True):
            i = int(np.flatnonzero(~((got == want) | ((got != got) & (want != want)))
                                   .ravel())[0])
            difference = (f"{p.name}[{i}] is {got.ravel()[i].item()!r} on the GPU, "
                          f"{want.ravel()[i].item()!r} in the simulator")
            break
    t = sim.totals
    moved = float(t.global_sectors * 32)
    g = catalog_gpu(run.device)
    predicted = (roofline.kernel_time(0.0, moved, g.peak_flops("fp32"), g.bandwidth)
                 if g is not None and moved > 0 else None)
    return BesideSimulator(run, difference is None, difference, t.sectors_per_request,
                           int(t.shared_wavefronts), int(t.bank_conflicts), t.simt_efficiency,
                           moved, predicted, g.bandwidth if g is not None else None)


# -- compiling without a GPU ----------------------------------------------------------------------

_NVRTC = None


def nvrtc_library():
    """The NVRTC shared library (ctypes), from the ``nvidia-cuda-nvrtc-cu12`` wheel or the
    system's CUDA; ``None`` when there is none.  NVRTC compiles CUDA C to PTX without a GPU."""
    global _NVRTC
    if _NVRTC is not None:
        return _NVRTC or None
    import ctypes
    import glob
    import os
    import sys

    candidates = []
    for base in sys.path:
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib",
                                                    "libnvrtc.so*")))
    candidates += ["libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13"]
    for path in candidates:
        if "builtins" in path or ".alt." in path:
            continue
        try:
            _NVRTC = ctypes.CDLL(path)
            return _NVRTC
        except OSError:
            continue
    _NVRTC = False
    return None


@dataclass(frozen=True)
class Compiled:
    """NVRTC's answer: ``ok``, the PTX text and the compiler's log."""

    ok: bool
    ptx: str
    log: str
    arch: str


def compile_ptx(source: str, arch: str = "sm_90", options=EXACT_OPTIONS) -> Compiled:
    """Compile CUDA C ``source`` to PTX for ``arch`` with NVRTC (no GPU needed)."""
    import ctypes

    lib = nvrtc_library()
    if lib is None:
        raise RuntimeError("NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12)")
    prog = ctypes.c_void_p()
    src = str(source).encode()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernel.cu", 0, None, None)
    if rc != 0:
        raise RuntimeError(f"nvrtcCreateProgram failed with code {rc}")
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    try:
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        ptx = ""
        if rc == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            pbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, pbuf)
            ptx = pbuf.value.decode(errors="replace")
        return Compiled(rc == 0, ptx, log, arch)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))

