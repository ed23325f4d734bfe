"""Small helpers the lesson modules use to make inputs, launches and budgets."""

from __future__ import annotations

import numpy as np

from .._math import cdiv  # noqa: F401  (the lesson modules import it from here)
from .._validate import integer
from ._core import COALESCED_WHY, Budget, Section

#: A warp of 4-byte lanes reading 32 consecutive, 128-byte aligned floats touches 4 sectors
#: of 32 bytes: 128 B / 32 B.  Every coalescing budget of 32-bit data is this number.
COALESCED = 4.0


def values(rng, n: int, low: int = 0, high: int = 100) -> np.ndarray:
    """Small whole numbers as float32: sums of them are exact, so order cannot matter."""
    return rng.integers(low, high, size=n).astype(np.float32)


def unwritten(n: int) -> np.ndarray:
    """An output buffer: NaN everywhere, so an element the kernel never writes shows."""
    return np.full(n, np.nan, dtype=np.float32)


def size_int(name: str, value, *, low: int = 1, high: int | None = None, multiple: int = 1):
    value = integer(name, value, low=low, high=high)
    if value % multiple:
        raise ValueError(f"{name}={value} must be a multiple of {multiple} for this launch")
    return value


def power_of_two(name: str, value, *, low: int = 1, high: int | None = None) -> int:
    value = integer(name, value, low=low, high=high)
    if value & (value - 1):
        raise ValueError(f"{name}={value} must be a power of two")
    return value


def loads(arr: str, direction: str = "load") -> Budget:
    """The coalescing budget of one array: 4 sectors per request."""
    metric = "load_sectors" if direction == "load" else "store_sectors"
    return Budget(metric, COALESCED, COALESCED_WHY, array=arr)


def stores(arr: str) -> Budget:
    return loads(arr, "store")


def once(arr: str, why: str = "each element is needed once") -> Budget:
    return Budget("loads_per_element", 1.0, why, array=arr)


S = Section
