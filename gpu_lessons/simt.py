"""A SIMT simulator: write a kernel from one thread's point of view, run it as warps.

A kernel is a plain Python function that receives a *warp context* ``t`` followed by its
arguments, the way a CUDA kernel receives ``threadIdx`` and pointers:

>>> import numpy as np
>>> def scale(t, x, out, n):
...     i = t.block_idx.x * t.block_dim.x + t.thread_idx.x    # int i = blockIdx.x * ...
...     t.return_if(i >= n)                                     # if (i >= n) return;
...     with t.if_(t.thread_idx.x % 2 == 0):                    # if (threadIdx.x % 2 == 0)
...         out[i] = x[i] * 2.0
...     with t.else_():                                         # else
...         out[i] = x[i] * 0.5
>>> x, out = np.ones(256, np.float32), np.zeros(256, np.float32)
>>> result = run(scale, 2, 128, x, out, 256)     # scale<<<2, 128>>>(x, out, 256)
>>> out[:4]                                       # arrays are written in place
array([2. , 0.5, 2. , 0.5], dtype=float32)
>>> result.simt_efficiency, result.sectors_per_request
(0.75, 4.0)

Per warp, 6 instructions run with all 32 lanes (``+ thread_idx.x``, ``>=``, the return test,
``%``, ``==``, the if test) and 6 with 16 lanes (load, multiply, store in each path):
(6·32 + 6·16) / (12·32) = 0.75.  Every load or store of 16 alternate floats still touches
the same 4 sectors as 32 consecutive ones.

How it works
------------
* **A warp executes together.**  The simulator calls the kernel once per warp.  Every
  per-thread value (``t.thread_idx.x``, a load, ``i * 2``) is a :class:`Lanes`: 32 numbers,
  one per lane, held in a NumPy array.  Each Python operator on lane values is one warp
  instruction, recorded with the warp's *active mask* at that moment.  Values that are the
  same for the whole block (``t.block_idx``, ``t.block_dim``, Python ints) are plain Python
  numbers and cost nothing, like CUDA's uniform values.
* **Branches are visible.**  A per-lane condition cannot steer a Python ``if`` (one Python
  ``if`` cannot go both ways), so branches are written ``with t.if_(cond):`` /
  ``with t.else_():``.  Both bodies run, each with the lanes that took it; a body whose mask
  is empty issues nothing (the warp jumps over it).  Paths therefore run one after the other
  and the lanes meet again (reconverge) after the ``else`` — the classic SIMT stack
  behaviour (CUDA C++ Programming Guide, "SIMT Architecture").  ``t.while_`` is a loop whose
  trip count differs per lane; ``t.return_if`` retires lanes; ``t.where`` selects.
  Python itself still executes every body for every warp — only the simulated operations
  are masked — so keep plain-Python side effects (``print``, ``raise``, appending to a
  list) out of branch bodies, or expect them once per warp.
* **A value made inside a branch exists only for the lanes that made it.**  Python
  assignment cannot be masked, so a value computed inside ``t.if_`` carries the lanes it is
  defined on, and using it where other lanes are active raises an error that says how to fix
  it (declare ``y = t.local(0.0)`` before the branch and write ``y[...] = ...`` inside it, or
  merge with ``t.where``) — in CUDA the variable would simply be out of scope.
* **Memory.**  Array arguments are global memory; ``t.shared(shape)`` declares a block's
  ``__shared__`` array.  ``a[i]`` and ``a[i] = v`` are warp-wide loads and stores: every
  access is fed, as 32 byte addresses, to :func:`gpu_lessons.memory.global_load` (32-byte
  sectors) or :func:`gpu_lessons.memory.shared_load` (banks and wavefronts).  Global arrays
  get 256-byte-aligned base addresses (as ``cudaMalloc`` gives); each shared array starts at
  a multiple of 128 bytes, i.e. at bank 0.  Stores are counted with the same sector and bank
  rules as loads.
* **Barriers and scheduling.**  ``t.sync()`` is ``__syncthreads()``.  Each warp runs in its
  own Python thread, but only one runs at a time: the warps of a block take turns, each
  running until its next barrier (or the end), in the order ``order`` says.  That is one
  legal schedule of the real machine; code whose answer depends on the schedule has a race.
* **Race detection.**  Between two barriers, a shared-memory word written by one warp and
  read or written by another warp is a race (a missing ``__syncthreads()``); each is reported
  with the array, index, warps and source lines.  Accesses within one warp are in program
  order here (warps run in lockstep), so intra-warp races of independent thread scheduling
  (Volta and later, fixed by ``__syncwarp()``) are outside this model.

The instruction set is the simulator's own, not SASS: one warp instruction per operator on
lane values (``alu``), per ``t.if_``/``t.while_`` test or ``t.return_if`` (``branch``), per
load or store (``ld.global``, ``st.global``, ``ld.shared``, ``st.shared``), per ``t.where`` or
``t.local`` (``alu``) and per barrier (``bar.sync``).  Python ``for`` loops over plain ints are
unrolled at no cost, as ``#pragma unroll`` would.  The counts are for reasoning about ratios
(SIMT efficiency, sectors per request, conflicts), not for predicting cycle counts.

SIMT efficiency = (sum of active lanes over issued warp instructions) / (32 x instructions),
the quantity Nsight Compute reports as "Avg. Active Threads Per Warp" / 32.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _validate
from .hardware import WARP_SIZE
from .memory import global_load, shared_load

#: Per-block and per-dimension limits of every compute capability since 2.0 (Programming
#: Guide, "Compute Capabilities", Table "Technical Specifications").
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
#: Static ``__shared__`` memory per block (Programming Guide: above 48 KB needs dynamic
#: shared memory and an explicit opt-in).
MAX_STATIC_SHARED_BYTES = 48 * 1024
#: Alignment of each global array (cudaMalloc returns at least 256-byte aligned pointers,
#: Programming Guide "Device Memory Accesses") and of each shared array in this model.
GLOBAL_ALIGN = 256
SHARED_ALIGN = 128

ORDERS = ("ascending", "descending")
KINDS = ("alu", "branch", "ld.global", "st.global", "ld.shared", "st.shared", "bar.sync")

_THIS_FILE = __file__
_LANE_BITS = np.array([1 << i for i in range(WARP_SIZE)], dtype=np.uint64)
_ALL = np.ones(WARP_SIZE, dtype=bool)
_NONE = np.zeros(WARP_SIZE, dtype=bool)


class SimtError(RuntimeError):
    """A kernel did something the SIMT model (or CUDA) does not allow; the message says what."""


class _Aborted(BaseException):
    """Unwinds a warp thread when the run is abandoned (not an error of the kernel)."""


class Dim3(NamedTuple):
    """``dim3``: x, y, z."""

    x: object
    y: object
    z: object


def _mask_int(mask: np.ndarray) -> int:
    return int(_LANE_BITS[mask].sum())


def _caller_line() -> int | None:
    """Line number in the kernel's own source of the call being recorded."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == _THIS_FILE:
        f = f.f_back
    return None if f is None else f.f_lineno


