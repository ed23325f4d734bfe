"""The warp context ``t``: masks, arithmetic and control flow of one warp."""

from __future__ import annotations

import numpy as np

from ... import _validate
from ...hardware import WARP_SIZE
from ..constructs import HALF_ARITHMETIC
from .async_copy import _AsyncOps
from .errors import SimtError
from .flow import _FlowOps, unweaken
from .lanes import (
    _ALL,
    _ALL_BITS,
    _LANE_IDS,
    _NO_EXTRA,
    _NONE,
    SIM_FILES,
    Dim3,
    Lanes,
    _caller_line,
    _GlobalArg,
    _is_scalar,
    _mask_int,
    _Memory,
    _new_event,
)
from .mma import _MmaOps
from .registers import Registers
from .result import (
    Event,
)
from .vectors import _VectorOps
from .warp_memory import _MemoryOps, _undefined_message

# -- the warp context ---------------------------------------------------------------------------

class WarpContext(_FlowOps, _MemoryOps, _VectorOps, _AsyncOps, _MmaOps):
    """What a kernel sees as ``t``: thread/block indices and the SIMT operations.

    Attributes: ``thread_idx`` (Dim3 of :class:`Lanes`), ``block_idx``, ``block_dim``,
    ``grid_dim`` (Dim3 of ints), ``lane`` (Lanes 0..31), ``warp`` (warp index in the block),
    ``warp_size`` (32).
    """

    warp_size = WARP_SIZE

    def __init__(self, block_run, warp: int):
        self._b = block_run
        sim = self._sim = block_run.sim
        self.warp = warp
        self.block_idx = block_run.block_idx
        self.block_dim = sim.block
        self.grid_dim = sim.grid
        linear = warp * WARP_SIZE + _LANE_IDS
        bx, by, _ = sim.block
        self._alive = linear < sim.threads_per_block
        self._stack = [_ALL]
        self._refresh()
        self._path: list[str] = []
        self._path_t: tuple[str, ...] = ()
        self.lane = Lanes(self, _LANE_IDS.copy(), _ALL_BITS)
        self.thread_idx = Dim3(Lanes(self, linear % bx, _ALL_BITS),
                               Lanes(self, linear // bx % by, _ALL_BITS),
                               Lanes(self, linear // (bx * by), _ALL_BITS))
        self._step = 0
        self._time_offset = 0
        self._warp_syncs = 0    # t.syncwarp() calls so far: lanes' accesses between them race
        self._shared_calls = 0
        self._last_if = None
        self._loops = []        # the plain-Python loops the warp is in (flow._Loop)
        self._async_open = []   # t.copy_async copies not yet committed, then the groups
        self._async_groups = []
        self._args = tuple(self._wrap(a) for a in sim.args)
        # scheduling state
        self.state = "new"
        self._glet = None
        self._barrier_line = None
        self._barrier_event = None

    def _wrap(self, arg):
        if isinstance(arg, _GlobalArg):
            return _Memory(self, arg.data, arg.base, arg.name, "global")
        return arg

    # -- masks -----------------------------------------------------------------------------------
    # The active mask is (innermost branch mask) & (lanes that have not returned); it is
    # cached because every instruction needs it and it changes only at branches and returns.
    def _refresh(self):
        self._mask = self._stack[-1] & self._alive
        self._mask_bits = _mask_int(self._mask)
        self._alive_bits = _mask_int(self._alive)
        self._act = None  # indices of the active lanes, computed when first needed

    def _active_lanes(self) -> np.ndarray:
        if self._act is None:
            self._act = self._mask.nonzero()[0]
        return self._act

    def _push(self, branch_mask):
        self._stack.append(branch_mask)
        self._refresh()

    def _pop(self):
        self._stack.pop()
        self._refresh()

    @property
    def active_mask(self) -> int:
        """The current active mask as a 32-bit int, like ``__activemask()``."""
        return self._mask_bits

    # -- recording -------------------------------------------------------------------------------
    def _issue(self, kind, line, **extra):
        """Record one warp instruction under the current mask; with no lane active nothing
        issues (the warp branches around the code)."""
        if not self._mask_bits:
            return None
        sim = self._sim
        sim.count += 1
        if sim.count > sim.max_instructions:
            raise SimtError(
                f"the kernel issued more than max_instructions={sim.max_instructions} warp "
                f"instructions (an endless t.while_ loop?); pass a larger max_instructions "
                f"to run() if the kernel really is that long")
        b = self._b
        if extra:
            ev = Event(b.linear, self.warp, self._step, self._step + self._time_offset, b.phase,
                       kind, self._mask_bits, self._path_t, line, **extra)
        else:  # the common case, without NamedTuple's argument parsing
            ev = _new_event(Event, (b.linear, self.warp, self._step,
                                    self._step + self._time_offset, b.phase, kind,
                                    self._mask_bits, self._path_t, line, *_NO_EXTRA))
        self._step += 1
        sim.events.append(ev)
        return len(sim.events) - 1

    def _value(self, v, bits: int, what):
        """The 32 lane values of ``v`` (Lanes or scalar); checks they exist on ``bits``."""
        if type(v) is Lanes:
            if v._ctx is not self:
                raise SimtError("a value from another warp was used: lane values belong to the "
                                "warp that computed them (share data through memory)")
            missing = bits & ~v._defined
            if missing:
                raise SimtError(_undefined_message(what, missing, v._defined))
            return v._v
        if _is_scalar(v):
            return v
        raise TypeError(f"{what} must be a lane value (Lanes) or a number, "
                        f"got {type(v).__name__}")

    # -- arithmetic ------------------------------------------------------------------------------
    def _alu(self, ufunc, inputs):
        bits = self._mask_bits
        args = []
        weak = False
        for v in inputs:  # _value, inlined for the common case: this runs per instruction
            if type(v) is Lanes and v._ctx is self and not bits & ~v._defined:
                args.append(v._v)
                weak = weak or v._weak
            else:
                args.append(self._value(v, bits, "an operand"))
        for a in args:
            dt = getattr(a, "dtype", None)
            if dt is not None and dt.itemsize == 2 and dt.kind in "fV":
                raise TypeError(f"line {_caller_line()}: "
                                + HALF_ARITHMETIC.format(dtype=dt.name))
        result_weak = False
        if weak:
            args, result_weak = unweaken(args, inputs)
        out = ufunc(*args)  # NumPy errors are off while warps run: inf/nan as on a GPU
        if type(out) is not np.ndarray or out.shape != (WARP_SIZE,):
            out = np.broadcast_to(np.asarray(out), (WARP_SIZE,)).copy()
        line = _caller_line()
        self._issue("alu", line)
        if out.dtype == np.float64 and not result_weak:
            self._sim.fp64(line, inputs)
        return Lanes(self, out, bits, weak=result_weak and out.dtype != np.bool_)

    def _assign(self, target: Lanes, value):
        if target._ctx is not self:
            raise SimtError("y[...] = value: y belongs to another warp")
        bits = self._mask_bits
        v = self._value(value, bits, "the value assigned with y[...] =")
        mask = self._mask
        target._v[mask] = v[mask] if isinstance(v, np.ndarray) else v
        target._defined |= bits

    def local(self, value=0, dtype=None) -> Lanes:
        """Declare a per-thread variable (``float acc = 0;``) that branches can update with
        ``acc[...] = ...``.  One ``alu`` instruction (a move).

        With a shape, ``t.local((8, 8), np.float32)`` declares a per-thread array
        (:class:`~gpu_lessons.kernels.simt.registers.Registers`, zero to begin with; float32
        unless ``dtype`` says otherwise)."""
        if type(value) is tuple:
            shape = _validate.shape("t.local's shape", value)
            return Registers(self, shape, np.float32 if dtype is None else dtype)
        bits = self._mask_bits
        v = self._value(value, bits, "t.local's value")
        arr = np.empty(WARP_SIZE, dtype=dtype if dtype is not None else np.asarray(v).dtype)
        arr[:] = v
        self._issue("alu", _caller_line())
        return Lanes(self, arr, bits, variable=True)

    def where(self, cond, a, b) -> Lanes:
        """``cond ? a : b`` per lane, without branching (a select instruction)."""
        bits = self._mask_bits
        c = self._cond(cond, bits, "t.where's condition")
        cbits = _mask_int(c)
        va = self._value(a, bits & cbits, "t.where's first value")
        vb = self._value(b, bits & ~cbits, "t.where's second value")
        weak = False
        if (type(a) is Lanes and a._weak) or (type(b) is Lanes and b._weak):
            (va, vb), weak = unweaken([va, vb], (a, b))
        out = np.where(c, va, vb)
        if out.shape != (WARP_SIZE,):
            out = np.broadcast_to(out, (WARP_SIZE,)).copy()
        self._issue("alu", _caller_line())
        return Lanes(self, out, bits, weak=weak)

    def _cond(self, cond, bits, what) -> np.ndarray:
        if isinstance(cond, Lanes):
            return np.asarray(self._value(cond, bits, what), dtype=bool)
        if isinstance(cond, (bool, np.bool_, int, np.integer)):
            return _ALL if cond else _NONE
        raise TypeError(f"{what} must be a per-lane condition (e.g. t.thread_idx.x < n) or a "
                        f"bool, got {type(cond).__name__}")

    # -- control flow ----------------------------------------------------------------------------
    def if_(self, cond, label: str | None = None) -> _Branch:
        """``with t.if_(cond):`` runs its body for the active lanes where ``cond`` holds."""
        return _Branch(self, cond, label, _caller_line())

    def else_(self) -> _Else:
        """``with t.else_():`` right after a ``with t.if_(...)`` block: the other lanes."""
        return _Else(self, _caller_line())

    def _enter(self, branch_mask, label):
        self._push(branch_mask)
        self._path.append(label)
        self._path_t = tuple(self._path)

    def _leave(self):
        self._pop()
        self._path.pop()
        self._path_t = tuple(self._path)

    def while_(self, cond, label: str | None = None):
        """``for _ in t.while_(lambda: i < n):`` loops while ``cond()`` holds for some lane.

        Lanes whose condition fails drop out and wait; the warp reconverges when the last
        lane leaves.  Update loop variables with ``i[...] = i + step``.
        """
        if not callable(cond):
            raise TypeError("t.while_ needs a function that returns the condition, e.g. "
                            "t.while_(lambda: i < n), so it can be tested on every iteration")
        line = _caller_line()
        label = label or f"L{line}"
        looping = self._stack[-1].copy()
        diverged = False
        while True:
            # the test runs in the enclosing code (like t.if_'s), the body in "label:loop"
            self._push(looping)
            try:
                c = self._cond(cond(), self._mask_bits, "the t.while_ condition")
                self._issue("branch", line)
            finally:
                self._pop()
            still = looping & c
            if not (still & self._alive).any():
                break
            if ((looping & ~c) & self._alive).any():
                diverged = True
            looping = still
            self._enter(looping, f"{label}:loop")
            try:
                yield
            finally:
                self._leave()
        if diverged:
            self._marker(line)

    def return_if(self, cond) -> None:
        """``if (cond) return;``: lanes where ``cond`` holds stop for good."""
        mask = self._mask
        c = self._cond(cond, self._mask_bits, "t.return_if's condition")
        self._issue("branch", _caller_line())
        self._alive = self._alive & ~(mask & c)
        self._refresh()

    def _marker(self, line):
        """Note where a diverged warp's lanes meet again (no instruction is issued)."""
        if self._mask_bits:
            b = self._b
            self._sim.events.append(Event(b.linear, self.warp, self._step,
                                          self._step + self._time_offset, b.phase,
                                          "reconverge", self._mask_bits, self._path_t, line))


class _Branch:
    def __init__(self, ctx: WarpContext, cond, label, line):
        self.ctx, self.cond, self.line = ctx, cond, line
        self.label = label or f"L{line}"

    def __enter__(self):
        ctx = self.ctx
        parent = ctx._mask
        c = ctx._cond(self.cond, ctx._mask_bits, "t.if_'s condition")
        ctx._issue("branch", self.line)
        self.c = c
        self.diverged = bool((parent & c).any() and (parent & ~c).any())
        ctx._enter(ctx._stack[-1] & c, f"{self.label}:then")
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._leave()
        if exc[0] is None:
            if self.diverged:
                ctx._marker(self.line)
            # (the warp's own issue slot: other warps' events may come in between when
            # the body has a barrier)
            ctx._last_if = (self, len(ctx._stack), ctx._step)
        return False


class _Else:
    def __init__(self, ctx: WarpContext, line):
        self.ctx, self.line = ctx, line

    def __enter__(self):
        ctx = self.ctx
        last = ctx._last_if
        ctx._last_if = None
        if last is None or last[1] != len(ctx._stack) or last[2] != ctx._step:
            raise SimtError("t.else_() must directly follow a `with t.if_(...)` block at the "
                            "same level")
        self.branch = br = last[0]
        events = ctx._sim.events
        if (br.diverged and events and events[-1].kind == "reconverge"
                and events[-1].warp == ctx.warp and events[-1].block == ctx._b.linear):
            events.pop()  # the lanes meet after the else, not between the two paths
        ctx._enter(ctx._stack[-1] & ~br.c, f"{br.label}:else")
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._leave()
        if exc[0] is None and self.branch.diverged:
            ctx._marker(self.branch.line)
        return False



SIM_FILES.add(__file__)
