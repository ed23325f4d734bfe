"""The translator's expressions: each Python expression of a kernel as a typed C expression."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

import numpy as np

from .. import _validate
from .constructs import HALF_ARITHMETIC, MATH_C, NP_DTYPES
from .cuda_structure import (
    _structure,
)
from .cuda_types import (
    _ATOMIC_FN,
    _BINOPS,
    _CMP,
    _CTYPES,
    _FLOATS,
    _LANE_ID,
    _LINEAR_TID,
    _NUMPY_OF_C,
    _PYOPS,
    _RANK,
    _RESERVED,
    _SMALL,
    _UNSIGNED,
    _WARP_ID,
    HALF_DTYPES,
    INDEX,
    P_ADD,
    P_ATOM,
    P_COND,
    P_EQ,
    P_LAND,
    P_LOR,
    P_MUL,
    P_REL,
    P_UNARY,
    E,
    Param,
    Ty,
    _Array,
    _c_common,
    _cast,
    _DynShared,
    _helper_floordiv,
    _helper_ipow,
    _helper_minmax,
    _helper_mod,
    _int,
    _literal,
    _result_ty,
    _signed,
    _to,
    _ty_of_value,
    _wide,
)
from .lang import Kernel, KernelLanguageError
from .simt.lanes import ATOMIC_DTYPES

# -- the translator ------------------------------------------------------------------------------

def _plain(node) -> bool:
    """A value C may read twice at no cost: a name, a number, a built-in like t.thread_idx.x."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    return isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute))


def _snippet(node) -> str:
    text = re.sub(r"#\d*", "", ast.unparse(node))
    return text if len(text) <= 40 else text[:37] + "..."


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


