"""Helpers the chapter modules share: GPUs as question parameters, formatting for prompts, and
the mistakes many questions name."""

from __future__ import annotations

from .._format import si
from ..hardware import gpu
from ..occupancy import compute_capability
from .types import Mistake, Vary


def gpu_name(key: str) -> str:
    """A catalog key as the prompt prints it: ``"h100"`` -> ``"H100 SXM5"``."""
    return gpu(key).name


def gpus(*keys: str, doc: str = "the GPU (a catalog key)") -> Vary:
    """A ``gpu`` parameter over catalog keys, the first the lesson's own."""
    return Vary("gpu", keys, doc, show=gpu_name)


def max_threads_per_sm(key: str) -> int:
    """The most threads one SM of ``key`` keeps resident (its compute capability's warps x 32)."""
    return compute_capability(gpu(key).cc).max_warps_per_sm * 32


def tbs(bytes_per_s: float) -> str:
    """A bandwidth as a datasheet prints it: ``4.8 TB/s``, ``900 GB/s``."""
    return si(bytes_per_s, "B/s")


def percent_as_fraction() -> Mistake:
    """The slip of an answer asked in percent given as a fraction: the right one / 100."""
    return Mistake("fraction", "looks like a fraction (0..1); the answer is wanted in percent.",
                   value=_hundredth)


def fraction_as_percent(
        message: str = "return a fraction between 0 and 1, not a percentage.") -> Mistake:
    """The slip of an answer asked as a fraction (0..1) given in percent: the right one x 100.
    ``message`` is the feedback ("give ..." for a number, "return ..." for a function)."""
    return Mistake("percent", message, value=_hundredfold)


def _hundredth(right, **params):
    return right / 100


def _hundredfold(right, **params):
    return 100 * right
