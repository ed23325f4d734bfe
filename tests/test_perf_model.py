"""The performance model (gpu_lessons.perf) against what an H200 measured.

* the calibration: every constant in gpu_lessons/data/perf_calibration.toml is recomputed from
  the microbenchmark record (tests/data/h200_perf_microbench.json);
* the validation kernels (tests/perf_kernels.py, timed with run_on_gpu:
  tests/data/h200_perf_validation.json) and the 30 worked puzzle kernels (their recorded
  runs, tests/data/h200_puzzle_gpu_runs.json): predicted against measured, with the error
  figures docs/performance_model.md quotes, and the issue's thresholds as expected failures
  until the model meets them;
* profile(...).metrics against Nsight Compute's reports (tests/data/h200_perf_ncu.json);
* behaviour: bad input, an uncalibrated GPU, the mechanisms a lesson teaches moving the
  prediction the right way.

Nothing here is fitted to these recordings: the model's constants come from the
microbenchmarks alone.
"""

import importlib.util
import json
import math
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import perf_kernels  # noqa: E402

from gpu_lessons import perf  # noqa: E402
from gpu_lessons.perf import calibration  # noqa: E402
from gpu_lessons.perf.model import _predict  # noqa: E402
from gpu_lessons.perf.profile import _report, beside  # noqa: E402

DATA = ROOT / "tests" / "data"


def _load(name):
    return json.loads((DATA / name).read_text())


