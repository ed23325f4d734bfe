"""Every measured figure in ``gpu_lessons/data/measured.toml`` against the record it names.

Each value is recomputed here from the raw samples in ``tests/data/`` (medians of the timed
runs, bytes over the median time) and must be that result rounded to the digits the data file
writes.  A figure added to the data file without a derivation here fails
``test_every_figure_is_checked``.
"""

import json
import statistics
import tomllib
from pathlib import Path

import pytest

from gpu_lessons import hardware
from gpu_lessons.hardware import Measured, measured, measured_figures

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
RUN = json.loads((DATA / "h200_measurements.json").read_text("utf-8"))
CHASE = json.loads((DATA / "h200_pointer_chase.json").read_text("utf-8"))
FIR = json.loads((DATA / "h200_capstone_fir.json").read_text("utf-8"))
REPEATS = json.loads((DATA / "h200_gemm_repeats.json").read_text("utf-8"))
SPILLS = json.loads((DATA / "sm90_register_spills.json").read_text("utf-8"))
MiB = 2**20


def _median(timing) -> float:
    return statistics.median(timing["samples"])


def _stride(stride, element_bytes=4) -> dict:
    sweep = next(s for s in RUN["stride"] if s["element_bytes"] == element_bytes)
    point = next(p for p in sweep["points"] if p["stride"] == stride and p["offset"] == 0)
    return {"n": sweep["n_elements"], "seconds": _median(point["timing"])}


def _stride_us(stride):
    return _stride(stride)["seconds"] * 1e6


def _stride_useful_gbs(stride):
    # every output float is read once and written once: 4 B x 2 per element
    s = _stride(stride)
    return s["n"] * 4 * 2 / s["seconds"] / 1e9


def _fetch_model_worst_error_pct():
    # each stride's predicted useful bandwidth: the stride-1 measurement x useful / moved bytes,
    # moved bytes counted in the 64-byte blocks L2 fetches from DRAM (the granularity the run read)
    from gpu_lessons.memory import predicted_traffic

    sweep = next(s for s in RUN["stride"] if s["element_bytes"] == 4)
    assert sweep["l2_fetch_granularity"] == 64
    strides = [p["stride"] for p in sweep["points"] if p["offset"] == 0]
    worst = max(abs(_stride_useful_gbs(s) / (_stride_useful_gbs(1) * predicted_traffic(
        s, element_bytes=4, fetch_bytes=64)["useful_over_moved"]) - 1) for s in strides)
    return 100 * worst


def _simt_us(name):
    return 1e6 * next(_median(k["timing"]) for k in RUN["simt"]["kernels"] if k["name"] == name)


def _gemm(precision, n, table="gemm"):
    return next(_median(g["timing"]) for g in RUN[table]
                if g["precision"] == precision and g["n"] == n and g["data"] == "normal")


def _gemm_clock(precision, n, which):
    g = next(g for g in RUN["gemm_sustained"]
             if g["precision"] == precision and g["n"] == n and g["data"] == "normal")
    return g["clock"][f"sm_mhz_{which}"]


def _repeats_tflops():
    """The 8 repeated calls, each 2·n³ FLOPs over its own median time, in TFLOP/s."""
    return [2 * r["n"] ** 3 / _median(r["timing"]) / 1e12 for r in REPEATS["runs"]]


def _bank_per_load_cycles(sweep, point):
    # every warp of the block issues iters x loads_per_iter loads; the SM serves them one
    # after another, so block cycles / all the block's loads = cycles per warp-wide load
    loads = sweep["iters"] * sweep["loads_per_iter"] * sweep["warps_per_block"]
    return statistics.median(point["block_cycles"]) / loads


def _shared_bytes_per_clock():
    sweep = next(s for s in RUN["bank"] if s["element_bytes"] == 4)
    point = next(p for p in sweep["points"] if p["stride"] == 1)
    return 32 * 4 / _bank_per_load_cycles(sweep, point)


