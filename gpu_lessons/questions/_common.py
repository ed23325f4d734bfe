"""Helpers the chapter modules share: GPUs as question parameters, and formatting for prompts."""

from __future__ import annotations

from .._format import si
from ..hardware import gpu
from ..occupancy import compute_capability
from .types import Vary


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
