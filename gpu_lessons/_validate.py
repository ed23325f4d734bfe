"""Argument checks shared by every model.

Each helper raises a ``TypeError`` or ``ValueError`` whose message names the
parameter, the value it got and what is allowed, so a learner who passes a bad
value sees what to change instead of a traceback from deep inside NumPy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable


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


def _in_range(name, value, low, high):
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low:g}, got {value:g}" + _range(low, high))
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high:g}, got {value:g}" + _range(low, high))


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" (allowed: {low:g} to {high:g})"
    return ""