def _shared_worst_model_error_pct():
    # the figure compares the measurement with the course's model: gpu_lessons.memory.shared_load
    # gives the wavefronts of each point's lane addresses, (lane x stride) mod 2048 elements
    # (tests/models/test_memory.py ties that model to Nsight Compute's counts of the same patterns)
    from gpu_lessons.memory import shared_load

    worst = 0.0
    for sweep in RUN["bank"]:
        size = sweep["element_bytes"]
        for p in sweep["points"]:
            addresses = [(lane * p["stride"]) % 2048 * size for lane in range(32)]
            model = shared_load(addresses, bytes_per_thread=size).wavefronts
            worst = max(worst, abs(_bank_per_load_cycles(sweep, p) / model - 1))
    return 100 * worst


def _launch_step_us(which):
    return which(RUN["launch"]["back_to_back"]["samples"]) * 1e6


def _spill(cap, field="stack_frame_bytes"):
    return next(r[field] for r in SPILLS["rows"] if r["maxrregcount"] == cap)


def _fir_idle_cycles_per_round():
    # (1 - share of cycles with a warp resident) x the kernel's SM cycles / rounds per SM, a
    # round being 8 warps (one 256-thread block) on each of the 132 SMs
    rounds = FIR["meta"]["n_floats"] / 32 / (132 * 8)
    return (1 - _fir_sm_active_pct("fir40_v1") / 100) * _fir_cycles("fir40_v1") / rounds


def _size_sweep_gbs(array_bytes):
    p = next(p for p in RUN["size_sweep"]["points"] if p["array_bytes"] == array_bytes)
    return p["bytes_moved"] * p["copies"] / _median(p["timing"]) / 1e9


def _transfer_gbs(direction, memory):
    t = RUN["transfers"]
    row = next(r for r in t["rows"] if r["direction"] == direction and r["memory"] == memory)
    return t["bytes"] / _median(row["timing"]) / 1e9


def _chase_ns(footprint):
    return next(r["ns_per_hop"] for r in CHASE["rows"] if r["footprint_bytes"] == footprint)


def _ncu(kernel, metric):
    return FIR["kernels"][kernel]["ncu_raw"][metric]


def _fir_cycles(kernel):
    """SM cycles of one launch as Nsight Compute timed it: duration x SM clock."""
    return _ncu(kernel, "gpu__time_duration.sum") * 1e-9 * _ncu(
        kernel, "sm__cycles_elapsed.avg.per_second")


def _fir_sm_active_pct(kernel):
    # issue slots used over elapsed cycles (4 schedulers x 132 SMs) against Nsight Compute's
    # issue slots used over *active* cycles: their ratio is the share of cycles with a warp
    # resident on the SM
    elapsed = _ncu(kernel, "smsp__inst_executed.sum") / (4 * 132 * _fir_cycles(kernel))
    return 100 * elapsed / (_ncu(kernel, "sm__inst_issued.avg.pct_of_peak_sustained_active") / 100)


def _ldc_per_clock():
    # ldc_probe's SASS (nvcc -arch=sm_90, cuobjdump): 24 instructions before its loop, a loop body
    # of 29 (8 LDC.64, 16 FADD, IADD3 x 2, UIADD3, ISETP, BRA) run iters / 16 = 256 times, one
    # branch past the remainder loop and 12 after (one LDC): 24 + 256 x 29 + 1 + 12 = 7,461
    # instructions per warp, which is exactly what Nsight Compute counted.  LDC: 2 before the
    # loop, 8 per trip, 1 after = 2,051 per warp.
    warps = FIR["meta"]["n_floats"] // 32
    per_warp = 24 + 256 * 29 + 1 + 12
    assert FIR["meta"]["ldc_iters"] // 16 == 256
    assert _ncu("ldc_probe", "smsp__inst_executed.sum") == per_warp * warps
    # the listing's LDCs: 2 before the loop, 8 in it, 2 in the remainder loop (which runs no
    # trip: 1,024 iterations are a multiple of 4), 1 after
    assert FIR["kernels"]["ldc_probe"]["sass_per_thread"]["LDC"] == 2 + 8 + 2 + 1
    return (2 + 8 * 256 + 1) * warps / 132 / _fir_cycles("ldc_probe")


