"""Plain Python control flow on lane values: what ``if``, ``while``, ``break``, ``and`` and
``x if c else y`` mean for a warp.

:mod:`gpu_lessons.kernels.desugar` rewrites a validated kernel so that every plain-Python
construct whose meaning depends on per-lane values calls one of the hooks below (``t._if``,
``t._loop``, ``t._set``, ...).  Each hook looks at its operands when the warp reaches it:

* a **uniform** value (a Python number, a NumPy scalar: the same for the whole warp) takes the
  Python path: ``if n > 0:`` runs one body, ``while k < 4:`` loops, ``a and b`` short-circuits
  as Python does, and nothing is issued — as CUDA's uniform branches cost nothing here;
* a **per-lane** value (:class:`~gpu_lessons.kernels.simt.lanes.Lanes`) takes the SIMT path, with
  the meaning CUDA C gives the same statement for each thread: both bodies of an ``if`` run,
  each under the lanes that took it; a ``while`` runs until its last lane leaves; ``break``,
  ``continue`` and ``return`` retire the lanes that execute them (from the loop, from this
  iteration, from the kernel) while the others go on; the right side of ``and``/``or`` and the
  arm of ``x if c else y`` that a lane does not take is not evaluated for it, so
  ``x[i - 1] if i > 0 else 0.0`` never reads ``x[-1]``.

Assignment keeps registers per lane: ``acc += v`` inside a branch updates the lanes that ran
it and leaves the others' ``acc`` as it was (:meth:`_FlowOps._set`).  A Python number that
becomes a per-lane value that way stays *weak* (NumPy's rule for Python scalars, NEP 50): ``n =
0`` then ``n += 1`` in a branch, then ``n * x[i]`` with float32 ``x`` is float32 arithmetic,
as ``int n`` would be in C.

Source: CUDA C++ Programming Guide, "SIMT Architecture" (divergent paths run one after the
other, with the lanes that took them), "Independent Thread Scheduling".
"""

from __future__ import annotations

import operator

import numpy as np

from .lanes import _ALL_BITS, _NONE, SIM_FILES, Lanes, _caller_line, _is_scalar

#: Comparison operators of a chained comparison, by the names the rewrite passes.
_COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
            "eq": operator.eq, "ne": operator.ne}


class _Unset:
    """The value of a name before its first assignment (only the rewrite sees it)."""

    def __repr__(self):
        return "<unset>"


UNSET = _Unset()


class _UniformIf:
    """``if`` on a warp-uniform condition: Python's own ``if``."""

    __slots__ = ("other", "then")

    def __init__(self, taken: bool):
        self.then, self.other = taken, not taken

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _LaneIf:
    """``if`` on a per-lane condition: the body runs under the lanes where it holds."""

    __slots__ = ("c", "ctx", "diverged", "has_else", "label", "line", "other", "then")

    def __init__(self, ctx, cond: Lanes, line, has_else: bool):
        self.ctx, self.line, self.has_else = ctx, line, has_else
        self.label = f"L{line}"
        self.then = self.other = True
        bits = ctx._mask_bits
        self.c = np.asarray(ctx._value(cond, bits, "the if's condition"), dtype=bool)

    def __enter__(self):
        ctx = self.ctx
        parent = ctx._mask
        ctx._issue("branch", self.line)
        self.diverged = bool((parent & self.c).any() and (parent & ~self.c).any())
        ctx._enter(ctx._stack[-1] & self.c, f"{self.label}:then")
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._leave()
        if exc[0] is None and self.diverged and not self.has_else:
            ctx._marker(self.line)
        return False


class _LaneElse:
    __slots__ = ("branch",)

    def __init__(self, branch: _LaneIf):
        self.branch = branch

    def __enter__(self):
        br = self.branch
        ctx = br.ctx
        ctx._enter(ctx._stack[-1] & ~br.c, f"{br.label}:else")
        return self

    def __exit__(self, *exc):
        br = self.branch
        br.ctx._leave()
        if exc[0] is None and br.diverged:
            br.ctx._marker(br.line)
        return False


