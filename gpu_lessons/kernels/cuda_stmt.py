"""The translator's statements: declarations, blocks, loops and branches as C."""

from __future__ import annotations

import ast
import contextlib
import itertools

import numpy as np

from .cuda_expr import _Exprs, _Unknown, _Var
from .cuda_mma import LDMATRIX, MMA
from .cuda_structure import (
    _S,
    _assigned_names,
    _first_access,
    _header_nodes,
    _leading_op,
    _names,
    _occurs,
    _own_nodes,
    _strip_comment,
    _walk,
)
from .cuda_types import (
    _CTYPES,
    _LANE_ID,
    _LINEAR_TID,
    CP_ASYNC,
    P_ADD,
    P_ATOM,
    P_MUL,
    P_REL,
    SHARED_ALIGN,
    E,
    Ty,
    _Array,
    _assignable,
    _DynShared,
    _literal,
    _signed,
    _to,
)
from .lang import KernelLanguageError

#: CUDA's vector type names by element type (float4, int2, ...).
_VECTOR_BASE = {"float32": "float", "int32": "int", "uint32": "uint", "float64": "double"}


class _Translator(_Exprs):
    def need(self, key: str, text: str):
        self.helpers.setdefault(key, text)

    def emit(self, indent: int, code: str, node=None, comment: str | None = None):
        if self.inferring:
            return
        temps, self.temps = self.temps, []
        for cty, name in temps:   # a chained comparison's middle value, evaluated once
            self.lines.append((indent, f"{cty} {name};", "(a value compared twice)"))
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
        if self.lane_ctl and not new_ty.lanes:
            # assigned by some lanes only: from here on each lane has its own value
            new_ty = Ty(new_ty.np, True, new_ty.narrow)
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
                        f"in CUDA only the lanes that took the branch); write the branch as a "
                        f"plain `if` (each lane keeps its own {name}), or declare it per lane "
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
            self.emit(indent, f"if ({c.text}) {{", n)
            self.block(s.blocks[0], indent + 1, lanes_depth + 1)
            if len(s.blocks) > 1:
                self.emit(indent, "} else {", s.else_node)
                self.block(s.blocks[1], indent + 1, lanes_depth + 1)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "if":
            return self.if_(s, indent, lanes_depth)
        if s.kind == "while":
            c = self.expr(n.test)
            self.emit(indent, f"while ({c.text}) {{", n)
            with self.lane_control(c.ty.lanes), self.loop(n):
                self.block(s.blocks[0], indent + 1, lanes_depth)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "while_lanes":
            c = self.expr(n.iter.args[0].body)
            self.emit(indent, f"while ({c.text}) {{", n)
            with self.loop(n):
                self.block(s.blocks[0], indent + 1, lanes_depth + 1)
            self.emit(indent, "}", None, "")
            return
        if s.kind == "for_range":
            return self.for_range(s, indent, lanes_depth)
        if s.kind == "for_values":
            return self.for_values(s, indent, lanes_depth)
        raise AssertionError(s.kind)

    def if_(self, s: _S, indent: int, lanes_depth: int, chained: bool = False):
        """if/elif/else: C's if, else if, else; each lane (thread) takes its own branch."""
        n = s.node
        c = self.expr(n.test)
        self.emit(indent, f"{'} else ' if chained else ''}if ({c.text}) {{", n)
        with self.lane_control(c.ty.lanes):
            self.block(s.blocks[0], indent + 1, lanes_depth)
            if len(s.blocks) > 1:
                other = s.blocks[1]
                if (len(other) == 1 and other[0].kind == "if" and not self.temps_for(other[0])
                        and not self.block_decls.get(id(other))):
                    self.if_(other[0], indent, lanes_depth, chained=True)
                    return
                self.emit(indent, "} else {", None, "else:")
                self.block(other, indent + 1, lanes_depth)
        self.emit(indent, "}", None, "")

    @staticmethod
    def temps_for(s: _S) -> bool:
        """Whether an elif's condition needs a temporary (then it cannot be an else if)."""
        return any(isinstance(sub, ast.Compare) and len(sub.ops) > 1
                   for sub in ast.walk(s.node.test))

    @contextlib.contextmanager
    def lane_control(self, per_lane: bool):
        """Inside a branch or loop some lanes may skip: what it assigns is per lane."""
        self.lane_ctl += per_lane
        try:
            yield
        finally:
            self.lane_ctl -= per_lane

    @contextlib.contextmanager
    def loop(self, node):
        """A loop whose body some lanes leave early (a per-lane break or continue) assigns per
        lane: found in one pass, used in the next."""
        self.loops.append((node, self.lane_ctl))
        diverged = id(node) in self.divergent_loops
        self.lane_ctl += diverged
        try:
            yield
        finally:
            self.lane_ctl -= diverged
            self.loops.pop()

    def uniform(self, node, c: E, what: str, instead: str):
        if c.ty.lanes:
            self.refuse(node, "per-lane condition",
                        f"{what} needs one value for the whole warp, and this one is per lane; "
                        f"write {instead}")

    def for_range(self, s: _S, indent: int, lanes_depth: int):
        n = s.node
        var = n.target.id
        args = [self.expr(a) for a in n.iter.args]
        for node, a in zip(n.iter.args, args, strict=True):
            self.uniform(node, a, "range()", "a while loop: j = start, then while j < stop: "
                                             "... j += 1")
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
        if (n.lineno, n.col_offset) in self.k.unrolled:   # constant bounds, few trips
            self.emit(indent, "#pragma unroll", None, "")
        self.emit(indent, f"for ({init}; {test}; {incr}) {{", n)
        with self.loop(n):
            self.block(s.blocks[0], indent + 1, lanes_depth)
        self.emit(indent, "}", None, "")

    def for_values(self, s: _S, indent: int, lanes_depth: int):
        """for v in (16, 8, 4, 2, 1): a loop over a constant array, unrolled by the compiler
        (#pragma unroll), so break and continue keep their meaning."""
        n = s.node
        var = n.target.id
        vals = [self.expr(e) for e in n.iter.elts]
        ty = vals[0].ty
        for node, v in zip(n.iter.elts, vals, strict=True):
            if v.ty != ty or v.const is None:
                self.refuse(node, "loop value",
                            f"the values of a for loop over a tuple are constants of one type "
                            f"(this one is a {v.ty.text()}, the first a {ty.text()}): a CUDA "
                            f"variable has one type; write them all as ints or all as floats")
        v = self.vars[var]
        v.ty = ty
        v.nonneg = all(x.nonneg for x in vals) and ty.is_int
        v.lane_body = lanes_depth
        T = ty.ctype
        table = self.cname_for(n, f"{var.split('#')[0]}_values")
        k = self.cname_for(n, f"{var.split('#')[0]}_k")
        items = ", ".join(_to(x, T).text for x in vals)
        self.emit(indent, f"const {T} {table}[{len(vals)}] = {{{items}}};", n)
        self.emit(indent, "#pragma unroll", None, "")
        self.emit(indent, f"for (int {k} = 0; {k} < {len(vals)}; ++{k}) {{", None, "")
        self.emit(indent + 1, f"{T} {v.cname} = {table}[{k}];", None, "")
        with self.loop(n):
            self.block(s.blocks[0], indent + 1, lanes_depth)
        self.emit(indent, "}", None, "")

    def simple(self, n, indent: int, lanes_depth: int, merged_name):
        if isinstance(n, ast.Pass):
            self.emit(indent, ";", n)
            return
        if isinstance(n, (ast.Break, ast.Continue)):
            loop, ctl = self.loops[-1]
            if self.lane_ctl > ctl and id(loop) not in self.divergent_loops:
                self.divergent_loops.add(id(loop))
                self.changed = True
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
            elif op == "launch_bounds":
                self.emit(indent, "// __launch_bounds__ in the signature", n)
            elif op == "vstore":
                self.vector_store(call, indent)
            elif op == "copy_async":
                self.copy_async(call, indent)
            elif op in ("mma", "ldmatrix"):
                self.tensor_core(op, call, indent)
            elif op == "commit":
                self.need("cp_async", CP_ASYNC)
                self.emit(indent, "cp_async_commit();", n)
            elif op == "wait":
                self.need("cp_async", CP_ASYNC)
                self.emit(indent, f"cp_async_wait<{call.args[0].value}>();", n)
            elif op == "return_if":
                c = self.expr(call.args[0])
                self.emit(indent, f"if ({c.text}) return;", n)
            else:   # an atomic whose old value is not needed
                self.emit(indent, self.atomic(call).text.removeprefix("(long long)") + ";", n)
            return
        if isinstance(n, ast.Assign):
            tgt = n.targets[0]
            if isinstance(tgt, ast.Tuple):   # x0, x1, x2, x3 = t.vload(a, i, 4)
                return self.vector_load(n, indent, lanes_depth)
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

    def vector_type(self, node, arr, width: int) -> str:
        base = _VECTOR_BASE.get(arr.dtype)
        if base is None or (arr.dtype == "float64" and width != 2):
            self.refuse(node, "vector type", f"CUDA has no vector of {width} {arr.dtype} "
                                             f"elements: float32/int32/uint32 take 2 or 4, "
                                             f"float64 2 (16 bytes at most)")
        return f"{base}{width}"

    def vector_load(self, n, indent, lanes_depth):
        """``x0, x1, x2, x3 = t.vload(a, i, 4)``: one 16-byte load into a float4, then its
        fields (the simulator checks the alignment the cast needs)."""
        call = n.value
        arr = self.array(call.args[0])
        width = call.args[2].value
        vty = self.vector_type(n, arr, width)
        vec = self.cname_for(n, "vec")
        ref = self.flat_index(arr, call.args[1], n)
        self.emit(indent, f"const {vty} {vec} = *reinterpret_cast<const {vty}*>(&{ref});", n)
        for k, tgt in enumerate(n.targets[0].elts):
            value = E(f"{vec}.{'xyzw'[k]}", P_ATOM, Ty(arr.dtype, lanes=True, narrow=False),
                      arr.cty, arr.dtype.startswith("uint"))
            if isinstance(tgt, ast.Name):
                self.assign_var(n, tgt.id, value, indent, lanes_depth, False)
            else:
                self.store(n, tgt, value, indent)

    def vector_store(self, call, indent):
        arr = self.array(call.args[0])
        arr.written = True
        vals = call.args[2].elts
        vty = self.vector_type(call, arr, len(vals))
        ref = self.flat_index(arr, call.args[1], call)
        parts = ", ".join(_assignable(self.expr(v), arr.cty).text for v in vals)
        self.emit(indent, f"*reinterpret_cast<{vty}*>(&{ref}) = make_{vty}({parts});", call)

    def copy_async(self, call, indent):
        """``t.copy_async(sa, j, a, i, 4)``: ``cp_async<16>(&sa[j], &a[i]);`` (the helper's
        inline PTX on sm_80 and later, a plain copy where there is no cp.async)."""
        dst, src = self.array(call.args[0]), self.array(call.args[2])
        dst.written = True
        nbytes = call.args[4].value * np.dtype(dst.dtype).itemsize
        self.need("cp_async", CP_ASYNC)
        self.emit(indent, f"cp_async<{nbytes}>(&{self.flat_index(dst, call.args[1], call)}, "
                          f"&{self.flat_index(src, call.args[3], call)});", call)

    def tensor_core(self, op, call, indent):
        """``t.mma(d, a, b, c)``: ``mma_m16n8k16(d, a, b, c);``; ``t.ldmatrix(r, s, idx, 4)``:
        ``ldmatrix<4, false>(r, &s[...]);`` (inline PTX on the GPUs that have them, the same
        values through shuffles elsewhere: :mod:`~gpu_lessons.kernels.cuda_mma`)."""
        names = ("d", "a", "b", "c") if op == "mma" else ("r", "s")
        arrays = [self.array(node) for node in call.args[:len(names)]]
        for what, arr in zip(names, arrays, strict=False):
            want = "shared" if what == "s" else "local"
            if arr.space not in ((want, "dynamic") if want == "shared" else (want,)):
                self.refuse(call, f"t.{op}", f"{what} must be a "
                                             f"{'shared' if want == 'shared' else 'per-thread'} "
                                             f"array, got a {arr.space} one")
        self.need("linear_tid", _LINEAR_TID)
        self.need("lane_id", _LANE_ID)
        if op == "mma":
            arrays[0].written = True
            self.need("mma", MMA)
            self.emit(indent, f"mma_m16n8k16({', '.join(a.name for a in arrays)});", call)
            return
        arrays[0].written = True
        trans = any(kw.arg == "trans" and kw.value.value for kw in call.keywords)
        self.need("ldmatrix", LDMATRIX)
        self.emit(indent, f"ldmatrix<{call.args[3].value}, {'true' if trans else 'false'}>("
                          f"{arrays[0].name}, &{self.flat_index(arrays[1], call.args[2], call)});",
                  call)

    def assign_name(self, n, name, value_node, indent, lanes_depth, declare):
        if name in self.arrays and isinstance(value_node, ast.Call) and (
                self.is_t(value_node, "shared") or self.is_t(value_node, "local")):
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
            if (s.kind == "simple" and isinstance(n, ast.Assign) and isinstance(
                    n.targets[0], ast.Name) and n.targets[0].id in self.k.register_arrays):
                self.register_array(n, single)
                continue
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
                align = " __align__(16)" if name in self.vector_arrays() else ""
                self._shared_lines[name] = [f"__shared__{align} {cty} {cn}{shape_c};"]
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

    def vector_arrays(self) -> set[str]:
        """The arrays a t.vload/t.vstore touches (a static __shared__ array then needs the
        16-byte alignment a float4 access has, which C gives a float array only on request)."""
        return {node.args[0].id for node in ast.walk(self.k.tree)
                if self.is_t(node, "vload") or self.is_t(node, "vstore")
                or self.is_t(node, "copy_async") or self.is_t(node, "ldmatrix")}

    def register_array(self, n, single):
        """``acc = t.local((8, 8), np.float32)``: ``float acc[8][8] = {};`` (every index is a
        compile-time number: :mod:`gpu_lessons.kernels.registers`)."""
        name = n.targets[0].id
        call = n.value
        dtype_node = call.args[1] if len(call.args) > 1 else next(
            (kw.value for kw in call.keywords if kw.arg == "dtype"), None)
        dtype = "float32" if dtype_node is None else np.dtype(
            dtype_node.attr if dtype_node.attr != "bool_" else "bool").name
        dims = [self.expr(p) for p in self.inline_uniform(call.args[0], single).elts]
        cn = self.cname(name)
        self.arrays[name] = _Array(cn, "local", dtype, dims, node=n)
        shape_c = "".join(f"[{d.text}]" for d in dims)
        self._shared_lines[name] = [f"{_CTYPES[dtype]} {cn}{shape_c} = {{}};"]

    def split_webs(self):
        """Give a reused Python name a fresh variable where its old value is dead: after
        ``d = 16; ...`` at the top, a ``d = 4`` inside ``with t.if_(...)`` that nothing outside
        reads is a separate variable, declared inside that body (as one would write it in C)."""
        protected = set(self.k.params) | set(self.arrays) | {
            s.node.target.id for s in _walk(self.body) if s.kind in ("for_range", "for_values")}
        counter = itertools.count(2)
        loops = ("for_range", "for_values", "while", "while_lanes")

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
                            and not getattr(n, "unpacked", False)
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
            if s.kind in ("for_range", "for_values"):
                loop_vars.add(s.node.target.id)
        for name in names:
            self.vars[name] = _Var(name, self.cname(name.split("#")[0]))
            if name in loop_vars:
                self.check_loop_var(name)
                continue
            self.place(name, self.body)

    def check_loop_var(self, name):
        # every occurrence must be inside a loop that binds it
        def outside(stmts, inside):
            for s in stmts:
                if s.kind in ("for_range", "for_values") and s.node.target.id == name:
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
        self.loops: list = []
        self.divergent_loops: set[int] = set()
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