#: key -> the value recomputed from the record, in the figure's unit
FROM_RECORD = {
    "h200.copy.bandwidth_gbs": lambda: RUN["copy"]["bytes_moved"] / _median(RUN["copy"]["timing"]) / 1e9,
    "h200.triad.bandwidth_gbs":
        lambda: RUN["triad"]["bytes_moved"] / _median(RUN["triad"]["timing"]) / 1e9,
    "h200.copy_in_l2.bandwidth_gbs": lambda: _size_sweep_gbs(16 * MiB),
    "h200.strided_copy.float_stride1_us": lambda: _stride_us(1),
    "h200.strided_copy.float_stride2_us": lambda: _stride_us(2),
    "h200.strided_copy.float_stride4_us": lambda: _stride_us(4),
    "h200.strided_copy.float_stride8_us": lambda: _stride_us(8),
    "h200.strided_copy.float_stride1_useful_gbs": lambda: _stride_useful_gbs(1),
    "h200.strided_copy.float_stride2_useful_gbs": lambda: _stride_useful_gbs(2),
    "h200.strided_copy.float_stride4_useful_gbs": lambda: _stride_useful_gbs(4),
    "h200.strided_copy.float_stride8_useful_gbs": lambda: _stride_useful_gbs(8),
    "h200.strided_copy.float_stride32_useful_gbs": lambda: _stride_useful_gbs(32),
    "h200.strided_copy.float_fetch_model_worst_error_pct": _fetch_model_worst_error_pct,
    "h200.copy_1gib.bandwidth_gbs": lambda: _size_sweep_gbs(512 * MiB),
    "h200.shared_load.bytes_per_clock": _shared_bytes_per_clock,
    "h200.shared_load.worst_model_error_pct": _shared_worst_model_error_pct,
    **{f"h200.simt.{name}_us": (lambda name=name: _simt_us(name)) for name in (
        "branch_by_parity", "branch_by_warp", "reduce_interleaved", "reduce_interleaved_strided",
        "reduce_sequential", "transpose_naive", "transpose_tiled", "transpose_tiled_padded")},
    "h200.gemm.fp32_4096_ms": lambda: _gemm("fp32", 4096) * 1e3,
    "h200.gemm.fp32_8192_ms": lambda: _gemm("fp32", 8192) * 1e3,
    "h200.gemm.fp16_1024_ms": lambda: _gemm("fp16", 1024) * 1e3,
    "h200.gemm.fp16_8192_ms": lambda: _gemm("fp16", 8192) * 1e3,
    "h200.gemm.bf16_8192_ms": lambda: _gemm("bf16", 8192) * 1e3,
    "h200.gemm.fp16_8192_power_limited_ms": lambda: _gemm("fp16", 8192, "gemm_sustained") * 1e3,
    "h200.gemm.bf16_8192_power_limited_ms": lambda: _gemm("bf16", 8192, "gemm_sustained") * 1e3,
    "h200.gemm.fp16_8192_power_limited_sm_clock_mhz": lambda: _gemm_clock("fp16", 8192, "median"),
    "h200.gemm.fp16_8192_power_limited_sm_clock_min_mhz": lambda: _gemm_clock("fp16", 8192, "min"),
    "h200.gemm.fp16_8192_power_limited_sm_clock_max_mhz": lambda: _gemm_clock("fp16", 8192, "max"),
    "h200.gemm_repeats.fp16_8192_min_tflops": lambda: min(_repeats_tflops()),
    "h200.gemm_repeats.fp16_8192_median_tflops": lambda: statistics.median(_repeats_tflops()),
    "h200.gemm_repeats.fp16_8192_max_tflops": lambda: max(_repeats_tflops()),
    "h200.launch.back_to_back_us": lambda: _median(RUN["launch"]["back_to_back"]) * 1e6,
    "h200.launch.back_to_back_fastest_us": lambda: _launch_step_us(min),
    "h200.launch.back_to_back_slowest_us": lambda: _launch_step_us(max),
    "h200.launch.synced_us": lambda: _median(RUN["launch"]["synced"]) * 1e6,
    "h200.launch.graph_per_kernel_us": lambda: _median(RUN["launch"]["graph"]) * 1e6,
    "h200.host_copy.pinned_h2d_gbs": lambda: _transfer_gbs("host->device", "pinned"),
    "h200.host_copy.pinned_d2h_gbs": lambda: _transfer_gbs("device->host", "pinned"),
    "h200.host_copy.pageable_h2d_gbs": lambda: _transfer_gbs("host->device", "pageable"),
    "h200.host_copy.pageable_d2h_gbs": lambda: _transfer_gbs("device->host", "pageable"),
    **{f"h200.occ_regs.cap{cap}_local_bytes": (lambda cap=cap: _spill(cap)) for cap in (32, 64, 128, 255)},
    "h200.pointer_chase.l1_ns": lambda: _chase_ns(16 * 2**10),
    "h200.pointer_chase.l2_ns": lambda: _chase_ns(8 * MiB),
    "h200.pointer_chase.hbm_ns": lambda: _chase_ns(4096 * MiB),
    **{f"h200.capstone_fir.{name}_us": (lambda name=name: FIR["kernels"][name]["median_s"] * 1e6)
       for name in ("fir40_v1", "fir40_v2", "fir40_v3", "fir40_v4", "copy_f4")},
    "h200.capstone_fir.fir40_v1_kernel_us": lambda: _ncu("fir40_v1", "gpu__time_duration.sum") / 1e3,
    "h200.capstone_fir.fir40_v4_kernel_us": lambda: _ncu("fir40_v4", "gpu__time_duration.sum") / 1e3,
    **{f"h200.capstone_fir.{name}_{what}_pct": (lambda name=name, what=what:
                                                FIR["kernels"][name]["ncu"][f"{what}_pct"])
       for name in ("fir40_v1", "fir40_v4") for what in ("sm_throughput", "dram_throughput")},
    "h200.capstone_fir.fir40_v1_sm_active_pct": lambda: _fir_sm_active_pct("fir40_v1"),
    "h200.capstone_fir.fir40_v1_round_idle_cycles": _fir_idle_cycles_per_round,
    "h200.capstone_fir.fir40_v4_instructions_per_warp":
        lambda: _ncu("fir40_v4", "smsp__inst_executed.sum") / (FIR["meta"]["n_floats"] / 4 / 32),
    "h200.capstone_fir.fir40_v4_sm_clock_mhz":
        lambda: _ncu("fir40_v4", "sm__cycles_elapsed.avg.per_second") / 1e6,
    "h200.capstone_fir.ldc_per_clock": lambda: _ldc_per_clock(),
}