class _Exprs:
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
        self.temps: list[tuple[str, str]] = []     # (C type, name) to declare before the line
        self.node_names: dict[tuple[int, str], str] = {}
        self.fp64: dict[int, str] = {}             # learner's line -> its text, computed in FP64
        self.lane_ctl = 0    # plain if/while (and loops left per lane) on per-lane values

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

    def cname_for(self, node, base: str) -> str:
        """One C name per syntax node and purpose, the same in every pass."""
        key = (id(node), base)
        if key not in self.node_names:
            self.node_names[key] = self.cname(base)
        return self.node_names[key]

    def note_fp64(self, node, cty: str, const=None):
        """Remember that ``node``'s line computes in double (the header says so)."""
        if cty == "double" and const is None and not self.inferring and hasattr(node, "lineno"):
            self.fp64.setdefault(self.k.lineno(node), self.py_line(node))

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
                if a.dtype.name not in _CTYPES:
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
            elif _validate.is_number(a):
                ty = _ty_of_value(a)
                if ty.np == "pyint" and not -(2**31) <= a < 2**31:
                    raise ValueError(f"{name}={a} does not fit the 32-bit int the CUDA kernel "
                                     f"takes")
                if ty.np in HALF_DTYPES:
                    raise TypeError(f"{name}: {ty.np} scalars cannot be translated; pass a "
                                    f"float32 (a kernel converts with t.local(x, np.{ty.np}))")
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
        if arr.space in ("shared", "local"):   # fixed-size arrays keep their C dimensions
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

    def no_half(self, node, tys):
        half = next((t.np for t in tys if t.np in HALF_DTYPES), None)
        if half is not None:
            self.refuse(node, "half arithmetic", HALF_ARITHMETIC.format(dtype=half))

    def result_ty(self, node, fn, tys, pyfn=None) -> Ty:
        self.no_half(node, tys)
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
        self.note_fp64(node, T, const)
        if op_type is ast.Pow:
            return self.power(node, a, b, r, const)
        nonneg = self.nonneg_of(op_type, a, b)
        if not nonneg:   # a result that can be negative is computed in signed arithmetic
            a, b = _int(a), _int(b)
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
            self.condition_operand(e.operand, a, "not")
            r = Ty("bool", True) if a.ty.lanes else Ty("pybool")
            return E(f"!{a.wrap(P_UNARY)}", P_UNARY, r, "bool", True, None, a.effect)
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
        self.note_fp64(e, r.ctype, const)
        x = _to(_int(a), r.ctype) if r.ctype != a.cty else _int(a)
        inner = x.wrap(P_UNARY)
        text = f"{sym}({inner})" if inner[0] in "-~+" else f"{sym}{inner}"   # not --x
        if r.ctype in _SMALL:
            return E(f"({r.ctype})({text})", P_UNARY, r, r.ctype, False, const)
        return E(text, P_UNARY, r, x.cty if x.cty != "bool" else "int", False, const, a.effect)


    def x_Compare(self, e):
        nodes = [e.left, *e.comparators]
        vals = [self.expr(n) for n in nodes]
        if len(e.ops) == 1:
            return self.compare(e, e.ops[0], vals[0], vals[1])
        # a < b < c is (a < b) and (b < c) with b evaluated once: a temporary unless b is a
        # name, a number or a built-in
        firsts, seconds = list(vals), list(vals)
        for k in range(1, len(vals) - 1):
            if not _plain(nodes[k]):
                v = vals[k]
                name = self.cname_for(nodes[k], "cmp")
                if not self.inferring:
                    self.temps.append((v.cty, name))
                firsts[k] = E(f"({name} = {v.text})", P_ATOM, v.ty, v.cty, v.nonneg, None,
                              v.effect)
                seconds[k] = E(name, P_ATOM, v.ty, v.cty, v.nonneg)
        parts = [self.compare(e, op, seconds[k], firsts[k + 1])
                 for k, op in enumerate(e.ops)]
        lanes = any(p.ty.lanes for p in parts)
        text = " && ".join(p.wrap(P_LAND + 1) for p in parts)
        return E(text, P_LAND, Ty("bool", True) if lanes else Ty("pybool"), "bool", True, None,
                 any(v.effect for v in vals))

    def compare(self, node, op, a: E, b: E) -> E:
        tys = [a.ty, b.ty]
        self.no_half(node, tys)
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
        if not (a.nonneg and b.nonneg):
            a, b = _int(a), _int(b)
        if common not in ("bool",):
            a, b = self.operands(a, b, common)
        if common == "double" and not (a.const is not None and b.const is not None):
            self.note_fp64(node, "double")
        sym = _CMP[type(op)]
        prec = P_REL if sym in ("<", "<=", ">", ">=") else P_EQ
        return E(f"{a.wrap(prec)} {sym} {b.wrap(prec + 1)}", prec, r, "bool", True, None,
                 a.effect or b.effect)

    def condition_operand(self, node, v: E, word: str):
        """``and``/``or``/``not`` take conditions: a per-lane operand must be a bool."""
        if v.ty.is_bool:
            return
        snippet = _snippet(node)
        if v.ty.lanes:
            self.refuse(node, f"{word} operand",
                        f"`{word}` combines conditions, and this per-lane value is a "
                        f"{v.ty.np}, not a bool; compare it: ({snippet} != 0) {word} ..."
                        if word != "not" else
                        f"`not` takes a condition, and this per-lane value is a {v.ty.np}, not "
                        f"a bool; compare it: not ({snippet} != 0), or {snippet} == 0")
        if word != "not":
            self.refuse(node, "and/or value", f"`{word}` here combines conditions (comparisons "
                                              f"or bools): Python's `{word}` of numbers gives "
                                              f"one of the numbers; write ({snippet} != 0) "
                                              f"{word} ...")

    def x_BoolOp(self, e):
        word = "and" if isinstance(e.op, ast.And) else "or"
        vals = [self.expr(v) for v in e.values]
        for node, v in zip(e.values, vals, strict=True):
            self.condition_operand(node, v, word)
        sym, prec = ("&&", P_LAND) if word == "and" else ("||", P_LOR)
        text = f" {sym} ".join(_to(v, "bool").wrap(prec + 1) for v in vals)
        lanes = any(v.ty.lanes for v in vals)
        return E(text, prec, Ty("bool", True) if lanes else Ty("pybool"), "bool", True, None,
                 any(v.effect for v in vals))

    def x_IfExp(self, e):
        c = self.expr(e.test)
        a, b = self.expr(e.body), self.expr(e.orelse)
        if c.ty.lanes:   # per lane: NumPy's promotion of both arms, as t.where and np.where
            return self.select(e, c, a, b)
        r = self.join(e, a.ty, b.ty)
        if r is None:
            self.refuse(e, "conditional types",
                        f"the arms are a {a.ty.text()} and a {b.ty.text()}, so the value's type "
                        f"would depend on the condition; convert one arm, e.g. "
                        f"np.float32(...) or float(...)")
        nonneg = a.nonneg and b.nonneg
        if not nonneg:
            a, b = _int(a), _int(b)
        a2, b2 = _to(a, r.ctype), _to(b, r.ctype)
        return E(f"{c.wrap(P_LOR)} ? {a2.wrap(P_COND)} : {b2.wrap(P_COND)}", P_COND, r, r.ctype,
                 nonneg, None, a.effect or b.effect or c.effect)

    def select(self, node, c: E, a: E, b: E) -> E:
        """``c ? a : b`` per lane, typed as ``np.where(c, a, b)`` types it."""
        value = np.where(np.ones(2, bool), a.ty.dummy(), b.ty.dummy())
        r = Ty(value.dtype.name, True, narrow=value.dtype.name == "int64"
               and not _wide([a.ty, b.ty]))
        T = r.ctype
        nonneg = a.nonneg and b.nonneg
        if not nonneg:
            a, b = _int(a), _int(b)
        c2 = _to(c, "bool") if c.cty != "bool" else c
        return E(f"{c2.wrap(P_LOR)} ? {_to(a, T).wrap(P_COND)} : {_to(b, T).wrap(P_COND)}",
                 P_COND, r, T, nonneg, None, a.effect or b.effect or c.effect)

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
            if f.value.id == "math":
                return self.math_call(e)
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
        if name in ("maximum", "minimum", "fmax", "fmin"):
            return self.np_minmax(e, name, *args)
        return self.np_math(e, name, args[0])

    def np_minmax(self, e, name: str, x: E, y: E) -> E:
        r = self.result_ty(e, getattr(np, name), [x.ty, y.ty])
        T = r.ctype
        self.note_fp64(e, T)
        a, b = (_to(_int(v), T) for v in (x, y))
        effect = x.effect or y.effect
        if T in _FLOATS:
            if name.startswith("f"):
                fname = name + ("f" if T == "float" else "")
            else:
                fname = f"py_{name}"
                self.need(f"{fname}<{T}>", _helper_minmax(T, name))
            return E(f"{fname}({a.text}, {b.text})", P_ATOM, r, T, False, None, effect)
        fname = "max" if name in ("maximum", "fmax") else "min"
        return E(f"{fname}({a.text}, {b.text})", P_ATOM, r, T, x.nonneg or y.nonneg
                 if fname == "max" else x.nonneg and y.nonneg, None, effect)

    def np_math(self, e, name: str, a: E, weak_result: bool = False) -> E:
        """np.<name>(a) (and math.<name>(a): a Python float for a Python number)."""
        fn = getattr(np, name)
        r = self.result_ty(e, fn, [a.ty])
        if weak_result:
            r = Ty("pyfloat")
        T = r.ctype
        self.note_fp64(e, T, a.const)
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
        fname = MATH_C.get(name, name + "f") if T == "float" else name
        return E(f"{fname}({_to(_int(a), T).text})", P_ATOM, r, T, False, None, a.effect)

    def math_call(self, e):
        """math.<name>(x): NumPy's function of that name; a Python float for a Python number
        (as NumPy treats Python floats: weak)."""
        name = e.func.attr
        a = self.expr(e.args[0])
        return self.np_math(e, name, a, weak_result=a.ty.weak)

    def b_len(self, e):
        arr = self.array(e.args[0])
        d = arr.dims[0]
        return E(d.text, d.prec, Ty("pyint"), "int", True, d.const)

    def b_abs(self, e):
        a = self.expr(e.args[0])
        if a.ty.lanes:   # abs of lanes is np.absolute
            return self.np_math(e, "absolute", a)
        if a.ty.is_float:
            self.note_fp64(e, a.ty.ctype, a.const)
            return E(f"fabs({_to(a, 'double').text})", P_ATOM, a.ty, "double", True)
        return E(f"abs({_signed(a).text})", P_ATOM, a.ty, a.ty.ctype, True)

    def _minmax(self, e, which):
        vals = [self.expr(a) for a in e.args]
        if any(v.ty.lanes for v in vals):   # per lane: np.minimum / np.maximum, left to right
            acc = vals[0]
            for v in vals[1:]:
                acc = self.np_minmax(e, "minimum" if which == "min" else "maximum", acc, v)
            return acc
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
        return self.select(e, c, a, b)

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
