"""The capstone's mystery kernels: every time against its source, every diagnosis against a
hand derivation.

References (none of them is the capstone module's own output):
* ``tests/data/h200_measurements.json``: the raw H200 samples; their medians must be the
  times the capstone quotes, and ``docs/measured/h200.md`` must print them;
* ``tests/data/h200_capstone_fir.json``: the filter of mystery 6 before and after its fix on an
  H200: raw timing samples, Nsight Compute's metrics, SASS counts;
* hand arithmetic, written out beside each kernel: sectors and wavefronts of one warp, bytes,
  FLOPs, fractions of the datasheet peaks (H200 SXM: 66.9 TFLOP/s FP32, 989 TFLOP/s FP16
  tensor, 4,800 GB/s, 132 SMs at 1,980 MHz — NVIDIA H200 datasheet / Hopper whitepaper), and
  pipe throughputs per SM per clock (CUDA C++ Programming Guide, "Arithmetic Instructions":
  128 FP32 results on CC 9.0; four schedulers issuing one warp instruction each);
* Nsight Compute's 60 % "Speed Of Light" rule for the verdict.
"""

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import capstone
from gpu_lessons.capstone import (
    H200_MEASURED,
    MYSTERIES,
    NEAR_ROOF,
    VERDICTS,
    WarpAccess,
    answer_key,
    classify,
    diagnose,
    evidence,
    gemm_story,
    latency_prediction,
    mystery,
)

ROOT = Path(__file__).resolve().parents[2]
RAW = json.loads((ROOT / "tests" / "data" / "h200_measurements.json").read_text("utf-8"))
FIR = json.loads((ROOT / "tests" / "data" / "h200_capstone_fir.json").read_text("utf-8"))
DOC = (ROOT / "docs" / "measured" / "h200.md").read_text("utf-8")

# H200 SXM datasheet figures (NVIDIA H200 datasheet; Hopper whitepaper for the SM count/clock)
PI_FP32, PI_FP16, BETA = 66.9e12, 989e12, 4800e9
SMS, CLOCK = 132, 1.98e9


def _median(timing):
    return statistics.median(timing["samples"])


# -- the measured times are the raw run's medians --------------------------------------------------

def _raw_stride(stride, element_bytes=4):
    for sweep in RAW["stride"]:
        if sweep["element_bytes"] == element_bytes:
            for p in sweep["points"]:
                if p["stride"] == stride and p["offset"] == 0:
                    return _median(p["timing"])
    raise KeyError(stride)


def _raw_gemm(precision, n=8192):
    for g in RAW["gemm"]:
        if g["precision"] == precision and g["n"] == n and g["data"] == "normal":
            return _median(g["timing"])
    raise KeyError(precision)


def _raw_simt(name):
    return next(_median(k["timing"]) for k in RAW["simt"]["kernels"] if k["name"] == name)


@pytest.mark.parametrize("key, raw", [
    ("strided_copy_4_stride8", lambda: _raw_stride(8)),
    ("strided_copy_4_stride1", lambda: _raw_stride(1)),
    ("transpose_tiled", lambda: _raw_simt("transpose_tiled")),
    ("transpose_tiled_padded", lambda: _raw_simt("transpose_tiled_padded")),
    ("sgemm_8192", lambda: _raw_gemm("fp32")),
    ("hgemm_8192", lambda: _raw_gemm("fp16")),
    ("hgemm_1024", lambda: _raw_gemm("fp16", 1024)),
    ("triad_bandwidth", lambda: RAW["triad"]["bytes_moved"] / _median(RAW["triad"]["timing"])),
    ("copy_bandwidth", lambda: RAW["copy"]["bytes_moved"] / _median(RAW["copy"]["timing"])),
    *[(name, lambda name=name: statistics.median(FIR["kernels"][name]["samples_s"]))
      for name in ("fir40_v1", "fir40_v2", "fir40_v3", "fir40_v4", "copy_f4")],
])
def test_quoted_h200_figures_are_the_medians_of_the_raw_run(key, raw):
    # copy bandwidth is quoted to 4 significant figures (4,205 GB/s), times to 5-6
    assert H200_MEASURED[key][0] == pytest.approx(raw(), rel=2e-4)
    assert "docs/measured/h200.md" in H200_MEASURED[key][1]


@pytest.mark.parametrize("text", ["334.5 µs", "152.6 µs", "4,205 GB/s", "966", "3,824", "50.7",
                                  "763.9", "78.2", "4,346 GB/s", "| fir40_v1 | 1,500.3 µs |",
                                  "| fir40_v4 | 243.8 µs |", "| copy_f4 | 140.6 µs |"])
def test_the_measurement_report_prints_the_figures_the_capstone_uses(text):
    assert text in DOC


