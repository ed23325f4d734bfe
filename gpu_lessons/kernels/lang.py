"""The kernel language: the part of Python a simulator kernel may use.

A kernel for :func:`gpu_lessons.kernels.run` is **one self-contained function** ``def k(t, ...)``:
everything it uses is its arguments, the warp context ``t``, ``np``, ``math``, numbers and its
own local variables.  :func:`validate` decides this by walking the function's syntax tree
(``ast``), before the kernel runs, and refuses anything else with a :class:`KernelLanguageError`
that names the construct and the learner's line, says why CUDA has no counterpart and shows the
form that works.  The language is exactly what :func:`gpu_lessons.kernels.to_cuda` translates to
CUDA C and what the simulator executes: one definition, used by both, so a kernel that passes
here has a CUDA twin.  The names it accepts and each construct's meaning and CUDA form are in
:mod:`gpu_lessons.kernels.constructs`; ``docs/kernel_language.md`` is the learner's guide.

What a kernel may use
---------------------
* **Statements**: ``name = expr``, ``a, b = e1, e2`` (names only, a tuple of the same length on
  the right), ``a[i] = expr``/``a[y, x] = expr`` (stores), ``y[...] = expr`` (a ``t.local``),
  augmented assignment (``s *= 2``, ``sdata[tid] += v``), ``if``/``elif``/``else`` and ``while``
  (on per-lane or warp-wide conditions: each lane follows its own branch, as a CUDA thread does),
  ``for v in range(...)``, ``for v in (16, 8, 4, 2, 1):`` (a tuple or list of number constants),
  ``break``/``continue``/``return`` inside those (per lane: a per-lane ``return`` ends those lanes),
  the old forms ``with t.if_(cond):``/``with t.else_():``/``for _ in t.while_(lambda: cond):``,
  ``pass``, calls of the ``t.`` operations that are statements, ``print``.
* **Expressions**: numbers, names, ``+ - * / // % ** << >> & | ^``, ``- + ~ not``, comparisons
  (``< <= > >= == !=``, chained), ``and``/``or`` (short-circuit per lane), ``a if c else b``
  (lazy per lane), indexing ``a[i]``/``a[i, j]`` (no slices), ``a.shape[k]``, calls of the
  functions below.
* **The warp context** ``t``: :data:`~gpu_lessons.kernels.constructs.T_DIM3` (``.x .y .z``),
  :data:`~gpu_lessons.kernels.constructs.T_VALUES`, the operations of
  :data:`~gpu_lessons.kernels.constructs.T_CALLS` (see :mod:`gpu_lessons.kernels.simt`).
* **NumPy and math**: :data:`NP_FUNCTIONS`, :data:`NP_DTYPES` (a dtype, or a conversion of one
  number), :data:`NP_CONSTANTS`; ``math.`` :data:`MATH_FUNCTIONS` (each the NumPy function of the
  same name) and ``math.pi``/``e``/``inf``/``nan``.
* **Builtins**: :data:`BUILTINS`.
* **Constants from outside the function**: a name that is not a parameter, a local, ``t``,
  ``np``, ``math`` or a builtin must be a plain number in the function's globals or closure
  (``TILE = 32``); its value is read once, here, and written into the CUDA source.

What is refused, and why
------------------------
* ``import``, ``global``, ``nonlocal``, ``exec``/``eval``/``getattr``/``open`` and any other
  name: a GPU has no modules, files or Python objects, and refusing them is what lets the
  course's grader run a learner's kernel without it reaching the simulator's internals.
* Attributes other than the listed ``t.``/``np.``/``math.`` names, ``.x/.y/.z`` and ``.shape``;
  names starting with ``_``: those are the simulator's insides, not device memory.
* Lambdas (except ``t.while_(lambda: cond)``), nested ``def``/``class``, comprehensions,
  ``try``/``raise``/``assert``/``del``, slices, ``*args``, decorators, annotations, defaults,
  ``a = b = 0``, tuple targets other than names, ``:=``, ``else`` on loops.
* ``break``/``continue``/``return`` inside the old forms ``t.if_``/``t.else_``/``t.while_``:
  Python runs those bodies for the whole warp, so it would leave the loop (or the kernel) for
  every lane; plain ``if``/``while`` mean what CUDA means.
* ``t.shared`` anywhere but ``name = t.shared(...)`` at the kernel's top level; atomics anywhere
  but a statement or the whole right side of ``name = ...``; atomics and shuffles inside
  ``t.where`` (a function: Python evaluates every argument for every lane) or an operand only
  some lanes evaluate (``and``/``or``'s right side, ``a if c else b``'s arms).

Type-dependent rules (a variable that changes type, a per-lane operand of ``and`` that is not a
condition) need the arguments' types, so :func:`~gpu_lessons.kernels.to_cuda` checks them; the
simulator refuses the same kernels when it runs them.

For the grader: :func:`validate` takes source text and a dict of constants, and
:func:`compile_kernel` turns validated source into a function in a namespace holding only
``np``, ``math``, the constants and the builtins above.

Sources: Python's ``ast`` module documentation (node types); CUDA C++ Programming Guide,
"C++ Language Support" (what device code may contain).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
import math
import textwrap
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .. import _validate
from . import outside_names, registers
from .constructs import (
    BUILTIN_ARITY,
    BUILTINS,
    MATH_CONSTANTS,
    MATH_FUNCTIONS,
    ML_DTYPES,
    NP_ARITY,
    NP_CONSTANTS,
    NP_DTYPES,
    NP_FUNCTIONS,
    SIDE_EFFECT_CALLS,
    T_CALLS,
    T_DIM3,
    T_VALUES,
)
from .errors import USE, KernelLanguageError

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
                   ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
_ALLOWED_CMPOPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)

_USE = USE


@dataclass(frozen=True)
class Kernel:
    """A validated kernel: its syntax tree and what :func:`gpu_lessons.kernels.to_cuda` needs.

    ``params``: parameter names after ``ctx`` (the warp context's name, usually ``t``);
    ``constants``: outside names it uses with their values; ``line_offset``: add it to a node's
    ``lineno`` to get the learner's line; ``lines``: the source lines, by tree line number - 1.
    """

    name: str
    ctx: str
    params: tuple[str, ...]
    tree: ast.FunctionDef = field(repr=False)
    lines: tuple[str, ...] = field(repr=False)
    line_offset: int
    constants: dict = field(default_factory=dict)
    locals: frozenset = frozenset()
    #: per-thread arrays (name -> dimensions) and the unrolled loops' (line, column), from
    #: :func:`gpu_lessons.kernels.registers.check`
    register_arrays: dict = field(default_factory=dict)
    unrolled: frozenset = frozenset()

    def lineno(self, node: ast.AST) -> int:
        return node.lineno + self.line_offset

    def source_line(self, node: ast.AST) -> str:
        return self.lines[node.lineno - 1]


# -- reading the source ---------------------------------------------------------------------------

def _function_source(kernel) -> tuple[str, int]:
    code = getattr(kernel, "__code__", None)
    if code is None:
        raise TypeError(f"kernel must be a Python function def k(t, ...) or its source text, "
                        f"got {type(kernel).__name__}")
    if kernel.__name__ == "<lambda>":
        raise KernelLanguageError(
            "a kernel must be a function defined with def, not a lambda", construct="lambda")
    try:
        source = inspect.getsource(kernel)
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of kernel {kernel.__name__!r} ({exc}); define "
                         f"it in a .py file or a notebook cell, or pass its source text") from None
    return textwrap.dedent(source), code.co_firstlineno - 1


def _parse(source: str, line_offset: int) -> ast.FunctionDef:
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        line = (exc.lineno or 0) + line_offset
        raise KernelLanguageError(f"line {line}: the kernel is not valid Python ({exc.msg})",
                                  construct="syntax", lineno=line) from None
    body = [s for s in module.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                    and isinstance(s.value.value, str))]
    defs = [s for s in body if isinstance(s, ast.FunctionDef)]
    if len(body) != 1 or len(defs) != 1:
        first = next((s for s in body if not isinstance(s, ast.FunctionDef)), None)
        if first is not None:
            return _refuse_top(first, line_offset)
        raise KernelLanguageError(
            f"the source holds {len(defs)} function definitions; a kernel is exactly one "
            f"function def k(t, ...)", construct="module", lineno=None)
    return defs[0]


def _refuse_top(node, line_offset):
    line = node.lineno + line_offset
    kind = "import" if isinstance(node, (ast.Import, ast.ImportFrom)) else "module statement"
    raise KernelLanguageError(
        f"line {line}: `{_snippet_of(node)}` is not part of the kernel language; the source "
        f"must be one function def k(t, ...) and nothing else (constants are passed separately)",
        construct=kind, lineno=line)


def _snippet_of(node) -> str:
    try:
        text = ast.unparse(node).splitlines()[0]
    except Exception:  # pragma: no cover - unparse handles every node ast.parse makes
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


# -- the walk -------------------------------------------------------------------------------------

class _Checker:
    def __init__(self, fn: ast.FunctionDef, line_offset: int):
        self.fn = fn
        self.offset = line_offset
        args = fn.args
        if (args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults
                or args.kw_defaults):
            self.refuse(fn, "parameters",
                        "a kernel's parameters are plain names def k(t, a, b, n): no defaults, "
                        "*args, **kwargs or keyword-only parameters")
        if fn.decorator_list:
            self.refuse(fn.decorator_list[0], "decorator", "kernels cannot be decorated")
        if getattr(fn, "type_params", None):   # def k[T](t, ...), Python 3.12 and later
            self.refuse(fn, "type parameters", "a kernel is a plain def k(t, ...): no [type "
                                               "parameters] (element types come from the "
                                               "arrays passed)")
        if fn.returns is not None or any(a.annotation is not None for a in args.args):
            self.refuse(fn, "annotation", "kernels cannot carry type annotations")
        if not args.args:
            self.refuse(fn, "parameters", "a kernel's first parameter is the warp context t")
        names = [a.arg for a in args.args]
        for a in args.args:
            self.check_identifier(a, a.arg)
        self.ctx = names[0]
        self.params = tuple(names[1:])
        self.locals = self._collect_locals(fn)
        self.local_vars = self._collect_t_locals(fn)
        self.free: dict[str, ast.AST] = {}
        self.uses_np = False
        self.uses_math = False

    # -- errors --
    def refuse(self, node, construct: str, why: str):
        line = getattr(node, "lineno", None)
        line = None if line is None else line + self.offset
        where = f"line {line}: " if line is not None else ""
        raise KernelLanguageError(f"{where}`{_snippet_of(node)}` is not part of the kernel "
                                  f"language: {why}", construct=construct, lineno=line)

    def check_identifier(self, node, name: str):
        if not name.isascii():
            self.refuse(node, "name", "names must use ASCII letters, digits and _ "
                                      "(CUDA C identifiers)")
        if name.startswith("__"):
            self.refuse(node, "private name", "names starting with __ belong to Python's "
                                              "machinery, not to a kernel")

    # -- scopes --
    def _collect_locals(self, fn) -> frozenset:
        found = set()
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for tgt in targets:
                    for sub in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt]):
                        if isinstance(sub, ast.Name):
                            found.add(sub.id)
            elif (isinstance(node, ast.For) and isinstance(node.target, ast.Name)) or \
                    isinstance(node, ast.NamedExpr):
                found.add(node.target.id)
        return frozenset(found)

    def _collect_t_locals(self, fn) -> frozenset:
        found = set()
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and self.is_t_call(node.value)
                    and node.value.func.attr == "local"):
                found.add(node.targets[0].id)
        return frozenset(found)

    def is_t_call(self, node, name: str | None = None) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == self.ctx
                and (name is None or node.func.attr == name))

    # -- statements --
    def body(self, stmts, where):
        previous = None
        for s in stmts:
            self.stmt(s, where, previous)
            previous = s

    def stmt(self, s, where, previous):
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            self.refuse(s, "import", "kernels cannot import modules; " + _USE)
        if isinstance(s, ast.Global):
            self.refuse(s, "global", "kernels cannot change names outside themselves; " + _USE)
        if isinstance(s, ast.Nonlocal):
            self.refuse(s, "nonlocal", "kernels cannot change names outside themselves; " + _USE)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.refuse(s, "nested function", "a kernel is one self-contained function; write "
                                              "the helper's code inline")
        if isinstance(s, ast.ClassDef):
            self.refuse(s, "class", "a kernel cannot define classes")
        if isinstance(s, (ast.Try, ast.TryStar, ast.Raise, ast.Assert)):
            self.refuse(s, type(s).__name__.lower(), "device code has no exceptions")
        if isinstance(s, ast.Delete):
            self.refuse(s, "del", "device memory and variables cannot be deleted")
        if isinstance(s, (ast.AsyncFor, ast.AsyncWith, ast.Match)):
            self.refuse(s, type(s).__name__.lower(), "not part of the kernel language")
        if isinstance(s, ast.AnnAssign):
            self.refuse(s, "annotation", "kernels cannot carry type annotations")
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Expr):
            return self.expr_stmt(s, where)
        if isinstance(s, ast.Assign):
            return self.assign(s, where)
        if isinstance(s, ast.AugAssign):
            return self.augassign(s, where)
        if isinstance(s, ast.If):
            self.expr(s.test)
            self.body(s.body, {**where, "top": False})
            self.body(s.orelse, {**where, "top": False})
            return
        if isinstance(s, ast.While):
            if s.orelse:
                self.refuse(s, "loop else", "an else: on a loop has no CUDA counterpart")
            self.expr(s.test)
            self.body(s.body, {**where, "loop": "plain", "top": False})
            return
        if isinstance(s, ast.For):
            return self.for_(s, where)
        if isinstance(s, ast.With):
            return self.with_(s, where, previous)
        if isinstance(s, (ast.Break, ast.Continue)):
            word = "break" if isinstance(s, ast.Break) else "continue"
            if where.get("loop") is None:
                self.refuse(s, word, f"{word} must be inside a for or while loop")
            if where.get("loop") == "lanes":
                self.refuse(s, word, f"Python runs the body of t.if_, t.else_ and t.while_ for "
                                     f"the whole warp, so it would {word} the loop for every "
                                     f"lane, CUDA only for the lanes in the branch; use plain "
                                     f"`if`/`while` (if i < n: ... {word}), which mean what CUDA "
                                     f"means")
            return
        if isinstance(s, ast.Return):
            if s.value is not None:
                self.refuse(s, "return value", "a kernel returns nothing; store results in an "
                                               "output array")
            if where.get("lanes"):
                self.refuse(s, "return", "Python runs the body of t.if_, t.else_ and t.while_ "
                                         "for the whole warp, so it would end the kernel for "
                                         "every lane, CUDA only for the lanes in the branch; "
                                         "use plain `if`/`while` (if i >= n: return) or "
                                         "t.return_if(cond)")
            return
        self.refuse(s, type(s).__name__.lower(), "not part of the kernel language; " + _USE)

    def expr_stmt(self, s, where):
        v = s.value
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return  # a docstring or a string used as a comment
        if not isinstance(v, ast.Call):
            self.refuse(s, "expression statement",
                        "a statement that is only an expression does nothing; assign or "
                        "store its value")
        if self.is_t_call(v):
            op = v.func.attr
            kind = T_CALLS.get(op, (0, 0, set(), None))[3]
            if kind in ("stmt", "assign") or op not in T_CALLS:
                return self.t_call(v, top=True)  # an unknown t.op is refused there
        if isinstance(v.func, ast.Name) and v.func.id == "print":
            return self.call(v, print_ok=True)
        if not self.is_t_call(v):
            self.call(v)  # refuses a call outside the language with its own reason
        self.refuse(s, "expression statement",
                    "only t.sync(), t.syncwarp(), t.return_if(...), atomics and print(...) "
                    "can stand alone as statements")

    def assign(self, s, where):
        if len(s.targets) != 1:
            self.refuse(s, "multiple targets", "assign one name at a time (a = 0; b = 0)")
        tgt = s.targets[0]
        if isinstance(tgt, ast.Name):
            self.bind(tgt, tgt.id)
            v = s.value
            if self.is_t_call(v) and v.func.attr in T_CALLS:
                kind = T_CALLS[v.func.attr][3]
                if kind == "shared" and not where.get("top"):
                    self.refuse(s, "t.shared placement",
                                "declare shared arrays at the top level of the kernel (not in a "
                                "loop or branch), as __shared__ declarations are per block")
                if kind in ("shared", "local", "assign"):
                    return self.t_call(v, top=True)
            return self.expr(v)
        if isinstance(tgt, ast.Subscript):
            self.store_target(tgt)
            return self.expr(s.value)
        if isinstance(tgt, (ast.Tuple, ast.List)):
            return self.tuple_assign(s, tgt)
        self.refuse(s, "assignment target", "only names, array elements a[i] and t.local "
                                            "variables y[...] can be assigned")

    def tuple_assign(self, s, tgt):
        """``a, b = e1, e2``: every right-hand value first, in order, then the names."""
        if self.is_t_call(s.value, "vload"):   # x0, x1, x2, x3 = t.vload(a, i, 4)
            return self.vector_assign(s, tgt)
        if isinstance(tgt, ast.List) or not all(isinstance(e, ast.Name) for e in tgt.elts):
            self.refuse(s, "tuple assignment", "a tuple assignment sets names: a, b = e1, e2 "
                                               "(store array elements one at a time: "
                                               "a[i] = e1 on its own line)")
        v = s.value
        if not isinstance(v, ast.Tuple) or len(v.elts) != len(tgt.elts) or any(
                isinstance(e, ast.Starred) for e in v.elts):
            self.refuse(s, "tuple assignment", f"the right side must be a tuple of "
                                               f"{len(tgt.elts)} values written out, "
                                               f"a, b = e1, e2 (a kernel has no tuple values "
                                               f"to unpack)")
        names = [e.id for e in tgt.elts]
        if len(set(names)) != len(names):
            self.refuse(s, "tuple assignment", "each name appears once on the left: "
                                               "a, b = e1, e2")
        for e in tgt.elts:
            self.bind(e, e.id)
        for e in v.elts:
            if self.is_t_call(e) and T_CALLS.get(e.func.attr, (0, 0, set(), "expr"))[3] != "expr":
                self.refuse(e, "tuple assignment", f"t.{e.func.attr} needs a line of its own: "
                                                   f"name = t.{e.func.attr}(...)")
            self.expr(e)

    def vector_assign(self, s, tgt):
        width = s.value.args[2] if len(s.value.args) == 3 else None
        if not (isinstance(width, ast.Constant) and width.value in (2, 4)
                and type(width.value) is int and len(tgt.elts) == width.value):
            self.refuse(s, "t.vload", "write x0, x1, x2, x3 = t.vload(a, i, 4) (or two names "
                                      "and width 2): the width is the number 2 or 4, one name "
                                      "or element per value")
        for e in tgt.elts:
            if isinstance(e, ast.Name):
                self.bind(e, e.id)
            elif isinstance(e, ast.Subscript):
                self.store_target(e)
            else:
                self.refuse(e, "t.vload", "each target is a name or an element a[i]")
        self.t_call(s.value, top=True)

    def augassign(self, s, where):
        if not isinstance(s.op, _ALLOWED_BINOPS):
            self.refuse(s, "operator", "the matrix product @ is not part of the kernel "
                                       "language")
        if isinstance(s.target, ast.Name):
            self.bind(s.target, s.target.id)
        elif isinstance(s.target, ast.Subscript):
            self.store_target(s.target)
        else:
            self.refuse(s, "assignment target", "only names and array elements can be updated")
        self.expr(s.value)

    def bind(self, node, name):
        self.check_identifier(node, name)
        if name == self.ctx or name in ("np", "math") or name in BUILTINS:
            what = ("the warp context" if name == self.ctx else "NumPy" if name == "np"
                    else "the math module" if name == "math" else "a builtin")
            self.refuse(node, "reserved name", f"`{name}` names {what}; choose another "
                                               f"variable name")

    def store_target(self, tgt: ast.Subscript):
        if isinstance(tgt.slice, ast.Constant) and tgt.slice.value is Ellipsis:
            if not (isinstance(tgt.value, ast.Name) and tgt.value.id in self.local_vars):
                self.refuse(tgt, "y[...] assignment",
                            "y[...] = v updates a variable declared with y = t.local(...)")
            return
        if not isinstance(tgt.value, ast.Name) or tgt.value.id in (self.ctx, "np"):
            self.refuse(tgt, "store target", "store into an array argument or shared array by "
                                             "name: a[i] = v")
        self.name(tgt.value)
        self.index(tgt)

    def for_(self, s, where):
        if s.orelse:
            self.refuse(s, "loop else", "an else: on a loop has no CUDA counterpart")
        if not isinstance(s.target, ast.Name):
            self.refuse(s, "for target", "loop over one name: for i in range(n) "
                                         "(for i, v in ... has no CUDA counterpart)")
        self.bind(s.target, s.target.id)
        it = s.iter
        if self.is_t_call(it, "while_"):
            self.t_call(it, top=True)
            return self.body(s.body, {**where, "lanes": True, "loop": "lanes", "top": False})
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            self.call(it)
            return self.body(s.body, {**where, "top": False,
                                      "loop": "plain" if not where.get("lanes")
                                      else "plain-in-lanes"})
        if isinstance(it, (ast.Tuple, ast.List)):
            if not it.elts:
                self.refuse(s, "for loop", "loop over at least one value: "
                                           "for d in (16, 8, 4, 2, 1):")
            for e in it.elts:
                self.loop_value(e)
            return self.body(s.body, {**where, "top": False,
                                      "loop": "plain" if not where.get("lanes")
                                      else "plain-in-lanes"})
        self.refuse(s, "for loop", "loops are for v in range(...), for v in (16, 8, 4, 2, 1) "
                                   "(number constants, unrolled) or "
                                   "for _ in t.while_(lambda: cond)")

    def loop_value(self, e):
        """A value of ``for v in (...)``: a number, -number, a constant's name, np.pi..."""
        inner = e.operand if isinstance(e, ast.UnaryOp) and isinstance(
            e.op, (ast.USub, ast.UAdd)) else e
        if isinstance(inner, ast.Constant) and type(inner.value) in (int, float):
            return
        if isinstance(inner, ast.Name) and inner.id not in self.locals \
                and inner.id not in self.params and inner.id not in (self.ctx, "np", "math"):
            return self.name(inner)
        if (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                and inner.value.id in ("np", "math")):
            return self.attribute(inner)
        self.refuse(e, "loop value", "a for loop over a tuple runs over number constants "
                                     "(for d in (16, 8, 4, 2, 1):), unrolled as CUDA's "
                                     "#pragma unroll does; loop over computed values with "
                                     "range() or while")

    def with_(self, s, where, previous):
        if len(s.items) != 1 or s.items[0].optional_vars is not None:
            self.refuse(s, "with", "write with t.if_(cond): or with t.else_(): (one item, no as)")
        ctx = s.items[0].context_expr
        if not (self.is_t_call(ctx, "if_") or self.is_t_call(ctx, "else_")):
            self.refuse(s, "with", "the only with-blocks are with t.if_(cond): and "
                                   "with t.else_():")
        if ctx.func.attr == "else_" and not (
                isinstance(previous, ast.With) and self.is_t_call(previous.items[0].context_expr,
                                                                  "if_")):
            self.refuse(s, "t.else_ placement", "with t.else_(): must directly follow a "
                                                "with t.if_(...): block")
        self.t_call(ctx, top=True)
        inner = {**where, "lanes": True, "top": False}
        if where.get("loop") is not None:
            inner["loop"] = "lanes"
        self.body(s.body, inner)

    # -- expressions --
    def expr(self, e, *, arm=False):
        if isinstance(e, ast.Constant):
            if isinstance(e.value, (bool, int, float)):
                return
            if e.value is Ellipsis:
                self.refuse(e, "ellipsis", "... only appears in y[...] = v")
            self.refuse(e, "constant", "kernels compute with numbers (int, float, bool); strings "
                                       "appear only as labels, names and in print")
        if isinstance(e, ast.Name):
            return self.name(e)
        if isinstance(e, ast.BinOp):
            if not isinstance(e.op, _ALLOWED_BINOPS):
                self.refuse(e, "operator", "the matrix product @ is not part of the kernel "
                                           "language")
            self.expr(e.left, arm=arm)
            self.expr(e.right, arm=arm)
            return
        if isinstance(e, ast.UnaryOp):
            return self.expr(e.operand, arm=arm)
        if isinstance(e, ast.Compare):
            for op in e.ops:
                if not isinstance(op, _ALLOWED_CMPOPS):
                    self.refuse(e, "comparison", "compare numbers with < <= > >= == !=; "
                                                 "is/in have no CUDA counterpart")
            self.expr(e.left, arm=arm)
            for c in e.comparators:
                self.expr(c, arm=arm)
            return
        if isinstance(e, ast.BoolOp):
            self.expr(e.values[0], arm=arm)
            for v in e.values[1:]:
                self.expr(v, arm=True)
            return
        if isinstance(e, ast.IfExp):
            self.expr(e.test, arm=arm)
            self.expr(e.body, arm=True)
            self.expr(e.orelse, arm=True)
            return
        if isinstance(e, ast.Subscript):
            if isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
                self.attribute(e.value)
                if not (isinstance(e.slice, ast.Constant) and type(e.slice.value) is int):
                    self.refuse(e, "shape", "index a shape with a number: a.shape[0]")
                return
            if isinstance(e.value, ast.Attribute):
                self.attribute(e.value)  # a.data[i], t.lane[0]: refused with its own reason
            if not isinstance(e.value, ast.Name) or e.value.id in (self.ctx, "np"):
                self.refuse(e, "subscript", "index an array argument, a shared array or a "
                                            "shape by name: a[i], a[i, j], a.shape[0]")
            self.name(e.value)
            self.index(e, arm=arm)
            return
        if isinstance(e, ast.Attribute):
            return self.attribute(e)
        if isinstance(e, ast.Call):
            if self.is_t_call(e):
                kind = T_CALLS.get(e.func.attr, (0, 0, set(), "expr"))[3]
                if kind != "expr" and e.func.attr in T_CALLS:
                    where = {"with": "only as with t.{op}(...):", "for":
                             "only as for _ in t.{op}(lambda: cond):", "stmt":
                             "only as a statement of its own", "assign":
                             "only as a statement or as name = t.{op}(...)", "local":
                             "only as name = t.{op}(...)", "shared":
                             "only as name = t.{op}(...) at the kernel's top level",
                             "vector": "only as x0, x1, x2, x3 = t.{op}(a, i, 4)"}[kind]
                    self.refuse(e, f"t.{e.func.attr} placement",
                                f"t.{e.func.attr} can be used " + where.format(op=e.func.attr))
                if arm and e.func.attr in SIDE_EFFECT_CALLS:
                    self.refuse(e, "side effect in a conditional arm",
                                f"here t.{e.func.attr} would run for some lanes only (an arm "
                                f"of `a if c else b`, the right side of and/or) or, inside "
                                f"t.where, for every lane (Python evaluates a function's "
                                f"arguments first) while CUDA's c ? a : b runs one arm; a "
                                f"shuffle must run in every lane of the warp: compute it "
                                f"into a variable first, v = t.{e.func.attr}(...)")
                return self.t_call(e, arm=arm)
            return self.call(e, arm=arm)
        if isinstance(e, ast.Lambda):
            self.refuse(e, "lambda", "the only lambda is the condition of "
                                     "t.while_(lambda: cond)")
        if isinstance(e, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            self.refuse(e, "comprehension", "comprehensions build Python objects; a kernel "
                                            "loops with for i in range(n)")
        if isinstance(e, ast.Slice):
            self.refuse(e, "slice", "index one element at a time (a[i]); slices have no "
                                    "CUDA counterpart")
        if isinstance(e, ast.Starred):
            self.refuse(e, "starred", "*args has no CUDA counterpart")
        if isinstance(e, ast.NamedExpr):
            self.refuse(e, "walrus", "assign with name = value on a line of its own")
        if isinstance(e, (ast.Await, ast.Yield, ast.YieldFrom)):
            self.refuse(e, type(e).__name__.lower(), "kernels are plain functions")
        if isinstance(e, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            self.refuse(e, "container", "tuples, lists and dicts are Python objects; tuples "
                                        "appear only as indices a[i, j] and shapes")
        if isinstance(e, ast.JoinedStr):
            self.refuse(e, "f-string", "strings appear only in print(...)")
        self.refuse(e, type(e).__name__.lower(), "not part of the kernel language; " + _USE)

    def index(self, sub: ast.Subscript, arm=False):
        idx = sub.slice
        parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        for p in parts:
            if isinstance(p, ast.Slice):
                self.refuse(sub, "slice", "index one element at a time (a[i]); slices have no "
                                          "CUDA counterpart")
            if isinstance(p, ast.Constant) and p.value is Ellipsis:
                self.refuse(sub, "ellipsis", "a[...] only appears as y[...] = v on a t.local "
                                             "variable")
            self.expr(p, arm=arm)

    def name(self, e: ast.Name):
        n = e.id
        self.check_identifier(e, n)
        if n == self.ctx:
            self.refuse(e, "warp context", f"use {n}'s attributes and operations ({n}.thread_idx, "
                                           f"{n}.sync(), ...), not {n} itself")
        if n == "np":
            self.refuse(e, "np", "use NumPy's listed functions, dtypes and constants "
                                 "(np.sqrt, np.float32, np.inf), not the module itself")
        if n == "math" and n not in self.params and n not in self.locals:
            self.refuse(e, "math", "use math's listed functions and constants "
                                   "(math.sqrt, math.pi), not the module itself")
        if n in BUILTINS and n not in self.locals and n not in self.params:
            self.refuse(e, "builtin", f"{n} can only be called: {n}(...)")
        if n in self.params or n in self.locals:
            return
        self.free.setdefault(n, e)

    def attribute(self, e: ast.Attribute):
        a = e.attr
        if a.startswith("_"):
            self.refuse(e, "private attribute", "names starting with _ are the simulator's "
                                                "insides, not part of a kernel")
        base = e.value
        if isinstance(base, ast.Name) and base.id == self.ctx:
            if a in T_DIM3:
                self.refuse(e, "t API", f"t.{a} is a dim3: use t.{a}.x, t.{a}.y or t.{a}.z")
            if a in T_VALUES:
                return
            if a in T_CALLS:
                self.refuse(e, "t API", f"t.{a} must be called: t.{a}(...)")
            self.refuse(e, "t API", f"t.{a} is not part of the warp context's API (see "
                                    f"docs/kernel_language.md)")
        if isinstance(base, ast.Name) and base.id == "np":
            self.uses_np = True
            if a in NP_CONSTANTS:
                return
            if a in NP_FUNCTIONS or a in NP_DTYPES:
                self.refuse(e, "np name", f"np.{a} must be called here: np.{a}(...)")
            self.refuse(e, "np name", f"np.{a} is not one of the NumPy names a kernel may use: "
                                      f"{', '.join(sorted(NP_FUNCTIONS | NP_DTYPES))}")
        if isinstance(base, ast.Name) and base.id == "math":
            self.uses_math = True
            if a in MATH_CONSTANTS:
                return
            if a in MATH_FUNCTIONS:
                self.refuse(e, "math name", f"math.{a} must be called here: math.{a}(...)")
            self.refuse(e, "math name", f"math.{a} is not one of the math names a kernel may "
                                        f"use: {', '.join(sorted(MATH_FUNCTIONS | MATH_CONSTANTS))}")
        if (a in ("x", "y", "z") and isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name) and base.value.id == self.ctx
                and base.attr in T_DIM3):
            return
        if a == "shape" and isinstance(base, ast.Name) and base.id not in (self.ctx, "np"):
            return self.name(base)
        self.refuse(e, "attribute", "the only attributes are t.<name> from the kernel API, "
                                    "np.<name> from the listed NumPy names, .x/.y/.z of t's "
                                    "dim3 values and a.shape of arrays (a.data, a.base and the "
                                    "like are the simulator's insides)")

    def dtype_arg(self, e):
        if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "np"
                and e.attr in NP_DTYPES):
            self.uses_np = True
            return
        if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
                and e.value.id == "ml_dtypes" and e.attr in ML_DTYPES):
            return
        self.refuse(e, "dtype", f"a dtype is one of np.{', np.'.join(sorted(NP_DTYPES))} or "
                                f"ml_dtypes.bfloat16")

    def string_arg(self, e, what):
        if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
            self.refuse(e, "label", f"{what} must be a string literal")

    def t_call(self, e: ast.Call, *, top=False, arm=False):
        op = e.func.attr
        if op.startswith("_"):
            self.refuse(e, "private attribute", "names starting with _ are the simulator's "
                                                "insides, not part of a kernel")
        if op not in T_CALLS:
            if op in T_DIM3 or op in T_VALUES:
                self.refuse(e, "t API", f"t.{op} is a value, not a function")
            self.refuse(e, "t API", f"t.{op} is not part of the warp context's API (see "
                                    f"docs/kernel_language.md)")
        lo, hi, keywords, _ = T_CALLS[op]
        for a in e.args:
            if isinstance(a, ast.Starred):
                self.refuse(a, "starred", "*args has no CUDA counterpart")
        if not lo <= len(e.args) <= hi:
            self.refuse(e, "t API", f"t.{op} takes {lo if lo == hi else f'{lo} to {hi}'} "
                                    f"positional argument(s), got {len(e.args)}")
        for kw in e.keywords:
            if kw.arg is None or kw.arg not in keywords:
                self.refuse(e, "keyword argument", f"t.{op} takes "
                            + (f"only the keyword(s) {', '.join(sorted(keywords))}" if keywords
                               else "no keyword arguments"))
        kwargs = {kw.arg: kw.value for kw in e.keywords}
        args = list(e.args)
        if op in ("if_", "while_"):
            if op == "while_":
                lam = args[0]
                if not isinstance(lam, ast.Lambda) or (lam.args.args or lam.args.vararg or
                                                       lam.args.kwarg or lam.args.kwonlyargs or
                                                       lam.args.posonlyargs):
                    self.refuse(e, "t.while_", "write the condition as t.while_(lambda: cond)")
                self.expr(lam.body)
            else:
                self.expr(args[0])
            label = args[1] if len(args) > 1 else kwargs.get("label")
            if label is not None:
                self.string_arg(label, f"t.{op}'s label")
            return
        if op == "shared":
            self.shape_arg(args[0])
            dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
            if dtype is not None:
                self.dtype_arg(dtype)
            label = args[2] if len(args) > 2 else kwargs.get("name")
            if label is not None:
                self.string_arg(label, "t.shared's name")
            return
        if op == "local":   # a value, or a per-thread array's shape (checked in .registers)
            for p in (args[0].elts if isinstance(args[0], ast.Tuple) else [args[0]]):
                self.expr(p)
            dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
            if dtype is not None:
                self.dtype_arg(dtype)
            return
        if op == "copy_async":   # t.copy_async(dst, dst_index, src, src_index, width)
            for arr in (args[0], args[2]):
                if not isinstance(arr, ast.Name) or arr.id in (self.ctx, "np"):
                    self.refuse(e, "t.copy_async", "the destination and the source are arrays, "
                                                   "by name: t.copy_async(sa, (r, c), a, i, 4)")
                self.name(arr)
            for idx in (args[1], args[3]):
                for p in (idx.elts if isinstance(idx, ast.Tuple) else [idx]):
                    self.expr(p)
            if not (isinstance(args[4], ast.Constant) and type(args[4].value) is int
                    and args[4].value in (1, 2, 4, 8)):
                self.refuse(e, "t.copy_async", "the width is the number 1, 2 or 4 (4, 8 or 16 "
                                               "bytes of float32; 2, 4 or 8 of 16-bit floats): "
                                               "t.copy_async(sa, j, a, i, 4)")
            return
        if op in ("mma", "ldmatrix"):   # t.mma(d, a, b, c), t.ldmatrix(r, s, index, n)
            arrays = args if op == "mma" else args[:2]
            for arr in arrays:
                if not isinstance(arr, ast.Name) or arr.id in (self.ctx, "np"):
                    self.refuse(e, f"t.{op}", "the operands are arrays, by name: "
                                              "t.mma(d, a, b, c), t.ldmatrix(r, s, (row, col), 4)")
                self.name(arr)
            if op == "ldmatrix":
                for p in (args[2].elts if isinstance(args[2], ast.Tuple) else [args[2]]):
                    self.expr(p)
                if not (isinstance(args[3], ast.Constant) and type(args[3].value) is int
                        and args[3].value in (1, 2, 4)):
                    self.refuse(e, "t.ldmatrix", "the number of matrices is the number 1, 2 "
                                                 "or 4: t.ldmatrix(r, s, (row, col), 4)")
                for kw in e.keywords:
                    if not (isinstance(kw.value, ast.Constant) and type(kw.value.value) is bool):
                        self.refuse(e, "t.ldmatrix", "trans is True or False, written out: "
                                                     "t.ldmatrix(r, s, (row, col), 2, trans=True)")
            return
        if op == "wait":
            g = args[0]
            if not (isinstance(g, ast.Constant) and type(g.value) is int and g.value >= 0):
                self.refuse(e, "t.wait", "the number of groups that may stay in flight is a "
                                         "number written out, 0 or more: t.wait(1)")
            return
        if op.startswith("atomic_") or op in ("vload", "vstore"):
            arr = args[0]
            if not isinstance(arr, ast.Name) or arr.id in (self.ctx, "np"):
                self.refuse(e, "atomic", f"t.{op}'s first argument is an array, by name")
            self.name(arr)
            idx = args[1]
            for p in (idx.elts if isinstance(idx, ast.Tuple) else [idx]):
                self.expr(p)
            if op == "vstore":
                vals = args[2]
                if not (isinstance(vals, ast.Tuple) and len(vals.elts) in (2, 4)):
                    self.refuse(e, "t.vstore", "the values are a tuple of 2 or 4 written out: "
                                               "t.vstore(a, i, (x0, x1, x2, x3))")
                args = [*args[:2], *vals.elts]
            for a in args[2:]:
                self.expr(a)
            return
        for k, a in enumerate(args):
            # t.where(c, a, b): Python evaluates both values for every lane, CUDA one of them
            self.expr(a, arm=arm or (op == "where" and k > 0))

    def shape_arg(self, e):
        for p in (e.elts if isinstance(e, ast.Tuple) else [e]):
            self.expr(p)

    def call(self, e: ast.Call, *, arm=False, print_ok=False):
        f = e.func
        for a in e.args:
            if isinstance(a, ast.Starred):
                self.refuse(a, "starred", "*args has no CUDA counterpart")
        if isinstance(f, ast.Name):
            if f.id in ("exec", "eval", "getattr", "setattr", "open", "compile", "__import__",
                        "globals", "locals", "vars", "type", "object", "super", "input"):
                self.refuse(e, "builtin", f"{f.id} reaches outside the kernel; " + _USE)
            if f.id not in BUILTINS or f.id in self.locals or f.id in self.params:
                self.refuse(e, "call", f"only t.<operation>, np.<function> and the builtins "
                                       f"{', '.join(sorted(BUILTINS))} can be called; a kernel "
                                       f"is one self-contained function")
            if f.id == "print":
                if not print_ok:
                    self.refuse(e, "print placement", "print(...) is a statement of its own")
                if e.keywords:
                    self.refuse(e, "keyword argument", "print takes positional arguments only")
                for a in e.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        continue
                    if isinstance(a, ast.JoinedStr):
                        for v in a.values:
                            if isinstance(v, ast.FormattedValue):
                                self.expr(v.value)
                                if v.format_spec is not None:
                                    self.refuse(v, "f-string", "format specs are not part of "
                                                               "the kernel language")
                        continue
                    self.expr(a)
                return
            if e.keywords:
                self.refuse(e, "keyword argument", f"{f.id} takes positional arguments only")
            lo, hi = BUILTIN_ARITY[f.id]
            if len(e.args) < lo or (hi is not None and len(e.args) > hi):
                count = (str(lo) if lo == hi else f"{lo} or more" if hi is None
                         else f"{lo} to {hi}")
                self.refuse(e, "call", f"{f.id} takes {count} argument(s) here, got "
                                       f"{len(e.args)}")
            if f.id == "len":
                a = e.args[0]
                if not isinstance(a, ast.Name) or a.id in (self.ctx, "np"):
                    self.refuse(e, "len", "len takes an array by name: len(a)")
                self.name(a)
                return
            for a in e.args:
                self.expr(a, arm=arm)
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np":
            self.uses_np = True
            if f.attr.startswith("_"):
                self.refuse(e, "private attribute", "names starting with _ are not part of a "
                                                    "kernel")
            if f.attr not in NP_FUNCTIONS and f.attr not in NP_DTYPES:
                self.refuse(e, "np name", f"np.{f.attr} is not one of the NumPy names a kernel "
                                          f"may use: {', '.join(sorted(NP_FUNCTIONS | NP_DTYPES))}")
            if e.keywords:
                self.refuse(e, "keyword argument", f"np.{f.attr} takes positional arguments "
                                                   f"only here")
            lo, hi = NP_ARITY.get(f.attr, (1, 1))
            if not lo <= len(e.args) <= hi:
                self.refuse(e, "call", f"np.{f.attr} takes {lo} argument(s) here, got "
                                       f"{len(e.args)}")
            for a in e.args:
                self.expr(a, arm=arm)
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "math":
            self.uses_math = True
            if f.attr not in MATH_FUNCTIONS:
                self.attribute(f)   # a constant called, or a name outside the language
            if e.keywords or len(e.args) != 1:
                self.refuse(e, "call", f"math.{f.attr} takes one positional argument")
            self.expr(e.args[0], arm=arm)
            return
        if isinstance(f, ast.Attribute):
            self.attribute(f)  # refuses with the attribute's own reason
        self.refuse(e, "call", f"only t.<operation>, np.<function> and the builtins "
                               f"{', '.join(sorted(BUILTINS))} can be called")


