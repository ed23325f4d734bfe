"""From simulator to silicon: a simulator kernel as CUDA C, compiled and run on a real GPU.

:func:`to_cuda` translates a kernel written for :func:`gpu_lessons.kernels.run` (in the kernel
language of :mod:`gpu_lessons.kernels.lang`) into CUDA C, with the Python line beside each CUDA
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
  ``long long``, and so does everything computed from an ``np.int64`` value
  (``i = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x`` is a ``long long``, the
  form for indices past 2**31).  A 32-bit product or sum that overflows at run time is undefined
  behaviour in C++ (C++ [expr.pre]: not "wraps"), and the simulator, in 64 bits, cannot show it;
  the header says so.  ``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` are unsigned in CUDA
  and signed (Python ints) in the simulator: they stay as written while every value computed from
  them is known to be >= 0, and are cast to ``int`` before any operation whose result or other
  operand can be negative (``(int)threadIdx.x - 5``, ``(int)threadIdx.x > n``), where C's usual
  arithmetic conversions would compute in unsigned.
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
* **Control flow.**  Plain ``if``/``elif``/``else`` and ``while``, on per-lane or warp-wide
  conditions, are C's ``if``/``else if``/``else`` and ``while``; ``break``, ``continue`` and
  ``return`` inside them are C's (per thread).  ``for v in (16, 8, 4, 2, 1):`` is a loop over a
  constant array under ``#pragma unroll``.  ``and``/``or``/``not`` are ``&&``/``||``/``!``
  (short-circuit, on conditions); ``a < b < c`` is ``a < (cmp = b) && cmp < c`` (``b`` once);
  ``a if c else b`` is ``c ? a : b`` (lazy; per lane typed as ``np.where``); ``a, b = e1, e2``
  assigns through ``a_new`` where a later value reads an earlier name.  The older forms:
  ``with t.if_(c):``/``with t.else_():`` → ``if (c) { } else { }``;
  ``for _ in t.while_(lambda: c):`` → ``while (c) { }``; ``t.return_if(c)`` →
  ``if (c) return;``; ``t.where(c, a, b)`` → ``c ? a : b``; ``for i in range(a, b, s)`` →
  ``for (int i = a; i < b; i += s)``, under ``#pragma unroll`` when its bounds are known at
  compile time and it runs at most 64 times (:mod:`~gpu_lessons.kernels.registers`).  A
  per-thread array ``acc = t.local((4, 4), np.float32)`` is ``float acc[4][4] = {};``, indexed
  ``acc[i][j]`` with compile-time indices only, so it stays in registers.  Logical ``&``,
  ``|``, ``~`` on conditions become ``&&``, ``||``, ``!``.  ``min``/``max``/``abs`` of lanes
  are ``np.minimum``/``np.maximum``/``np.absolute``; ``math.f`` is ``np.f`` (``sqrtf``,
  ``floorf``, ... for float32).
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
  for the element types CUDA has them for (:data:`gpu_lessons.kernels.simt.ATOMIC_DTYPES`: no float
  ``atomicMax``, no 64-bit signed ``atomicAdd``; the simulator refuses the others too).
  ``t.shfl_down/up/xor/idx`` → ``__shfl_down_sync/__shfl_up_sync/__shfl_xor_sync/
  __shfl_sync(0xffffffff, v, x)`` (Guide, "Warp Shuffle Functions"): every lane named in the
  mask (all 32) must execute the call.  The offset, lane mask or source lane is passed through
  unchanged: the hardware uses its low 5 bits (PTX ISA, ``shfl.sync``: ``bval[4:0]``).
* **FP64.**  Every line that computes in double is named in the header (``// computes in FP64
  (double) on lines ...``), with FP64's rate (1/2 of FP32 on an H200, 1/64 on consumer GPUs) and
  the float32 forms.
* **Rounding.**  Compile with ``-fmad=false`` (:data:`EXACT_OPTIONS`, what :func:`run_on_gpu`
  does by default) and ``+ - * /`` and ``sqrt`` give bit-identical results to NumPy: CUDA's
  defaults are IEEE-rounded division and square root, and without ``-fmad=false`` the compiler
  fuses ``a * b + c`` into one rounding (Guide, "Floating-Point Standard"; CUDA Best Practices
  Guide, "Math Libraries").  ``exp``, ``log``, ``sin``, ``pow``... are within a few units in the
  last place of NumPy's, not bit-identical (Guide, "Mathematical Functions", error bounds).
  Sums in a different order (atomics, a different reduction tree) round differently.
* **What is refused** (:class:`~gpu_lessons.kernels.lang.KernelLanguageError` naming the
  construct and line, never a silently different kernel): everything outside the kernel
  language, and what the simulator would also reject when it runs: a per-lane ``range()`` bound,
  a per-lane number as an operand of ``and``/``or``/``not``, a warp-wide conditional expression
  whose arms differ in type, a plain Python value assigned inside ``t.if_`` (Python runs that
  body for every warp, whatever the lanes), a variable that changes type, arrays of float16 or
  complex numbers.  ``print(...)`` runs in the simulator only: the CUDA
  source shows it as a comment.
"""

