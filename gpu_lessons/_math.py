"""Integer arithmetic every layer shares: ceiling division and rounding up to a multiple.

Both work on Python integers and on NumPy integer arrays alike (floor division of the negated
numerator: no float, so exact for any size).
"""

from __future__ import annotations


def cdiv(a, b):
    """⌈a / b⌉ for integers ``a`` and ``b > 0``: how many ``b``-sized pieces cover ``a``."""
    return -(-a // b)


def round_up(a, unit):
    """``a`` rounded up to a multiple of ``unit`` (``unit > 0``)."""
    return cdiv(a, unit) * unit
