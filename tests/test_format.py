"""The text helpers behind the models' reprs (``gpu_lessons._format``).

References: strings written out by hand (SI and binary prefixes, 3 significant figures), and
the HTML standard's escaping of ``<``, ``>``, ``&`` and quotes.
"""

from __future__ import annotations

import html
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons._format import (
    Table,
    bandwidth,
    binary_bytes,
    duration,
    exact_bytes,
    fixed,
    flop_rate,
    html_table,
    memory_size,
    percent,
    ratio,
    si,
    text_table,
    tolerance,
)


@pytest.mark.parametrize(("value", "unit", "digits", "text"), [
    (989.4e12, "FLOP/s", 3, "989 TFLOP/s"),
    (989.4e12, "FLOP/s", 4, "989.4 TFLOP/s"),
    (4.8e12, "B/s", 3, "4.8 TB/s"),
    (1.23e19, "FLOP", 3, "12.3 EFLOP"),
    (6.3e23, "FLOP", 3, "630 ZFLOP"),
    (2e25, "FLOP", 3, "20 YFLOP"),
    (999, "B", 3, "999 B"),
    (1000, "B", 3, "1 kB"),
    (0, "FLOP", 3, "0 FLOP"),
    (-3.35e12, "B/s", 3, "-3.35 TB/s"),
    (1.98e15, "FLOP/s", 3, "1.98 PFLOP/s"),
    (2.5e21, "FLOP", 3, "2.5 ZFLOP"),
    (-2e9, "B", 3, "-2 GB"),
])
def test_si_by_hand(value, unit, digits, text):
    assert si(value, unit, digits) == text


@given(st.floats(1.0, 1e26))
def test_si_number_is_between_1_and_1000(x):
    number = float(si(x, "B", 6).split()[0])
    assert 1 <= number <= 1000


@pytest.mark.parametrize(("fraction", "text"), [(0.462, "46.2 %"), (0.00378, "0.378 %"),
                                                (1, "100 %"), (1.04, "104 %"), (0, "0 %")])
def test_percent_by_hand(fraction, text):
    assert percent(fraction) == text


@pytest.mark.parametrize(("fraction", "text"), [(0.031, "+3.1 %"), (-0.23, "-23 %"),
                                                (-3.3e-16, "0 %"), (2e-16, "0 %")])
def test_signed_percent_and_rounding_noise(fraction, text):
    # a change shows its sign; float noise from a subtraction (1e-16) is zero, not "3.3e-14 %"
    assert percent(fraction, signed=True) == text


@pytest.mark.parametrize(("nbytes", "text"), [(0, "0 B"), (128, "128 B"), (49152, "49,152 B"),
                                              (123904, "123,904 B")])
def test_exact_bytes_by_hand(nbytes, text):
    # to the byte: 123,904 B is 121 KiB, which binary_bytes would write instead
    assert exact_bytes(nbytes) == text


@pytest.mark.parametrize(("value", "unit", "decimals", "text"), [
    (1600, "µs", 1, "1,600.0 µs"), (123.456, "GB/s", 2, "123.46 GB/s"),
    (0.04, "µs", 1, "0.0 µs"), (1980, "MHz", 0, "1,980 MHz")])
def test_fixed_by_hand(value, unit, decimals, text):
    # one fixed decimal keeps a measured and a modelled time comparable digit for digit
    assert fixed(value, unit, decimals) == text


@pytest.mark.parametrize(("rtol", "text"), [(0.005, "0.5 %"), (0.01, "1 %"), (0.03, "3 %"),
                                            (1e-4, "0.01 %"), (1e-9, "1e-07 %")])
def test_tolerance_by_hand(rtol, text):
    # 1e-9 of the expected value is 1e-7 %: a tolerance is never rounded to "0 %" as noise is
    assert tolerance(rtol) == text


@pytest.mark.parametrize(("value", "text"), [(0.1666, "0.167"), (61.34, "61.3"),
                                             (1024, "1,024"), (math.inf, "∞"), (99.96, "100")])
def test_ratio_by_hand(value, text):
    assert ratio(value) == text


