"""Lane values, device memory and the limits every part of the simulator shares."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ... import _validate
from ...hardware import WARP_SIZE
from .result import (
    Event,
)

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

#: The simulator's own source files: frames in them are skipped when a kernel's line is looked up.
SIM_FILES = {__file__}
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
    while f is not None and f.f_code.co_filename in SIM_FILES:
        f = f.f_back
    return None if f is None else f.f_lineno


@dataclass
class _GlobalArg:
    data: np.ndarray
    base: int
    name: str


# -- lane values ----------------------------------------------------------------------------------

class Lanes:
    """One value per lane of a warp (a register, in CUDA terms).

    Arithmetic, comparisons and NumPy ufuncs on ``Lanes`` are warp instructions issued under
    the current active mask.  ``values`` gives the 32 numbers; ``defined`` which lanes hold
    a meaningful one.  A variable declared with ``y = t.local(...)`` can be updated in place
    with ``y[...] = expr``, which writes only the active lanes (a masked move).
    """

    __slots__ = ("_ctx", "_defined", "_v", "_variable", "_weak")
    __hash__ = None  # == is element-wise

    def __init__(self, ctx, values: np.ndarray, defined: int,
                 variable: bool = False, weak: bool = False):
        self._ctx = ctx
        self._v = values
        self._defined = defined  # bit i: lane i holds a value
        self._variable = variable
        # a Python number made per-lane by a branch: NumPy promotes it as a Python scalar
        self._weak = weak

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


#: A value every lane shares: any number NumPy holds (``_validate.is_number``'s wider reading).
_is_scalar = functools.partial(_validate.is_number, any_numpy_scalar=True)


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


