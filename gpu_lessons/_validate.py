"""Argument checks shared by every model.

Each helper raises a ``TypeError`` or ``ValueError`` whose message names the
parameter, the value it got and what is allowed, so a learner who passes a bad
value sees what to change instead of a traceback from deep inside NumPy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

#: NumPy's number scalars beside Python's; every NumPy scalar (complex, str, datetime too).
_NUMBERS = (int, float, bool, np.integer, np.floating, np.bool_)
_SCALARS = (int, float, bool, np.generic)


def is_number(value, *, any_numpy_scalar: bool = False) -> bool:
    """A plain number: a Python ``int``, ``float`` or ``bool``, or NumPy's integer, floating or
    bool scalar (what a kernel's outside names and scalar arguments may hold).  With
    ``any_numpy_scalar`` every NumPy scalar (``np.generic``) counts as well: the simulator hands
    those to NumPy as a value every lane shares, and NumPy says what they mean."""
    return isinstance(value, _SCALARS if any_numpy_scalar else _NUMBERS)


def integer(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    _in_range(name, value, low, high)
    return value


def real(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` in ``[low, high]`` (``(low, high]`` if ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low_open and low is not None and value <= low:
        raise ValueError(f"{name} must be > {low:g}, got {value:g}")
    _in_range(name, value, low, high)
    return value


def positive(name: str, value) -> float:
    """A finite number > 0."""
    return real(name, value, low=0.0, low_open=True)


def flag(name: str, value) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def choice(name: str, value, allowed: Iterable):
    """Return ``value`` if it is one of ``allowed``."""
    allowed = list(allowed)
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {shown}; got {value!r}")
    return value


def dimensions(**named) -> tuple[int, ...]:
    """Each keyword's value as an ``int`` >= 1 (matrix sizes, rows and columns), in order:
    ``m, n, k = dimensions(m=m, n=n, k=k)``."""
    return tuple(integer(name, v, low=1) for name, v in named.items())


def launch_dims(name: str, value, *, high: int | tuple[int, int, int] = 2**31 - 1
                ) -> tuple[int, int, int]:
    """A CUDA grid or block shape: an int, or a tuple or list of 1 to 3 ints ``(x, y, z)``,
    each >= 1 and at most ``high`` (one limit for every axis, or one per axis, as CUDA's
    ``maxGridSize`` and ``maxThreadsDim``).  Returned as ``(x, y, z)``, a missing axis being 1;
    a message names the axis: ``block.y must be <= 1024, got 2048``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple | list) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be a positive int or a tuple of 1 to 3 positive ints "
                        f"(x, y, z), got {value!r}")
    highs = tuple(high) if isinstance(high, tuple | list) else (high,) * 3
    dims = [integer(f"{name}.{axis}", v, low=1, high=limit)
            for v, axis, limit in zip(value, "xyz", highs, strict=False)]
    return (*dims, *[1] * (3 - len(dims)))


def shape(name: str, value) -> tuple[int, ...]:
    """An array's shape: an int, or a non-empty tuple or list of ints, each >= 1
    (``t.shared(256)``, ``t.shared((2, 128))``); a message names the dimension:
    ``shape[1] must be >= 1, got 0``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple | list) or not value:
        raise TypeError(f"{name} must be a positive int or a tuple of positive ints, "
                        f"got {value!r}")
    return tuple(integer(f"{name}[{i}]", v, low=1) for i, v in enumerate(value))


def _asarray(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value)
    except ValueError:          # ragged nesting: not an array of numbers at all
        raise TypeError(f"{name} must be a number or a flat sequence of numbers, "
                        f"got {value!r:.80}") from None


def _shape_check(name, a: np.ndarray, max_ndim, nonempty) -> None:
    if max_ndim is not None and a.ndim > max_ndim:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}" if max_ndim == 1
                         else f"{name} must have at most {max_ndim} dimensions, got {a.shape}")
    if nonempty and a.size == 0:
        raise ValueError(f"{name} must not be empty, got {a.tolist()!r}")


def int_array(name: str, value, *, low: int | None = None, high: int | None = None,
              max_ndim: int | None = None, nonempty: bool = False) -> np.ndarray:
    """``value`` (an int, a list of ints or an integer array) as an ``int64`` array, every
    element in ``[low, high]``; at most ``max_ndim`` dimensions; not empty if ``nonempty``."""
    a = _asarray(name, value)
    empty_list = a.size == 0 and a.dtype.kind == "f"   # np.asarray([]) is a float array
    if (a.dtype == bool or a.dtype.kind not in "iu") and not empty_list:
        raise TypeError(f"{name} must be integers (an int, a list of ints or an integer "
                        f"array), got dtype {a.dtype} ({value!r:.60})")
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} must fit in a signed 64-bit integer, got {a.max()}")
    a = a.astype(np.int64)
    _shape_check(name, a, max_ndim, nonempty)
    if a.size and low is not None and a.min() < low:
        raise ValueError(f"{name} must be >= {low}, got {a.min()}" + _range(low, high))
    if a.size and high is not None and a.max() > high:
        raise ValueError(f"{name} must be <= {high}, got {a.max()}" + _range(low, high))
    return a


def real_array(name: str, value, *, low: float | None = None, low_open: bool = False,
               max_ndim: int | None = None, nonempty: bool = False) -> np.ndarray:
    """``value`` (a number, a list of numbers or a numeric array) as a ``float`` array of
    finite numbers, every element >= ``low`` (> ``low`` if ``low_open``)."""
    a = _asarray(name, value)
    if a.dtype == bool or a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {value!r:.80}")
    a = a.astype(float)
    _shape_check(name, a, max_ndim, nonempty)
    bad = ~np.isfinite(a)
    if low is not None:
        bad |= (a <= low) if low_open else (a < low)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        need = "finite" if low is None else f"finite and {'>' if low_open else '>='} {low:g}"
        where = f" at index {i}" if a.ndim else ""
        raise ValueError(f"{name} must be {need}, got {float(a.flat[i])!r}{where}")
    return a


def _in_range(name, value, low, high):
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low:g}, got {value:g}" + _range(low, high))
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high:g}, got {value:g}" + _range(low, high))


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" (allowed: {low:g} to {high:g})"
    return ""