class _Loop:
    """One loop's lanes: which are still in it, which left by ``break``, which skipped the rest
    of this iteration by ``continue``.  Its mask is an entry of the warp's mask stack."""

    __slots__ = ("cond", "ctx", "depth", "diverged", "items", "line", "skipped")

    def __init__(self, ctx, items, cond, line):
        self.ctx, self.items, self.cond, self.line = ctx, items, cond, line
        self.diverged = False

    def __enter__(self):
        ctx = self.ctx
        ctx._enter(ctx._stack[-1].copy(), f"L{self.line}:loop")
        self.depth = len(ctx._stack) - 1
        self.skipped = np.zeros_like(ctx._stack[-1])
        ctx._loops.append(self)
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._loops.pop()
        del ctx._stack[self.depth + 1:]   # branches a native break jumped out of
        ctx._leave()
        if exc[0] is None and self.diverged:
            ctx._marker(self.line)
        return False

    def _start_iteration(self) -> bool:
        """Readmit the lanes that ``continue``d; False when no lane is left in the loop."""
        ctx = self.ctx
        stack = ctx._stack
        del stack[self.depth + 1:]
        if self.skipped.any():
            stack[self.depth] = stack[self.depth] | self.skipped
            self.skipped[:] = False
        ctx._refresh()
        return bool((stack[self.depth] & ctx._alive).any())

    def __iter__(self):
        if self.cond is None:
            for item in self.items:
                if not self._start_iteration():
                    return
                yield item
            return
        ctx = self.ctx
        while self._start_iteration():
            c = self.cond()
            if type(c) is not Lanes:
                if not c:
                    return
                yield None
                continue
            looping = ctx._stack[self.depth]
            test = np.asarray(ctx._value(c, ctx._mask_bits, "the while condition"), dtype=bool)
            ctx._issue("branch", self.line)
            if ((looping & ~test) & ctx._alive).any():
                self.diverged = True
            ctx._stack[self.depth] = looping & test
            ctx._refresh()
            if not ctx._mask.any():
                return
            yield None

    def _leave_lanes(self, lanes: np.ndarray, until_next_iteration: bool):
        ctx = self.ctx
        stack = ctx._stack
        for d in range(self.depth, len(stack)):
            stack[d] = stack[d] & ~lanes
        if until_next_iteration:
            self.skipped |= lanes
        self.diverged = True
        ctx._refresh()