# -- lane values ----------------------------------------------------------------------------------

class Lanes:
    """One value per lane of a warp (a register, in CUDA terms).

    Arithmetic, comparisons and NumPy ufuncs on ``Lanes`` are warp instructions issued under
    the current active mask.  ``values`` gives the 32 numbers; ``defined`` which lanes hold
    a meaningful one.  A variable declared with ``y = t.local(...)`` can be updated in place
    with ``y[...] = expr``, which writes only the active lanes (a masked move).
    """

    __hash__ = None  # == is element-wise

    def __init__(self, ctx: WarpContext, values: np.ndarray, defined: np.ndarray,
                 variable: bool = False):
        self._ctx = ctx
        self._v = values
        self._defined = defined
        self._variable = variable

    @property
    def values(self) -> np.ndarray:
        """A copy of the 32 lane values (inactive or undefined lanes hold leftovers)."""
        return self._v.copy()

    @property
    def defined(self) -> np.ndarray:
        """Which lanes hold a value (bool[32])."""
        return self._defined.copy()

    @property
    def dtype(self):
        return self._v.dtype

    def __repr__(self) -> str:
        shown = " ".join(str(v) if d else "·" for v, d in zip(self._v.tolist(),
                                                               self._defined.tolist(),
                                                               strict=True))
        return f"Lanes({self._v.dtype}: [{shown}])"

    # NumPy hands every ufunc on a Lanes (np.sqrt(x), 2 + x, np.maximum(x, y)) to us.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            return NotImplemented
        ctx = None
        for v in inputs:
            if isinstance(v, Lanes):
                if ctx is None:
                    ctx = v._ctx
                elif v._ctx is not ctx:
                    raise SimtError("a value from another warp was used: lane values belong to "
                                    "the warp that computed them (share data through memory)")
            elif not _is_scalar(v):
                return NotImplemented
        return ctx._alu(ufunc, inputs)

    def __bool__(self):
        raise TypeError(
            "a per-lane value has no single truth value, so a Python `if`/`while`/`and`/`or` "
            "cannot use it: write `with t.if_(cond):` (and `with t.else_():`), "
            "`for _ in t.while_(lambda: cond):`, or combine conditions with & | ~")

    def __int__(self):
        raise TypeError("a per-lane value is 32 numbers, not one: use .values to look at them")

    __float__ = __index__ = __int__

    def __iter__(self):
        raise TypeError("a per-lane value cannot be iterated; use .values to look at the lanes")

    def __setitem__(self, key, value):
        if key is not Ellipsis:
            raise TypeError("write lane values with y[...] = value (a masked move into y)")
        if not self._variable:
            # Python names share objects: without this, `i = t.thread_idx.x; i[...] = 0`
            # would overwrite threadIdx itself.
            raise TypeError("only variables declared with t.local() can be assigned in place: "
                            "write y = t.local(initial value) first, then y[...] = ...")
        self._ctx._assign(self, value)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return np.positive(self)

    def __abs__(self):
        return np.absolute(self)

    def __invert__(self):
        return np.invert(self)


def _binary(ufunc, reflected=False):
    if reflected:
        def op(self, other):
            return ufunc(other, self)
    else:
        def op(self, other):
            return ufunc(self, other)
    return op


for _name, _uf in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                   ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                   ("mod", np.remainder), ("pow", np.power), ("and", np.bitwise_and),
                   ("or", np.bitwise_or), ("xor", np.bitwise_xor), ("lshift", np.left_shift),
                   ("rshift", np.right_shift)]:
    setattr(Lanes, f"__{_name}__", _binary(_uf))
    setattr(Lanes, f"__r{_name}__", _binary(_uf, reflected=True))
for _name, _uf in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                   ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(Lanes, f"__{_name}__", _binary(_uf))
del _name, _uf


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, bool, np.generic))


# -- memory -------------------------------------------------------------------------------------

class _Memory:
    """A global or shared array as one warp sees it: ``a[i]`` loads, ``a[i] = v`` stores."""

    def __init__(self, ctx, data: np.ndarray, base: int, name: str, space: str, alloc=None):
        self._ctx = ctx
        self.data = data
        self.base = base
        self.name = name
        self.space = space
        self._alloc = alloc

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"<{self.space} array {self.name} {self.data.dtype}{list(self.data.shape)}>"

    def __getitem__(self, index):
        return self._ctx._access(self, index, None, _caller_line())

    def __setitem__(self, index, value):
        self._ctx._access(self, index, value, _caller_line())


@dataclass
class _SharedAlloc:
    name: str
    data: np.ndarray
    base: int
    written: np.ndarray


# -- the warp context ---------------------------------------------------------------------------