def test_every_kernel_says_where_its_time_comes_from():
    for k in MYSTERIES.values():
        for kernel in (k, k.after) if k.after else (k,):
            source = kernel.time_source
            if kernel.measured:
                assert source.startswith("measured:") and "h200.md" in source
            else:
                assert source.startswith("model-derived:")


def test_at_least_five_kernels_cover_all_three_verdicts():
    verdicts = {diagnose(k).verdict for k in MYSTERIES}
    assert len(MYSTERIES) >= 5
    assert verdicts == set(VERDICTS)


# -- each diagnosis follows from hand-derived evidence ---------------------------------------------

def test_aos_field_is_memory_bound_with_wasted_sectors():
    # load: lanes 32 B apart -> 32 distinct sectors (1024 B) for 128 B asked; store: 128
    # contiguous aligned bytes -> 4 sectors.  Traffic factor (1024 + 128) / (128 + 128) = 4.5.
    # Useful bytes 62,914,560 x 8 = 503,316,480; moved 4.5x = 2,264,924,160 B in 520.752 µs
    # = 4.349 TB/s = 90.6 % of 4.8 TB/s >= 60 % -> memory-bound (DRAM).
    ev = evidence("aos_field")
    assert ev.traffic_factor == pytest.approx(4.5)
    assert [s for _, s, _ in ev.global_sectors] == [32, 4]
    assert ev.dram_fraction == pytest.approx(503_316_480 * 4.5 / 520.752e-6 / BETA, rel=1e-6)
    assert ev.dram_fraction == pytest.approx(0.9061, abs=1e-3)
    d = diagnose("aos_field")
    assert (d.verdict, d.limiter) == ("memory-bound", "DRAM")
    assert "step 1" in d.route
    # after SoA: 4 sectors per request, 503,316,480 B in 131.280 µs = 3.834 TB/s = 79.9 %
    assert d.after.evidence.traffic_factor == 1
    assert d.after.evidence.dram_fraction == pytest.approx(0.799, abs=1e-3)
    assert d.speedup == pytest.approx(520.752 / 131.280, rel=1e-4)


def test_transpose_tiled_is_bound_by_shared_memory_bank_conflicts():
    # tile[32][32] floats: a column read puts all 32 lanes in bank 0 -> 32 wavefronts; a row
    # store is conflict-free -> 1.  Each happens 8192² / 32 = 2,097,152 times.  At one
    # wavefront per SM per cycle: 33 x 2,097,152 / (132 x 1.98 GHz) = 264.8 µs, 79.2 % of the
    # measured 334.512 µs.  DRAM: 2 x 8192² x 4 B = 536,870,912 B / 334.512 µs = 33.4 %.
    ev = evidence("transpose_tiled")
    assert [w for _, w, _ in ev.shared_wavefronts] == [1, 32]
    assert ev.smem_seconds == pytest.approx(33 * 2_097_152 / (SMS * CLOCK), rel=1e-9)
    assert ev.smem_fraction == pytest.approx(0.7916, abs=1e-3)
    assert ev.dram_fraction == pytest.approx(536_870_912 / 334.512e-6 / BETA, rel=1e-6)
    # 256 threads, 28 registers, 4 KB + 1 KB reserved: 8 blocks = 64 warps, as the CUDA runtime
    # reported for this kernel in the same H200 run
    assert ev.occupancy.blocks_per_sm == 8
    d = diagnose("transpose_tiled")
    assert (d.verdict, d.limiter) == ("memory-bound", "shared memory")
    # padded: 2 x 2,097,152 wavefronts = 16.0 µs (10.5 % of 152.592 µs); DRAM 536,870,912 B
    # in 152.592 µs = 3.518 TB/s = 73.3 %: the bottleneck moved to DRAM
    after = d.after
    assert [w for _, w, _ in after.evidence.shared_wavefronts] == [1, 1]
    assert after.evidence.smem_fraction == pytest.approx(0.105, abs=1e-3)
    assert (after.verdict, after.limiter) == ("memory-bound", "DRAM")
    assert after.evidence.dram_fraction == pytest.approx(0.7330, abs=1e-3)