class _FlowOps:
    """The control-flow hooks of the warp context (the rewrite calls them; a kernel cannot,
    since the kernel language refuses names that start with ``_``)."""

    _unset = UNSET

    # -- if / else --------------------------------------------------------------------------------
    def _if(self, cond, has_else: bool = False):
        if type(cond) is Lanes:
            return _LaneIf(self, cond, _caller_line(), has_else)
        return _UniformIf(bool(cond))

    def _orelse(self, branch):
        if type(branch) is _LaneIf:
            return _LaneElse(branch)
        return branch

    # -- loops ------------------------------------------------------------------------------------
    def _loop(self, items):
        """``for v in items:`` whose body may ``break`` or ``continue`` per lane."""
        return _Loop(self, items, None, _caller_line())

    def _loop_while(self, cond):
        """``while cond():`` on a uniform or per-lane condition."""
        return _Loop(self, None, cond, _caller_line())

    def _all_here(self, loop: _Loop | None) -> bool:
        """Whether every lane still running (in ``loop``, or in the kernel) is active."""
        here = self._mask
        everyone = self._alive if loop is None else self._stack[loop.depth] & self._alive
        return bool((here == everyone).all())

    def _break(self) -> bool:
        """``break``: True when every lane left in the loop breaks (then Python breaks)."""
        loop = self._loops[-1]
        if self._all_here(loop):
            return True
        loop._leave_lanes(self._mask.copy(), until_next_iteration=False)
        return False

    def _continue(self) -> bool:
        loop = self._loops[-1]
        if self._all_here(loop):
            return True
        loop._leave_lanes(self._mask.copy(), until_next_iteration=True)
        return False

    def _return(self) -> bool:
        """``return``: the active lanes stop for good; True when no lane is left."""
        if self._all_here(None):
            return True
        self._alive = self._alive & ~self._mask
        self._refresh()
        return False

    # -- assignment -------------------------------------------------------------------------------
    def _diverged(self) -> bool:
        return self._mask_bits != self._alive_bits

    def _set(self, old, new):
        """``x = new`` where ``x`` held ``old``: lanes that do not run the assignment keep theirs."""
        if type(old) is Lanes and old._variable:
            self._assign(old, new)           # t.local's variable: a masked move
            return old
        if not self._diverged() and self._mask_bits:
            return new
        bits = self._mask_bits
        if old is UNSET:
            if type(new) is Lanes:
                return Lanes(self, new._v, new._defined & bits, weak=new._weak)
            arr, weak = _lane_array(new)
            return Lanes(self, arr, bits, weak=weak)
        if type(old) is not Lanes and type(new) is not Lanes and old == new \
                and type(old) is type(new):
            return new
        mask = self._mask
        ov, ow = _values_of(self, old)
        nv, nw = (self._value(new, bits, "the value assigned"), _weak_of(new))
        dtype = _merged_dtype(old, ow, new, nw)
        out = np.empty(32, dtype=dtype)
        out[:] = ov
        out[mask] = nv[mask] if isinstance(nv, np.ndarray) else nv
        defined = (old._defined if type(old) is Lanes else _ALL_BITS) | bits
        return Lanes(self, out, defined, weak=ow and nw)

    # -- expressions ------------------------------------------------------------------------------
    def _truth(self, v) -> Lanes:
        """A per-lane operand of and/or/not as a bool per lane."""
        if v.dtype == np.bool_:
            return v
        return v != 0

    def _and(self, *thunks):
        return self._shortcircuit(thunks, want=True)

    def _or(self, *thunks):
        return self._shortcircuit(thunks, want=False)

    def _shortcircuit(self, thunks, want: bool):
        v = thunks[0]()
        for th in thunks[1:]:
            if type(v) is not Lanes:
                if bool(v) != want:
                    return v
                v = th()
                continue
            v = self._lane_step(self._truth(v), th, want)
        if type(v) is Lanes:
            return self._truth(v)
        return v

    def _lane_step(self, cv: Lanes, thunk, want: bool) -> Lanes:
        """``cv and thunk()`` (want True) or ``cv or thunk()``: the thunk runs only under the
        lanes whose answer it decides."""
        line = _caller_line()
        bits = self._mask_bits
        c = np.asarray(self._value(cv, bits, "an operand of and/or"), dtype=bool)
        decide = c if want else ~c
        out = c.copy()
        if (decide & self._mask).any():
            self._push(self._stack[-1] & decide)
            try:
                w = thunk()
                m = self._mask
                if type(w) is Lanes:
                    wv = np.asarray(self._value(self._truth(w), self._mask_bits,
                                                "an operand of and/or"), dtype=bool)
                    out[m] = wv[m]
                else:
                    out[m] = bool(w)
            finally:
                self._pop()
        self._issue("alu", line)
        return Lanes(self, out, bits)

    def _not(self, v):
        if type(v) is not Lanes:
            return not v
        return self._alu(np.logical_not, (self._truth(v),))

    def _chain(self, first, *pairs):
        """``a < b <= c``: each comparison under the lanes for which the ones before held, each
        operand evaluated once."""
        left = first()
        result = None
        for op, thunk in pairs:
            cmp = _COMPARE[op]
            if result is None:
                right = thunk()
                result = cmp(left, right)
                left = right
                continue
            if type(result) is not Lanes:
                if not result:
                    return result
                right = thunk()
                result = cmp(left, right)
                left = right
                continue
            cell = []

            def step(thunk=thunk, cmp=cmp, left=left, cell=cell):
                right = thunk()
                cell.append(right)
                return cmp(left, right)

            result = self._lane_step(self._truth(result), step, want=True)
            left = cell[0] if cell else left
        if type(result) is Lanes:
            return self._truth(result)
        return result

    def _ifexp(self, cond, if_true, if_false):
        """``a if cond else b``: each arm evaluated only for the lanes that take it."""
        if type(cond) is not Lanes:
            return if_true() if cond else if_false()
        bits = self._mask_bits
        c = np.asarray(self._value(cond, bits, "the condition of `a if c else b`"), dtype=bool)
        mask = self._mask
        arms = []
        for take, thunk in ((c, if_true), (~c, if_false)):
            if (take & mask).any():
                self._push(self._stack[-1] & take)
                try:
                    arms.append(thunk())
                finally:
                    self._pop()
            else:
                arms.append(None)
        # An arm no active lane takes is still evaluated, under no lane at all (it issues and
        # reads nothing), for its type: C's ``c ? a : b`` has NumPy's promotion of both arms
        # whichever is taken (``x[i] if c else 0`` is float32 even where every lane takes 0).
        for k, thunk in ((0, if_true), (1, if_false)):
            if arms[k] is None:
                self._push(_NONE)
                try:
                    arms[k] = thunk()
                except Exception:   # an arm that cannot run at all: the other one's type
                    arms[k] = arms[1 - k]
                finally:
                    self._pop()
        return self.where(Lanes(self, c, bits), arms[0], arms[1])

    def _min(self, *args):
        return self._extreme(args, min, np.minimum)

    def _max(self, *args):
        return self._extreme(args, max, np.maximum)

    def _extreme(self, args, python, ufunc):
        if not any(type(a) is Lanes for a in args):
            return python(*args)
        out = args[0]
        for a in args[1:]:
            out = self._alu(ufunc, (out, a))
        return out

    def _math(self, name: str, *args):
        """``math.<name>(x)``: NumPy's function of that name (float32 stays float32); a Python
        number gives a Python float."""
        fn = getattr(np, name)
        if any(type(a) is Lanes or isinstance(a, np.generic) for a in args):
            return fn(*args)
        return float(fn(*args))


