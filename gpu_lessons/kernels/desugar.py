"""The simulator's form of a kernel: plain Python control flow made warp-aware.

A Python ``if`` cannot go both ways, so the simulator cannot run ``if i < n:`` on 32 lanes as it
stands.  :func:`simulator_function` takes the kernel :func:`~gpu_lessons.kernels.lang.validate`
accepted and rewrites the statements and expressions whose meaning depends on per-lane values
into calls of the warp's flow hooks (:mod:`gpu_lessons.kernels.simt.flow`), which take Python's
path for uniform values and the SIMT path for lane values:

==========================================  =================================================
the learner writes                          the simulator runs
==========================================  =================================================
``if c: A`` / ``elif`` / ``else: B``        ``with t._if(c) as b:`` ``if b.then: A``, then
                                            ``with t._orelse(b):`` ``if b.other: B``
``while c: A``                              ``with t._loop_while(lambda: c) as l:``
                                            ``for _ in l: A``
``for v in range(...)`` / a literal tuple   the same loop, inside ``with t._loop(...)`` when its
with ``break``/``continue`` in it           body breaks or continues
``break`` / ``continue`` / ``return``       ``if t._break(): break`` (likewise): Python's own
                                            statement once every lane still running takes it
``x = e`` / ``x += e`` inside a block       ``x = t._set(x, e)``: lanes that do not run it keep
                                            their ``x``
``a, b = e1, e2``                           temporaries first, then each name
``a and b``, ``a or b``, ``not a``          ``t._and(lambda: a, lambda: b)``, ..., ``t._not(a)``
``a < b < c``                               ``t._chain(lambda: a, ("lt", lambda: b), ...)``
``a if c else b``                           ``t._ifexp(c, lambda: a, lambda: b)``
``min``/``max``, ``math.f(x)``              ``t._min``/``t._max``, ``t._math("f", x)``
==========================================  =================================================

The rewritten function keeps the learner's file name and line numbers, so tracebacks, ``print``
and every message name the learner's own line; it runs in a namespace holding only NumPy,
``math``, the kernel's outside constants and the language's builtins.
"""

from __future__ import annotations

import ast
import copy
import math

import ml_dtypes
import numpy as np

from .lang import SAFE_BUILTINS, Kernel, validate

_CMP_NAMES = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
              ast.NotEq: "ne"}


def _lambda(body: ast.expr) -> ast.Lambda:
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])
    return ast.Lambda(args=args, body=body)