def test_sgemm_is_compute_bound_on_the_cuda_cores():
    # 2 x 8192³ = 1,099,511,627,776 FLOP in 21.679 ms = 50.72 TFLOP/s = 75.8 % of 66.9
    flops = 2 * 8192**3
    ev = evidence("sgemm")
    assert ev.flops == flops
    assert ev.flop_fraction == pytest.approx(flops / 21.678544e-3 / PI_FP32, rel=1e-6)
    # pipe model: 8192³ FFMA = 17,179,869,184 warp instructions over 132 SMs x 4 per clock
    # = 32,537,631 cycles; the run is 21.678544 ms x 1.98 GHz = 42,923,517 cycles: FP32 pipe
    # 75.8 %.  Per 64 FFMA the model adds 4.5 LSU and 1 integer instruction: issue
    # 32,537,631 x 69.5 / 64 = 35,333,958 cycles = 82.3 %, the busiest unit.
    run = 21.678544e-3 * CLOCK
    assert ev.sm.fraction("fp32") == pytest.approx(8192**3 / 32 / (SMS * 4) / run, rel=1e-9)
    assert ev.sm.fraction("issue") == pytest.approx(8192**3 / 32 * 69.5 / 64 / (SMS * 4) / run,
                                                    rel=1e-9)
    assert ev.compute_fraction == pytest.approx(0.8232, abs=1e-3)
    d = diagnose("sgemm")
    assert d.verdict == "compute-bound" and d.limiter == "SM: instruction issue"
    assert "tensor cores" in d.route      # the FP32 roof itself is the limit: change it
    # the fix changes the roof: FP16 tensor cores, 1.439 ms measured = 15.1x
    assert d.speedup == pytest.approx(21.678544 / 1.439424, rel=1e-6)
    assert d.after.verdict == "compute-bound"


def test_hgemm_is_compute_bound_near_the_tensor_roof():
    # 1,099,511,627,776 FLOP in 1.439424 ms (full clock) = 763.9 TFLOP/s = 77.2 % of 989
    ev = evidence("hgemm")
    assert ev.flop_fraction == pytest.approx(0.7724, abs=1e-3)
    # the tensor pipe at the clock the run had: 4096 FLOP per clock per SM (989.4 TFLOP/s =
    # 4096 x 132 x 1.83 GHz) -> 1,099,511,627,776 / (4096 x 132) = 2,033,811 cycles against
    # 1.439424 ms x 1.98 GHz = 2,850,060: 71.4 % (the datasheet peak assumes 1,830 MHz)
    assert ev.compute_fraction == pytest.approx(
        2 * 8192**3 / (4096 * SMS) / (1.439424e-3 * CLOCK), rel=1e-9)
    assert ev.compute_fraction == pytest.approx(0.7136, abs=1e-3)
    # compulsory intensity 2N/(3 x 2 B) = 2730.7 FLOP/byte, ridge 989/4.8 = 206
    assert ev.intensity == pytest.approx(2 * 8192 / 6)
    assert ev.ridge_point == pytest.approx(989 / 4.8)
    d = diagnose("hgemm")
    assert d.verdict == "compute-bound" and "tensor" in d.limiter
    assert d.after is None and "already near the roof" in d.route


def test_decode_layer_bytes_and_verdict():
    # Weights: 4096 x (3·4096 + 4096 + 2·11008 + 11008) = 202,375,168 FP16 values = 404,750,336 B.
    # Activations in/out of the four GEMMs at m = 8: 8 x (3·4096 + 11008) x 2 = 372,736 B in,
    # 8 x (12288 + 4096 + 22016 + 4096) x 2 = 679,936 B out.  KV cache: 8 sequences x 32 heads
    # x 8192 tokens x 128 x 2 B x 2 (K and V) = 1,073,741,824 B; Q and O: 8 x 32 x 128 x 2 x 2
    # = 131,072 B.  Total 1,479,675,904 B.  FLOPs: 2 x 8 x 202,375,168 + 4 x 8 x 32 x 8192 x 128
    # = 4,311,744,512 -> 2.914 FLOP/byte, far below the FP16 ridge (206).
    k = mystery("decode_layer")
    assert k.cost.bytes == 1_479_675_904
    assert k.cost.flops == 4_311_744_512
    assert k.seconds == pytest.approx(1_479_675_904 / 4205e9, rel=1e-3)
    d = diagnose(k)
    assert (d.verdict, d.limiter) == ("memory-bound", "DRAM")
    assert d.evidence.roofline_side == "memory-bound"
    # KV reads are 73 % of the bytes: attention, not the weights, dominates at this batch
    kv = sum(b for label, _, b in k.cost.parts if label == "attention decode")
    assert kv / k.cost.bytes == pytest.approx(0.7257, abs=1e-3)
    # FP8 KV cache halves those 1,073,741,824 + 131,072 B: the layer moves 536,936,448 B less
    assert k.after.cost.bytes == 1_479_675_904 - (1_073_741_824 + 131_072) // 2


# the medians of the 20 CUDA-event samples, to the 0.1 µs the course quotes them with
V1, V4 = (round(statistics.median(FIR["kernels"][k]["samples_s"]) * 1e6, 1) * 1e-6
          for k in ("fir40_v1", "fir40_v4"))