def _lane_array(value):
    """32 copies of a uniform value, and whether it is weak (a Python number)."""
    weak = isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)
    if weak:
        dtype = np.bool_ if isinstance(value, bool) else (
            np.int64 if isinstance(value, int) else np.float64)
    else:
        dtype = np.asarray(value).dtype
    arr = np.empty(32, dtype=dtype)
    arr[:] = value
    return arr, weak


def _weak_of(v) -> bool:
    if type(v) is Lanes:
        return v._weak
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)


def _values_of(ctx, v):
    if type(v) is Lanes:
        return v._v, v._weak
    if _is_scalar(v):
        return v, _weak_of(v)
    raise TypeError(f"a kernel variable must hold a lane value or a number, got {type(v).__name__}")


def _rep(v, weak: bool):
    """What NumPy's promotion sees for ``v``: a Python scalar of its kind when weak."""
    if weak:
        kind = v.dtype.kind if type(v) is Lanes else np.asarray(v).dtype.kind
        return {"b": False, "i": 0, "u": 0, "f": 0.0}.get(kind, 0.0)
    return v.dtype if type(v) is Lanes else np.asarray(v).dtype


def _merged_dtype(old, old_weak, new, new_weak):
    if old_weak and new_weak:
        kinds = {np.asarray(_values_of(None, x)[0]).dtype.kind for x in (old, new)}
        return np.float64 if "f" in kinds else (np.int64 if kinds & {"i", "u"} else np.bool_)
    return np.result_type(_rep(old, old_weak), _rep(new, new_weak))


def unweaken(values: list, inputs) -> tuple[list, bool]:
    """Operands of one instruction with weak per-lane values cast as NumPy would cast Python
    scalars beside the strong operands; and whether the result is weak (no strong operand)."""
    weak_flags = [_weak_of(v) for v in inputs]
    if all(weak_flags):
        return values, True
    strong = [_rep(v, False) for v, w in zip(inputs, weak_flags, strict=True) if not w]
    out = []
    for val, v, w in zip(values, inputs, weak_flags, strict=True):
        if w and type(v) is Lanes:
            target = np.result_type(_rep(v, True), *strong)
            val = val.astype(target)
        out.append(val)
    return out, False


SIM_FILES.add(__file__)
