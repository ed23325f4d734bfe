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
from gpu_lessons.measure.cpu import RooflinePoints, Staircase
from gpu_lessons.measure.gpu import KernelResources
from gpu_lessons.measure.gpu_compute import KernelTiming
from gpu_lessons.measure.gpu_system import LaunchLatency, Transfers
from gpu_lessons.measure.timing import Bandwidth, FlopRate, Timing
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
    # -- measurements, kernels, puzzles, grading --
    # sorted 1, 2, 3, 10 ms: median (2 + 3) / 2 = 2.5 ms
    (Timing((3e-3, 1e-3, 2e-3, 10e-3), warmup=2, method="perf_counter"), "Timing",
     [("median", 2.5e-3, "s"), ("min", 1e-3, "s"), ("max", 10e-3, "s"), ("runs", 4, ""),
      ("warm-up runs", 2, ""), ("method", "perf_counter", "")]),
    # 2e9 B in 0.5 ms = 4e12 B/s
    (Bandwidth("dev", "copy", 2 * 10**9, Timing((0.5e-3,) * 3, 1, "CUDA events"), 10**9, "x"),
     "dev: copy",
     [("bandwidth", 4e12, "B/s"), ("bytes per run", 2e9, "B"), ("median time", 0.5e-3, "s"),
      ("runs", 3, ""), ("warm-up runs", 1, ""), ("method", "CUDA events", ""),
      ("array size", 1e9, "B"), ("note", "x", "")]),
    # 1e12 FLOP in 1 ms = 1e15 FLOP/s over 1e9 B: 1,000 FLOP/byte; 1e15 / 2e15 = 50 %,
    # 1e15 / 1.25e15 = 80 % of the peak at the clock read
    (FlopRate("dev", "GEMM", 1e12, 1e9, Timing((1e-3,)), peak_flops=2e15, conditions="capped",
              clock_peak_flops=1.25e15), "dev: GEMM",
     [("rate", 1e15, "FLOP/s"), ("FLOPs per run", 1e12, "FLOP"), ("median time", 1e-3, "s"),
      ("runs", 1, ""), ("intensity", 1000, "FLOP/byte"), ("of peak", 0.5, "%"),
      ("peak", 2e15, "FLOP/s"), ("of peak at its clock", 0.8, "%"),
      ("peak at its clock", 1.25e15, "FLOP/s"), ("conditions", "capped", "")]),
    # ridge 1e11 / 2e10 = 5 FLOP/byte
    (RooflinePoints("cpu", 1e11, 2e10, (("triad", 0.05, 1e9),)), "cpu: measured roofline",
     [("roof: compute (GEMM)", 1e11, "FLOP/s"), ("roof: memory (triad)", 2e10, "B/s"),
      ("ridge point", 5, "FLOP/byte"), ("triad at 0.05 FLOP/byte", 1e9, "FLOP/s")]),
    (Staircase("cpu", (16 * 1024, MiB), (100.0, 50.5), {"L1d": 48 * 1024}),
     "cpu: copy bandwidth by working set",
     [("working set 16 KiB", 100e9, "B/s"), ("working set 1 MiB", 50.5e9, "B/s"),
      ("L1d cache", 49152, "B")]),
    (KernelResources("k", ("--maxrregcount=40", "-DN=4"), 40, 96, 12288), "k: compiled resources",
     [("compiler options", "--maxrregcount=40 -DN=4", ""), ("registers per thread", 40, ""),
      ("local memory per thread (spills, local arrays)", 96, "B"),
      ("static shared memory per block", 12288, "B")]),
    (KernelTiming("k", (64, 1, 1), (256, 1, 1), 1024, 32, 4096, 8, Timing((2e-5, 3e-5, 1e-5))),
     "k",
     [("median time", 2e-5, "s"), ("runs", 3, ""), ("grid", "(64, 1, 1)", ""),
      ("block", "(256, 1, 1)", ""), ("registers per thread", 32, ""),
      ("static shared memory per block", 4096, "B"),
      ("dynamic shared memory per block", 1024, "B"), ("blocks per SM (CUDA runtime)", 8, "")]),
    (LaunchLatency("gpu", 1000, Timing((5e-6,)), Timing((1e-5,)), Timing((1e-6,))),
     "gpu: launch cost per empty kernel (1,000 launches)",
     [("back-to-back", 5e-6, "s"), ("sync after each", 1e-5, "s"), ("CUDA graph", 1e-6, "s")]),
    # 1 GiB in 0.1 s = 10.74 GB/s, in 0.05 s twice that
    (Transfers("gpu", (Bandwidth("gpu", "host->device pinned", 2**30, Timing((0.1,))),
                       Bandwidth("gpu", "device->host pinned", 2**30, Timing((0.05,))))),
     "gpu: host<->device copies of 1 GiB",
     [("host->device pinned", 2**30 / 0.1, "B/s"), ("device->host pinned", 2**31 / 0.1, "B/s")]),
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
    (8192 / 3, "FLOP/byte", "2,731 FLOP/byte"), (0.05, "FLOP/byte", "0.05 FLOP/byte"),
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