from __future__ import annotations

import ast

import numpy as np

from .cuda_mma import HALF_TYPES
from .cuda_stmt import _Translator
from .cuda_structure import _strip_comment
from .cuda_types import (
    _COMMENT_COLUMN_MAX,
    _RESERVED,
    HALF_DTYPES,
    CudaSource,
    Param,
)
from .lang import KernelLanguageError, validate

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


def _python_line_numbers(k, lines) -> list[int | None]:
    """The learner's line number of each translated line, from the Python text its comment
    repeats: the first line with that text at or after the last one found (statements come out
    in order), else the nearest before it (a declaration placed ahead of a loop)."""
    texts = [_strip_comment(line).strip() for line in k.lines]
    out, last = [], 0
    for _, _, comment in lines:
        text = comment.removesuffix(" …").strip()
        hits = [i for i, t in enumerate(texts) if t and t == text] if text else []
        if not hits:
            out.append(None)
            continue
        i = next((h for h in hits if h >= last), hits[-1])
        last = max(last, i)
        out.append(i + 1 + k.line_offset)
    return out


def to_cuda(kernel, *args) -> CudaSource:
    """CUDA C source of simulator kernel ``kernel`` for arguments like ``args``.

    ``kernel``: a function ``def k(t, ...)`` in the kernel language
    (:mod:`gpu_lessons.kernels.lang`); ``args``: the arguments you would give
    :func:`gpu_lessons.kernels.run` after the launch shape (arrays give element types and shapes,
    numbers their types; the values are not used).  Returns a :class:`CudaSource` (a ``str``)
    whose lines end with the Python line each came from.  Raises
    :class:`~gpu_lessons.kernels.lang.KernelLanguageError` for what cannot be translated.
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
    bounds = next((s.value for s in k.tree.body if isinstance(s, ast.Expr)
                   and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
                   and isinstance(s.value.func.value, ast.Name) and s.value.func.value.id == k.ctx
                   and s.value.func.attr == "launch_bounds"), None)
    if bounds is not None:   # t.launch_bounds(256, 2): numbers checked by kernels.registers
        decl = f"__launch_bounds__({', '.join(tr.expr(a).text for a in bounds.args)}) {kname}"
    else:
        decl = kname
    body_lines = [(0, f'extern "C" __global__ void {decl}({", ".join(sig)})', ""), (0, "{", "")]
    body_lines += tr.lines
    body_lines.append((0, "}", ""))
    body = _format(body_lines)
    header = [f"// {kname}: translated from the simulator kernel by gpu_lessons.kernels.to_cuda;",
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
    header.append("// Integers (indices, Python ints) are 32-bit int; Python floats are double. A 32-bit")
    header.append("// product or sum that overflows is undefined behaviour in C++ (the simulator, in 64")
    header.append("// bits, does not overflow): for indices past 2**31 write")
    header.append("// i = np.int64(t.block_idx.x) * t.block_dim.x + t.thread_idx.x (a long long).")
    header.append("// threadIdx/blockIdx/blockDim/gridDim are unsigned: (int) where a value can be "
                  "negative.")
    if tr.fp64:
        lines = sorted(tr.fp64)
        where = ", ".join(str(n) for n in lines)
        first = tr.fp64[lines[0]]
        header.append(f"// computes in FP64 (double) on line{'s' if len(lines) > 1 else ''} "
                      f"{where}: {first}{' ...' if len(lines) > 1 else ''};")
        header.append("// FP64 runs at 1/2 of FP32's rate on an H200 and 1/64 on consumer GPUs; "
                      "write")
        header.append("// t.local(0.0, np.float32) or acc = 0.0 then acc += x[i] for float "
                      "arithmetic.")
    header.append("// Compile with -fmad=false for results bit-identical to the simulator's "
                  "(NumPy rounds")
    header.append("// a * b + c twice; a fused multiply-add rounds once).")
    helpers = [h for h in tr.helpers.values()]
    if any(a.dtype in HALF_DTYPES for a in tr.arrays.values()):
        helpers.insert(0, HALF_TYPES)   # the 16-bit types, before anything that uses them
    text = "\n".join(header) + "\n\n" + ("\n".join(helpers) + "\n" if helpers else "") + body + "\n"
    body_py = _python_line_numbers(k, body_lines)
    body_py[0] = k.tree.lineno + k.line_offset   # the signature: the def line
    before = text[:len(text) - len(body) - 1].count("\n")
    return CudaSource(text, kernel_name=kname, params=params, body=body, dynamic=tr.dynamic,
                      ctx=k.ctx, python_lines=[None] * before + body_py)
