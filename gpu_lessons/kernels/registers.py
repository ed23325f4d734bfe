"""What must be known when a kernel is compiled: per-thread arrays and the loops that unroll.

A per-thread array (``acc = t.local((8, 8), np.float32)``, CUDA's ``float acc[8][8] = {};``)
lives in registers only when the compiler knows every index: a register has no address, so an
index computed at run time puts the whole array in local memory (off-chip, behind the L1),
and the kernel's speed with it ("spills").  So the language allows, as an index into such an
array, only a *compile-time number*: a number, an outside constant (``TM = 8``), a name the
kernel assigns once at its top level from such numbers, the variable of an *unrolled* loop,
and ``+ - * // %`` of these.  An unrolled loop is ``for v in (16, 8, 4, 2, 1)`` or
``for v in range(...)`` whose bounds are compile-time numbers and that runs at most
:data:`MAX_UNROLL` times; the translation puts ``#pragma unroll`` before it (CUDA C++
Programming Guide, "#pragma unroll").

:func:`check` refuses every other index with the line, the reason and the form that works, and
returns the unrolled loops (their ``(line, column)``) for the translation.
"""

from __future__ import annotations

import ast

#: The most iterations a loop is unrolled for (a longer one stays a loop: its variable is not a
#: compile-time number, and indexing a per-thread array with it is refused).
MAX_UNROLL = 64
#: The most elements a per-thread array may hold: a thread has at most 255 32-bit registers
#: (CUDA C++ Programming Guide, "Compute Capabilities", registers per thread).
MAX_ELEMENTS = 255

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