@pytest.mark.parametrize(("nbytes", "spec", "text"), [
    (3 * 2**20, ",.4g", "3 MiB"),
    (1536, ",.4g", "1.5 KiB"),
    (100, ",.4g", "100 B"),
    (1023, ",.4g", "1,023 B"),
    (13_107_200, ",.2f", "12.50 MiB"),      # vLLM's 16-token page of OPT-13B
    (32 * 1024, ",.1f", "32.0 KiB"),
    (80 * 2**30, ",.4g", "80 GiB"),
    (1500 * 2**30, ",.4g", "1,500 GiB"),
])
def test_binary_bytes_by_hand(nbytes, spec, text):
    assert binary_bytes(nbytes, spec) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (2.26e-4, "226 µs"), (0.0216785, "21.7 ms"), (1.5, "1.5 s"), (5e-8, "50 ns"),
    (1e-6, "1 µs"), (999.4e-6, "999 µs"), (999.0, "999 s"), (1800.0, "1,800 s"),
    (3600.4, "3,600 s"),
])
def test_duration_by_hand(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize(("value", "text"), [
    (989.4e12, "989.4 TFLOP/s"), (1978.9e12, "1,978.9 TFLOP/s"), (66.9e12, "66.9 TFLOP/s"),
    (312.5e9, "312.5 GFLOP/s"), (1e12, "1.0 TFLOP/s"),
])
def test_flop_rate_by_hand(value, text):
    assert flop_rate(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (3350e9, "3,350 GB/s"), (4.8e12, "4,800 GB/s"), (55.2e9, "55.2 GB/s"), (7.9e9, "7.9 GB/s"),
    (0.5e9, "0.5 GB/s"),
])
def test_bandwidth_by_hand(value, text):
    assert bandwidth(value) == text


@pytest.mark.parametrize(("nbytes", "text"), [
    (141e9, "141 GB"), (80e9, "80 GB"), (60 * 2**20, "60 MiB"), (256 * 2**10, "256 KiB"),
])
def test_memory_size_by_hand(nbytes, text):
    assert memory_size(nbytes) == text


def test_text_table_numbers_align_the_first_column_left_the_rest_right():
    # widths 3 ("xxx") and 2 ("bb", "22"): the first column to the left, the rest to the right
    assert text_table(("a", "bb"), [("xxx", 1), ("y", 22)], align="numbers") == (
        "a    bb\nxxx   1\ny    22")
    assert text_table(None, [("a", "b")], align="numbers") == "a  b"


def test_a_table_declared_once_is_its_repr_and_its_html():
    class Two(Table):
        def table(self):
            return "cap", ("k", "v"), [("a", "<1>")]

    assert repr(Two()) == "cap\nk    v\na  <1>"
    assert Two()._repr_html_() == ("<table><caption>cap</caption><tr><th>k</th><th>v</th></tr>"
                                   "<tr><td>a</td><td>&lt;1&gt;</td></tr></table>")


def test_html_table_escapes_unless_told_not_to():
    t = html_table("a < b", ("x", "y & z"), [(1, "<b>2</b>")])
    assert t == ("<table><caption>a &lt; b</caption><tr><th>x</th><th>y &amp; z</th></tr>"
                 "<tr><td>1</td><td>&lt;b&gt;2&lt;/b&gt;</td></tr></table>")
    raw = html_table("MFU", ("", ""), [("<b>MFU</b>", "46.2 %")], escape=False)
    assert raw == ("<table><caption>MFU</caption><tr><th></th><th></th></tr>"
                   "<tr><td><b>MFU</b></td><td>46.2 %</td></tr></table>")
    # no header: caption and rows only
    assert html_table("t", None, [("k", "v")]) == \
        "<table><caption>t</caption><tr><td>k</td><td>v</td></tr></table>"


def test_text_table_pads_each_column_to_its_widest_cell():
    # "mode" and "graph" are 4 and 5 wide; the last column carries no trailing blanks
    assert text_table(("mode", "step"), [("graph", "1 µs"), ("sync", "12 µs")]) == (
        "mode   step\ngraph  1 µs\nsync   12 µs")
    assert text_table(None, [("a", 1), ("bbb", 22)], align="right") == "  a   1\nbbb  22"
    assert text_table(None, []) == ""


@given(st.lists(st.lists(st.text(max_size=8), min_size=1, max_size=4), max_size=5))
def test_html_table_keeps_every_cell(rows):
    t = html_table("c", None, rows)
    cells = re.findall(r"<td>(.*?)</td>", t, flags=re.S)
    assert [html.unescape(c) for c in cells] == [c for r in rows for c in r]