def test_fir_filter_is_latency_bound_by_too_few_warps():
    # 16 registers would allow 64 warps; the launch's 120 KiB of dynamic shared memory + the
    # 1 KiB the driver reserves per block = 123,904 B, and an SM has 233,472 B: one 256-thread
    # block, 8 warps.  Little's law: 4.8 TB/s x 600 ns = 2.88 MB in flight = 21,818 B per SM
    # = 5,455 threads of 4-byte loads = 170.5 warps/SM needed.
    ev = evidence("fir_filter")
    assert (ev.occupancy.warps_per_sm, ev.occupancy.limiter) == (8, "shared memory")
    assert ev.warps_needed == pytest.approx(4.8e12 * 600e-9 / 132 / 4 / 32, rel=1e-9)
    # measured: the median of the 20 CUDA-event samples, 1,500.3 µs
    assert ev.measured and ev.seconds == pytest.approx(1500.3e-6, rel=1e-12) == V1
    # Per thread (the recorded SASS): 144 instructions, 121 of them FP32.  At the boost clock,
    # 1,500.3 µs = 2,970,665 cycles: issue 144 x 2^21 / (132 x 4) / 2,970,665 = 19.3 %, FP32
    # 121 x 2^21 x 32 / (128 x 132) / 2,970,665 = 16.2 %; DRAM 2^29 B / 1,500.3 µs =
    # 357.8 GB/s = 7.46 % of 4.8 TB/s; 120 FLOPs x 2^26 / 1,500.3 µs = 5.37 TFLOP/s = 8.0 %
    cycles = V1 * CLOCK
    assert ev.compute_fraction == pytest.approx(144 * 2**21 / (SMS * 4) / cycles, rel=1e-9)
    assert ev.compute_fraction == pytest.approx(0.1925, abs=1e-3)
    assert ev.sm.fraction("fp32") == pytest.approx(121 * 2**21 * 32 / (128 * SMS) / cycles)
    assert ev.dram_fraction == pytest.approx(2**29 / V1 / BETA, rel=1e-9)
    assert ev.flop_fraction == pytest.approx(120 * 2**26 / V1 / PI_FP32, rel=1e-9)
    # Nsight Compute on the same kernel: SM 19.64 %, DRAM 7.32 % (of its own DRAM peak)
    ncu = FIR["kernels"]["fir40_v1"]["ncu"]
    assert ev.compute_fraction == pytest.approx(ncu["sm_throughput_pct"] / 100, abs=0.01)
    assert ev.dram_fraction == pytest.approx(ncu["dram_throughput_pct"] / 100, abs=0.005)
    assert max(ev.fractions.values()) < NEAR_ROOF
    d = diagnose("fir_filter")
    assert (d.verdict, d.limiter) == ("latency-bound", "too few warps")
    # fixed: 28 registers, no shared memory -> 8 blocks = 64 warps/SM; measured 243.8 µs:
    # 1,500.3 / 243.8 = 6.15x, and compute-bound on the SM's instruction issue
    assert d.after.evidence.occupancy.warps_per_sm == 64
    assert d.after.evidence.measured and d.after.evidence.seconds == pytest.approx(V4, rel=1e-4)
    assert d.speedup == pytest.approx(V1 / V4, rel=1e-3)
    assert round(d.speedup, 1) == 6.2
    assert (d.after.verdict, d.after.limiter) == ("compute-bound", "SM: instruction issue")


def test_fixed_filter_against_nsight_compute():
    # 382 instructions per thread (321 FP32) for 2^24 threads = 524,288 warps.
    # Event-timed 243.8 µs x 1.98 GHz = 482,708 cycles: issue 382 x 524,288 / (132 x 4) /
    # 482,708 = 78.6 %; FP32 321 x 524,288 x 32 / (128 x 132) / 482,708 = 66.0 %.
    # Nsight Compute timed the kernel alone at 227.0 µs (1.9436 GHz: 441,278 cycles) and reads
    # SM throughput 85.99 %: 379,314 / 441,278 = 85.96 %.  DRAM: 2^29 B / 243.8 µs =
    # 2,202 GB/s = 45.9 % of 4.8 TB/s (Nsight Compute: 47.32 % over its 227.0 µs).
    fir = FIR["kernels"]["fir40_v4"]
    ev = diagnose("fir_filter").after.evidence
    run = V4 * CLOCK
    assert ev.sm.fraction("issue") == pytest.approx(382 * 524_288 / (SMS * 4) / run, rel=1e-9)
    assert ev.sm.fraction("issue") == pytest.approx(0.786, abs=1e-3)
    assert ev.sm.fraction("fp32") == pytest.approx(321 * 524_288 * 32 / (128 * SMS) / run,
                                                   rel=1e-9)
    raw = fir["ncu_raw"]
    ncu_cycles = raw["gpu__time_duration.sum"] * 1e-9 * raw["sm__cycles_elapsed.avg.per_second"]
    assert 382 * 524_288 / (SMS * 4) / ncu_cycles == pytest.approx(
        fir["ncu"]["sm_throughput_pct"] / 100, abs=5e-4)
    assert ev.dram_fraction == pytest.approx(2**29 / V4 / BETA, rel=1e-9)
    assert ev.dram_fraction == pytest.approx(fir["ncu"]["dram_throughput_pct"] / 100, abs=0.02)
    # FLOP/s over the peak: 120 FLOPs x 2^26 / 243.8 µs = 33.0 TFLOP/s = 49.4 % of 66.9: below
    # 60 %, the FLOP rule would have called it latency-bound.  Half the FP32 instructions are
    # FADDs, one FLOP each.
    assert ev.flop_fraction == pytest.approx(120 * 2**26 / V4 / PI_FP32, rel=1e-9)
    assert ev.flop_fraction < NEAR_ROOF <= ev.compute_fraction
    d = diagnose("fir_filter").after
    assert d.verdict == "compute-bound" and "fewer instructions" in d.route
    # the copy of the same bytes took 140.6 µs, the filter 243.8: not limited by DRAM
    copy = statistics.median(FIR["kernels"]["copy_f4"]["samples_s"])
    assert copy == pytest.approx(140.624e-6, rel=1e-6) and copy < 0.6 * V4


