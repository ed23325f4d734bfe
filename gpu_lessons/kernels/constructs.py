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
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "bool_",
})
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
#: "expr" (anywhere in an expression).
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
}
#: Calls that must not sit in an operand only some lanes evaluate (``and``/``or``'s right side,
#: an arm of ``a if c else b``) or in ``t.where``'s values, which Python evaluates for every lane.
SIDE_EFFECT_CALLS = frozenset({"atomic_add", "atomic_max", "atomic_cas",
                               "shfl_down", "shfl_up", "shfl_xor", "shfl_idx"})

#: CUDA's single-precision math function for each function name (the double one drops the f).
MATH_C = {"sqrt": "sqrtf", "exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f",
          "log10": "log10f", "sin": "sinf", "cos": "cosf", "tan": "tanf", "tanh": "tanhf",
          "fabs": "fabsf", "floor": "floorf", "ceil": "ceilf", "trunc": "truncf"}
