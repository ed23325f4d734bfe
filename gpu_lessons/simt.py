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
* **Barriers and scheduling.**  ``t.sync()`` is ``__syncthreads()``.  Each warp runs as a
  greenlet (a coroutine with its own stack), and only one runs at a time: the warps of a
  block take turns, each running until its next barrier (or the end), in the order
  ``order`` says.  That is one legal schedule of the real machine; code whose answer
  depends on the schedule has a race.
* **Race detection.**  Between two barriers, a shared-memory word written by one warp and
  read or written by another warp is a race (a missing ``__syncthreads()``); each is reported
  with the array, index, warps and source lines.  Two atomics on one word never race; an
  atomic and another warp's plain read or write of that word do.  Within one warp, a word one
  lane writes and another lane reads or writes in a later instruction, with no
  ``t.syncwarp()`` between, is a race too: the simulator runs a warp's lanes in lockstep, but
  since Volta each thread has its own program counter and only ``__syncwarp()`` orders the
  lanes (Programming Guide, "Independent Thread Scheduling").
* **Atomics.**  ``old = t.atomic_add(a, i, v)``, ``t.atomic_max(a, i, v)`` and
  ``t.atomic_cas(a, i, compare, v)`` read-modify-write one element per active lane of a
  global or shared array and return the value it held before, as ``atomicAdd``,
  ``atomicMax`` and ``atomicCAS`` do (Programming Guide, "Atomic Functions").  Lanes of one
  warp that hit the same address are applied one after another in lane order; CUDA leaves
  that order unspecified, so a kernel must not depend on it.  Atomics to one address are
  performed one at a time, which is why contended counters are slow and why histograms
  privatise into shared memory first (N. Sakharnykh, "GPU Pro Tip: Fast Histograms Using
  Shared Atomics on Maxwell", NVIDIA Developer Blog, 2015; A. Adinets, "CUDA Pro Tip:
  Optimized Filtering with Warp-Aggregated Atomics", 2014).  So each atomic instruction
  records its *serialisation*: the most active lanes that hit one address (32 for a
  warp-wide counter, 1 when all differ), summed in ``Stats.atomic_serialisation``.  It
  counts the atomics as written; since CUDA 9 nvcc may itself aggregate a warp's atomics
  on one address (Adinets, 2017 update), so on a GPU the cost can be lower.  An atomic's
  memory traffic is counted with the same sector and bank rules as a load.  Supported element
  types are CUDA's: ``atomicAdd`` int32, uint32, uint64, float32, float64; ``atomicMax``
  int32, uint32, int64, uint64; ``atomicCAS`` int32, uint32, uint64.
* **Warp shuffles.**  ``t.shfl_down(v, delta)``, ``t.shfl_up(v, delta)``,
  ``t.shfl_xor(v, lane_mask)`` and ``t.shfl_idx(v, src_lane)`` are
  ``__shfl_*_sync(0xffffffff, v, ..., 32)`` (Programming Guide, "Warp Shuffle Functions"):
  each lane gets ``v`` from lane ``lane + delta``, ``lane - delta``, ``lane ^ lane_mask`` or
  ``src_lane % 32``; a source outside 0..31 gives the lane its own ``v``.  CUDA leaves the
  value read from an inactive lane undefined; the simulator returns that lane's register
  and records it (``SimResult.shuffle_reads``, a note, ``Stats.shuffle_inactive_reads``).
  ``t.syncwarp()`` is ``__syncwarp()``: one ``bar.warp`` instruction.  Since Volta the lanes
  of a warp may be scheduled independently (Programming Guide, "Independent Thread
  Scheduling"), which is why the shuffles take a mask and ``__syncwarp()`` exists; here a
  warp's active lanes always run in lockstep, so ``t.syncwarp()`` only costs its slot.
* **Errors point at the kernel's line.**  Whatever a kernel raises while it runs (an index
  outside an array by an active lane, a Python ``if`` on lane values, a ``NameError``) comes
  out of :func:`run` as a :class:`KernelError` whose message starts with the file or cell,
  the line and its source text (see :mod:`gpu_lessons.simt_errors`).  Lanes that a branch
  switched off are never checked: ``s[tid - 1]`` under ``t.if_(tid >= 1)`` is fine.

The instruction set is the simulator's own, not SASS: one warp instruction per operator on
lane values (``alu``), per ``t.if_``/``t.while_`` test or ``t.return_if`` (``branch``), per
load, store or atomic (``ld.global``, ``st.global``, ``atom.global``, ``ld.shared``,
``st.shared``, ``atom.shared``), per ``t.where`` or ``t.local`` (``alu``), per shuffle
(``shfl``) and per barrier (``bar.sync``, ``bar.warp`` for ``t.syncwarp()``).  Python
``for`` loops over plain ints are unrolled at no cost, as ``#pragma unroll`` would.  The
counts are for reasoning about ratios (SIMT efficiency, sectors per request, conflicts,
serialisation), not for predicting cycle counts.

SIMT efficiency = (sum of active lanes over issued warp instructions) / (32 x instructions),
the quantity Nsight Compute reports as "Avg. Active Threads Per Warp" / 32.
"""

from __future__ import annotations

import linecache
import re
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from greenlet import greenlet

from . import _validate
from .hardware import WARP_SIZE
from .memory import global_load, shared_load
from .simt_errors import KernelError, SimtError, kernel_error
from .simt_result import (
    KINDS,
    MEMORY_KINDS,
    AccessMap,
    ArrayStats,
    Event,
    Race,
    SharedArray,
    ShuffleRead,
    SimResult,
    Stats,
    UninitialisedRead,
    _stats,
)

__all__ = ["KINDS", "MEMORY_KINDS", "WARP_SIZE", "AccessMap", "ArrayStats", "Dim3", "Event",
           "KernelError", "Lanes", "Race", "SharedArray", "ShuffleRead", "SimResult", "SimtError",
           "Stats", "UninitialisedRead", "WarpContext", "run"]

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

#: Element types of CUDA's atomic functions (Programming Guide, "Atomic Functions"); 16-bit
#: and vector forms are left out.
ATOMIC_DTYPES = {
    "atomic_add": ("int32", "uint32", "uint64", "float32", "float64"),
    "atomic_max": ("int32", "uint32", "int64", "uint64"),
    "atomic_cas": ("int32", "uint32", "uint64"),
}

_THIS_FILE = __file__
_LANE_BITS = np.array([1 << i for i in range(WARP_SIZE)], dtype=np.uint64)
_LANE_IDS = np.arange(WARP_SIZE, dtype=np.int64)
_ALL_BITS = (1 << WARP_SIZE) - 1
_ALL = np.ones(WARP_SIZE, dtype=bool)
_NONE = np.zeros(WARP_SIZE, dtype=bool)
_READ, _WRITE, _ATOMIC = 0, 1, 2


class _Aborted(BaseException):
    """Unwinds a warp when the run is abandoned (not an error of the kernel)."""


class Dim3(NamedTuple):
    """``dim3``: x, y, z."""

    x: object
    y: object
    z: object


def _mask_int(mask: np.ndarray) -> int:
    return int(_LANE_BITS[mask].sum())


def _bits_mask(bits: int) -> np.ndarray:
    return (bits >> _LANE_IDS) & 1 == 1


def _caller_line() -> int | None:
    """Line number in the kernel's own source of the call being recorded."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == _THIS_FILE:
        f = f.f_back
    return None if f is None else f.f_lineno


_DECLARED = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*\w+\.shared\(")
_declared_names: dict[tuple[str, int], str | None] = {}


def _declared_name() -> str | None:
    """The name the kernel's line gives a shared array (``tile = t.shared(...)``), so messages
    say ``tile[3]`` rather than ``shared0[3]``; ``None`` where the line does not say."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == _THIS_FILE:
        f = f.f_back
    if f is None:
        return None
    key = (f.f_code.co_filename, f.f_lineno)
    if key not in _declared_names:
        match = _DECLARED.match(linecache.getline(*key))
        _declared_names[key] = match.group(1) if match else None
    return _declared_names[key]


# -- lane values ----------------------------------------------------------------------------------

class Lanes:
    """One value per lane of a warp (a register, in CUDA terms).

    Arithmetic, comparisons and NumPy ufuncs on ``Lanes`` are warp instructions issued under
    the current active mask.  ``values`` gives the 32 numbers; ``defined`` which lanes hold
    a meaningful one.  A variable declared with ``y = t.local(...)`` can be updated in place
    with ``y[...] = expr``, which writes only the active lanes (a masked move).
    """

    __slots__ = ("_ctx", "_defined", "_v", "_variable")
    __hash__ = None  # == is element-wise

    def __init__(self, ctx: WarpContext, values: np.ndarray, defined: int,
                 variable: bool = False):
        self._ctx = ctx
        self._v = values
        self._defined = defined  # bit i: lane i holds a value
        self._variable = variable

    @property
    def values(self) -> np.ndarray:
        """A copy of the 32 lane values (inactive or undefined lanes hold leftovers)."""
        return self._v.copy()

    @property
    def defined(self) -> np.ndarray:
        """Which lanes hold a value (bool[32])."""
        return _bits_mask(self._defined)

    @property
    def dtype(self):
        return self._v.dtype

    def __repr__(self) -> str:
        shown = " ".join(str(v) if d else "·" for v, d in zip(self._v.tolist(),
                                                               self.defined.tolist(),
                                                               strict=True))
        return f"Lanes({self._v.dtype}: [{shown}])"

    # NumPy hands every ufunc on a Lanes (np.sqrt(x), np.maximum(x, y)) to us.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            return NotImplemented
        for v in inputs:
            if not isinstance(v, Lanes) and not _is_scalar(v):
                return NotImplemented
        return self._ctx._alu(ufunc, inputs)

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
        return self._ctx._alu(np.negative, (self,))

    def __pos__(self):
        return self._ctx._alu(np.positive, (self,))

    def __abs__(self):
        return self._ctx._alu(np.absolute, (self,))

    def __invert__(self):
        return self._ctx._alu(np.invert, (self,))


def _binary(ufunc, reflected=False):
    # Operators call the warp directly: going through np.add(self, other) and
    # __array_ufunc__ costs a few microseconds per instruction.
    if reflected:
        def op(self, other):
            return self._ctx._alu(ufunc, (other, self))
    else:
        def op(self, other):
            return self._ctx._alu(ufunc, (self, other))
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

    __slots__ = ("_alloc", "_ctx", "_flat", "base", "contiguous", "data", "name", "space")

    def __init__(self, ctx, data: np.ndarray, base: int, name: str, space: str, alloc=None):
        self._ctx = ctx
        self.data = data
        self.base = base
        self.name = name
        self.space = space
        self._alloc = alloc
        self.contiguous = data.flags.c_contiguous
        # a flat view when there is one (row-major arrays); else elements go through .flat
        self._flat = data.reshape(-1) if self.contiguous else data.flat

    def take(self, flat: np.ndarray) -> np.ndarray:
        return self._flat[flat]

    def put(self, flat: np.ndarray, values) -> None:
        self._flat[flat] = values

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
    written: np.ndarray  # bool per element, flat: has any thread of the block written it?


# Events are built without NamedTuple's keyword parsing in the hot paths; _NO_EXTRA is
# every field after ``line`` at its default.
_new_event = tuple.__new__
_NO_EXTRA = (None,) * (len(Event._fields) - 9)


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
        for v in inputs:  # _value, inlined for the common case: this runs per instruction
            if type(v) is Lanes and v._ctx is self and not bits & ~v._defined:
                args.append(v._v)
            else:
                args.append(self._value(v, bits, "an operand"))
        out = ufunc(*args)  # NumPy errors are off while warps run: inf/nan as on a GPU
        if type(out) is not np.ndarray or out.shape != (WARP_SIZE,):
            out = np.broadcast_to(np.asarray(out), (WARP_SIZE,)).copy()
        self._issue("alu", _caller_line())
        return Lanes(self, out, bits)

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
        ``acc[...] = ...``.  One ``alu`` instruction (a move)."""
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
        out = np.where(c, va, vb)
        if out.shape != (WARP_SIZE,):
            out = np.broadcast_to(out, (WARP_SIZE,)).copy()
        self._issue("alu", _caller_line())
        return Lanes(self, out, bits)

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

    # -- memory ----------------------------------------------------------------------------------
    def shared(self, shape, dtype=np.float32, name: str | None = None) -> _Memory:
        """Declare a ``__shared__`` array of the block (the same array for all its warps).

        Contents start undefined (NaN for floats); every warp of the block must declare the
        same arrays in the same order.
        """
        shape = _validate.shape("shape", shape)
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
            name = name or _declared_name() or f"shared{k}"
            a = _SharedAlloc(name, data, base, np.zeros(data.size, bool))
            allocs.append(a)
            self._b.shared_top = base + nbytes
            sim = self._sim
            sim.shared_bytes = max(sim.shared_bytes, self._b.shared_top)
            if name not in sim.shared_arrays:
                sim.shared_arrays[name] = SharedArray(name, nbytes, _caller_line())
            known = self._sim.shapes.setdefault(name, ("shared", shape, dtype.itemsize))
            if known != ("shared", shape, dtype.itemsize):
                raise SimtError(f"two arrays are called {name!r} ({known[0]} "
                                f"{list(known[1])} and shared {list(shape)}): give each "
                                f"shared array its own name=")
        return _Memory(self, a.data, a.base, a.name, "shared", alloc=k)

    def _where_of(self, mem: _Memory, index, verb: str, line) -> tuple:
        """``(lanes, flat, offsets)``: the active lanes, the flat (row-major) element
        indices of ``mem[index]`` they touch and those elements' byte offsets from the
        array's base, bounds-checked for the active lanes only (a switched-off lane's
        index is never looked at)."""
        data = mem.data
        if (type(index) is Lanes and mem.contiguous and data.ndim == 1 and index._ctx is self
                and not self._mask_bits & ~index._defined and index._v.dtype.kind in "iu"):
            # the common case, a[i] on a 1-D array, without the general loop below
            act = self._active_lanes()
            if self._mask_bits == _ALL_BITS:  # a copy: the race log keeps these indices
                flat = index._v.astype(np.int64)
            else:
                flat = index._v[act].astype(np.int64, copy=False)
            if np.count_nonzero(flat.view(np.uint64) >= data.shape[0]):
                self._out_of_range(mem, (index,), act, verb)
            return act, flat, flat * data.itemsize
        if type(index) is not tuple:
            index = (index,)
        if len(index) != data.ndim:
            raise IndexError(f"{mem.name} has {data.ndim} dimension(s) {list(data.shape)}; "
                             f"index it with {data.ndim} index(es), got {len(index)}")
        bits = self._mask_bits
        act = self._active_lanes()
        flat = 0
        shape = data.shape
        for k, ix in enumerate(index):
            if type(ix) is Lanes:
                v = self._value(ix, bits, f"the index into {mem.name}")
                if v.dtype.kind not in "iu":
                    raise TypeError(f"index into {mem.name} must be an integer, got lane "
                                    f"values of type {v.dtype}")
                c = (v.astype(np.int64) if bits == _ALL_BITS
                     else v[act].astype(np.int64, copy=False))
                # one comparison finds both ends: negative values wrap to huge unsigned ones
                if np.count_nonzero(c.view(np.uint64) >= shape[k]):
                    self._out_of_range(mem, index, act, verb)
            elif isinstance(ix, (int, np.integer)) and not isinstance(ix, (bool, np.bool_)):
                c = int(ix)
                if not 0 <= c < shape[k]:
                    self._out_of_range(mem, index, act, verb)
            else:
                raise TypeError(f"index {k} into {mem.name} must be an int or integer lane "
                                f"values, got {type(ix).__name__}")
            flat = c if k == 0 else flat * shape[k] + c
        if type(flat) is not np.ndarray:  # every lane indexes the same element
            flat = np.full(act.size, flat, dtype=np.int64)
        if mem.contiguous:
            offsets = flat * data.itemsize
        else:
            comps = np.unravel_index(flat, shape)
            offsets = sum(c * s for c, s in zip(comps, data.strides, strict=True))
        return act, flat, offsets

    def _out_of_range(self, mem, index, act, verb):
        """Raise the IndexError naming the first active lane whose index is outside."""
        data = mem.data
        comps = [self._value(ix, self._mask_bits, "index")[act] if type(ix) is Lanes
                 else np.full(act.size, int(ix)) for ix in index]
        bad = np.zeros(act.size, dtype=bool)
        for k, c in enumerate(comps):
            bad |= (c < 0) | (c >= data.shape[k])
        j = int(np.argmax(bad))
        lane = int(act[j])
        where = ", ".join(str(int(c[j])) for c in comps)
        raise IndexError(
            f"lane {lane} of warp {self.warp} in block {tuple(self.block_idx)} "
            f"(thread {self._thread_of(lane)}) {verb} {mem.name}[{where}], outside its shape "
            f"{list(data.shape)}; on a GPU this would corrupt memory or fault")

    def _access(self, mem: _Memory, index, value, line):
        store = value is not None
        if not self._mask_bits:
            # Nothing issues; the values below only keep inactive code paths running.
            return None if store else Lanes(self, np.zeros(WARP_SIZE, mem.data.dtype), 0)
        lanes, flat, offsets = self._where_of(mem, index, "writes" if store else "reads", line)
        full = self._mask_bits == _ALL_BITS
        if store:
            v = self._value(value, self._mask_bits, f"the value stored into {mem.name}")
            mem.put(flat, v[lanes] if isinstance(v, np.ndarray) and not full else v)
            result = None
        elif full:
            result = Lanes(self, mem.take(flat), _ALL_BITS)
        else:
            out = np.zeros(WARP_SIZE, dtype=mem.data.dtype)
            out[lanes] = mem.take(flat)
            result = Lanes(self, out, self._mask_bits)
        kind = ("st." if store else "ld.") + mem.space
        self._record(mem, kind, lanes, flat, offsets, line, _WRITE if store else _READ)
        return result

    def _record(self, mem, kind, lanes, flat, offsets, line, access, serialisation=None):
        """Count one memory instruction and log what race/uninitialised checks need."""
        counts = _memory_counts(mem.space, mem.base, offsets, self._mask, self._mask_bits,
                                mem.data.dtype.itemsize)
        sim = self._sim
        indices = None
        if sim.record_indices:
            idx = [None] * WARP_SIZE
            for lane, f in zip(lanes.tolist(), flat.tolist(), strict=True):
                idx[lane] = f
            indices = tuple(idx)
        # _issue, unrolled: one Event built positionally (this runs per memory instruction)
        sim.count += 1
        if sim.count > sim.max_instructions:
            self._issue(kind, line)  # raises the max_instructions error
        b = self._b
        sim.events.append(_new_event(Event, (
            b.linear, self.warp, self._step, self._step + self._time_offset, b.phase, kind,
            self._mask_bits, self._path_t, line, mem.name, *counts, serialisation, None,
            None, indices)))
        self._step += 1
        if mem.space == "shared":
            alloc = self._b.shared[mem._alloc]
            if access != _WRITE:
                written = alloc.written[flat]
                if np.count_nonzero(written) != written.size:
                    self._uninitialised(alloc, flat[~written], line)
            if access != _READ:
                alloc.written[flat] = True
            self._b.access_log.append((mem._alloc, flat, self.warp, access, line, lanes,
                                       self._warp_syncs))

    def _uninitialised(self, alloc, flat, line):
        """Record a read of unwritten shared memory: the first one per block, warp, line and
        array (a loop would otherwise record the same mistake thousands of times)."""
        sim = self._sim
        key = (self._b.linear, self.warp, line, alloc.name)
        if key in sim.uninitialised_seen:
            return
        sim.uninitialised_seen.add(key)
        index = tuple(int(i) for i in np.unravel_index(int(flat[0]), alloc.data.shape))
        if len(sim.uninitialised) < 1000:
            sim.uninitialised.append(UninitialisedRead(self._b.linear, self.warp, line,
                                                       alloc.name, index, int(flat.size)))
        sim.note(f"line {line}: warp {self.warp} of block {tuple(self.block_idx)} reads "
                 f"{alloc.name} where nothing was written yet (shared memory starts "
                 f"undefined)")

    def _thread_of(self, lane: int) -> tuple[int, int, int]:
        return tuple(int(d._v[lane]) for d in self.thread_idx)

    # -- atomics ---------------------------------------------------------------------------------
    def atomic_add(self, array, index, value) -> Lanes:
        """``old = atomicAdd(&array[index], value)`` for each active lane; returns ``old``.

        Lanes hitting the same element are applied in lane order (CUDA: unspecified order).
        """
        return self._atomic("atomic_add", array, index, value, None, _caller_line())

    def atomic_max(self, array, index, value) -> Lanes:
        """``old = atomicMax(&array[index], value)``: stores ``max(old, value)``; returns
        ``old``."""
        return self._atomic("atomic_max", array, index, value, None, _caller_line())

    def atomic_cas(self, array, index, compare, value) -> Lanes:
        """``old = atomicCAS(&array[index], compare, value)``: stores ``value`` where
        ``old == compare``; returns ``old`` (so a lane knows whether it won)."""
        return self._atomic("atomic_cas", array, index, value, compare, _caller_line())

    def _atomic(self, op, mem, index, value, compare, line) -> Lanes:
        if not isinstance(mem, _Memory):
            raise TypeError(f"t.{op}'s first argument must be a global or shared array "
                            f"(a kernel argument or t.shared(...)), got {type(mem).__name__}")
        data = mem.data
        if data.dtype.name not in ATOMIC_DTYPES[op]:
            raise TypeError(f"t.{op} on {mem.name}: CUDA has no {op.replace('_', '')[:6]}"
                            f"{op[7:].capitalize()} for {data.dtype} elements; the array must "
                            f"hold one of {', '.join(ATOMIC_DTYPES[op])}")
        bits = self._mask_bits
        if not bits:
            return Lanes(self, np.zeros(WARP_SIZE, data.dtype), 0)
        lanes, flat, offsets = self._where_of(mem, index, "updates", line)
        v = self._lane_operand(value, bits, lanes, data.dtype, f"t.{op}'s value")
        cmp = (None if compare is None else
               self._lane_operand(compare, bits, lanes, data.dtype, f"t.{op}'s compare"))
        _, counts = np.unique(flat, return_counts=True)
        serial = int(counts.max())
        if serial == 1:  # distinct elements: one vectorised read-modify-write
            old = mem.take(flat)
            mem.put(flat, _atomic_new(op, old, v, cmp))
        else:  # lanes on the same element take turns, in lane order
            old = np.empty(flat.size, data.dtype)
            for j, f in enumerate(flat.tolist()):
                o = mem._flat[f]
                old[j] = o
                mem._flat[f] = _atomic_new(op, o, v[j], None if cmp is None else cmp[j])
        out = np.zeros(WARP_SIZE, dtype=data.dtype)
        out[lanes] = old
        self._record(mem, "atom." + mem.space, lanes, flat, offsets, line, _ATOMIC,
                     serialisation=serial)
        return Lanes(self, out, bits)

    def _lane_operand(self, value, bits, lanes, dtype, what) -> np.ndarray:
        """The active lanes' values of an operand, converted to the array's element type
        (as C converts an argument to the parameter's type)."""
        v = self._value(value, bits, what)
        if isinstance(v, np.ndarray):
            return v[lanes].astype(dtype)
        return np.full(lanes.size, v).astype(dtype)

    # -- warp-level primitives -------------------------------------------------------------------
    def shfl_down(self, value, delta) -> Lanes:
        """``__shfl_down_sync(0xffffffff, value, delta)``: lane i gets lane i + delta's
        value; where i + delta > 31 it keeps its own."""
        line = _caller_line()
        d = self._shfl_operand(delta, "delta", line)
        return self._shuffle("shfl_down", value, _LANE_IDS + d, line)

    def shfl_up(self, value, delta) -> Lanes:
        """``__shfl_up_sync(0xffffffff, value, delta)``: lane i gets lane i - delta's value;
        where i - delta < 0 it keeps its own."""
        line = _caller_line()
        d = self._shfl_operand(delta, "delta", line)
        return self._shuffle("shfl_up", value, _LANE_IDS - d, line)

    def shfl_xor(self, value, lane_mask) -> Lanes:
        """``__shfl_xor_sync(0xffffffff, value, lane_mask)``: lane i gets lane
        i ^ lane_mask's value (the butterfly of a warp reduction)."""
        line = _caller_line()
        m = self._shfl_operand(lane_mask, "lane_mask", line)
        return self._shuffle("shfl_xor", value, _LANE_IDS ^ m, line)

    def shfl_idx(self, value, src_lane) -> Lanes:
        """``__shfl_sync(0xffffffff, value, src_lane)``: every lane gets lane
        ``src_lane % 32``'s value (a broadcast when ``src_lane`` is one number)."""
        line = _caller_line()
        s = self._shfl_operand(src_lane, "src_lane", line, signed=True)
        return self._shuffle("shfl_idx", value, s % WARP_SIZE, line)

    def _shfl_operand(self, v, what, line, signed=False):
        """An int, or lane values, for a shuffle's lane argument."""
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            if v < 0 and not signed:
                raise ValueError(f"{what}={v} must be >= 0 (it is an unsigned int in CUDA)")
            return int(v)
        if type(v) is Lanes:
            vals = self._value(v, self._mask_bits, what)
            if vals.dtype.kind not in "iu":
                raise TypeError(f"{what} must be an integer, got lane values of type "
                                f"{vals.dtype}")
            vals = vals.astype(np.int64)
            if not signed and (vals[self._mask] < 0).any():
                raise ValueError(f"{what} must be >= 0 on every active lane (it is an "
                                 f"unsigned int in CUDA)")
            return vals
        raise TypeError(f"{what} must be an int or integer lane values, "
                        f"got {type(v).__name__}")

    def _shuffle(self, op, value, src, line) -> Lanes:
        bits = self._mask_bits
        v = self._value(value, bits, f"t.{op}'s value")
        if not isinstance(v, np.ndarray):
            v = np.full(WARP_SIZE, v)
        if not bits:
            return Lanes(self, v.copy(), 0)
        inside = (src >= 0) & (src < WARP_SIZE)
        src = np.where(inside, src, _LANE_IDS)   # outside the warp: the lane's own value
        out = v[src]
        mask = self._mask
        stray = mask & inside & ~mask[src]
        n_stray = int(np.count_nonzero(stray))
        if n_stray:
            sim = self._sim
            for lane in np.flatnonzero(stray).tolist():
                if len(sim.shuffle_reads) < 1000:
                    sim.shuffle_reads.append(ShuffleRead(self._b.linear, self.warp, line, op,
                                                         lane, int(src[lane])))
            first = int(np.argmax(stray))
            sim.note(f"line {line}: {op} read lane {int(src[first])}, which was not active "
                     f"(warp {self.warp} of block {tuple(self.block_idx)}); CUDA leaves that "
                     f"value undefined")
        self._issue("shfl", line, inactive_reads=n_stray)
        return Lanes(self, out, bits)

    def syncwarp(self) -> None:
        """``__syncwarp()``: the warp's lanes meet (one ``bar.warp`` instruction).  Lanes of
        a warp run in lockstep here, but not on Volta and later GPUs, so the race check
        counts shared-memory accesses of different lanes between two of these as a race."""
        self._issue("bar.warp", _caller_line())
        self._warp_syncs += 1

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
                f"t.sync() inside a branch that only some lanes of warp {self.warp} took; "
                f"__syncthreads() in divergent code is undefined behaviour (the other lanes "
                f"never arrive). Move the barrier out of the branch.")
        self._barrier_event = self._issue("bar.sync", line)
        self._barrier_line = line
        self._b.wait_at_barrier(self)


def _atomic_new(op, old, v, cmp):
    if op == "atomic_add":
        return old + v
    if op == "atomic_max":
        return np.maximum(old, v)
    return np.where(old == cmp, v, old)


_COUNT_CACHE: dict = {}


def _memory_counts(space: str, base: int, offsets: np.ndarray, mask: np.ndarray,
                   mask_bits: int, itemsize: int) -> tuple:
    """The memory model's counts for one warp access, memoised: the tuple (sectors,
    requests, requested_bytes, wavefronts, ideal_wavefronts, bank_conflicts) in
    :class:`Event`'s field order, ``None`` where a field is for the other space.

    Sectors and lines (global) and banks, words and wavefronts (shared) do not change when
    every address moves by the same multiple of 128 bytes, so the pattern is cached relative
    to its first 128-byte boundary: regular kernels repeat a handful of patterns.
    ``offsets``: byte offsets of the active lanes' elements, in lane order.
    """
    # relative to the 128-byte boundary below the first active lane's address (the
    # counts are the same for any such shift; lanes below it give negative numbers)
    first = base + int(offsets[0])
    relative = offsets + (base - first // 128 * 128)
    key = (space, itemsize, relative.tobytes(), mask_bits)
    hit = _COUNT_CACHE.get(key)
    if hit is not None:
        return hit
    full = np.zeros(WARP_SIZE, dtype=np.int64)
    full[mask] = base + offsets
    if space == "global":
        g = global_load(full, itemsize, mask=mask)
        hit = (g.sectors, g.requests, int(mask.sum()) * itemsize, None, None, None)
    else:
        s = shared_load(full, itemsize, mask=mask)
        hit = (None, None, None, s.wavefronts, s.ideal_wavefronts, s.bank_conflicts)
    if len(_COUNT_CACHE) > 20_000:
        _COUNT_CACHE.clear()
    _COUNT_CACHE[key] = hit
    return hit


def _undefined_message(what, missing: int, defined: int) -> str:
    lanes = np.flatnonzero(_bits_mask(missing)).tolist()
    has = np.flatnonzero(_bits_mask(defined)).tolist()
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


# -- running ---------------------------------------------------------------------------------------

@dataclass
class _GlobalArg:
    data: np.ndarray
    base: int
    name: str


class _Sim:
    """State shared by all blocks of one run."""

    def __init__(self, kernel, grid, block, args, order, max_instructions, record_indices,
                 shapes):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.threads_per_block = block.x * block.y * block.z
        self.warps_per_block = -(-self.threads_per_block // WARP_SIZE)
        self.args = args
        self.order = order
        self.rng = np.random.default_rng(order) if not isinstance(order, str) else None
        self.max_instructions = max_instructions
        self.record_indices = record_indices
        self.shapes = shapes  # array name -> (space, shape, itemsize)
        self.events: list[Event] = []
        self.races: list[Race] = []
        self.notes: list[str] = []
        self.uninitialised: list[UninitialisedRead] = []
        self.uninitialised_seen: set = set()
        self.shuffle_reads: list[ShuffleRead] = []
        self.barriers = 0
        self.count = 0
        self.shared_bytes = 0                            # the most one block declared
        self.shared_arrays: dict[str, SharedArray] = {}  # name -> first declaration

    def note(self, text: str):
        if len(self.notes) < 50 and text not in self.notes:
            self.notes.append(text)

    def warp_order(self, n: int) -> list[int]:
        if self.order == "ascending":
            return list(range(n))
        if self.order == "descending":
            return list(range(n - 1, -1, -1))
        return [int(i) for i in self.rng.permutation(n)]


class _BlockRun:
    """One thread block: its warps take turns, one barrier phase at a time.

    Each warp is a greenlet; ``run`` switches to a warp, which runs until it reaches a
    barrier (and switches back) or finishes.  An exception in a warp comes out of that
    switch, and the warps still waiting at a barrier are unwound with ``_Aborted``.
    """

    def __init__(self, sim: _Sim, linear: int, block_idx: Dim3):
        self.sim = sim
        self.linear = linear
        self.block_idx = block_idx
        self.phase = 0
        self.shared: list[_SharedAlloc] = []
        self.shared_top = 0
        self.access_log: list[tuple] = []

    def run(self):
        sim = self.sim
        warps = [WarpContext(self, w) for w in range(sim.warps_per_block)]
        for w in warps:
            w._glet = greenlet(self._warp_main)
        try:
            while any(w.state in ("new", "barrier") for w in warps):
                for i in sim.warp_order(len(warps)):
                    w = warps[i]
                    if w.state not in ("new", "barrier"):
                        continue
                    w.state = "running"
                    w._glet.switch(w)
                self._end_phase(warps)
        except BaseException:
            self._abandon(warps)
            raise

    def _warp_main(self, w: WarpContext):
        with np.errstate(all="ignore"):  # float faults give inf/nan, as on a GPU
            try:
                self.sim.kernel(w, *w._args)
            except _Aborted:
                w.state = "aborted"
                return
        w.state = "done"

    def wait_at_barrier(self, w: WarpContext):
        w.state = "barrier"
        w._glet.parent.switch()

    def _abandon(self, warps):
        for w in warps:
            if w.state == "barrier" and w._glet:
                w._glet.throw(_Aborted())

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
        events = self.sim.events
        arrive = {w.warp: events[w._barrier_event].time for w in at_barrier}
        release = max(arrive.values())
        for w in at_barrier:
            wait = release - arrive[w.warp]
            events[w._barrier_event] = events[w._barrier_event]._replace(wait=wait)
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
            self._check_lane_races(alloc, entries)
            if len({e[2] for e in entries}) < 2:
                continue  # no second warp to race with
            sizes = [len(e[1]) for e in entries]
            elems = np.concatenate([e[1] for e in entries])
            warp = np.repeat([e[2] for e in entries], sizes)
            access = np.repeat([e[3] for e in entries], sizes)
            seq = np.repeat(np.arange(len(entries)), sizes)
            order = np.lexsort((seq, elems))
            elems, warp, access, seq = elems[order], warp[order], access[order], seq[order]
            starts = np.flatnonzero(np.r_[True, elems[1:] != elems[:-1]])
            ends = np.r_[starts[1:], len(elems)]
            several = np.minimum.reduceat(warp, starts) != np.maximum.reduceat(warp, starts)
            writes = np.logical_or.reduceat(access != _READ, starts)
            plain = np.logical_or.reduceat(access != _ATOMIC, starts)
            for g in np.flatnonzero(several & writes & plain):
                s, e = starts[g], ends[g]
                found = _race_pair(warp[s:e], access[s:e])
                if found is None:
                    continue
                a, b = found
                self.sim.races.append(Race(
                    block=self.linear, phase=self.phase, array=alloc.name,
                    index=tuple(int(i) for i in np.unravel_index(int(elems[s]),
                                                                 alloc.data.shape)),
                    writer_warp=int(warp[s + a]), writer_line=entries[int(seq[s + a])][4],
                    other_warp=int(warp[s + b]), other_line=entries[int(seq[s + b])][4],
                    other_access=("read", "write", "atomic")[access[s + b]],
                    writer_access=("read", "write", "atomic")[access[s + a]]))

    def _check_lane_races(self, alloc, entries):
        """Races between lanes of one warp: a word one lane writes and another lane reads or
        writes, in different instructions with no ``t.syncwarp()`` between.  The simulator
        runs a warp's lanes in lockstep, but since Volta each thread has its own program
        counter and a warp's lanes may run apart (CUDA C++ Programming Guide, "Independent
        Thread Scheduling"): only ``__syncwarp()`` orders them."""
        sizes = [len(e[1]) for e in entries]
        elems = np.concatenate([e[1] for e in entries])
        lane = np.concatenate([e[5] for e in entries])
        # one group per warp, interval between t.syncwarp() calls and word
        group = np.repeat([e[2] * (1 << 32) + e[6] for e in entries], sizes)
        access = np.repeat([e[3] for e in entries], sizes)
        seq = np.repeat(np.arange(len(entries)), sizes)
        order = np.lexsort((seq, elems, group))
        elems, lane, group, access, seq = (elems[order], lane[order], group[order],
                                           access[order], seq[order])
        new = np.r_[True, (elems[1:] != elems[:-1]) | (group[1:] != group[:-1])]
        starts = np.flatnonzero(new)
        ends = np.r_[starts[1:], len(elems)]
        several = np.minimum.reduceat(lane, starts) != np.maximum.reduceat(lane, starts)
        writes = np.logical_or.reduceat(access == _WRITE, starts)
        for g in np.flatnonzero(several & writes):
            s, e = starts[g], ends[g]
            found = _lane_race_pair(lane[s:e], access[s:e], seq[s:e])
            if found is None:
                continue
            a, b = found
            writer, other = entries[int(seq[s + a])], entries[int(seq[s + b])]
            self.sim.races.append(Race(
                block=self.linear, phase=self.phase, array=alloc.name,
                index=tuple(int(i) for i in np.unravel_index(int(elems[s]), alloc.data.shape)),
                writer_warp=writer[2], writer_line=writer[4],
                other_warp=other[2], other_line=other[4],
                other_access=("read", "write", "atomic")[access[s + b]],
                writer_access="write", writer_lane=int(lane[s + a]),
                other_lane=int(lane[s + b])))
            return  # one per array and phase: the first tells the learner what to fix


def _lane_race_pair(lane: np.ndarray, access: np.ndarray, seq: np.ndarray):
    """Positions (writer, other) of a plain write by one lane and an access of the same word
    by another lane in a different instruction; ``None`` if there are none.  Lanes of one
    instruction writing one word together are not counted: the hardware keeps one of them."""
    for a in np.flatnonzero(access == _WRITE).tolist():
        others = np.flatnonzero((lane != lane[a]) & (seq != seq[a]))
        if others.size:
            return a, int(others[0])
    return None


def _race_pair(warp: np.ndarray, access: np.ndarray):
    """Positions (writer, other) of two accesses of one word by different warps that race:
    at least one writes and not both are atomic; ``None`` if there are none."""
    plain_writes = np.flatnonzero(access == _WRITE)
    for a in plain_writes.tolist():  # a plain write races with any access of another warp
        others = np.flatnonzero(warp != warp[a])
        if others.size:
            other_writes = others[access[others] != _READ]
            return a, int(other_writes[0] if other_writes.size else others[0])
    atomics = np.flatnonzero(access == _ATOMIC)
    for a in atomics.tolist():  # an atomic races with a plain read of another warp
        readers = np.flatnonzero((warp != warp[a]) & (access == _READ))
        if readers.size:
            return a, int(readers[0])
    return None


def _dim3(name: str, value, limits) -> Dim3:
    return Dim3(*_validate.launch_dims(name, value, high=limits))


def _kernel_params(kernel) -> list[str]:
    code = getattr(kernel, "__code__", None)
    if code is None:
        return []
    return list(code.co_varnames[1:code.co_argcount])


def run(kernel, grid, block, *args, order="ascending", max_instructions: int = 200_000,
        max_warps: int = 4096, record_indices: bool = False) -> SimResult:
    """Run ``kernel<<<grid, block>>>(*args)`` warp by warp and record what happened.

    ``kernel(t, *args)``: a Python function written from one thread's view (see the module
    docstring).  ``grid``, ``block``: an int or a tuple (x, y, z), CUDA's limits apply
    (block at most 1024 threads; x, y <= 1024, z <= 64).  ``args``: NumPy arrays (global
    memory, written in place as device memory would be) and Python numbers.
    ``order``: the order in which a block's warps take turns between barriers:
    ``"ascending"``, ``"descending"``, or an int seed for a random order per barrier phase.
    ``max_instructions``, ``max_warps``: guards against runaway kernels and huge grids.
    ``record_indices``: keep, for every memory instruction, the element each active lane
    touched (``Event.indices``), for pictures of the access pattern.

    Anything the kernel raises comes out as a :class:`KernelError` at the kernel's line
    (:mod:`gpu_lessons.simt_errors`); arrays keep what the kernel wrote before the error.
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
    record_indices = _validate.flag("record_indices", record_indices)
    n_blocks = grid.x * grid.y * grid.z
    n_warps = n_blocks * -(-threads // WARP_SIZE)
    if n_warps > max_warps:
        raise ValueError(f"grid={tuple(grid)} x block={tuple(block)} is {n_warps} warps; the "
                         f"simulator runs at most max_warps={max_warps} (simulate a smaller "
                         f"problem, or raise max_warps and wait)")

    names = _kernel_params(kernel)
    wrapped, top, shapes = [], 0, {}
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
            shapes[name] = ("global", a.shape, a.dtype.itemsize)
            top = start + high - low + a.dtype.itemsize
        elif _is_scalar(a):
            wrapped.append(a)
        else:
            raise TypeError(f"{name}: kernel arguments must be NumPy arrays or numbers, "
                            f"got {type(a).__name__}")

    sim = _Sim(kernel, grid, block, tuple(wrapped), order, max_instructions, record_indices,
               shapes)
    linear = 0
    try:
        for bz in range(grid.z):
            for by in range(grid.y):
                for bx in range(grid.x):
                    _BlockRun(sim, linear, Dim3(bx, by, bz)).run()
                    linear += 1
    except Exception as exc:
        err = kernel_error(exc, kernel)
        if err is None:
            raise
        raise err from exc

    events = tuple(sim.events)
    return SimResult(kernel=getattr(kernel, "__name__", "kernel"), grid=grid, block=block,
                     order=order, events=events, races=tuple(sim.races),
                     notes=tuple(sim.notes), barriers=sim.barriers,
                     totals=_stats(events), array_shapes=sim.shapes,
                     uninitialised_reads=tuple(sim.uninitialised),
                     shuffle_reads=tuple(sim.shuffle_reads),
                     shared_bytes_per_block=sim.shared_bytes,
                     shared_arrays=tuple(sim.shared_arrays.values()))
