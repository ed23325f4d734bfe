"""Every result that shows itself through ``_format.Readout``: its rows say the right values in
the right units, and its ``repr``, HTML table and Markdown all say exactly those rows.

One example per class, with the rows worked out by hand; ``test_every_readout_class_has_an_example``
fails when a class adopts the readout without an example here.
"""

from __future__ import annotations

import html
import importlib
import pkgutil

import numpy as np
import pytest

import gpu_lessons
from gpu_lessons._format import Readout, Row, quantity
from gpu_lessons.grading.results import Row as GradeRow
from gpu_lessons.kernels.compiled import CompiledKernel
from gpu_lessons.kernels.gpu import BesideSimulator, GpuRun
from gpu_lessons.kernels.simt.examples import KernelRun
from gpu_lessons.kernels.simt.lanes import Dim3
from gpu_lessons.kernels.simt.result import AccessMap, ArrayStats, SharedArray, SimResult, Stats
from gpu_lessons.measure.cpu import RooflinePoints, Staircase
from gpu_lessons.measure.gpu import KernelResources
from gpu_lessons.measure.gpu_compute import KernelTiming
from gpu_lessons.measure.gpu_system import LaunchLatency, Transfers
from gpu_lessons.measure.timing import Bandwidth, FlopRate, Timing
from gpu_lessons.memory import global_load
from gpu_lessons.overlap_record import AllReducePoint, OverlapPoint
from gpu_lessons.puzzles._core import Measure, PuzzleResult
from gpu_lessons.puzzles.on_gpu import PuzzleGpuRun

MiB = 2**20

_GPU_RUN = GpuRun("scale", (2, 1, 1), (128, 1, 1), "NVIDIA H200", Timing((4e-6, 5e-6, 6e-6), 2),
                  512, 16)
# 240 active lanes over 10 instructions: 240 / 320 = 75 %; 8 sectors for 2 requests; 256 B
# asked of 8 x 32 B moved: 100 %
_STATS = Stats(10, 240, {}, 2, 8, 256, 1, 2, 1, 2, 3, shared_ideal_wavefronts=1)
_STATS_ROWS = [
    ("warp instructions", 10, ""), ("SIMT efficiency", 0.75, "%"), ("global requests", 2, ""),
    ("global sectors", 8, ""), ("sectors / request", 4, ""), ("moved bytes used", 1.0, "%"),
    ("shared requests", 1, ""), ("shared wavefronts", 2, ""), ("bank conflicts", 1, ""),
    ("barrier instructions", 2, ""), ("issue slots waiting at barriers", 3, "")]