class _Pass:
    def __init__(self, fn: ast.FunctionDef, ctx: str, constants: dict, refuse):
        self.fn, self.ctx, self.refuse = fn, ctx, refuse
        self.known = {k: v for k, v in constants.items() if type(v) is int}
        self.arrays: dict[str, int] = {}     # name -> number of dimensions
        self.unrolled: set[tuple[int, int]] = set()
        counts: dict[str, int] = {}
        for node in ast.walk(fn):
            for tgt in _targets(node):
                counts[tgt] = counts.get(tgt, 0) + 1
        for s in fn.body:   # top-level names assigned once from compile-time numbers
            if (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                    and counts.get(s.targets[0].id) == 1):
                v = self.value(s.value, {})
                if v is not None:
                    self.known[s.targets[0].id] = v
        self.counts = counts

    def value(self, e, loops) -> int | None:
        """``e``'s value if it is a compile-time int; ``loops`` maps unrolled loop variables to
        None (known when compiled, different in each copy of the body)."""
        if isinstance(e, ast.Constant) and type(e.value) is int:
            return e.value
        if isinstance(e, ast.Name):
            if e.id in loops:
                return loops[e.id]
            return self.known.get(e.id)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            v = self.value(e.operand, loops)
            return None if v is None else -v
        if isinstance(e, ast.BinOp) and type(e.op) in _OPS:
            a, b = self.value(e.left, loops), self.value(e.right, loops)
            if a is None or b is None or (b == 0 and isinstance(e.op, (ast.FloorDiv, ast.Mod))):
                return None
            return _OPS[type(e.op)](a, b)
        return None

    def constant(self, e, loops) -> bool:
        """Known when compiled: a compile-time int, or one made of unrolled loop variables."""
        if isinstance(e, ast.Name) and e.id in loops:
            return True
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            return self.constant(e.operand, loops)
        if isinstance(e, ast.BinOp) and type(e.op) in _OPS:
            return self.constant(e.left, loops) and self.constant(e.right, loops)
        return self.value(e, {}) is not None

    def declarations(self):
        for node in ast.walk(self.fn):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and _is_t(node.value, self.ctx, "local") and node.value.args
                    and isinstance(node.value.args[0], ast.Tuple)):
                continue
            name = node.targets[0].id
            if node not in self.fn.body:
                self.refuse(node, "per-thread array placement",
                            "declare per-thread arrays at the kernel's top level (not in a loop "
                            "or branch), as C declares float acc[8][8] once per thread")
            if self.counts.get(name, 0) != 1:
                self.refuse(node, "per-thread array", f"`{name}` names a per-thread array: "
                            f"assign its elements ({name}[0, 1] = v), not the name itself")
            size = 1
            for p in node.value.args[0].elts:
                v = self.value(p, {})
                if v is None or v < 1:
                    self.refuse(p, "per-thread array shape",
                                "a per-thread array's shape is made of positive numbers known "
                                "when the kernel is compiled: t.local((TM, TN), np.float32) "
                                "with TM = 8 outside the kernel")
                size *= v
            if size > MAX_ELEMENTS:
                self.refuse(node, "per-thread array size",
                            f"{size} elements per thread; a thread has at most "
                            f"{MAX_ELEMENTS} registers, so this array would live in local "
                            f"memory: make it smaller (8 x 8 = 64 is the usual register tile)")
            self.arrays[name] = len(node.value.args[0].elts)

    def launch_bounds(self):
        for node in ast.walk(self.fn):
            if not (isinstance(node, ast.Call) and _is_t(node, self.ctx, "launch_bounds")):
                continue
            if not any(isinstance(s, ast.Expr) and s.value is node for s in self.fn.body):
                self.refuse(node, "t.launch_bounds placement", "t.launch_bounds(...) is a "
                            "statement at the kernel's top level: it describes every launch")
            for a in node.args:
                v = self.value(a, {})
                if v is None or v < 1:
                    self.refuse(a, "t.launch_bounds", "the bounds are positive numbers known "
                                "when the kernel is compiled: t.launch_bounds(256, 2)")

    def walk(self, stmts, loops, slow):
        """``slow``: variables of loops that are not unrolled, with why (for messages)."""
        for s in stmts:
            if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
                self.uses(s.iter, loops, slow)
                var = s.target.id
                why = self.unrolls(s, loops)
                if why is None:
                    self.unrolled.add((s.lineno, s.col_offset))
                    self.walk(s.body, {**loops, var: None}, slow)
                else:
                    inner = {k: v for k, v in loops.items() if k != var}
                    self.walk(s.body, inner, {**slow, var: why})
                continue
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.stmt):
                    continue
                self.uses(child, loops, slow)
            for field in ("body", "orelse"):
                self.walk(getattr(s, field, []) or [], loops, slow)

    def unrolls(self, s: ast.For, loops) -> str | None:
        """None if the loop unrolls, else why not."""
        it = s.iter
        if isinstance(it, (ast.Tuple, ast.List)):
            return None
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range"):
            return "it is not a loop over range() or a tuple of numbers"
        bounds = [self.value(a, {}) for a in it.args]
        if any(b is None for b in bounds):
            return (f"range({', '.join(ast.unparse(a) for a in it.args)})'s bounds are not "
                    f"known when the kernel is compiled")
        trips = len(range(*bounds))
        if trips > MAX_UNROLL:
            return f"it runs {trips} times, more than the {MAX_UNROLL} a loop is unrolled for"
        return None

    def uses(self, node, loops, slow):
        # the tensor-core operations take whole per-thread arrays (a warp's fragments)
        whole = {id(a) for e in ast.walk(node) if isinstance(e, ast.Call)
                 and (_is_t(e, self.ctx, "mma") or _is_t(e, self.ctx, "ldmatrix"))
                 for a in e.args[:4 if _is_t(e, self.ctx, "mma") else 1]}
        for e in ast.walk(node):
            if isinstance(e, ast.Name) and e.id in self.arrays and not _indexed(e, node) \
                    and id(e) not in whole:
                self.refuse(e, "per-thread array", f"`{e.id}` is a per-thread array: use its "
                            f"elements ({e.id}[0, 1]), not the array itself")
            if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)
                    and e.value.id in self.arrays):
                continue
            parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            for p in parts:
                if self.constant(p, loops):
                    continue
                names = sorted({n.id for n in ast.walk(p) if isinstance(n, ast.Name)} & set(slow))
                reason = (f"`{names[0]}` comes from a loop that is not unrolled ({slow[names[0]]})"
                          if names else "it is computed when the kernel runs")
                self.refuse(e, "per-thread array index",
                            f"an index into a per-thread array must be known when the kernel "
                            f"is compiled, and here {reason}; an index computed at run time "
                            f"puts the array in local memory (it spills out of registers). Index "
                            f"with numbers and the variables of loops with constant bounds: "
                            f"for i in range(TM): acc[i, j] += ...")


def _targets(node):
    if isinstance(node, ast.Assign):
        for tgt in node.targets:
            for sub in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt]):
                if isinstance(sub, ast.Name):
                    yield sub.id
    elif isinstance(node, (ast.AugAssign, ast.For)) and isinstance(node.target, ast.Name):
        yield node.target.id


def _is_t(call: ast.Call, ctx: str, op: str) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == ctx
            and f.attr == op)


def _indexed(name: ast.Name, root) -> bool:
    """Whether ``name`` is the array of a subscript (or the declaration's target) in ``root``."""
    return any(isinstance(e, ast.Subscript) and e.value is name for e in ast.walk(root))


def check(fn: ast.FunctionDef, ctx: str, constants: dict, refuse) -> tuple[dict, frozenset]:
    """Check ``fn``'s per-thread arrays; return ``(arrays, unrolled)``: each array's number of
    dimensions by name, and the ``(line, column)`` of every unrolled loop."""
    p = _Pass(fn, ctx, constants, refuse)
    p.declarations()
    p.launch_bounds()
    body = [s for s in fn.body if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                                        and _is_t(s.value, ctx, "local")
                                        and s.targets[0].id in p.arrays)]
    p.walk(body, {}, {})
    return p.arrays, frozenset(p.unrolled)
