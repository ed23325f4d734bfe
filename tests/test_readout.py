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
from gpu_lessons import (
    allocator,
    cache,
    capstone,
    latency,
    mfu,
    occupancy,
    overlap,
    predict,
    roofline,
    system,
    traces,
    transformer,
)
from gpu_lessons._format import Readout, Row, quantity
from gpu_lessons.costs import KernelCost
from gpu_lessons.grading.results import Row as GradeRow
from gpu_lessons.hardware import GPU
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
from gpu_lessons.memory import constant_load, global_load, shared_load
from gpu_lessons.overlap_record import AllReducePoint, Contention, OverlapPoint
from gpu_lessons.puzzles._core import Measure, PuzzleResult
from gpu_lessons.puzzles.on_gpu import PuzzleGpuRun

MiB = 2**20
_FP32 = roofline.Roof("fp32", "FP32", "compute", 10e12)
_DRAM = roofline.Roof("dram", "DRAM", "memory", 1e12)

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
    # 8,192 MiB with 7,900 MiB allocated: 292 MiB free in total, 192 MiB never reserved
    (allocator.OOM(17, 17, 500 * MiB, 512 * MiB, 8192 * MiB, 8000 * MiB, 7900 * MiB, 2 * MiB),
     "Out of memory at event 17",
     [("id", "17", ""), ("requested", 500 * MiB, "B"), ("needs", 512 * MiB, "B"),
      ("free in total", 292 * MiB, "B"), ("largest free block", 2 * MiB, "B"),
      ("unreserved", 192 * MiB, "B")]),
    # the peak reserved (8 MiB) is at event 1: 3 MiB used (3/8), 5 MiB unused, 4 MiB cached free
    # of which the largest block is 2 MiB (fragmentation 1 − 2/4); waste allocated − used = 1 MiB
    (allocator.AllocatorRun("best_fit", None, {}, np.array([1, 3]) * MiB, np.array([2, 4]) * MiB,
                            np.array([2, 8]) * MiB, np.array([0, 2]) * MiB, None, (), {}, {}, (), ()),
     "best_fit allocator",
     [("events", 2, ""), ("capacity", "unlimited", "B"), ("peak used", 3 * MiB, "B"),
      ("peak allocated", 4 * MiB, "B"), ("peak reserved", 8 * MiB, "B"),
      ("peak used/reserved", 3 / 8, "%"), ("peak internal waste", MiB, "B"),
      ("unused at peak reserved", 5 * MiB, "B"), ("fragmentation then", 0.5, "%"),
      ("failed", 0, ""), ("first OOM", "none", "")]),
    # 2,048 accesses with 64 misses: 1,984 / 2,048 = 96.9 % hits, 64 lines of 128 B = 8 KiB filled
    (cache.CacheStats("L1", 2048, 2048, 1984, 64, 16, 2, 8192, 8192, 512, 1, 3), "L1",
     [("accesses", 2048, ""), ("stores", 16, ""), ("hits", 1984, ""), ("misses", 64, ""),
      ("misses on stores", 2, ""), ("hit rate", 1984 / 2048, "%"),
      ("bytes from next level", 8192, "B"), ("bytes to next level", 512, "B"),
      ("write-backs", 1, ""), ("evictions", 3, "")]),
    # 132 SMs × 128 FP32 lanes = 16,896 cores
    (GPU("Test GPU", "9.0", "HBM3", 132, 128, 80.0, 3350.0, 50 * MiB, {"fp32": 66.9}), "Test GPU",
     [("compute capability", "9.0", ""), ("SMs", 132, ""), ("FP32 cores", 16896, ""),
      ("memory", "80 GB HBM3", ""), ("bandwidth", 3.35e12, "B/s"), ("L2", 50 * MiB, "B"),
      ("peak fp32 (dense)", 66.9e12, "FLOP/s")]),
    # 2 ALU instructions per load, 400 cycles: n* = (3 - 1 + 400) / 3 = 134 warps
    (latency.curve(16, alu_per_load=2, latency=400), "Latency hiding, one scheduler",
     [("warps", "1 to 16", ""), ("ALU instructions per load", 2, ""), ("ILP", 1, ""),
      ("latency (cycles)", 400, ""), ("saturates at (warps)", 134, "")]),
    (latency.SchedulerRun(8, 2, 1, 40, "gto", 0.5, 0.25, 0.571, 1000, np.zeros(0), np.zeros(0)),
     "One scheduler, simulated (gto)",
     [("warps", 8, ""), ("ALU instructions per load", 2, ""), ("ILP", 1, ""),
      ("latency (cycles)", 40, ""), ("issue rate (instructions/cycle)", 0.5, ""),
      ("closed form (instructions/cycle)", 0.571, ""), ("loads per cycle", 0.25, "")]),
    (latency.SMThroughput(32, 0.5, 0.125, 16.0, "latency"), "One SM",
     [("warps", 32, ""), ("issue rate (instructions/cycle)", 0.5, ""), ("loads per cycle", 0.125, ""),
      ("bytes per cycle", 16, ""), ("limited by", "latency", "")]),
    # H100: 3.35 TB/s × 600 ns = 2.01 MB in flight, / 132 SMs = 15,227 B, / 4 B = 3,807 threads
    # = 119 warps per SM against 64: 2 loads in flight per thread; 600 ns × 1.98 GHz = 1,188 cycles
    (latency.littles_law("H100", latency_ns=600), "Little's law: H100 SXM5",
     [("bandwidth", 3.35e12, "B/s"), ("latency", 600e-9, "s"), ("latency (cycles)", 1188, ""),
      ("bytes in flight", 2.01e6, "B"), ("per SM", 2.01e6 / 132, "B"), ("per thread", 4, "B"),
      ("threads per SM", 2.01e6 / 132 / 4, ""), ("warps per SM needed", 2.01e6 / 132 / 128, ""),
      ("warps per SM at most", 64, ""), ("loads in flight per thread", 2, "")]),
    (latency.ConfigResult(latency.Config("x", 256, 32, ilp=4), 64, 1.0, 256, 1.5e12, 0.5, "latency"),
     "Configuration x",
     [("threads per block", 256, ""), ("registers per thread", 32, ""), ("warps per SM", 64, ""),
      ("occupancy", 1.0, "%"), ("ILP", 4, ""), ("loads in flight per SM", 256, ""),
      ("predicted bandwidth", 1.5e12, "B/s"), ("of peak", 0.5, "%"),
      ("limited by", "latency", "")]),
    # 32 lanes reading 4 bytes each from byte 4 on: 128 B requested over 5 sectors (160 B)
    (global_load([4 + 4 * i for i in range(32)]), "Global load, one warp",
     [("active lanes", "32 of 32", ""), ("access size per thread", 4, "B"), ("requests", 1, ""),
      ("sectors (32 B)", 5, ""), ("lines (128 B)", 2, ""), ("requested", 128, "B"),
      ("moved", 160, "B"), ("efficiency", 0.8, "%")]),
    # 32 lanes 128 B apart: every word in bank 0, 32 wavefronts where 1 would do
    (shared_load([128 * i for i in range(32)]), "Shared-memory load, one warp",
     [("active lanes", "32 of 32", ""), ("access size per thread", 4, "B"), ("phases", 1, ""),
      ("wavefronts", 32, ""), ("ideal wavefronts", 1, ""), ("bank conflicts", 31, ""),
      ("worst conflict", "32-way", "")]),
    # two addresses, 16 lanes each: two passes
    (constant_load([0] * 16 + [64] * 16), "Constant-cache load, one warp",
     [("active lanes", "32 of 32", ""), ("access size per thread", 4, "B"),
      ("distinct addresses", 2, ""), ("passes", 2, "")]),
    # 8 × 989.4 TFLOP/s = 7,915.2 TFLOP/s; 2 PFLOP/s achieved: 250 TFLOP/s per GPU, MFU 25.3 %
    (mfu.Utilization("H100", "bf16", "fp32", 8, 989.4e12, 2e15, 2e15, 2000.0), "MFU",
     [("GPUs", "8 × H100", ""), ("precision", "bf16 dense, FP32 accumulate", ""),
      ("peak per GPU", 989.4e12, "FLOP/s"), ("peak of all GPUs", 7915.2e12, "FLOP/s"),
      ("throughput (tokens/s)", 2000, ""), ("model FLOP/s achieved", 2e15, "FLOP/s"),
      ("per GPU", 2.5e14, "FLOP/s"), ("MFU", 2e15 / 7915.2e12, "%"),
      ("hardware FLOP/s (with recomputation)", 2e15, "FLOP/s"), ("HFU", 2e15 / 7915.2e12, "%")]),
    (mfu.ReferenceRun("PaLM 540B", "6144 TPU v4", 0.462, None, "paper"), "PaLM 540B on 6144 TPU v4",
     [("MFU", 0.462, "%")]),
    (occupancy.Curve("registers_per_thread", np.array([32, 64, 128]), np.zeros(3), np.zeros(3),
                     np.array([1.0, 0.5, 0.25]), np.zeros(3), "9.0", {"threads_per_block": 256}),
     "Occupancy against registers_per_thread on CC 9.0",
     [("threads_per_block", 256, ""), ("registers_per_thread", "32 to 128, 3 points", ""),
      ("highest occupancy", 1.0, "%"), ("at registers_per_thread", 32, "")]),
    # residuals inside 1-256 MiB: 2 % and -5 % (the 30 % at 512 MiB lies outside the fit)
    (overlap.AllReduceFit(2, 10.0, 200e9, (MiB, 256 * MiB),
                          ((MiB, 0.02), (256 * MiB, -0.05), (512 * MiB, 0.3))),
     "Ring all-reduce fitted on 2 GPUs",
     [("α per ring step", 10e-6, "s"), ("bus bandwidth B", 200e9, "B/s"),
      ("smallest size fitted", MiB, "B"), ("largest size fitted", 256 * MiB, "B"),
      ("worst error there", 0.05, "%")]),
    # 64 MiB in 1,000 µs on 4 GPUs: algbw = 67.108864 GB/s, busbw = algbw × 2·3/4
    (AllReducePoint(64 * MiB, 4, 1000.0), "All-reduce of 64 MiB on 4 GPUs",
     [("time", 1e-3, "s"), ("algbw", 67.108864e9, "B/s"), ("busbw", 67.108864e9 * 1.5, "B/s")]),
    # step 9 ms against 8 ms of compute alone: 1 ms exposed = 0.5 ms slowed + 0.5 ms tail
    (OverlapPoint(32 * MiB, ((0, 1), (2,)), 9000.0, 8500.0, 8000.0), "Buckets of 32 MiB",
     [("buckets", 2, ""), ("step", 9e-3, "s"), ("exposed", 1e-3, "s"),
      ("compute slowed", 0.5e-3, "s"), ("tail", 0.5e-3, "s")]),
    # compute 1,600 -> 1,800 µs: +12.5 %, f = 1 - 1600/1800 = 1/9; all-reduce 400 -> 450 µs: +12.5 %
    (Contention(64 * MiB, 6, 1600.0, 1800.0, 400.0, 450.0), "Contention beside 6 all-reduces of 64 MiB",
     [("compute alone", 1.6e-3, "s"), ("compute beside them", 1.8e-3, "s"),
      ("compute slowed by", 0.125, "%"), ("comm_sm_fraction", 1 / 9, ""),
      ("all-reduce alone", 400e-6, "s"), ("all-reduce beside compute", 450e-6, "s"),
      ("all-reduce slowed by", 0.125, "%")]),
    # 4 against 14.8: a quarter of it and a bit, 1/3.7
    (predict.Reveal("00.x", "How many times faster?", 4.0, 14.8, "×", "peak over peak"),
     "Prediction 00.x",
     [("question", "How many times faster?", ""), ("your guess", "4×", ""),
      ("the model", "14.8×", ""), ("verdict", "your guess is 1/3.7 of the model's answer", ""),
      ("how", "peak over peak", "")]),
    (roofline.Roof("fp32", "FP32", "compute", 67e12), "Roof", [("FP32", 67e12, "FLOP/s")]),
    # π = 10 TFLOP/s, β = 1 TB/s: ridge 10 FLOP/byte; at 2 FLOP/byte 5× below it, 2 TFLOP/s = 20 %
    (roofline.Roofline(10e12, 1e12).classify(2.0), "Memory-bound",
     [("intensity", 2, "FLOP/byte"), ("ridge point", 10, "FLOP/byte"),
      ("factor below the ridge", 5, ""), ("attainable", 2e12, "FLOP/s"), ("of peak", 0.2, "%")]),
    # 1 MFLOP and 1 MB: memory 1 µs, compute 0.1 µs; 1 TFLOP/s = 10 % of peak
    (roofline.Roofline(10e12, 1e12).time(1e6, 1e6, name="axpy"), "Roofline time: axpy, memory-bound",
     [("time", 1e-6, "s"), ("memory time", 1e-6, "s"),
      ("compute time", 1e-7, "s"), ("attainable", 1e12, "FLOP/s"), ("of peak", 0.1, "%")]),
    # the same kernel measured at 2 µs: 0.5 TFLOP/s (5 %), 0.5 TB/s (50 %), half the roofline
    (roofline.Roofline(10e12, 1e12).achieved(1e6, 1e6, 2e-6, name="axpy"), "Achieved: axpy",
     [("time", 2e-6, "s"), ("compute", 5e11, "FLOP/s"), ("of peak", 0.05, "%"),
      ("memory", 5e11, "B/s"), ("of bandwidth", 0.5, "%"), ("of the roofline", 0.5, "%")]),
    (roofline.Roofline(10e12, 1e12), "custom roofline",
     [("compute", 10e12, "FLOP/s"), ("memory", 1e12, "B/s"), ("ridge point π/β", 10, "FLOP/byte")]),
    (roofline.RooflineCurves("G", np.ones(1), (_FP32, _DRAM),
                             (roofline.RoofCurve(_FP32, _DRAM, 10.0, np.ones(1)),)), "G roofs",
     [("FP32", 10e12, "FLOP/s"), ("DRAM", 1e12, "B/s"), ("ridge FP32 / DRAM", 10, "FLOP/byte")]),
    # 100 kernels of 5 µs in 610 µs: 6.1 µs per kernel, GPU busy 500 / 610
    (system.LaunchRun("async", 100, 5.0, 6.0, 10.0, 2.0, 1.0, True, 610.0, ()), "Launches (async)",
     [("kernels", 100, ""), ("kernel", 5e-6, "s"), ("launch", 6e-6, "s"), ("step", 610e-6, "s"),
      ("per kernel", 6.1e-6, "s"), ("GPU busy", 500 / 610, "%")]),
    # a kernel lasts 1 + 0.5·b µs, as long as a 6 µs launch at b = 10
    (system.BatchSweep("async", 1, 1.0, 0.5, 6.0, np.array([1, 64]), np.zeros(2), np.zeros(2),
                       np.array([0.25, 0.8]), np.zeros(2)), "Batch sweep (async)",
     [("kernels", 1, ""), ("fixed time per kernel", 1e-6, "s"), ("time per item", 0.5e-6, "s"),
      ("batch", "1 to 64", ""), ("GPU busy at the smallest batch", 0.25, "%"),
      ("GPU busy at the largest batch", 0.8, "%"), ("kernel = launch at batch", 10, "")]),
    # 1 MiB at 50 GB/s is 20.97 µs, + 10 µs latency: 1 MiB / 30.97 µs effective
    (system.CopyTime(MiB, "pinned", "h2d", 50e9, 10.0, 10 + MiB / 50e9 * 1e6),
     "Copy host→device, pinned memory",
     [("size", MiB, "B"), ("time", 10e-6 + MiB / 50e9, "s"), ("bandwidth", 50e9, "B/s"),
      ("latency", 10e-6, "s"), ("effective bandwidth", MiB / (10e-6 + MiB / 50e9), "B/s")]),
    # 13 ms = 12 compute + 0.5 slowed + 0.5 exposed; 2 ms of communication, 1.5 hidden = 75 %
    (system.StepRun(4, 8, 450e9, True, 0.1, (None, None), 12.0, 12.5, 2.0, 13.0, ()),
     "Training step: 4 layers, 8 GPUs, overlap on",
     [("link", 450e9, "B/s"), ("step", 13e-3, "s"), ("compute alone", 12e-3, "s"),
      ("compute slowed by SM sharing", 0.5e-3, "s"), ("exposed communication", 0.5e-3, "s"),
      ("communication (all buckets)", 2e-3, "s"), ("hidden behind compute", 1.5e-3, "s"),
      ("hidden", 0.75, "%"), ("buckets", 2, "")]),
    # bytes 0-3, 4-7 and 8-11 touched (4 read twice): a 12 B footprint
    (traces.Trace("t", np.array([0, 4, 8, 4]), np.array([False, False, True, False]), 4), "Trace t",
     [("accesses", 4, ""), ("stores", 1, ""), ("access size", 4, "B"), ("footprint", 12, "B")]),
    # non-embedding 100 + 10 + 4 = 114; total 114 + 50 + 8 + 50 = 222
    (transformer.ParameterCount(100, 10, 4, 50, 8, 50), "Parameters",
     [("layer weights (GEMMs)", 100, ""), ("layer biases", 10, ""), ("norms", 4, ""),
      ("non-embedding N", 114, ""), ("token embedding", 50, ""), ("position embedding", 8, ""),
      ("LM head (untied)", 50, ""), ("total", 222, "")]),
    # 2 GFLOP over 8 GB: 0.25 FLOP/byte; 2 GFLOP in 0.5 s = 4 GFLOP/s
    (capstone.Step("naive", "one thread per output", KernelCost("k", 2e9, 8e9), "fp32", 0.5,
                   "memory-bound", 13.9, 67e12, 0.6), "Step naive",
     [("intensity", 0.25, "FLOP/byte"), ("ridge (fp32)", 13.9, "FLOP/byte"),
      ("bound", "memory-bound", ""), ("predicted time", 0.5, "s"), ("predicted rate", 4e9, "FLOP/s"),
      ("measured", 0.6, "s")]),
    # 8 warps per SM in one block: 2 per scheduler; a round is 2 × (144 − 1) + 1,188 = 1,474 cycles
    # (bunched, one block); 1.48 ms against 1.5 ms measured is 1/75 short
    (capstone.LatencyPrediction("fir", "G", 1056, 8, 1, 144.0, 600.0, 1188.0, 1.98e9, 132,
                                1.33e-3, 1.48e-3, 1.5e-3, True), "Latency model: fir on G",
     [("warps per SM", 8, ""), ("blocks per SM", 1, ""), ("warps per scheduler", 2, ""),
      ("instructions per warp (one load)", 144, ""), ("latency", 600e-9, "s"),
      ("latency (cycles)", 1188, ""), ("cycles per round (n·(I − 1) + L)", 1474, ""),
      ("bunched", 1.48e-3, "s"), ("staggered", 1.33e-3, "s"), ("time per run", 1.5e-3, "s"),
      ("time per run is", "measured", ""), ("model used", "bunched", ""),
      ("model error", -1 / 75, "%")]),
    (capstone.MysteryKernel("k", "A kernel", "", "H200", "fp32", "1 Mi floats",
                            KernelCost("k", 2**20, 8 * MiB), 5e-6, False, "a model",
                            capstone.Launch(4096, 256, 32, 1024),
                            instructions=capstone.InstructionMix({"fp32": 64.0}, source="SASS"),
                            launches=2), "A kernel",
     [("GPU", "H200", ""), ("sizes", "1 Mi floats", ""), ("work", 2**20, "FLOP"),
      ("bytes (each operand once)", 8 * MiB, "B"), ("time per run", 5e-6, "s"),
      ("time per run is", "model-derived", ""), ("time source", "a model", ""),
      ("blocks", 4096, ""), ("threads per block", 256, ""), ("registers per thread", 32, ""),
      ("shared memory per block", 1024, "B"), ("warp instructions", 64, ""),
      ("instruction counts", "SASS", ""), ("launches per run", 2, "")]),
    (capstone.SMThroughput("G", 1e-3, 1e9, (("fp32", 0.5), ("issue", 0.75))),
     "SM throughput on G (cycles needed / cycles taken)",
     [("busiest", "instruction issue", ""), ("instruction issue", 0.75, "%"),
      (capstone.pipes.LABELS["fp32"], 0.5, "%")]),
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