def _puzzle_cases():
    spec = importlib.util.spec_from_file_location(
        "perf_calibration", ROOT / "tools" / "device" / "perf_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.puzzle_cases()


@pytest.fixture(scope="module")
def validation():
    """name -> (prediction, internals, measured µs, recorded registers)."""
    rec = _load("h200_perf_validation.json")["runs"]
    rng = np.random.default_rng(7)       # the inputs the record was made with
    out = {}
    for name, (kernel, make, _) in perf_kernels.CASES.items():
        grid, block, args = make(rng)
        pred, x = _predict(kernel, grid, block, args, "H200", True, None, 8, 4.0)
        out[name] = (pred, x, rec[name]["measured_us"], rec[name]["registers"])
    return out


@pytest.fixture(scope="module")
def puzzles():
    rec = {r["puzzle"]: r["measured_us"] for r in _load("h200_puzzle_gpu_runs.json")["runs"]}
    out = {}
    for name, (kernel, grid, block, args) in _puzzle_cases().items():
        pred, x = _predict(kernel, grid, block, args, "H200", True, None, 8, 4.0)
        out[name] = (pred, x, rec[name])
    return out


def _errors(table):
    ratios = np.array([v[0].us / v[2] for v in table.values()])
    err = np.abs(ratios - 1)
    return ratios, float(np.median(err)), float(np.mean(err <= 0.25)), float(
        max(ratios.max(), 1 / ratios.min()))


# -- the calibration ----------------------------------------------------------------------------


def test_every_constant_is_the_record_s_derivation():
    record = _load("h200_perf_microbench.json")
    derived = calibration.derive(record, gpu="H200", atomics=_load("h200_perf_atomics.json"))
    stored = calibration.constants("H200")
    assert stored.measured and "h200_perf_microbench.json" in stored.source
    for key, value in derived.items():
        got = getattr(stored, key)
        if isinstance(value, tuple):
            assert len(got) == len(value), key
            for a, b in zip(got, value, strict=True):
                assert a[0] == b[0] and math.isclose(a[1], b[1], rel_tol=1e-12), key
        elif isinstance(value, str):
            assert got == value
        else:
            assert math.isclose(got, value, rel_tol=1e-12), key


def test_constants_are_physical():
    k = calibration.constants("H200")
    assert 3.5e12 < k.copy_bw < 4.8e12                 # below the 4.8 TB/s datasheet
    assert k.l2_bw > 2 * k.copy_bw
    assert 200e-9 < k.dram_latency_s < 1e-6 and k.l2_latency_s < k.dram_latency_s
    assert k.launch_host_s > k.launch_device_s > 0
    assert 3.0 < k.fp32_per_s_sm / k.clock_hz <= 4.0    # 4 schedulers, one FP32 instr each
    assert k.fp64_per_s_sm < k.fp32_per_s_sm
    curve = [y for _, y in k.read_curve]
    assert max(curve) > 10 * min(curve)                 # bytes in flight matter
    assert 1.0 <= k.overlap_p <= 8.0


def test_a_gpu_without_calibration_uses_its_datasheet_and_says_so():
    k = calibration.constants("A100 SXM4 80GB")
    assert not k.measured and "datasheet" in k.source
    p = perf.predict_time(perf_kernels.pv_copy, 4, 256, np.ones(1024, np.float32),
                          np.zeros(1024, np.float32), 1024, gpu="A100 SXM4 80GB")
    assert not p.calibrated and any("datasheet" in n for n in p.notes)
    assert p.seconds > 0


# -- predictions against the H200 -------------------------------------------------------------


def test_validation_kernels_within_the_recorded_errors(validation):
    _, median, within, worst = _errors(validation)
    # docs/performance_model.md quotes these figures (the record, not a target)
    assert median <= 0.11, median
    assert within >= 0.85, within
    assert worst < 1.6, worst


def test_puzzle_kernels_within_the_recorded_errors(puzzles):
    _, median, within, worst = _errors(puzzles)
    assert median <= 0.15, median
    assert within >= 0.80, within
    assert worst < 1.6, worst
    # far better than the memory roof the course printed before (a median 4.9x off)
    roof = _load("h200_puzzle_gpu_runs.json")["runs"]
    roof_err = np.median([abs(r["measured_us"] / r["predicted_us"] - 1) for r in roof])
    assert median < roof_err / 10


def test_the_issue_s_thresholds_on_the_validation_kernels(validation):
    # 80 % within 25 %, none off by 2x or more, a median error of 15 % or less
    _, median, within, worst = _errors(validation)
    assert within >= 0.8 and worst < 2 and median <= 0.15


def test_the_issue_s_thresholds_on_the_puzzle_kernels(puzzles):
    _, median, within, worst = _errors(puzzles)
    assert within >= 0.8 and worst < 2 and median <= 0.15


def test_the_puzzle_story_the_measurements_tell(puzzles):
    # the naive transpose is L2-request bound, the padded one not; atomics on 16 bins are
    # the slowest thing in lesson 03; the tiled matrix product beats the naive one
    assert puzzles["transpose_naive"][0].limiter == "L2"
    assert puzzles["histogram_global"][0].limiter == "atomics"
    assert puzzles["matmul_tiled"][0].seconds < puzzles["matmul_naive"][0].seconds
    assert puzzles["transpose"][0].seconds < puzzles["transpose_tiled"][0].seconds
    for name in ("map", "zip", "dot"):
        assert puzzles[name][0].limiter == "launch overhead"


def test_barriers_keep_on_chip_work_from_hiding_under_the_loads(validation, puzzles):
    # the shared-memory transpose with 32-way conflicts: 68.7 µs of wavefronts and 56 µs of
    # DRAM traffic; the H200 took 128.8 µs, about their sum, not the larger
    pred, _, measured, _ = validation["transpose_conflicts"]
    assert pred.evidence["phases between barriers"][0] is not None
    assert abs(pred.us / measured - 1) <= 0.10
    # a reduction tree's eight barrier-separated steps: its time is the chain plus the steps
    for name in ("reduce_tree", "reduce", "reduce_shuffle", "scan_blelloch"):
        assert abs(puzzles[name][0].us / puzzles[name][2] - 1) <= 0.25, name
    # a kernel with no barrier has no phases
    assert validation["copy"][0].evidence["phases between barriers"][0] is None


def test_a_load_waits_as_long_as_the_level_that_serves_it(validation, puzzles):
    k = calibration.constants("H200")
    # a copy reads every sector once, from DRAM
    assert validation["copy"][1]["load_latency"] == pytest.approx(k.dram_latency_s)
    # the naive product's rows and columns are re-read by every block: nearly all from the L2
    lat = puzzles["matmul_naive"][1]["load_latency"]
    assert k.l2_latency_s <= lat < k.l2_latency_s + 0.1 * (k.dram_latency_s - k.l2_latency_s)
    assert abs(puzzles["matmul_naive"][0].us / puzzles["matmul_naive"][2] - 1) <= 0.25


def test_the_l2_serves_hot_lines_in_pairs(validation, puzzles):
    # tests/data/h200_perf_atomics.json: the same warp requests on 1, 2, ... 128 hot lines
    units = dict(calibration.constants("H200").atomic_line_units)
    assert units[1] == 1.0 and units[2] == pytest.approx(1.0, abs=0.1)   # 2 lines, one unit
    assert units[8] == pytest.approx(units[4], rel=0.1) and units[128] > 8
    # 16,384 blocks ending with 256 adds to the same eight lines, and 64 bins over two lines:
    # both queue on the hot lines, within 25 % of the H200
    for name in ("shared_hist", "atomic_bins"):
        pred, _, measured, _ = validation[name]
        assert pred.limiter == "atomics" and abs(pred.us / measured - 1) <= 0.25, name
    assert abs(puzzles["histogram_shared"][0].us / puzzles["histogram_shared"][2] - 1) <= 0.25
    # and not the shared atomics: random bins cost no more than patterned ones on the H200
    cases = _load("h200_perf_atomics.json")["cases"]
    assert cases["shared_random"]["seconds"] / cases["shared_pattern"]["seconds"] < 1.15


def test_the_launch_overhead_follows_the_measured_resets():
    # run_on_gpu resets every array before each timed launch: the larger the resets, the more
    # of the host's part of the launch they hide (tools/device/perf_calibration.py's launch_*)
    k = calibration.constants("H200")
    xs, ys = zip(*k.launch_curve, strict=True)
    assert xs[0] == 4 and xs[-1] == 256 << 20 and ys[0] == k.launch_host_s
    assert ys[0] > 3 * min(ys) and min(ys) == pytest.approx(k.launch_device_s, rel=0.05)
    # 16 MiB of resets hide less than half of it: 6.88 µs of 9.49
    assert dict(k.launch_curve)[16 << 20] == pytest.approx(6.88e-6, rel=0.01)
    x = np.ones(2 << 20, np.float32)          # 8 + 8 MiB of arrays to reset
    p = perf.predict_time(perf_kernels.pv_tiny, 4, 256, x, np.zeros_like(x), 1000)
    assert p.overhead == pytest.approx(6.88e-6, rel=0.01)


def test_the_launch_overhead_does_not_grow_with_the_arguments():
    # tests/data/h200_perf_launch.json: do-nothing launches through run_on_gpu taking 1-6
    # arrays and 0-3 numbers; the model takes one host figure for every launch because the
    # medians lie within 3 µs of one another
    rec = _load("h200_perf_launch.json")
    medians = [c["seconds"] for c in rec["cases"].values()]
    assert len(medians) == 8 and rec["gpu"].startswith("NVIDIA H200")
    assert max(medians) - min(medians) < 3e-6
    k = calibration.constants("H200")
    assert all(abs(m - k.launch_host_s) < 3e-6 for m in medians)


def test_shared_widths_from_the_sass():
    from gpu_lessons.kernels.compiled import AsmLine
    from gpu_lessons.perf.compiled import facts, shared_widths

    # by hand: 16 LDS and 4 LDS.128 move 16 + 16 elements in 20 instructions; one STS.64
    sass = ([AsmLine("LDS R1, [R2]", 1, 1)] * 16 + [AsmLine("LDS.128 R4, [R3]", 1, 1)] * 4
            + [AsmLine("@P0 STS.64 [R5], R6", 2, 2), AsmLine("FADD R1, R1, R2", 3, 3)])
    assert shared_widths(sass) == {"ld": 20 / 32, "st": 0.5}
    assert shared_widths([AsmLine("LDG.E R1, [R2]", 1, 1)]) == {"ld": 1.0, "st": 1.0}
    # the compiler merges the tiled product's row reads sa[ty, k] over its unrolled k loop
    cases = _puzzle_cases()
    k, _, _, args = cases["matmul_tiled"]
    regs, widths = facts(k, args)
    assert regs == 32        # as the CUDA runtime reported for it (tests/data/h200_registers.json)
    assert widths["ld"] < 1 and widths["st"] == 1.0
    k, _, _, args = cases["reduce_tree"]
    assert facts(k, args)[1] == {"ld": 1.0, "st": 1.0}


def test_limiters_and_breakdown(validation):
    for pred, *_ in validation.values():
        assert pred.limiter in perf.LIMITERS
        assert set(pred.breakdown) <= set(perf.LIMITERS)
        assert pred.seconds == pytest.approx(pred.overhead + max(pred.breakdown.values()))
        assert "bytes in flight per SM" in pred.evidence and "occupancy" in pred.evidence
    assert validation["few_warps"][0].limiter == "too little parallelism to hide latency"
    assert validation["tiny"][0].limiter == "launch overhead"
    assert validation["fp64"][0].limiter == "FP64"
    assert validation["transpose_conflicts"][0].limiter == "shared memory"
    assert validation["atomic_bins"][0].limiter == "atomics"


def test_registers_match_the_cuda_runtime(validation):
    same = [name for name, (_, x, _, regs) in validation.items() if x["registers"] == regs]
    assert len(same) >= len(validation) - 2     # NVRTC 12.9 here, 13.2 on the GPU machine


# -- profile(...).metrics against Nsight Compute --------------------------------------------------


def test_profile_metrics_against_ncu(validation):
    ncu = _load("h200_perf_ncu.json")["kernels"]
    close = {"dram__bytes_read.sum": [], "dram__bytes_write.sum": [],
             "lts__t_sectors_srcunit_tex.sum": [],
             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": []}
    for name, (pred, x, _, _) in validation.items():
        prof = _report(pred, x, True)
        real = ncu[f"pv_{name}"]["metrics"]
        for metric in close:
            sim, got = prof.metrics[metric], real[metric]
            if got > 1e5:
                close[metric].append(abs(sim / got - 1) <= 0.15)
        assert {r[0] for r in beside(prof.metrics, real)} >= set(close)
    # the share of kernels within 15 % of ncu, as docs/performance_model.md quotes
    assert np.mean(close["dram__bytes_read.sum"]) >= 0.85
    assert np.mean(close["dram__bytes_write.sum"]) >= 0.55   # 8 of 14 (4 of 37 as written)
    assert np.mean(close["lts__t_sectors_srcunit_tex.sum"]) >= 0.6
    assert np.mean(close["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]) >= 0.6


def test_l2_write_back_from_its_record():
    """ncu's dram__bytes_write.sum leaves out the dirty lines L2 holds at the kernel's end:
    the constant is the record's, and the rule reproduces the copies and fills of every
    size the record swept (writes below the L2's share reach DRAM not at all)."""
    rec = _load("h200_l2_writeback.json")
    dirty = calibration.constants("H200").l2_dirty_exit_bytes
    assert dirty == calibration.derive_writeback(rec)["l2_dirty_exit_bytes"]
    assert 16 * 2**20 < dirty < 50e6          # under the H200's 50 MB L2
    # hand derivation: 100 MB read, 100 MB written, 40 MB left in L2 -> 20 MB of it dirty
    assert math.isclose(calibration.written_back(100e6, 100e6, 40e6), 80e6)
    assert calibration.written_back(0.0, 4e6, 40e6) == 0.0
    assert calibration.written_back(1e6, 0.0, 40e6) == 0.0
    # re-reads from L2 sweep it too: 1 GB loaded leaves almost nothing dirty
    assert calibration.written_back(100e6, 100e6, 40e6, 1e9) > 96e6
    for r in rec["runs"]:
        w, got = r["bytes_written"], r["dram__bytes_write.sum"]
        sim = calibration.written_back(r["bytes_read"], w, dirty)
        if w <= 16 * 2**20:
            assert sim == 0.0 and got < 0.01 * w, r
        elif r["bytes_read"] and w >= 24 * 2**20:
            assert abs(sim / got - 1) <= 0.07, r
        elif w >= 128 * 2**20:   # a kernel that only writes keeps less dirty: the share's limit
            assert abs(sim / got - 1) <= 0.15, r


def test_profile_report_has_ncu_sections_and_names():
    rng = np.random.default_rng(0)
    kernel, make, _ = perf_kernels.CASES["transpose_padded"]
    grid, block, args = make(rng)
    prof = perf.profile(kernel, grid, block, *args)
    assert tuple(prof.sections) == perf.profile.__globals__["SECTIONS"]
    for name in ("dram__bytes_read.sum", "dram__bytes_write.sum",
                 "lts__t_sectors_srcunit_tex.sum",
                 "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
                 "smsp__inst_executed.sum", "launch__registers_per_thread",
                 "sm__warps_active.avg.pct_of_peak_sustained_active",
                 "gpu__time_duration.sum"):
        assert name in prof.metrics
    assert "Section: Memory Workload Analysis" in repr(prof)


# -- behaviour ------------------------------------------------------------------------------------


def _copy_args(n):
    return (np.random.default_rng(0).standard_normal(n).astype(np.float32),
            np.zeros(n, np.float32), n)


def test_too_few_warps_is_predicted_slower_than_the_roof():
    n = 1 << 22
    few = perf.predict_time(perf_kernels.pv_few_warps, 132, 32, *_copy_args(n))
    many = perf.predict_time(perf_kernels.pv_few_warps, 132 * 16, 128, *_copy_args(n))
    assert few.seconds > 5 * many.seconds
    assert few.limiter == "too little parallelism to hide latency"


def test_a_default_build_fuses_multiply_adds():
    rng = np.random.default_rng(0)
    kernel, make, _ = perf_kernels.CASES["fma_ilp"]
    grid, block, args = make(rng)
    exact = perf.predict_time(kernel, grid, block, *args, exact=True)
    fused = perf.predict_time(kernel, grid, block, *args, exact=False)
    assert fused.seconds < 0.75 * exact.seconds


def test_the_arguments_are_not_written():
    a, out, n = _copy_args(4096)
    before = out.copy()
    perf.predict_time(perf_kernels.pv_copy, n // 256, 256, a, out, n)
    assert np.array_equal(out, before)


def test_a_sample_that_cannot_speak_for_the_grid_says_so():
    def uneven(t, a, out, n):
        i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
        x = t.local(0.0, np.float32)
        for k in range(t.block_idx.x * 4):
            x[...] = x + a[i] * k
        out[i] = x

    n = 64 * 32
    p = perf.predict_time(uneven, 64, 32, np.ones(n, np.float32), np.zeros(n, np.float32), n)
    assert any("cannot speak" in note for note in p.notes)


def test_bad_input_names_the_parameter():
    a, out, n = _copy_args(1024)
    with pytest.raises(ValueError, match=r"gpu|GPU"):
        perf.predict_time(perf_kernels.pv_copy, 4, 256, a, out, n, gpu="no such GPU")
    with pytest.raises(TypeError, match="exact"):
        perf.predict_time(perf_kernels.pv_copy, 4, 256, a, out, n, exact="yes")
    with pytest.raises(ValueError, match="block"):
        perf.predict_time(perf_kernels.pv_copy, 4, 2048, a, out, n)
    with pytest.raises(TypeError, match="kernel"):
        perf.predict_time("not a kernel", 4, 256, a, out, n)
    with pytest.raises(ValueError, match="registers"):
        perf.predict_time(perf_kernels.pv_copy, 4, 256, a, out, n, registers=300)


def test_the_package_exposes_the_model():
    import gpu_lessons

    a, out, n = _copy_args(1024)
    p = gpu_lessons.predict_time(perf_kernels.pv_copy, 4, 256, a, out, n)
    assert isinstance(p, perf.TimePrediction) and "µs" in repr(p) and p.line()


# -- where the learner meets it -------------------------------------------------------------------


def test_the_worked_puzzle_table_is_the_record_and_the_model(puzzles):
    from gpu_lessons.perf import lesson

    runs = _load("h200_perf_validation.json")["puzzle_runs"]
    for name, (pred, _, _) in puzzles.items():
        rec = lesson.recorded(name)
        assert rec["measured_us"] == runs[name]["measured_us"]
        assert rec["predicted_us"] == pytest.approx(pred.us, rel=0.1), name
    table = lesson.worked_table(["blocks", "reduce_warp_uniform"])
    assert [r[0] for r in table.rows] == ["blocks", "reduce_warp_uniform"]
    with pytest.raises(ValueError, match="puzzle_ids"):
        lesson.worked_table(["no_such_puzzle"])


def test_puzzles_predict_prints_the_model_line(capsys):
    from gpu_lessons import puzzles as pz

    pk = _puzzle_cases()
    kernel = pk["blocks"][0]
    pz.predict("blocks", kernel)
    out = capsys.readouterr().out.splitlines()
    assert "model, H200 SXM at n = 16,777,216: your kernel" in out[0]
    assert "the worked kernel measured 83 µs there" in out[0]


def test_beside_simulator_sets_the_model_beside_the_measurement():
    from gpu_lessons.kernels import gpu
    from gpu_lessons.kernels.gpu import BesideSimulator, GpuRun
    from gpu_lessons.measure.timing import Timing

    assert gpu.TIME_MODEL is not None           # installed by importing gpu_lessons.perf
    args = (np.ones(4096, np.float32), np.zeros(4096, np.float32), 4096)
    model = gpu.TIME_MODEL(perf_kernels.pv_copy, 16, 256, args)
    assert model.seconds == perf.predict_time(perf_kernels.pv_copy, 16, 256, *args).seconds
    run = GpuRun("pv_copy", (16, 1, 1), (256, 1, 1), "NVIDIA H200", Timing((15e-6,) * 3, 2),
                 0, 16)
    rows = {r.label: r.value for r in BesideSimulator(
        run, True, None, 4.0, 0, 0, 1.0, 32768.0, None, None, model).readout_rows()}
    assert rows["performance model: predicted time"] == model.seconds
    assert rows["performance model: limited by"] == model.limiter
    assert rows["performance model: measured / predicted"] == pytest.approx(15e-6 / model.seconds)