def _decimals(value: float) -> int:
    text = repr(float(value))
    return 0 if text.endswith(".0") else len(text.split(".")[1])


def test_every_figure_is_checked():
    assert set(FROM_RECORD) == set(measured_figures())


@pytest.mark.parametrize("key", sorted(FROM_RECORD))
def test_figure_is_its_record_rounded_as_written(key):
    fig = measured(key)
    raw = FROM_RECORD[key]()
    half_step = 0.5 * 10.0 ** -_decimals(fig.value)
    assert abs(raw - fig.value) <= half_step * (1 + 1e-9), (key, raw, fig.value)


def test_units_names_and_runs_agree():
    text = (ROOT / "gpu_lessons" / "data" / "measured.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    suffix = {"µs": "_us", "ms": "_ms", "ns": "_ns", "GB/s": "_gbs", "%": "_pct",
              "TFLOP/s": "_tflops", "MHz": "_mhz", "B": "_bytes", "cycles": "_cycles",
              "instructions/warp": "_per_warp", "B/clock/SM": "_per_clock",
              "warp instructions/clock/SM": "_per_clock"}
    for key, fig in measured_figures().items():
        assert key.endswith(suffix[fig.unit]), key
        assert fig.gpu in hardware.names()           # a catalog GPU, by its canonical name
        assert (ROOT / fig.record).is_file(), fig.record
        assert fig.where and fig.what and fig.how and fig.doc
    # a run's record names the same GPU the run says
    assert RUN["device"]["catalog_name"] == raw["runs"]["h200"]["gpu"]
    assert RUN["meta"]["date_utc"].startswith(raw["runs"]["h200"]["date"][:16].replace("Z", ""))
    assert CHASE["gpu"] == "NVIDIA H200"
    assert REPEATS["date_utc"].startswith(raw["runs"]["h200_gemm_repeats"]["date"][:16].replace("Z", ""))
    assert all(r["catalog_name"] == raw["runs"]["h200_gemm_repeats"]["gpu"] for r in REPEATS["runs"])
    assert SPILLS["meta"]["date_utc"] == raw["runs"]["sm90_register_spills"]["date"]
    assert SPILLS["meta"]["arch"] == "sm_90" == "sm_" + hardware.gpu("h200").cc.replace(".", "")
    assert f"NVRTC {SPILLS['meta']['nvrtc']}" in raw["runs"]["sm90_register_spills"]["how"]