class WarpContext:
    """What a kernel sees as ``t``: thread/block indices and the SIMT operations.

    Attributes: ``thread_idx`` (Dim3 of :class:`Lanes`), ``block_idx``, ``block_dim``,
    ``grid_dim`` (Dim3 of ints), ``lane`` (Lanes 0..31), ``warp`` (warp index in the block),
    ``warp_size`` (32).
    """

    warp_size = WARP_SIZE

    def __init__(self, block_run: _BlockRun, warp: int):
        self._b = block_run
        sim = block_run.sim
        self.warp = warp
        self.block_idx = block_run.block_idx
        self.block_dim = sim.block
        self.grid_dim = sim.grid
        linear = warp * WARP_SIZE + np.arange(WARP_SIZE, dtype=np.int64)
        bx, by, _ = sim.block
        self._alive = linear < sim.threads_per_block
        self._stack = [_ALL]
        self._refresh()
        self._path: list[str] = []
        self.lane = Lanes(self, np.arange(WARP_SIZE, dtype=np.int64), _ALL)
        self.thread_idx = Dim3(Lanes(self, linear % bx, _ALL),
                               Lanes(self, linear // bx % by, _ALL),
                               Lanes(self, linear // (bx * by), _ALL))
        self._step = 0
        self._time_offset = 0
        self._shared_calls = 0
        self._last_if = None
        self._args = tuple(self._wrap(a) for a in sim.args)
        # scheduling state
        self._resume = threading.Semaphore(0)
        self.state = "new"
        self.error = None
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
    def _issue(self, kind, line, **mem):
        """Record one warp instruction under the current mask; with no lane active nothing
        issues (the warp branches around the code)."""
        b = self._b
        if b.sim.abort:
            raise _Aborted
        if not self._mask_bits:
            return None
        b.sim.count += 1
        if b.sim.count > b.sim.max_instructions:
            raise SimtError(
                f"the kernel issued more than max_instructions={b.sim.max_instructions} warp "
                f"instructions (an endless t.while_ loop?); pass a larger max_instructions "
                f"to run() if the kernel really is that long")
        ev = dict(block=b.linear, warp=self.warp, step=self._step,
                  time=self._step + self._time_offset, phase=b.phase, kind=kind,
                  mask=self._mask_bits, path=tuple(self._path), line=line, **mem)
        self._step += 1
        b.sim.events.append(ev)
        return ev

    def _value(self, v, mask, what):
        """The 32 lane values of ``v`` (Lanes or scalar); checks they exist on ``mask``."""
        if isinstance(v, Lanes):
            if v._ctx is not self:
                raise SimtError("a value from another warp was used: lane values belong to the "
                                "warp that computed them (share data through memory)")
            if v._defined is _ALL or v._defined is mask:
                return v._v
            missing = mask & ~v._defined
            if missing.any():
                raise SimtError(_undefined_message(what, missing, v._defined, self))
            return v._v
        if _is_scalar(v):
            return v
        raise TypeError(f"{what} must be a lane value (Lanes) or a number, "
                        f"got {type(v).__name__}")

    # -- arithmetic ------------------------------------------------------------------------------
    def _alu(self, ufunc, inputs):
        mask = self._mask
        args = [self._value(v, mask, "an operand") for v in inputs]
        out = ufunc(*args)  # NumPy errors are off in warp threads: inf/nan as on a GPU
        if not isinstance(out, np.ndarray) or out.shape != (WARP_SIZE,):
            out = np.broadcast_to(np.asarray(out), (WARP_SIZE,)).copy()
        self._issue("alu", _caller_line())
        return Lanes(self, out, mask)

    def _assign(self, target: Lanes, value):
        if target._ctx is not self:
            raise SimtError("y[...] = value: y belongs to another warp")
        mask = self._mask
        v = self._value(value, mask, "the value assigned with y[...] =")
        target._v[mask] = v[mask] if isinstance(v, np.ndarray) else v
        target._defined = target._defined | mask

    def local(self, value=0, dtype=None) -> Lanes:
        """Declare a per-thread variable (``float acc = 0;``) that branches can update with
        ``acc[...] = ...``.  One ``alu`` instruction (a move)."""
        mask = self._mask
        v = self._value(value, mask, "t.local's value")
        arr = np.empty(WARP_SIZE, dtype=dtype if dtype is not None else np.asarray(v).dtype)
        arr[:] = v
        self._issue("alu", _caller_line())
        return Lanes(self, arr, mask.copy(), variable=True)

    def where(self, cond, a, b) -> Lanes:
        """``cond ? a : b`` per lane, without branching (a select instruction)."""
        mask = self._mask
        c = self._cond(cond, mask, "t.where's condition")
        va = self._value(a, mask & c, "t.where's first value")
        vb = self._value(b, mask & ~c, "t.where's second value")
        out = np.where(c, va, vb)
        if out.shape != (WARP_SIZE,):
            out = np.broadcast_to(out, (WARP_SIZE,)).copy()
        self._issue("alu", _caller_line())
        return Lanes(self, out, mask)

    def _cond(self, cond, mask, what) -> np.ndarray:
        if isinstance(cond, Lanes):
            return np.asarray(self._value(cond, mask, what), dtype=bool)
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
                c = self._cond(cond(), self._mask, "the t.while_ condition")
                self._issue("branch", line)
            finally:
                self._pop()
            still = looping & c
            if not (still & self._alive).any():
                break
            if ((looping & ~c) & self._alive).any():
                diverged = True
            looping = still
            self._push(looping)
            self._path.append(f"{label}:loop")
            try:
                yield
            finally:
                self._path.pop()
                self._pop()
        if diverged:
            self._marker(line)

    def return_if(self, cond) -> None:
        """``if (cond) return;``: lanes where ``cond`` holds stop for good."""
        mask = self._mask
        c = self._cond(cond, mask, "t.return_if's condition")
        self._issue("branch", _caller_line())
        self._alive = self._alive & ~(mask & c)
        self._refresh()

    def _marker(self, line):
        """Note where a diverged warp's lanes meet again (no instruction is issued)."""
        if self._mask_bits:
            b = self._b
            b.sim.events.append(dict(block=b.linear, warp=self.warp, step=self._step,
                                     time=self._step + self._time_offset, phase=b.phase,
                                     kind="reconverge", mask=self._mask_bits,
                                     path=tuple(self._path), line=line))

    # -- memory ----------------------------------------------------------------------------------
    def shared(self, shape, dtype=np.float32, name: str | None = None) -> _Memory:
        """Declare a ``__shared__`` array of the block (the same array for all its warps).

        Contents start undefined (NaN for floats); every warp of the block must declare the
        same arrays in the same order.
        """
        shape = _shape("shape", shape)
        dtype = np.dtype(dtype)
        _validate.choice("dtype itemsize", dtype.itemsize, (1, 2, 4, 8))
        k = self._shared_calls
        self._shared_calls += 1
        allocs = self._b.shared
        if k < len(allocs):
            a = allocs[k]
            if a.data.shape != shape or a.data.dtype != dtype:
                raise SimtError(f"warp {self.warp} declares shared array #{k} as {dtype}"
                                f"{list(shape)}, another warp declared {a.data.dtype}"
                                f"{list(a.data.shape)}: all warps must declare the same")
        else:
            nbytes = int(np.prod(shape)) * dtype.itemsize
            base = -(-self._b.shared_top // SHARED_ALIGN) * SHARED_ALIGN
            if base + nbytes > MAX_STATIC_SHARED_BYTES:
                raise ValueError(
                    f"shared arrays of this block need {base + nbytes} bytes; static shared "
                    f"memory is limited to {MAX_STATIC_SHARED_BYTES} bytes (48 KB) per block")
            data = (np.full(shape, np.nan, dtype) if dtype.kind == "f"
                    else np.zeros(shape, dtype))
            a = _SharedAlloc(name or f"shared{k}", data, base, np.zeros(shape, bool))
            allocs.append(a)
            self._b.shared_top = base + nbytes
        return _Memory(self, a.data, a.base, a.name, "shared", alloc=k)

    def _access(self, mem: _Memory, index, value, line):
        store = value is not None
        mask = self._mask
        data = mem.data
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != data.ndim:
            raise IndexError(f"{mem.name} has {data.ndim} dimension(s) {list(data.shape)}; "
                             f"index it with {data.ndim} index(es), got {len(index)}")
        comps = []
        for k, ix in enumerate(index):
            if isinstance(ix, Lanes):
                v = self._value(ix, mask, f"the index into {mem.name}")
                if v.dtype.kind not in "iu":
                    raise TypeError(f"index into {mem.name} must be an integer, got lane "
                                    f"values of type {v.dtype}")
                comps.append(v.astype(np.int64, copy=False))
            elif isinstance(ix, (int, np.integer)) and not isinstance(ix, (bool, np.bool_)):
                comps.append(np.full(WARP_SIZE, int(ix), dtype=np.int64))
            else:
                raise TypeError(f"index {k} into {mem.name} must be an int or integer lane "
                                f"values, got {type(ix).__name__}")
        kind = ("st." if store else "ld.") + mem.space
        if not mask.any():
            # Nothing issues; the values below only keep inactive code paths running.
            return None if store else Lanes(self, np.zeros(WARP_SIZE, data.dtype), _NONE)
        for k, c in enumerate(comps):
            bad = mask & ((c < 0) | (c >= data.shape[k]))
            if bad.any():
                lane = int(np.flatnonzero(bad)[0])
                where = ", ".join(str(int(cc[lane])) for cc in comps)
                raise IndexError(
                    f"line {line}: lane {lane} of warp {self.warp} in block "
                    f"{tuple(self.block_idx)} (thread {self._thread_of(lane)}) "
                    f"{'writes' if store else 'reads'} {mem.name}[{where}], outside its shape "
                    f"{list(data.shape)}; on a GPU this would corrupt memory or fault")
        offsets = sum(c * s for c, s in zip(comps, data.strides, strict=True))
        addresses = mem.base + offsets
        sel = tuple(c[mask] for c in comps)
        if store:
            v = self._value(value, mask, f"the value stored into {mem.name}")
            data[sel] = v[mask] if isinstance(v, np.ndarray) else v
            result = None
        else:
            out = np.zeros(WARP_SIZE, dtype=data.dtype)
            out[mask] = data[sel]
            result = Lanes(self, out, mask)
        counts = _memory_counts(mem.space, addresses, mask, data.dtype.itemsize)
        self._issue(kind, line, array=mem.name, **counts)
        if mem.space == "shared":
            alloc = self._b.shared[mem._alloc]
            flat = np.ravel_multi_index(sel, data.shape)
            if store:
                alloc.written.flat[flat] = True
            elif not alloc.written.flat[flat].all():
                self._b.sim.note(f"line {line}: warp {self.warp} of block "
                                 f"{tuple(self.block_idx)} reads {mem.name} where nothing was "
                                 f"written yet (shared memory starts undefined)")
            self._b.log_shared(mem._alloc, flat, self.warp, store, line)
        return result

    def _thread_of(self, lane: int) -> tuple[int, int, int]:
        return tuple(int(d._v[lane]) for d in self.thread_idx)

    # -- barrier ---------------------------------------------------------------------------------
    def sync(self) -> None:
        """``__syncthreads()``: wait until every warp of the block gets here."""
        line = _caller_line()
        mask = self._mask
        if not self._mask_bits:
            # the warp jumped over the code around this barrier (or every lane returned)
            return
        if (self._alive & ~mask).any():
            raise SimtError(
                f"line {line}: t.sync() inside a branch that only some lanes of warp "
                f"{self.warp} took; __syncthreads() in divergent code is undefined behaviour "
                f"(the other lanes never arrive). Move the barrier out of the branch.")
        self._barrier_event = self._issue("bar.sync", line)
        self._barrier_line = line
        self._b.wait_at_barrier(self)


_COUNT_CACHE: dict = {}


def _memory_counts(space: str, addresses: np.ndarray, mask: np.ndarray, itemsize: int) -> dict:
    """The memory model's counts for one warp access, memoised.

    Sectors and lines (global) and banks, words and wavefronts (shared) do not change when
    every address moves by the same multiple of 128 bytes, so the pattern is cached relative
    to its first 128-byte boundary: regular kernels repeat a handful of patterns.
    """
    shift = int(addresses[mask].min()) // 128 * 128
    key = (space, itemsize, (addresses - shift)[mask].tobytes(), mask.tobytes())
    hit = _COUNT_CACHE.get(key)
    if hit is not None:
        return hit
    if space == "global":
        g = global_load(addresses, itemsize, mask=mask)
        hit = dict(sectors=g.sectors, requests=g.requests,
                   requested_bytes=int(mask.sum()) * itemsize)
    else:
        s = shared_load(addresses, itemsize, mask=mask)
        hit = dict(wavefronts=s.wavefronts, bank_conflicts=s.bank_conflicts)
    if len(_COUNT_CACHE) > 20_000:
        _COUNT_CACHE.clear()
    _COUNT_CACHE[key] = hit
    return hit


def _undefined_message(what, missing, defined, ctx) -> str:
    lanes = np.flatnonzero(missing).tolist()
    has = np.flatnonzero(defined).tolist()
    return (f"{what} is not defined on lanes {_lane_list(lanes)} that are active here (it "
            f"holds values only for lanes {_lane_list(has)}, probably because it was assigned "
            f"inside a t.if_/t.else_/t.while_ body). Declare it before the branch with "
            f"y = t.local(0) and assign inside with y[...] = ..., or merge the two paths with "
            f"t.where(cond, a, b).")


def _lane_list(lanes) -> str:
    if not lanes:
        return "(none)"
    if len(lanes) > 8:
        return "[" + ", ".join(map(str, lanes[:8])) + f", … ({len(lanes)} lanes)]"
    return "[" + ", ".join(map(str, lanes)) + "]"


class _Branch:
    def __init__(self, ctx: WarpContext, cond, label, line):
        self.ctx, self.cond, self.line = ctx, cond, line
        self.label = label or f"L{line}"

    def __enter__(self):
        ctx = self.ctx
        parent = ctx._mask
        c = ctx._cond(self.cond, parent, "t.if_'s condition")
        ctx._issue("branch", self.line)
        self.c = c
        self.diverged = bool((parent & c).any() and (parent & ~c).any())
        ctx._push(ctx._stack[-1] & c)
        ctx._path.append(f"{self.label}:then")
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._pop()
        ctx._path.pop()
        if exc[0] is None:
            if self.diverged:
                ctx._marker(self.line)
            ctx._last_if = (self, len(ctx._stack), len(ctx._b.sim.events))
        return False


class _Else:
    def __init__(self, ctx: WarpContext, line):
        self.ctx, self.line = ctx, line

    def __enter__(self):
        ctx = self.ctx
        last = ctx._last_if
        ctx._last_if = None
        if last is None or last[1] != len(ctx._stack) or last[2] != len(ctx._b.sim.events):
            raise SimtError(f"line {self.line}: t.else_() must directly follow a "
                            f"`with t.if_(...)` block at the same level")
        self.branch = br = last[0]
        events = ctx._b.sim.events
        if br.diverged and events and events[-1]["kind"] == "reconverge":
            events.pop()  # the lanes meet after the else, not between the two paths
        ctx._push(ctx._stack[-1] & ~br.c)
        ctx._path.append(f"{br.label}:else")
        return self

    def __exit__(self, *exc):
        ctx = self.ctx
        ctx._pop()
        ctx._path.pop()
        if exc[0] is None and self.branch.diverged:
            ctx._marker(self.branch.line)
        return False


# -- results --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """One warp instruction (or a ``reconverge`` marker, which issues nothing).

    ``step``: the warp's issue slot (0, 1, 2, ...); ``time``: step plus the slots the warp
    spent waiting at barriers for slower warps, so warps line up at barriers; ``phase``: how
    many barriers the block has passed; ``mask``: active lanes, bit i = lane i;
    ``path``: the branch bodies it is inside (``"L12:then"``, ``"parity:else"``, ...).
    Memory instructions carry the memory model's counts; ``bar.sync`` carries ``wait``.
    """

    block: int
    warp: int
    step: int
    time: int
    phase: int
    kind: str
    mask: int
    path: tuple[str, ...]
    line: int | None
    array: str | None = None
    sectors: int | None = None
    requests: int | None = None
    requested_bytes: int | None = None
    wavefronts: int | None = None
    bank_conflicts: int | None = None
    wait: int | None = None

    @property
    def issued(self) -> bool:
        return self.kind != "reconverge"

    @property
    def active(self) -> int:
        """Active lanes."""
        return self.mask.bit_count()

    @property
    def lanes(self) -> np.ndarray:
        """The active mask as bool[32]."""
        return (self.mask >> np.arange(WARP_SIZE)) & 1 == 1

    def in_region(self, region: str) -> bool:
        """Inside the branch labelled ``region`` (``"parity"`` = both paths,
        ``"parity:then"`` = one)."""
        return any(p == region or p.startswith(region + ":") for p in self.path)


@dataclass(frozen=True)
class Race:
    """A shared-memory word that two warps touched between the same two barriers, one
    of them writing it: a missing ``__syncthreads()``."""

    block: int
    phase: int
    array: str
    index: tuple[int, ...]
    writer_warp: int
    writer_line: int | None
    other_warp: int
    other_line: int | None
    other_access: str  # "read" or "write"

    def __str__(self) -> str:
        where = ("before the first t.sync()" if self.phase == 0
                 else f"after t.sync() #{self.phase}")
        idx = ", ".join(map(str, self.index))
        return (f"race on {self.array}[{idx}] in block {self.block} {where}: warp "
                f"{self.writer_warp} writes it (line {self.writer_line}) and warp "
                f"{self.other_warp} {'reads' if self.other_access == 'read' else 'writes'} it "
                f"(line {self.other_line}) with no barrier in between")


@dataclass(frozen=True)
class Stats:
    """Totals over a set of warp instructions.

    simt_efficiency     = sum(active lanes) / (32 x instructions)
    sectors_per_request = global sectors / global requests (4 is ideal for 4-byte loads)
    global_efficiency   = bytes the lanes asked for / (sectors x 32 B)
    bank_conflicts      = shared wavefronts - ideal wavefronts (Nsight Compute's count)
    barrier_wait        = issue slots warps spent waiting at barriers for slower warps
    """

    instructions: int
    active_lanes: int
    by_kind: dict = field(hash=False)
    global_requests: int
    global_sectors: int
    global_requested_bytes: int
    shared_requests: int
    shared_wavefronts: int
    bank_conflicts: int
    barrier_instructions: int
    barrier_wait: int

    @property
    def simt_efficiency(self) -> float:
        return self.active_lanes / (WARP_SIZE * self.instructions) if self.instructions else 0.0

    @property
    def sectors_per_request(self) -> float:
        return (self.global_sectors / self.global_requests if self.global_requests
                else float("nan"))

    @property
    def global_efficiency(self) -> float:
        moved = 32 * self.global_sectors
        return self.global_requested_bytes / moved if moved else float("nan")

    def __repr__(self) -> str:
        parts = [f"{self.instructions} warp instructions, SIMT efficiency "
                 f"{self.simt_efficiency:.1%}"]
        if self.global_requests:
            parts.append(f"global: {self.global_requests} requests, {self.global_sectors} "
                         f"sectors ({self.sectors_per_request:.2f} sectors/request, "
                         f"{self.global_efficiency:.0%} of moved bytes used)")
        if self.shared_requests:
            parts.append(f"shared: {self.shared_requests} requests, {self.shared_wavefronts} "
                         f"wavefronts, {self.bank_conflicts} bank conflicts")
        if self.barrier_instructions:
            parts.append(f"{self.barrier_instructions} barrier instructions, "
                         f"{self.barrier_wait} issue slots waiting")
        return "Stats(" + "; ".join(parts) + ")"


def _stats(events) -> Stats:
    by_kind = dict.fromkeys(KINDS, 0)
    active = greq = gsec = gbytes = sreq = swave = sconf = bwait = 0
    for e in events:
        if e.kind == "reconverge":
            continue
        by_kind[e.kind] += 1
        active += e.active
        if e.sectors is not None:
            greq += e.requests
            gsec += e.sectors
            gbytes += e.requested_bytes
        elif e.wavefronts is not None:
            sreq += 1
            swave += e.wavefronts
            sconf += e.bank_conflicts
        elif e.wait:
            bwait += e.wait
    return Stats(instructions=sum(by_kind.values()), active_lanes=active, by_kind=by_kind,
                 global_requests=greq, global_sectors=gsec, global_requested_bytes=gbytes,
                 shared_requests=sreq, shared_wavefronts=swave, bank_conflicts=sconf,
                 barrier_instructions=by_kind["bar.sync"], barrier_wait=bwait)


@dataclass(frozen=True, repr=False)
class SimResult:
    """What a run recorded: the event log, races, notes and totals.

    ``barriers``: block-wide barriers passed (one per ``__syncthreads()`` per block);
    ``notes``: things worth a look that are not errors (uninitialised shared reads,
    warps meeting at different barriers).
    """

    kernel: str
    grid: Dim3
    block: Dim3
    order: object
    events: tuple[Event, ...]
    races: tuple[Race, ...]
    notes: tuple[str, ...]
    barriers: int
    totals: Stats

    # the numbers a lesson asks for first
    simt_efficiency = property(lambda self: self.totals.simt_efficiency)
    instructions = property(lambda self: self.totals.instructions)
    sectors_per_request = property(lambda self: self.totals.sectors_per_request)
    bank_conflicts = property(lambda self: self.totals.bank_conflicts)

    @property
    def warps_per_block(self) -> int:
        return -(-self.block.x * self.block.y * self.block.z // WARP_SIZE)

    def stats(self, *, region: str | None = None, kind: str | None = None,
              block: int | None = None, warp: int | None = None) -> Stats:
        """Totals over the instructions that match every filter given.

        ``region``: a branch label (``t.if_(cond, "parity")`` → ``"parity"`` for both paths,
        ``"parity:then"``/``"parity:else"`` for one; unlabelled branches are ``"L<line>"``);
        ``kind``: one of :data:`KINDS`, or ``"global"``/``"shared"`` for both directions;
        ``block``: linear block index; ``warp``: warp index within the block.
        """
        if kind is not None:
            _validate.choice("kind", kind, (*KINDS, "global", "shared"))
        evs = [e for e in self.events
               if (region is None or e.in_region(region))
               and (kind is None or e.kind == kind or e.kind.endswith("." + kind))
               and (block is None or e.block == block)
               and (warp is None or e.warp == warp)]
        return _stats(evs)

    def warp_events(self, block: int = 0, warp: int = 0) -> list[Event]:
        """One warp's issued instructions in issue order."""
        return [e for e in self.events if e.block == block and e.warp == warp and e.issued]

    def lane_matrix(self, block: int = 0, warp: int = 0) -> np.ndarray:
        """bool[32, steps]: which lanes were active at each issue slot of one warp —
        the lanes x time picture of divergence."""
        evs = self.warp_events(block, warp)
        if not evs:
            return np.zeros((WARP_SIZE, 0), dtype=bool)
        return np.stack([e.lanes for e in evs], axis=1)

    def __repr__(self) -> str:
        t = self.totals
        order = (f"{self.order} order" if isinstance(self.order, str)
                 else f"random order, seed {self.order}")
        lines = [f"SimResult({self.kernel}<<<{_dim_text(self.grid)}, {_dim_text(self.block)}>>>"
                 f", warps take turns in {order})",
                 f"  {t.instructions} warp instructions, SIMT efficiency "
                 f"{t.simt_efficiency:.1%}"]
        if t.global_requests:
            lines.append(f"  global memory: {t.global_requests} requests, {t.global_sectors} "
                         f"sectors = {t.sectors_per_request:.2f} sectors/request "
                         f"({t.global_efficiency:.0%} of moved bytes used)")
        if t.shared_requests:
            lines.append(f"  shared memory: {t.shared_requests} requests, "
                         f"{t.shared_wavefronts} wavefronts, {t.bank_conflicts} bank "
                         f"conflicts")
        lines.append(f"  barriers: {self.barriers} (block-wide), "
                     f"{t.barrier_wait} issue slots spent waiting")
        if self.races:
            lines.append(f"  RACES: {len(self.races)} shared words, e.g.")
            lines += [f"    {r}" for r in self.races[:3]]
        else:
            lines.append("  races: none found")
        lines += [f"  note: {n}" for n in self.notes[:5]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        t = self.totals
        rows = [("launch", f"{self.kernel}&lt;&lt;&lt;{_dim_text(self.grid)}, "
                           f"{_dim_text(self.block)}&gt;&gt;&gt;"),
                ("warp instructions", f"{t.instructions}"),
                ("SIMT efficiency", f"{t.simt_efficiency:.1%}"),
                ("global requests", f"{t.global_requests}"),
                ("sectors / request",
                 f"{t.sectors_per_request:.2f}" if t.global_requests else "–"),
                ("shared requests", f"{t.shared_requests}"),
                ("bank conflicts", f"{t.bank_conflicts}"),
                ("barriers", f"{self.barriers}"),
                ("races", f"{len(self.races)}" + (f": {self.races[0]}" if self.races else ""))]
        body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
        return f"<table><caption>SIMT run</caption>{body}</table>"


def _dim_text(d: Dim3) -> str:
    if d.y == 1 and d.z == 1:
        return str(d.x)
    return f"({d.x}, {d.y}, {d.z})"


# -- running ---------------------------------------------------------------------------------------

@dataclass
class _GlobalArg:
    data: np.ndarray
    base: int
    name: str


class _Sim:
    """State shared by all blocks of one run."""

    def __init__(self, kernel, grid, block, args, order, max_instructions):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.threads_per_block = block.x * block.y * block.z
        self.warps_per_block = -(-self.threads_per_block // WARP_SIZE)
        self.args = args
        self.order = order
        self.rng = np.random.default_rng(order) if not isinstance(order, str) else None
        self.max_instructions = max_instructions
        self.events: list[dict] = []
        self.races: list[Race] = []
        self.notes: list[str] = []
        self.barriers = 0
        self.count = 0
        self.abort = False

    def note(self, text: str):
        if text not in self.notes and len(self.notes) < 50:
            self.notes.append(text)

    def warp_order(self, n: int) -> list[int]:
        if self.order == "ascending":
            return list(range(n))
        if self.order == "descending":
            return list(range(n - 1, -1, -1))
        return [int(i) for i in self.rng.permutation(n)]


class _Workers:
    """Threads that run warps, kept between blocks and runs: starting a thread costs more
    than running a small warp.  Only one of them executes at a time (see _BlockRun)."""

    def __init__(self):
        self._idle: list = []
        self._lock = threading.Lock()

    def submit(self, job):
        with self._lock:
            slot = self._idle.pop() if self._idle else None
        if slot is None:
            slot = [None, threading.Semaphore(0)]
            threading.Thread(target=self._loop, args=(slot,), daemon=True,
                             name="simt-warp").start()
        slot[0] = job
        slot[1].release()

    def _loop(self, slot):
        while True:
            slot[1].acquire()
            job, slot[0] = slot[0], None
            try:
                job()
            finally:
                with self._lock:
                    self._idle.append(slot)


_WORKERS = _Workers()


class _BlockRun:
    """One thread block: its warps take turns, one barrier phase at a time."""

    def __init__(self, sim: _Sim, linear: int, block_idx: Dim3):
        self.sim = sim
        self.linear = linear
        self.block_idx = block_idx
        self.phase = 0
        self.shared: list[_SharedAlloc] = []
        self.shared_top = 0
        self.access_log: list[tuple] = []
        self._back = threading.Semaphore(0)

    def log_shared(self, alloc, flat, warp, is_write, line):
        self.access_log.append((alloc, flat, warp, is_write, line))

    def run(self):
        sim = self.sim
        warps = [WarpContext(self, w) for w in range(sim.warps_per_block)]
        for w in warps:
            _WORKERS.submit(lambda w=w: self._warp_main(w))
        try:
            while any(w.state in ("new", "barrier") for w in warps):
                for i in sim.warp_order(len(warps)):
                    w = warps[i]
                    if w.state not in ("new", "barrier"):
                        continue
                    w.state = "running"
                    w._resume.release()
                    self._back.acquire()
                    if w.error is not None:
                        raise w.error
                self._end_phase(warps)
        except BaseException:
            self._abandon(warps)
            raise

    def _warp_main(self, w: WarpContext):
        w._resume.acquire()
        np.seterr(all="ignore")  # this thread only: float faults give inf/nan, as on a GPU
        try:
            if not self.sim.abort:
                self.sim.kernel(w, *w._args)
            w.state = "done"
        except _Aborted:
            w.state = "aborted"
        except BaseException as e:  # handed to the scheduler thread, which re-raises it
            w.error = e
            w.state = "error"
        finally:
            self._back.release()

    def wait_at_barrier(self, w: WarpContext):
        w.state = "barrier"
        self._back.release()
        w._resume.acquire()
        if self.sim.abort:
            raise _Aborted

    def _abandon(self, warps):
        self.sim.abort = True
        for w in warps:
            if w.state in ("new", "barrier"):
                w.state = "aborting"
                w._resume.release()
                self._back.acquire(timeout=1.0)

    def _end_phase(self, warps):
        at_barrier = [w for w in warps if w.state == "barrier"]
        self._check_races()
        if not at_barrier:
            return
        lines = {w._barrier_line for w in at_barrier}
        if len(lines) > 1:
            self.sim.note(f"block {self.linear}: warps met at t.sync() calls on different "
                          f"lines {sorted(lines)}; __syncthreads() must be reached by all "
                          f"threads at the same call")
        # The barrier opens when the last warp arrives; the others wait for it.
        arrive = {w.warp: w._barrier_event["time"] for w in at_barrier}
        release = max(arrive.values())
        for w in at_barrier:
            wait = release - arrive[w.warp]
            w._barrier_event["wait"] = wait
            w._time_offset += wait
        self.phase += 1
        self.sim.barriers += 1

    def _check_races(self):
        log, self.access_log = self.access_log, []
        if not log:
            return
        for k, alloc in enumerate(self.shared):
            entries = [e for e in log if e[0] == k]
            if not entries:
                continue
            sizes = [len(e[1]) for e in entries]
            elems = np.concatenate([e[1] for e in entries])
            warp = np.repeat([e[2] for e in entries], sizes)
            write = np.repeat([e[3] for e in entries], sizes)
            seq = np.repeat(np.arange(len(entries)), sizes)
            order = np.lexsort((seq, elems))
            elems, warp, write, seq = elems[order], warp[order], write[order], seq[order]
            starts = np.flatnonzero(np.r_[True, elems[1:] != elems[:-1]])
            wmin = np.minimum.reduceat(warp, starts)
            wmax = np.maximum.reduceat(warp, starts)
            anyw = np.logical_or.reduceat(write, starts)
            ends = np.r_[starts[1:], len(elems)]
            for g in np.flatnonzero(anyw & (wmin != wmax)):
                s, e = starts[g], ends[g]
                gw, gwr, gseq = warp[s:e], write[s:e], seq[s:e]
                first = int(np.flatnonzero(gwr)[0])
                writer = int(gw[first])
                others = np.flatnonzero(gw != writer)
                # prefer another writer (write-write), else the first reader
                other_writes = others[gwr[others]]
                o = int(other_writes[0]) if other_writes.size else int(others[0])
                self.sim.races.append(Race(
                    block=self.linear, phase=self.phase, array=alloc.name,
                    index=tuple(int(i) for i in np.unravel_index(int(elems[s]),
                                                                 alloc.data.shape)),
                    writer_warp=writer, writer_line=entries[int(gseq[first])][4],
                    other_warp=int(gw[o]), other_line=entries[int(gseq[o])][4],
                    other_access="write" if gwr[o] else "read"))


def _dim3(name: str, value, limits) -> Dim3:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be a positive int or a tuple of 1 to 3 positive ints "
                        f"(x, y, z), got {value!r}")
    dims = [_validate.integer(f"{name}.{axis}", v, low=1, high=hi)
            for v, axis, hi in zip(value, "xyz", limits, strict=False)]
    dims += [1] * (3 - len(dims))
    return Dim3(*dims)


def _shape(name: str, value) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not value:
        raise TypeError(f"{name} must be a positive int or a tuple of positive ints, "
                        f"got {value!r}")
    return tuple(_validate.integer(f"{name}[{i}]", v, low=1) for i, v in enumerate(value))


def _kernel_params(kernel) -> list[str]:
    code = getattr(kernel, "__code__", None)
    if code is None:
        return []
    return list(code.co_varnames[1:code.co_argcount])


def run(kernel, grid, block, *args, order="ascending", max_instructions: int = 200_000,
        max_warps: int = 4096) -> SimResult:
    """Run ``kernel<<<grid, block>>>(*args)`` warp by warp and record what happened.

    ``kernel(t, *args)``: a Python function written from one thread's view (see the module
    docstring).  ``grid``, ``block``: an int or a tuple (x, y, z), CUDA's limits apply
    (block at most 1024 threads; x, y <= 1024, z <= 64).  ``args``: NumPy arrays (global
    memory, written in place as device memory would be) and Python numbers.
    ``order``: the order in which a block's warps take turns between barriers:
    ``"ascending"``, ``"descending"``, or an int seed for a random order per barrier phase.
    ``max_instructions``, ``max_warps``: guards against runaway kernels and huge grids.
    """
    if not callable(kernel):
        raise TypeError(f"kernel must be a function kernel(t, ...), got {type(kernel).__name__}")
    grid = _dim3("grid", grid, MAX_GRID_DIM)
    block = _dim3("block", block, MAX_BLOCK_DIM)
    threads = block.x * block.y * block.z
    if threads > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block={tuple(block)} has {threads} threads; a block may have at "
                         f"most {MAX_THREADS_PER_BLOCK} (allowed: 1 to {MAX_THREADS_PER_BLOCK})")
    if isinstance(order, str):
        _validate.choice("order", order, ORDERS)
    else:
        order = _validate.integer("order (a random seed)", order, low=0)
    max_instructions = _validate.integer("max_instructions", max_instructions, low=1)
    max_warps = _validate.integer("max_warps", max_warps, low=1)
    n_blocks = grid.x * grid.y * grid.z
    n_warps = n_blocks * -(-threads // WARP_SIZE)
    if n_warps > max_warps:
        raise ValueError(f"grid={tuple(grid)} x block={tuple(block)} is {n_warps} warps; the "
                         f"simulator runs at most max_warps={max_warps} (simulate a smaller "
                         f"problem, or raise max_warps and wait)")

    names = _kernel_params(kernel)
    wrapped, top = [], 0
    for k, a in enumerate(args):
        name = names[k] if k < len(names) else f"arg{k}"
        if isinstance(a, np.ndarray):
            if a.dtype.itemsize not in (1, 2, 4, 8) or a.dtype.kind not in "biuf":
                raise TypeError(f"{name}: arrays must hold numbers of 1, 2, 4 or 8 bytes, "
                                f"got dtype {a.dtype}")
            if a.ndim == 0 or a.size == 0:
                raise ValueError(f"{name}: arrays must have at least one element and one "
                                 f"dimension, got shape {a.shape}")
            low = sum(min(0, s * (n - 1)) for s, n in zip(a.strides, a.shape, strict=True))
            high = sum(max(0, s * (n - 1)) for s, n in zip(a.strides, a.shape, strict=True))
            start = -(-top // GLOBAL_ALIGN) * GLOBAL_ALIGN
            wrapped.append(_GlobalArg(a, start - low, name))
            top = start + high - low + a.dtype.itemsize
        elif _is_scalar(a):
            wrapped.append(a)
        else:
            raise TypeError(f"{name}: kernel arguments must be NumPy arrays or numbers, "
                            f"got {type(a).__name__}")

    sim = _Sim(kernel, grid, block, tuple(wrapped), order, max_instructions)
    linear = 0
    for bz in range(grid.z):
        for by in range(grid.y):
            for bx in range(grid.x):
                _BlockRun(sim, linear, Dim3(bx, by, bz)).run()
                linear += 1

    events = tuple(Event(**e) for e in sim.events)
    return SimResult(kernel=getattr(kernel, "__name__", "kernel"), grid=grid, block=block,
                     order=order, events=events, races=tuple(sim.races),
                     notes=tuple(sim.notes), barriers=sim.barriers,
                     totals=_stats(events))