def test_the_latency_model_for_the_filter():
    # 8 warps per SM = 2 per scheduler; I = 144 instructions per warp, one load;
    # L = 600 ns x 1.98 GHz = 1,188 cycles; 2^21 warps / (132 SMs x 8) = 1,985.94 rounds.
    # Bunched (one block per SM: its warps start and end together): 2 x 143 + 1,188 = 1,474
    # cycles per round -> 1,985.94 x 1,474 / 1.98 GHz = 1.4784 ms.  Staggered: each warp
    # 143 + 1,188 = 1,331 cycles, the two overlapping -> 1.3350 ms.
    rounds = 2**21 / (132 * 8)
    p = latency_prediction("fir_filter")
    assert (p.warps_per_sm, p.blocks_per_sm, p.instructions) == (8, 1, 144)
    assert p.latency_cycles == pytest.approx(1188)
    assert p.round_cycles == pytest.approx(1474)
    assert p.bunched and p.seconds == p.bunched_seconds
    assert p.bunched_seconds == pytest.approx(rounds * 1474 / CLOCK, rel=1e-9)
    assert p.staggered_seconds == pytest.approx(rounds * 1331 / CLOCK, rel=1e-9)
    # against the record: -1.5 % of the events' 1,500.3 µs, +0.5 % of Nsight Compute's
    # 1,471.3 µs for the kernel alone; the staggered bound is 11 % fast
    kernel_alone = FIR["kernels"]["fir40_v1"]["ncu_raw"]["gpu__time_duration.sum"] * 1e-9
    assert p.error == pytest.approx(rounds * 1474 / CLOCK / V1 - 1, rel=1e-9)
    assert p.error == pytest.approx(-0.0146, abs=5e-4)
    assert p.seconds / kernel_alone - 1 == pytest.approx(0.0048, abs=5e-4)
    assert p.staggered_seconds / V1 - 1 == pytest.approx(-0.110, abs=1e-3)
    # the unloaded 340 ns (pointer chase): 2 x 143 + 673.2 = 959.2 cycles -> 0.962 ms
    low = latency_prediction("fir_filter", latency_ns=340)
    assert low.seconds == pytest.approx(rounds * (286 + 340e-9 * CLOCK) / CLOCK, rel=1e-9)


def test_what_the_latency_model_leaves_out():
    # From the record (the latency_model docstring's figures): Nsight Compute's issue-slot use
    # over elapsed cycles (144 x 2^21 / (4 x 132) / (1,471.296 µs x 1.97976 GHz) = 19.64 %)
    # against over active cycles (23.48 %): warps resident in 83.6 % of the cycles.  A round
    # is 1,471.296 µs x 1.97976 GHz / 1,985.94 = 1,466.7 cycles, 240 of them with no warp on
    # the SM; the active 1,226.6 less 2 x 143 issue cycles leave 940.6 cycles = 475 ns of waiting.
    raw = FIR["kernels"]["fir40_v1"]["ncu_raw"]
    cycles = raw["gpu__time_duration.sum"] * 1e-9 * raw["sm__cycles_elapsed.avg.per_second"]
    elapsed_issue = raw["smsp__inst_executed.sum"] / (4 * 132 * cycles)
    active = elapsed_issue / (raw["sm__inst_issued.avg.pct_of_peak_sustained_active"] / 100)
    assert active == pytest.approx(0.836, abs=1e-3)
    round_cycles = cycles / (2**21 / (132 * 8))
    assert round_cycles == pytest.approx(1466.7, abs=0.1)
    assert (1 - active) * round_cycles == pytest.approx(240, abs=1)
    waiting = active * round_cycles - 2 * 143
    assert waiting == pytest.approx(940.6, abs=1)
    assert waiting / CLOCK == pytest.approx(475e-9, abs=1e-9)
    # the dependent FFMA chain: 40 x 4 cycles = 160 < 2 x 124 post-load issue cycles of two
    # warps on one scheduler (144 instructions, the load the 20th): hidden
    assert 40 * 4 < 2 * (144 - 20)
    doc = capstone.latency_model.__doc__
    for text in ("1.478 ms", "1.500 ms", "1.471 ms", "1.335 ms", "84 %", "240", "1,227",
                 "940", "475 ns", "340 ns"):
        assert text in doc, text