class _Rewrite(ast.NodeTransformer):
    """The rewrite of one kernel body; ``ctx`` is the name of its warp context (``t``)."""

    def __init__(self, ctx: str, params: tuple[str, ...]):
        self.ctx = ctx
        self.params = set(params)
        self.counter = 0
        self.depth = 0          # compound statements around the current one
        self.bound: set[str] = set(params)   # names certainly bound here

    # -- helpers ---------------------------------------------------------------------------------
    def hook(self, name: str, *args: ast.expr) -> ast.Call:
        return ast.Call(func=ast.Attribute(value=ast.Name(self.ctx, ast.Load()), attr=name,
                                           ctx=ast.Load()), args=list(args), keywords=[])

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"_gl_{stem}{self.counter}"

    def located(self, new, old):
        """``new`` (a node or a list) placed at ``old``'s line: every node the rewrite made (the
        learner's own nodes inside it keep their lines)."""
        for node in new if isinstance(new, list) else [new]:
            for sub in ast.walk(node):
                if getattr(sub, "lineno", None) is None and "lineno" in sub._attributes:
                    ast.copy_location(sub, old)
        return new

    def body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for s in stmts:
            r = self.visit(s)
            out.extend(r if isinstance(r, list) else [r])
        return out or [ast.Pass()]

    def nested(self, stmts):
        self.depth += 1
        before = set(self.bound)
        try:
            return self.body(stmts), self.bound
        finally:
            self.depth -= 1
            self.bound = before

    # -- statements ------------------------------------------------------------------------------
    def visit_If(self, node: ast.If):
        test = self.visit(node.test)
        name = self.fresh("if")
        then, bound_then = self.nested(node.body)
        has_else = bool(node.orelse)
        out = [ast.With(items=[ast.withitem(self.hook("_if", test, ast.Constant(has_else)),
                                            ast.Name(name, ast.Store()))],
                        body=[ast.If(test=ast.Attribute(ast.Name(name, ast.Load()), "then",
                                                        ast.Load()), body=then, orelse=[])])]
        if has_else:
            other, bound_else = self.nested(node.orelse)
            out.append(ast.With(items=[ast.withitem(self.hook("_orelse", ast.Name(name,
                                                                                  ast.Load())))],
                                body=[ast.If(test=ast.Attribute(ast.Name(name, ast.Load()),
                                                                "other", ast.Load()),
                                             body=other, orelse=[])]))
            self.bound |= bound_then & bound_else
        return self.located(out, node)

    def visit_While(self, node: ast.While):
        test = self.visit(node.test)
        body, _ = self.nested(node.body)
        loop, var = self.fresh("loop"), self.fresh("w")
        new = ast.With(items=[ast.withitem(self.hook("_loop_while", _lambda(test)),
                                           ast.Name(loop, ast.Store()))],
                       body=[ast.For(target=ast.Name(var, ast.Store()),
                                     iter=ast.Name(loop, ast.Load()), body=body, orelse=[])])
        return self.located(new, node)

    def visit_For(self, node: ast.For):
        it = node.iter
        old_form = (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                    and isinstance(it.func.value, ast.Name) and it.func.value.id == self.ctx)
        node.iter = self.visit(it)
        if isinstance(node.target, ast.Name):
            self.bound.add(node.target.id)
        body, _ = self.nested(node.body)
        node.body = body
        if old_form or not _breaks(node.body):
            return node
        loop = self.fresh("loop")
        new = ast.With(items=[ast.withitem(self.hook("_loop", node.iter),
                                           ast.Name(loop, ast.Store()))],
                       body=[ast.For(target=node.target, iter=ast.Name(loop, ast.Load()),
                                     body=body, orelse=[])])
        return self.located(new, node)

    def visit_With(self, node: ast.With):
        node.items = [self.visit(i) for i in node.items]
        node.body, _ = self.nested(node.body)
        return node

    def _native(self, hook: str, stmt: ast.stmt):
        return self.located(ast.If(test=self.hook(hook), body=[stmt], orelse=[]), stmt)

    def visit_Break(self, node):
        return self._native("_break", node)

    def visit_Continue(self, node):
        return self._native("_continue", node)

    def visit_Return(self, node):
        return self._native("_return", node)

    def assign_name(self, name: str, value: ast.expr, where: ast.AST) -> list[ast.stmt]:
        """``name = value``, keeping other lanes' values when some lanes are switched off."""
        if self.depth == 0:
            self.bound.add(name)
            return [self.located(ast.Assign([ast.Name(name, ast.Store())], value), where)]
        if name in self.bound:
            old = ast.Name(name, ast.Load())
            stmts = [ast.Assign([ast.Name(name, ast.Store())], self.hook("_set", old, value))]
        else:
            # maybe bound (an earlier iteration, one arm of an if): read it if it is
            tmp = self.fresh("old")
            get = ast.Try(body=[ast.Assign([ast.Name(tmp, ast.Store())], ast.Name(name, ast.Load()))],
                          handlers=[ast.ExceptHandler(
                              type=ast.Name("NameError", ast.Load()), name=None,
                              body=[ast.Assign([ast.Name(tmp, ast.Store())],
                                               ast.Attribute(ast.Name(self.ctx, ast.Load()),
                                                             "_unset", ast.Load()))])],
                          orelse=[], finalbody=[])
            stmts = [get, ast.Assign([ast.Name(name, ast.Store())],
                                     self.hook("_set", ast.Name(tmp, ast.Load()), value))]
        self.bound.add(name)
        return self.located(stmts, where)

    def declares(self, value: ast.expr) -> bool:
        """``t.local(...)`` / ``t.shared(...)``: a declaration binds the name as it is."""
        return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name) and value.func.value.id == self.ctx
                and value.func.attr in ("local", "shared"))

    def visit_Assign(self, node: ast.Assign):
        node.value = self.visit(node.value)
        target = node.targets[0]
        if isinstance(target, ast.Name) and self.declares(node.value):
            call = node.value
            if call.func.attr == "shared" and not any(k.arg == "name" for k in call.keywords) \
                    and len(call.args) < 3:
                # messages say tile[3], not shared0[3]: the array is named as the line names it
                call.keywords.append(self.located(ast.keyword("name", ast.Constant(target.id)),
                                                  call))
            self.bound.add(target.id)
            return node
        if isinstance(target, ast.Name):
            return self.assign_name(target.id, node.value, node)
        if isinstance(target, ast.Tuple):
            out = []
            if isinstance(node.value, ast.Call):   # x0, x1, x2, x3 = t.vload(a, i, 4)
                vec = self.fresh("vec")
                out.append(self.located(ast.Assign([ast.Name(vec, ast.Store())], node.value),
                                        node))
                values = [ast.Subscript(ast.Name(vec, ast.Load()), ast.Constant(k), ast.Load())
                          for k in range(len(target.elts))]
            else:
                values = node.value.elts
            temps = [self.fresh("tup") for _ in values]
            out += [self.located(ast.Assign([ast.Name(tmp, ast.Store())], v), node)
                    for tmp, v in zip(temps, values, strict=True)]
            for tgt, tmp in zip(target.elts, temps, strict=True):
                if isinstance(tgt, ast.Name):
                    out += self.assign_name(tgt.id, ast.Name(tmp, ast.Load()), node)
                else:
                    out.append(self.located(ast.Assign([self.visit(tgt)],
                                                       ast.Name(tmp, ast.Load())), node))
            return out
        node.targets = [self.visit(t) for t in node.targets]
        return node

    def visit_AugAssign(self, node: ast.AugAssign):
        value = self.visit(node.value)
        if isinstance(node.target, ast.Name):
            name = node.target.id
            combined = ast.BinOp(left=ast.Name(name, ast.Load()), op=node.op, right=value)
            return self.assign_name(name, combined, node)
        node.target = self.visit(node.target)
        node.value = value
        return node

    # -- expressions -----------------------------------------------------------------------------
    def visit_BoolOp(self, node: ast.BoolOp):
        values = [self.visit(v) for v in node.values]
        name = "_and" if isinstance(node.op, ast.And) else "_or"
        return self.located(self.hook(name, *(_lambda(v) for v in values)), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        node.operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return self.located(self.hook("_not", node.operand), node)
        return node

    def visit_Compare(self, node: ast.Compare):
        left = self.visit(node.left)
        comparators = [self.visit(c) for c in node.comparators]
        if len(node.ops) == 1:
            node.left, node.comparators = left, comparators
            return node
        pairs = [ast.Tuple([ast.Constant(_CMP_NAMES[type(op)]), _lambda(c)], ast.Load())
                 for op, c in zip(node.ops, comparators, strict=True)]
        return self.located(self.hook("_chain", _lambda(left), *pairs), node)

    def visit_IfExp(self, node: ast.IfExp):
        test, a, b = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)
        return self.located(self.hook("_ifexp", test, _lambda(a), _lambda(b)), node)

    def visit_Call(self, node: ast.Call):
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("min", "max"):
            return self.located(self.hook(f"_{f.id}", *node.args), node)
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id == "math"):
            return self.located(self.hook("_math", ast.Constant(f.attr), *node.args), node)
        node.func = self.visit(f)
        return node

    def visit_Lambda(self, node: ast.Lambda):
        node.body = self.visit(node.body)
        return node


