"""What every explorer shares (``gpu_lessons.views._base``): lane lists, SI formatting, and
changing controls from code without a cascade of updates.

References: hand-written expectations (the lane lists and SI strings are written out), and a
counting explorer that records each update it runs.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons.views._base import Explorer, lane_ranges, slider


def test_lane_ranges_by_hand():
    assert lane_ranges([0, 1, 2, 5]) == "0–2, 5"
    assert lane_ranges([7]) == "7"
    assert lane_ranges([1, 3, 4, 5, 9, 10]) == "1, 3–5, 9–10"
    assert lane_ranges(range(32)) == "0–31"
    assert lane_ranges((0, 2, 4)) == "0, 2, 4"


@given(st.sets(st.integers(0, 31), min_size=1))
def test_lane_ranges_lists_every_lane_once(lanes):
    text = lane_ranges(sorted(lanes))
    back = set()
    for part in text.split(", "):
        lo, _, hi = part.partition("–")
        back |= set(range(int(lo), int(hi or lo) + 1))
    assert back == lanes


class _Counting(Explorer):
    title = "counting"

    def __init__(self):
        self.updates = 0
        super().__init__({"a": slider("a", 1, 0, 10), "b": slider("b", 1, 0, 10)}, [])

    def _update(self):
        self.updates += 1


def test_quietly_suppresses_updates_and_restores():
    e = _Counting()
    assert e.updates == 1                   # the first draw
    e.controls["a"].value = 2
    assert e.updates == 2                   # a learner's change updates once
    with e.quietly():
        e.controls["a"].value = 3
        e.controls["b"].value = 4
        with e.quietly():                   # nesting keeps the outer block quiet
            e.controls["b"].value = 5
        e.controls["a"].value = 6
    assert e.updates == 2
    e.controls["b"].value = 6
    assert e.updates == 3                   # loud again afterwards


def test_quietly_restores_after_an_error():
    e = _Counting()
    with pytest.raises(RuntimeError), e.quietly():
        raise RuntimeError("boom")
    e.controls["a"].value = 9
    assert e.updates == 2


def test_use_only_greys_out_the_controls_not_read():
    e = _Counting()
    assert e.control_values() == {"a": 1, "b": 1}
    e.use_only({"a"})
    assert (e.controls["a"].disabled, e.controls["b"].disabled) == (False, True)
    e.use_only(set(), always=("b",))
    assert (e.controls["a"].disabled, e.controls["b"].disabled) == (True, False)