def test_kernel_chain_is_launch_bound_and_stays_so_when_fused():
    # each kernel: 2^20 floats in and out = 8,388,608 B / 4205 GB/s = 1.995 µs of GPU work.
    # H200 launch figures (recorded run: 6.05 µs back-to-back, 10.97 µs synced -> 4.92 µs
    # round trip).  Launches every 6.05 µs > 1.995 µs, so the GPU waits for the CPU: the last
    # kernel is launched at 10 x 6.05 = 60.5 µs, runs 1.995 µs, and the sync returns 4.92 µs
    # later: 67.4 µs.  GPU busy 19.95 / 67.4 = 29.6 %; DRAM 83,886,080 B / 67.4 µs = 25.9 %.
    per = 8_388_608 / 4205e9
    k = mystery("kernel_chain")
    assert k.seconds == pytest.approx(10 * 6.05e-6 + per + 4.92e-6, rel=1e-3)
    ev = evidence(k)
    assert ev.launch_dominated
    assert ev.gpu_busy_fraction == pytest.approx(0.296, abs=1e-3)
    assert ev.dram_fraction == pytest.approx(0.259, abs=1e-3)
    d = diagnose(k)
    assert (d.verdict, d.limiter) == ("latency-bound", "launch overhead")
    # fused: one launch + one pass + the sync = 6.05 + 1.995 + 4.92 = 13.0 µs (5.2x); a single
    # 2 µs kernel is still dominated by its launch and sync
    assert d.fixed_seconds == pytest.approx(6.05e-6 + per + 4.92e-6, rel=1e-3)
    assert (d.after.verdict, d.after.limiter) == ("latency-bound", "launch overhead")


def test_every_fix_is_faster():
    for d in answer_key().diagnoses:
        if d.after is not None:
            assert d.speedup > 1, d.evidence.key


# -- the verdict rule ------------------------------------------------------------------------------

