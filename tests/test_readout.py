"""Every result that shows itself through ``_format.Readout``: its rows say the right values in
the right units, and its ``repr``, HTML table and Markdown all say exactly those rows.

One example per class, with the rows worked out by hand; ``test_every_readout_class_has_an_example``
fails when a class adopts the readout without an example here.
"""

from __future__ import annotations

import html
import importlib
import pkgutil

import pytest

import gpu_lessons
from gpu_lessons._format import Readout, Row, quantity
from gpu_lessons.memory import global_load
from gpu_lessons.overlap_record import AllReducePoint, OverlapPoint

MiB = 2**20

#: (instance, title, rows as (label, value, unit), by hand)
EXAMPLES = [
    # 32 lanes reading 4 bytes each from byte 4 on: 128 B requested over 5 sectors (160 B)
    (global_load([4 + 4 * i for i in range(32)]), "Global load, one warp",
     [("active lanes", "32 of 32", ""), ("access size per thread", 4, "B"), ("requests", 1, ""),
      ("sectors (32 B)", 5, ""), ("lines (128 B)", 2, ""), ("requested", 128, "B"),
      ("moved", 160, "B"), ("efficiency", 0.8, "%")]),
    # 64 MiB in 1,000 µs on 4 GPUs: algbw = 67.108864 GB/s, busbw = algbw × 2·3/4
    (AllReducePoint(64 * MiB, 4, 1000.0), "All-reduce of 64 MiB on 4 GPUs",
     [("time", 1e-3, "s"), ("algbw", 67.108864e9, "B/s"), ("busbw", 67.108864e9 * 1.5, "B/s")]),
    # step 9 ms against 8 ms of compute alone: 1 ms exposed = 0.5 ms slowed + 0.5 ms tail
    (OverlapPoint(32 * MiB, ((0, 1), (2,)), 9000.0, 8500.0, 8000.0), "Buckets of 32 MiB",
     [("buckets", 2, ""), ("step", 9e-3, "s"), ("exposed", 1e-3, "s"),
      ("compute slowed", 0.5e-3, "s"), ("tail", 0.5e-3, "s")]),
]


def _ids():
    return [type(obj).__name__ for obj, _, _ in EXAMPLES]


@pytest.mark.parametrize(("obj", "title", "rows"), EXAMPLES, ids=_ids())
def test_rows_say_the_values_and_units(obj, title, rows):
    got = obj.readout_rows()
    assert obj.readout_title() == title
    assert [(r.label, r.unit) for r in got] == [(label, unit) for label, _, unit in rows]
    for r, (label, value, _) in zip(got, rows, strict=True):
        assert r.value == pytest.approx(value) if not isinstance(value, str) else r.value == value, label


@pytest.mark.parametrize(("obj", "title", "rows"), EXAMPLES, ids=_ids())
def test_repr_html_and_markdown_show_exactly_the_rows(obj, title, rows):
    texts = [quantity(v, u) for _, v, u in rows]
    assert repr(obj) == f"{title}: " + ", ".join(f"{lab} {t}" for (lab, _, _), t in zip(rows, texts,
                                                                                          strict=True))
    cells = "".join(f"<tr><td>{html.escape(lab)}</td><td>{html.escape(t)}</td></tr>"
                    for (lab, _, _), t in zip(rows, texts, strict=True))
    assert obj._repr_html_() == f"<table><caption>{html.escape(title)}</caption>{cells}</table>"
    md = obj.markdown().splitlines()
    assert md[0] == f"**{title}**" and md[4:] == [f"| {lab} | {t} |" for (lab, _, _), t in
                                                  zip(rows, texts, strict=True)]


@pytest.mark.parametrize(("value", "unit", "text"), [
    (2.26e-4, "s", "226 µs"), (160, "B", "160 B"), (3 * MiB, "B", "3 MiB"), (0.8, "%", "80 %"),
    (3.35e12, "B/s", "3,350 GB/s"), (989.4e12, "FLOP/s", "989.4 TFLOP/s"), (1_024, "", "1,024"),
    (0.5, "", "0.5"), (True, "", "yes"), ("32 of 32", "", "32 of 32"), (4.8e9, "Hz", "4.8 GHz"),
])
def test_quantity_writes_each_unit_through_the_format_helpers(value, unit, text):
    assert quantity(value, unit) == text
    assert Row("x", value, unit).text == text


def test_markdown_escapes_the_column_bar():
    class Bar(Readout):
        def readout_rows(self):
            return (Row("a|b", 1),)

    assert Bar().markdown().splitlines()[-1] == "| a\\|b | 1 |"


def test_every_readout_class_has_an_example():
    for mod in pkgutil.walk_packages(gpu_lessons.__path__, "gpu_lessons."):
        if not mod.name.startswith(("gpu_lessons.views", "gpu_lessons.notebook")):
            importlib.import_module(mod.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    users = {c for c in subclasses(Readout) if c.__module__.startswith("gpu_lessons.")}
    assert users == {type(obj) for obj, _, _ in EXAMPLES}
