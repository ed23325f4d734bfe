"""Ceiling division and rounding up, against the float definition on every small case."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons._math import cdiv, round_up


@given(st.integers(0, 10**12), st.integers(1, 10**6))
def test_cdiv_is_the_ceiling_of_the_quotient(a, b):
    q = cdiv(a, b)
    assert (q - 1) * b < a <= q * b or a == q == 0
    if a < 2**40:
        assert q == math.ceil(a / b)
    assert round_up(a, b) % b == 0 and 0 <= round_up(a, b) - a < b


def test_cdiv_on_arrays_and_exact_multiples():
    assert cdiv(256, 32) == 8 and cdiv(257, 32) == 9 and cdiv(0, 32) == 0
    assert round_up(4097, 256) == 4352 and round_up(4096, 256) == 4096
    np.testing.assert_array_equal(cdiv(np.array([1, 32, 33]), 32), [1, 1, 2])