FRACTION = st.floats(min_value=0, max_value=1.2, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(c=FRACTION, m=FRACTION, s=st.none() | FRACTION, launch=st.booleans(),
       warps=st.booleans())
def test_classify_follows_the_60_percent_rule(c, m, s, launch, warps):
    fr = {"compute": c, "DRAM": m}
    if s is not None:
        fr["shared memory"] = s
    verdict, limiter = classify(fr, launch_dominated=launch, too_few_warps=warps)
    assert verdict in VERDICTS
    top = max(fr.values())
    if top < NEAR_ROOF:
        assert verdict == "latency-bound"
        assert limiter == ("launch overhead" if launch else
                           "too few warps" if warps else "latency (unexplained)")
    else:
        assert fr[limiter] == top
        assert verdict == ("compute-bound" if limiter == "compute" else "memory-bound")


def test_classify_edges():
    assert classify({"compute": 0.6, "DRAM": 0.1}) == ("compute-bound", "compute")
    assert classify({"compute": 0.1, "DRAM": 0.599}) == ("latency-bound", "latency (unexplained)")
    assert classify({"compute": 0.0, "DRAM": 0.0, "shared memory": 0.61}) == \
        ("memory-bound", "shared memory")


# -- the end-to-end GEMM story ---------------------------------------------------------------------

def test_gemm_story_numbers():
    s = gemm_story()
    naive, t32, t128, tc, tc256 = s.steps
    n = 8192
    # naive: 2N³ FLOP over (2N³ + N²) x 4 B = 0.25 FLOP/byte (PMPP ch. 5), memory-bound at
    # 4.8 TB/s: (2N³ + N²) x 4 / 4.8e12 = 916.4 ms
    assert naive.cost.intensity == pytest.approx(0.25, rel=1e-3)
    assert naive.seconds == pytest.approx((2 * n**3 + n**2) * 4 / BETA)
    assert naive.bound == "memory-bound"
    # 32-tiles: A and B each read N/32 times -> 2N³/32 + N² elements; intensity 7.98 < 13.9
    assert t32.cost.bytes == (2 * n**3 // 32 + n**2) * 4
    assert t32.bound == "memory-bound" and t32.ridge_point == pytest.approx(66.9 / 4.8)
    # 128-tiles: 2N³/128 + N² elements -> 31.8 FLOP/byte > 13.9: compute-bound, 2N³/66.9 TFLOP/s
    assert t128.bound == "compute-bound"
    assert t128.seconds == pytest.approx(2 * n**3 / PI_FP32)
    assert t128.measured_seconds == H200_MEASURED["sgemm_8192"][0]
    # FP16 on tensor cores: same tiles, 2-byte elements -> 63.5 FLOP/byte < 206: memory-bound
    # again (the bottleneck moved)
    assert tc.bound == "memory-bound" and tc.cost.intensity == pytest.approx(63.5, abs=0.1)
    # 128 x 256: A read N/256 times, B N/128 times: (N³/256 + N³/128 + N²) x 2 B = 13.02 GB ->
    # 2.712 ms at 4.8 TB/s; cuBLAS measured 1.439 ms, faster than this DRAM-only bound because
    # L2 serves part of the re-reads
    assert tc256.cost.bytes == (n**3 // 256 + n**3 // 128 + n**2) * 2
    assert tc256.seconds == pytest.approx(13_019_119_616 / BETA)
    assert tc256.measured_seconds < tc256.seconds
    times = [st_.seconds for st_ in s.steps]
    assert times == sorted(times, reverse=True)


def test_gemm_story_on_another_gpu_has_no_measurements():
    s = gemm_story(4096, "a100")
    assert all(st_.measured_seconds is None for st_ in s.steps)
    # A100: ridge 19.5 / 2.039 = 9.56 FLOP/byte in FP32
    assert s.steps[0].ridge_point == pytest.approx(19.5 / 2.039)


# -- representations and bad input -----------------------------------------------------------------

def test_reprs_carry_units():
    text = repr(evidence("transpose_tiled"))
    assert "FLOP/byte" in text and "GB/s" in text and "wavefronts" in text
    assert "TFLOP/s" in repr(gemm_story())
    assert "<table>" in answer_key()._repr_html_()
    assert "after the fix" in repr(diagnose("fir_filter"))
    assert round(latency_prediction("fir_filter").round_cycles) == 1474
    assert "<table>" in diagnose("sgemm")._repr_html_()
    assert "<table>" in evidence("sgemm")._repr_html_()


def test_bad_input():
    with pytest.raises(ValueError, match=r"key must be one of .*'aos_field'"):
        mystery("naive_gemm")
    with pytest.raises(TypeError, match="key must be a string"):
        mystery(3)
    with pytest.raises(TypeError, match="kernel must be a MysteryKernel"):
        evidence(3.5)
    with pytest.raises(TypeError, match="fractions"):
        classify({"DRAM": 0.5})
    with pytest.raises(ValueError, match="fractions"):
        classify({"compute": -0.1})
    with pytest.raises(ValueError, match="near"):
        classify({"compute": 0.5}, near=0)
    with pytest.raises(ValueError, match="n must be >= 256"):
        gemm_story(16)
    with pytest.raises(ValueError, match="space"):
        WarpAccess("x", (0,) * 32, space="local")
    with pytest.raises(ValueError, match="needs a launch and an instruction mix"):
        latency_prediction("hgemm")
    with pytest.raises(TypeError, match="kernel must be a MysteryKernel"):
        latency_prediction(3)
    with pytest.raises(ValueError, match="latency_ns must be >= 1"):
        latency_prediction("fir_filter", latency_ns=0)
    with pytest.raises(ValueError, match="key must be one of"):
        mystery("register_hog")


def test_roofline_points_are_the_kernels_with_flops():
    names, xs, ys = capstone.roofline_points()
    # the field copy and the transpose only move data: no FLOP/s to plot
    assert "aos_field" not in names and "transpose_tiled" not in names
    i = names.index("hgemm")
    assert xs[i] == pytest.approx(2 * 8192 / 6)
    assert ys[i] == pytest.approx(2 * 8192**3 / 1.439424e-3)
    assert capstone.roofline_points("sgemm")[0] == ["sgemm"]


def test_a_kernel_built_by_hand_is_diagnosed_too():
    # the learner's own kernel: a copy at half the DRAM peak with no other evidence ->
    # latency-bound with no model to explain it
    k = replace(mystery("aos_field"), key="mine", accesses=(), after=None,
                seconds=503_316_480 / (0.5 * BETA))
    d = diagnose(k)
    assert (d.verdict, d.limiter) == ("latency-bound", "latency (unexplained)")
    assert math.isclose(d.evidence.dram_fraction, 0.5)
    assert capstone.diagnose(k).after is None


def _lesson_cells(number):
    import nbformat

    path, = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    return nbformat.read(path, 4).cells


def test_notebook_quotes_the_filter_figures_the_package_computes():
    # notebook 10's mystery 6: its prompt, diagnosis and the note on the latency model must say
    # what the package computes and what the H200 record holds
    from gpu_lessons.capstone import mysteries
    from gpu_lessons.hardware import measured
    from gpu_lessons.occupancy import occupancy

    cells = _lesson_cells("10")
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    six = text[text.index("### Mystery 6"):text.index("### Mystery 7")]
    k = mystery("fir_filter")
    d = diagnose(k)
    ev, after = d.evidence, d.after.evidence
    p = latency_prediction(k)
    v1 = FIR["kernels"]["fir40_v1"]
    assert k.code.strip() in six
    # the kernel as the record has it: 119 FFMA + 1 FADD per element, 16 registers
    assert v1["sass_per_thread"]["FFMA"] + v1["sass_per_thread"]["FADD"] == 120
    assert (mysteries.FIR_V1_FP32_PER_ELEMENT, mysteries.FIR_FLOPS_PER_ELEMENT) == (120, 120)
    assert "120 FP32 instructions and 120 FLOPs of filtering per element" in six
    assert v1["registers"] == k.launch.registers_per_thread == 16
    assert f"kernel's {k.launch.registers_per_thread} registers would allow " \
        f"{occupancy(cc='9.0', threads_per_block=256, registers_per_thread=16).warps_per_sm}" in six
    # measured, and Nsight Compute's readings
    assert f"took {ev.seconds * 1e3:.2f} ms" in six and "took 1.50 ms" in six
    ncu = v1["ncu"]
    assert f"SM at {ncu['sm_throughput_pct']:.0f} % and DRAM at {ncu['dram_throughput_pct']:.0f} %" \
        in six
    assert f"**one\nblock, {ev.occupancy.warps_per_sm} warps per SM**" in six
    assert f"about {round(ev.warps_needed, -1):.0f} warps'" in six
    # the latency model, as latency_prediction computes it
    assert f"issues {p.instructions:.0f} instructions" in six
    assert f"600 ns ({p.latency_cycles:,.0f} cycles)" in six
    assert f"2 × {p.instructions - 1:.0f} + {p.latency_cycles:,.0f} = {p.round_cycles:,.0f} cycles" in six
    assert f"runs {2**21 / (132 * 8):,.0f} rounds, **{p.seconds * 1e3:.2f} ms**" in six
    assert f"only {p.staggered_seconds * 1e3:.2f} ms" in six
    # the fix, and each step measured
    assert (f"({mysteries.FIR_FP32_PER_ELEMENT} FP32 instructions per element instead of\n"
            f"{mysteries.FIR_V1_FP32_PER_ELEMENT})") in six
    for key in ("fir40_v2_us", "fir40_v3_us", "fir40_v4_us", "copy_f4_us"):
        assert f"{measured('h200.capstone_fir.' + key).value} µs" in six, key
    assert f"{d.speedup:.1f}× faster" in six
    # after the fix: Nsight Compute, and the pipe model over both times
    ncu4 = FIR["kernels"]["fir40_v4"]["ncu"]
    assert f"SM throughput {ncu4['sm_throughput_pct']:.0f} %" in six
    assert f"DRAM {ncu4['dram_throughput_pct']:.0f} %" in six
    raw4 = FIR["kernels"]["fir40_v4"]["ncu_raw"]
    alone = capstone.sm_throughput(k.after.instructions, "h200",
                                   raw4["gpu__time_duration.sum"] * 1e-9,
                                   clock_hz=raw4["sm__cycles_elapsed.avg.per_second"])
    assert f"fill {alone.fraction('issue'):.0%} of the issue slots in the\n" \
           f"{raw4['gpu__time_duration.sum'] / 1e3:.1f} µs" in six.replace(" %", "%")
    assert f"({after.sm.fraction('issue'):.0%} of the 243.8 µs" in six.replace(" %", "%")
    assert f"{sum(mysteries.FIR_SASS['fir40_v4'].values())} instructions per four elements" in six
    # the note on what the model leaves out
    low = latency_prediction(k, latency_ns=340)
    assert f"predicts {low.seconds * 1e3:.2f} ms" in six
    assert f"only {measured('h200.capstone_fir.fir40_v1_sm_active_pct').value:.0f} % of\nthe cycles" \
        in six
    assert f"to\n{2 * p.seconds * 1e3:.2f} ms here" in six
    # the story the lesson used to tell is gone
    for gone in ("168 registers", "226", "128 µs", "12×", "19×", "40 FMAs", "register_hog"):
        assert gone not in text, gone


def test_the_lesson_runs_the_latency_model_cell():
    cells = _lesson_cells("10")
    sources = [c.source for c in cells if c.cell_type == "code"]
    assert any("latency_prediction(k)" in s for s in sources)
    assert 'mystery("fir_filter")' in "\n".join(sources)


def test_the_lessons_gemm_error_orders_are_the_records():
    # mystery 3's diagnosis: "the measured relative error grows from about 1e-6 to 2e-4"
    import math

    errors = {g["precision"]: g["relative_error"] for g in RAW["gemm"]
              if g["n"] == 8192 and g["data"] == "normal"}
    assert math.floor(math.log10(errors["fp32"])) == -6            # 1.7e-6
    assert f"{errors['fp16']:.0e}" == "2e-04"                      # 2.1e-4
    text = "\n".join(c.source for c in _lesson_cells("10") if c.cell_type == "markdown")
    assert "from about 1e-6 to 2e-4" in text