def test_si_values_and_text():
    f = measured("h200.launch.back_to_back_us")
    assert isinstance(f, Measured)
    assert f.si == pytest.approx(6.05e-6)
    assert str(f) == "6.05 µs"
    assert str(measured("h200.copy.bandwidth_gbs")) == "4,205 GB/s"
    assert measured("h200.copy.bandwidth_gbs").si == 4205e9
    assert "tests/data/h200_measurements.json" in f.source and "H200" in f.source
    assert "6.05 µs" in repr(f)


def test_unknown_key_names_the_closest():
    with pytest.raises(ValueError, match="back_to_back_us"):
        measured("h200.launch.back2back_us")
    with pytest.raises(TypeError, match="key"):
        measured(6.05)


# -- the register-spill record: compiled, so it can be checked twice ---------------------------------

def test_spill_record_agrees_with_the_h200s_runtime():
    """The registers ptxas gave occ_regs under each cap are what the CUDA runtime reported for the
    same kernel on the H200 (its occupancy table), so the compile matches what the GPU ran."""
    columns = RUN["occupancy"]["columns"]
    on_h200 = {}
    for row in RUN["occupancy"]["rows"]:
        r = dict(zip(columns, row, strict=True))
        if r["kernel"].startswith("occ_regs maxrreg="):
            on_h200[int(r["kernel"].split("=")[1])] = r["registers_per_thread"]
    for row in SPILLS["rows"]:
        assert on_h200[row["maxrregcount"]] == row["registers"] == row["maxrregcount"]
    # the fewer registers, the more spills; at 255 nothing spills (160 live floats fit)
    frames = [_spill(cap) for cap in (32, 64, 128, 255)]
    assert frames == sorted(frames, reverse=True) and frames[-1] == 0
    assert all(_spill(c, "spill_store_bytes") >= _spill(c) for c in (32, 64, 128))


def test_spill_record_is_what_this_nvrtc_compiles():
    """Recompiled with the same NVRTC, the record comes out again (another NVRTC may spill
    differently: then rerun tools/record_register_spills.py and update measured.toml)."""
    import importlib.util

    from gpu_lessons.kernels import nvrtc

    if nvrtc.nvrtc_library() is None:
        pytest.skip("NVRTC is not installed (the test extra brings it)")
    spec = importlib.util.spec_from_file_location("record_register_spills",
                                                  ROOT / "tools" / "record_register_spills.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if tool.nvrtc_version() != SPILLS["meta"]["nvrtc"]:
        pytest.skip(f"NVRTC {tool.nvrtc_version()} here, the record is from "
                    f"{SPILLS['meta']['nvrtc']}")
    assert tool.record()["rows"] == SPILLS["rows"]