_SIM = SimResult("k", Dim3(2, 1, 1), Dim3(32, 2, 1), 7, (), (), ("a note",), 2, _STATS,
                 shared_bytes_per_block=1056, shared_arrays=(SharedArray("tile", 1056, 3),))

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
    (_GPU_RUN, "scale on NVIDIA H200",
     [("median kernel time", 5e-6, "s"), ("timed runs", 3, ""), ("warm-up runs", 2, ""),
      ("timer", "CUDA events", ""), ("launch", "<<<2, 128>>>", ""),
      ("registers per thread", 16, ""), ("dynamic shared memory", 512, "B"),
      ("arithmetic", "exact (-fmad=false)", "")]),
    # 2,048 B over 4.8e12 B/s = 0.4267 ns, under 1 µs: the measured time is the launch's
    (BesideSimulator(_GPU_RUN, True, None, 4.0, 0, 0, 1.0, 2048.0, 2048 / 4.8e12, 4.8e12),
     "scale<<<2, 128>>> on NVIDIA H200: GPU beside the simulator",
     [("output", "the simulator's, bit for bit", ""),
      ("measured kernel time (median, CUDA events)", 5e-6, "s"), ("timed runs", 3, ""),
      ("simulator: global sectors / request", 4.0, ""), ("simulator: shared wavefronts", 0, ""),
      ("simulator: bank conflicts", 0, ""), ("simulator: SIMT efficiency", 1.0, "%"),
      ("memory model: bytes moved (32 B per sector)", 2048, "B"),
      ("memory model: time at the catalog bandwidth", 2048 / 4.8e12, "s"),
      ("catalog bandwidth", 4.8e12, "B/s"), ("measured / predicted", 5e-6 * 4.8e12 / 2048, ""),
      ("note", "at this size the measured time is the launch's (a few µs however little a "
               "kernel moves, lesson 08), not memory's", "")]),
    # 1 GB in 1 ms on a GPU outside the catalog: no model time; 2e9 FLOP / 1 ms = 2 TFLOP/s,
    # 2e12 / 50e12 = 4 % of the peak
    (PuzzleGpuRun("map", "Some GPU", {"n": 4096}, (16, 1, 1), (256,), False, "out[3] is 1.0",
                  1e-3, 20, float("nan"), 2, 6, 0.5, 1e9, None, None, 2e9, 50e12),
     "map on Some GPU (n=4,096)",
     [("output", "WRONG: out[3] is 1.0", ""), ("launch", "grid 16 × 1 × 1, block 256", ""),
      ("measured kernel time (median, CUDA events)", 1e-3, "s"), ("timed runs", 20, ""),
      ("simulator: global sectors / request", "–", ""), ("simulator: shared wavefronts", 6, ""),
      ("simulator: bank conflicts", 2, ""), ("simulator: SIMT efficiency", 0.5, "%"),
      ("memory model: bytes moved at this size", 1e9, "B"), ("arithmetic", 2e9, "FLOP"),
      ("measured rate", 2e12, "FLOP/s"), ("of the FP32 peak", 0.04, "%"),
      ("FP32 peak", 50e12, "FLOP/s"),
      ("memory model: time", "Some GPU is not in the course's GPU catalog, so no bandwidth to "
                             "divide by", "")]),
    (CompiledKernel("tiled", "sm_90", "13.0", ("-fmad=false", "-lineinfo"), 18, 0, 0, 0, 512, 1,
                    None, (), "", (), (), notes=("no nvdisasm",)), "tiled compiled for sm_90",
     [("registers per thread", 18, ""), ("local memory per thread (stack frame)", 0, "B"),
      ("register spills: stored", 0, "B"), ("register spills: loaded", 0, "B"),
      ("static shared memory per block", 512, "B"), ("SASS instructions", "–", ""),
      ("compiler", "NVRTC 13.0, sm_90, -fmad=false -lineinfo", ""),
      ("note", "no nvdisasm", "")]),
    (_STATS, "Stats", _STATS_ROWS),
    # 2 loads of 64 elements over a 32-element array: 2 per element; 4 sectors, 2 per request
    (ArrayStats("x", "global", (32,), loads=2, load_elements=64, load_sectors=4), "global x[32]",
     [("loads", 2, ""), ("elements loaded", 64, ""), ("loads per element", 2, ""),
      ("stores", 0, ""), ("atomics", 0, ""), ("sectors", 4, ""), ("sectors / request", 2, "")]),
    (AccessMap("x", "global", (2, 2), 4, 3, np.array([2, 0, 1, 1]), *(np.zeros(4),) * 6),
     "AccessMap of global x[2, 2]",
     [("instructions", 3, ""), ("lane accesses", 4, ""), ("elements touched", 3, ""),
      ("elements", 4, "")]),
    (_SIM, "SIMT run of k<<<2, (32, 2, 1)>>>",
     [("warps take turns in order", "random, seed 7", ""), *_STATS_ROWS,
      ("shared memory declared per block", 1056, "B"), ("shared arrays", "tile: 1.031 KiB (line 3)", ""),
      ("barriers (block-wide)", 2, ""), ("races", 0, ""), ("note", "a note", "")]),
    (KernelRun("k", _SIM, np.zeros(4), np.array([0.0, 1.0, 0.0, 0.0])),
     "SIMT run of k<<<2, (32, 2, 1)>>>",
     [("warps take turns in order", "random, seed 7", ""), *_STATS_ROWS,
      ("shared memory declared per block", 1056, "B"), ("shared arrays", "tile: 1.031 KiB (line 3)", ""),
      ("barriers (block-wide)", 2, ""), ("races", 0, ""), ("note", "a note", ""),
      ("output", "DIFFERS from NumPy in 1 of 4 values", "")]),
    (GradeRow("ada.ipynb", "ada", {"q1": 2.5, "puzzle:map": 0.0}, 2.5, 3.0, "timeout",
              "ran past 60 s"), "Grade of ada.ipynb",
     [("student", "ada", ""), ("status", "timeout", ""), ("points", "2.5 of 3", ""),
      ("reason", "ran past 60 s", ""), ("q1", "2.5", ""), ("puzzle:map", "0", "")]),
    (PuzzleResult("transpose", "failed", True, "over a budget", "store_sectors", 12,
                  (Measure("load_sectors", 4.0, 4.0, True, "4 per request, budget ≤ 4"),
                   Measure("store_sectors", 32.0, 4.0, False, "32 per request, budget ≤ 4"))),
     "transpose: failed",
     [("verdict", "over a budget", ""), ("first failure", "store_sectors", ""), ("line", 12, ""),
      ("load_sectors", "4 per request, budget ≤ 4 ✓", ""),
      ("store_sectors", "32 per request, budget ≤ 4 ✗", "")]),
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