def validate(kernel_or_source, constants: dict | None = None) -> Kernel:
    """Check that a kernel is written in the kernel language; return its parsed form.

    ``kernel_or_source``: a function ``def k(t, ...)`` (its source is read with
    ``inspect.getsource``, which works for functions defined in notebook cells) or the source
    text of exactly one such function.  ``constants``: values of outside names the source uses
    (for source text; a function's own globals and closure are read directly).
    Raises :class:`KernelLanguageError` (a ``ValueError``) naming the construct and the line.
    """
    if constants is None:
        constants = {}
    if not isinstance(constants, dict):
        raise TypeError(f"constants must be a dict of name -> number, got "
                        f"{type(constants).__name__}")
    for k, v in constants.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"constants: {k!r} is not a Python name")
        if not _validate.is_number(v):
            raise TypeError(f"constants[{k!r}] must be a number (int, float, bool), got "
                            f"{type(v).__name__}")
    if isinstance(kernel_or_source, str):
        source, offset, fn_obj = textwrap.dedent(kernel_or_source), 0, None
    else:
        source, offset = _function_source(kernel_or_source)
        fn_obj = kernel_or_source
    tree = _parse(source, offset)
    checker = _Checker(tree, offset)
    try:
        checker.body(tree.body, {"top": True})
    except KernelLanguageError as exc:  # the message names the line: the walk's frames do not
        raise exc.with_traceback(None) from None
    values = outside_names.resolve(checker, fn_obj, constants, offset)
    try:
        arrays, unrolled = registers.check(tree, checker.ctx, values, checker.refuse)
    except KernelLanguageError as exc:
        raise exc.with_traceback(None) from None
    if fn_obj is not None and tree.name != fn_obj.__name__:
        raise KernelLanguageError(
            f"the source read for {fn_obj.__name__!r} defines {tree.name!r}; define the kernel "
            f"with def at the top of its cell", construct="module")
    return Kernel(name=tree.name, ctx=checker.ctx, params=checker.params, tree=tree,
                  lines=tuple(source.splitlines()), line_offset=offset, constants=values,
                  locals=checker.locals, register_arrays=arrays, unrolled=unrolled)


#: What :func:`compile_kernel` leaves a kernel's code able to call.
SAFE_BUILTINS = {name: getattr(builtins, name) for name in BUILTINS}


def compile_kernel(source: str, constants: dict | None = None):
    """Validate ``source`` (one ``def``) and return the function, defined in a clean namespace.

    The namespace holds ``np`` (NumPy), ``math``, the ``constants`` and only the builtins of the language
    (:data:`SAFE_BUILTINS`), so even code that slipped past :func:`validate` could not import
    or open anything.  This is how the grader turns a learner's kernel text into a function.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be the kernel's source text, got {type(source).__name__}")
    k = validate(source, constants)
    namespace = {"np": np, "math": math, "ml_dtypes": ml_dtypes,
                 "__builtins__": dict(SAFE_BUILTINS), **k.constants}
    text = textwrap.dedent(source)
    filename = f"<kernel {k.name} #{next(_COMPILED)}>"
    exec(compile(text, filename=filename, mode="exec"), namespace)  # validated source, clean namespace
    # keep the text where inspect.getsource (and so to_cuda) looks for it
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return namespace[k.name]


_COMPILED = itertools.count(1)