def _breaks(stmts) -> bool:
    """Whether ``stmts`` break or continue the loop they are the body of (not an inner loop)."""
    for s in stmts:
        for node in _walk_outside_loops(s):
            if isinstance(node, (ast.Break, ast.Continue)):
                return True
    return False


def _walk_outside_loops(node):
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            continue
        yield from _walk_outside_loops(child)


#: Rewritten code objects, by kernel source, name, file and first line.
_CODE: dict[tuple, object] = {}


def _rewritten(k: Kernel, filename: str):
    key = (k.lines, k.name, filename, k.line_offset)
    code = _CODE.get(key)
    if code is None:
        tree = copy.deepcopy(k.tree)
        tree.body = _Rewrite(k.ctx, k.params).body(tree.body)
        tree.decorator_list = []
        module = ast.Module(body=[tree], type_ignores=[])
        ast.fix_missing_locations(module)
        ast.increment_lineno(module, k.line_offset)
        code = compile(module, filename, "exec")
        if len(_CODE) >= 512:
            _CODE.clear()
        _CODE[key] = code
    return code


def simulator_function(kernel, k: Kernel | None = None):
    """The function :func:`gpu_lessons.kernels.run` executes for ``kernel``: validated with the
    kernel language (refusing what :func:`~gpu_lessons.kernels.to_cuda` refuses), then rewritten
    as the module docstring says.  ``k``: ``kernel``'s :class:`Kernel`, when already validated."""
    if k is None:
        k = validate(kernel)
    code = getattr(kernel, "__code__", None)
    filename = code.co_filename if code is not None else f"<kernel {k.name}>"
    compiled = _rewritten(k, filename)
    # NameError: the rewrite reads a name that may not be bound yet (the kernel cannot name it)
    builtins = {**SAFE_BUILTINS, "NameError": NameError}
    namespace = {"np": np, "math": math, "ml_dtypes": ml_dtypes, "__builtins__": builtins,
                 **k.constants}
    exec(compiled, namespace)  # validated, rewritten kernel source; clean namespace
    fn = namespace[k.name]
    fn.__gl_kernel__ = k
    return fn
