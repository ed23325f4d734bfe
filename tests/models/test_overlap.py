"""Overlap measurement: the record's arithmetic, the ring fit, the model beside it, skip lines.

Everything here runs without PyTorch and without a GPU.  The record is the SYNTHETIC fixture
``tests/data/overlap_fixture.json`` (built by ``tests/overlap_fixture.py``; its numbers are
made up so that every consequence can be derived by hand below; it is never shown to learners
as a measurement).  ``tests/measure/test_overlap_torch.py`` runs the measurement code itself on the
CPU (gloo); ``tests/measure/test_overlap_h200x2.py`` replays the real two-GPU record once it exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import overlap_fixture as fx
import pytest

from gpu_lessons import overlap as overlap_model
from gpu_lessons import overlap_record, system
from gpu_lessons.measure import GPUS_LINE, SKIP_LINE, multigpu, on_gpus, overlap
from gpu_lessons.overlap import load_overlap, overlap_from_raw
from gpu_lessons.overlap_record import OverlapConfig

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "overlap_fixture.json"
MiB = 2**20


@pytest.fixture(scope="module")
def m():
    return load_overlap(FIXTURE)


def test_fixture_file_is_the_documented_builder_and_says_synthetic(m):
    assert FIXTURE.read_text() == fx.text()     # regenerate: python tests/overlap_fixture.py
    raw = json.loads(FIXTURE.read_text())
    assert raw["synthetic"] is True and "SYNTHETIC" in raw["note"]
    assert m.synthetic and "SYNTHETIC" in m.label and "not a measurement" in m.label
    assert "SYNTHETIC" in repr(m) and "Synthetic test fixture" in overlap_model.report_markdown(m)


def test_learners_never_see_the_fixture():
    for folder in ("notebooks", "exercises", "solutions", "gpu_lessons", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".ipynb", ".py", ".md", ".toml", ".json"):
                assert "overlap_fixture" not in path.read_text(errors="ignore"), path


# -- the record's arithmetic -----------------------------------------------------------------

def test_times_are_the_median_of_the_slowest_rank(m):
    # rank 0 runs 0.98, 1 and 1.05 × the value, rank 1 0.99 × that: the slowest rank per repeat
    # is rank 0, whose median is the value itself (a mean would give 1.01 ×, rank 1 0.99 ×)
    assert m.compute_us == pytest.approx(1600.0)
    assert m.layer_us == pytest.approx(200.0)
    assert [p.time_us for p in m.allreduce] == pytest.approx([fx.ring_us(s) for s in fx.SIZES])


def test_slowest_rank_is_taken_per_repeat_not_per_rank():
    raw = fx.build()
    # rank 1 slow in the first repeat only: per repeat max = [3, 2, 2.1] ms -> median 2.1 ms;
    # the max of per-rank medians would be 2.0 ms and the median of rank 0 alone 2.0 ms
    raw["by_rank"][0]["compute_samples"] = [1e-3, 2e-3, 2.1e-3]
    raw["by_rank"][1]["compute_samples"] = [3e-3, 1e-3, 1.5e-3]
    assert overlap_from_raw(raw).compute_us == pytest.approx(2100.0)


def test_bandwidths_as_nccl_tests_reports_them(m):
    # 256 MiB in 20 + 268435456 / 200e9 s = 1362.17728 µs: algbw = S / t, busbw = algbw × 2(p−1)/p
    p = m.allreduce[-1]
    assert p.nbytes == 256 * MiB
    algbw = 268435456 / 1362.17728e-6 / 1e9
    assert p.algbw_gbs == pytest.approx(algbw) == pytest.approx(197.06, abs=0.01)
    assert p.busbw_gbs == pytest.approx(algbw * 2 * 1 / 2)       # p = 2: the factor is 1
    eight = overlap_record.AllReducePoint(p.nbytes, 8, p.time_us)
    assert eight.busbw_gbs == pytest.approx(algbw * 2 * 7 / 8)
    assert overlap_record.AllReducePoint(p.nbytes, 1, p.time_us).busbw_gbs == 0


def test_overlap_points_split_exposed_into_slowdown_and_tail(m):
    got = {p.bucket_bytes: p for p in m.points}
    for cap, (exposed, compute) in fx.OVERLAP.items():
        p = got[cap]
        assert p.exposed_us == pytest.approx(exposed)          # total − compute alone
        assert p.slowdown_us == pytest.approx(compute - 1600)  # compute stream − compute alone
        assert p.tail_us == pytest.approx(1600 + exposed - compute)
        assert p.slowdown_us + p.tail_us == pytest.approx(p.exposed_us)
    assert [p.n_buckets for p in m.points] == [8, 4, 1]


def test_contention_gives_the_sm_share_and_the_comm_slowdown(m):
    c = m.contention
    # compute 1600 µs alone, 1600 / 0.9 beside NCCL: runs at 0.9 of its speed, f = 0.1
    assert c.compute_slowdown == pytest.approx(1 / 0.9 - 1)
    assert c.comm_sm_fraction == pytest.approx(0.1)
    # all-reduces ended at 400, 800, … µs; the GEMMs ran from 30 to 1807.8 µs: the ones from
    # 400 to 800, 800 to 1200 and 1200 to 1600 µs ran wholly beside them, 400 µs each, vs
    # 355.54432 µs alone (the first started before the GEMMs, the fifth ended after them)
    assert c.allreduce_alone_us == pytest.approx(355.54432)
    assert c.allreduce_under_us == pytest.approx(400.0)
    assert c.comm_slowdown == pytest.approx(400 / 355.54432 - 1)


def test_contention_without_an_allreduce_inside_the_compute():
    raw = fx.build()
    for r in raw["by_rank"]:
        r["contention"]["comm_end_samples"] = [[5e-3, 6e-3]] * 3    # all after the compute
    c = overlap_from_raw(raw).contention
    assert c.allreduce_under_us is None and c.comm_slowdown is None
    assert "not observed" in repr(c)


def test_summary_is_json_with_units(m):
    d = json.loads(json.dumps(m.to_dict()))
    assert d["compute_us"] == pytest.approx(1600)
    assert d["allreduce"][-1]["busbw_gbs"] == pytest.approx(197.06, abs=0.01)
    assert {"exposed_us", "slowdown_us", "tail_us", "total_us"} <= set(d["overlap"][0])
    assert m.to_raw() == json.loads(FIXTURE.read_text())


def test_save_and_load_round_trip(m, tmp_path):
    m.save(tmp_path / "run.json")
    assert load_overlap(tmp_path / "run.json") == m


def test_reprs_carry_units(m):
    text = repr(m)
    assert "1,600.0 µs" in text and "GB/s" in text and "TFLOP/s" in text
    assert "<table>" in m._repr_html_() and "µs" in m._repr_html_()


# -- the ring fit ----------------------------------------------------------------------------

def test_fit_recovers_the_ring_parameters(m):
    # the fixture's times are exactly 2·α + S/B with α = 10 µs, B = 200 GB/s
    fit = overlap_model.fit_allreduce(m.allreduce)
    assert fit.latency_us == pytest.approx(10.0)
    assert fit.bus_bandwidth == pytest.approx(200e9)
    assert fit.worst_residual == pytest.approx(0, abs=1e-9)
    assert fit.time_us(64 * MiB) == pytest.approx(355.54432)


def test_fit_range_follows_the_buckets(m):
    # buckets hold 32 MiB (one layer) to 256 MiB: fit on 8 MiB .. 1 GiB -> 16, 64, 256 MiB
    assert overlap_model.fit_for(m).fit_bytes == (16 * MiB, 256 * MiB)


def test_fit_weighs_relative_error():
    # time = 100 µs + S / (1 GB/s) for 4 sizes, but the largest measured 10 % slow: a plain
    # least-squares fit would bend to the largest point; the relative fit keeps α close
    sizes = [1e5, 1e6, 1e7, 1e8]
    t = [100 + s / 1e3 for s in sizes]
    t[-1] *= 1.1
    pts = [overlap_record.AllReducePoint(int(s), 2, x) for s, x in zip(sizes, t, strict=True)]
    fit = overlap_model.fit_allreduce(pts)
    assert fit.latency_us * 2 == pytest.approx(100, rel=0.1)


def test_fit_refuses_what_it_cannot_fit(m):
    one = [overlap_record.AllReducePoint(p.nbytes, 1, p.time_us) for p in m.allreduce]
    with pytest.raises(ValueError, match="one GPU"):
        overlap_model.fit_allreduce(one)
    with pytest.raises(ValueError, match="two sizes"):
        overlap_model.fit_allreduce(m.allreduce, min_bytes=200 * MiB)
    flat = [overlap_record.AllReducePoint(s, 2, 50.0 - i) for i, s in enumerate((4, 8, 16))]
    with pytest.raises(ValueError, match="does not grow"):
        overlap_model.fit_allreduce(flat)
    with pytest.raises(TypeError, match="AllReducePoint"):
        overlap_model.fit_allreduce([(1, 2)])


def test_negative_intercept_falls_back_to_bandwidth_only():
    # t = S / (1 GB/s) − 1 µs: the line's intercept is negative, so α = 0 and the slope alone
    # minimises Σ(b·S/t − 1)²: b = Σ(S/t) / Σ(S/t)², B = 2(p−1)/p / b (p = 2)
    sizes = (10_000, 100_000, 1_000_000)
    t = [s / 1e3 - 1 for s in sizes]
    x = [s / u for s, u in zip(sizes, t, strict=True)]          # 1111.1, 1010.1, 1001.0 B/µs
    b = sum(x) / sum(v * v for v in x)
    fit = overlap_model.fit_allreduce([overlap_record.AllReducePoint(s, 2, u)
                                       for s, u in zip(sizes, t, strict=True)])
    assert fit.latency_us == 0 and fit.bus_bandwidth == pytest.approx(1 / b * 1e6)
    assert fit.bus_bandwidth == pytest.approx(1.0431e9, rel=1e-4)


# -- the model beside the measurement --------------------------------------------------------

def test_prediction_by_hand(m):
    """Hand derivation, 8 layers of 200 µs backward, 32 MiB gradients each, p = 2, α = 10 µs,
    B = 200 GB/s (a 32 MiB all-reduce: 20 + 167.77216 = 187.77216 µs; 64 MiB: 355.54432 µs;
    256 MiB: 1362.17728 µs).

    Without SM sharing every bucket's all-reduce is shorter than the compute before the next
    one is ready, so only the last bucket is exposed: 187.77216 / 355.54432 / 1362.17728 µs.

    With f = 0.1, 32 MiB buckets: layers 6..0 each run beside one 187.77216 µs all-reduce, doing
    0.9 × 187.77216 = 168.994944 µs of work in it and the other 31.005056 µs after:
    218.777216 µs each.  Compute ends at 200 + 7 × 218.777216 = 1731.440512, the last
    all-reduce at 1919.212672: exposed 319.212672 µs.  64 MiB buckets: each pair of layers
    (400 µs of work) runs beside one 355.54432 µs all-reduce: 355.54432 + 400 − 0.9 ×
    355.54432 = 435.554432 µs; compute ends at 400 + 3 × 435.554432 = 1706.663296, the last
    all-reduce at 2062.207616: exposed 462.207616 µs.  One 256 MiB bucket starts after the
    compute: 1362.17728 µs, no slowdown.
    """
    cmp_ = m.compare()
    assert cmp_.comm_sm_fraction == pytest.approx(0.1)
    assert [r.predicted_us for r in cmp_.rows] == pytest.approx(
        [319.212672, 462.207616, 1362.17728])
    assert [r.predicted_no_sharing_us for r in cmp_.rows] == pytest.approx(
        [187.77216, 355.54432, 1362.17728])
    assert [r.predicted_slowdown_us for r in cmp_.rows] == pytest.approx(
        [131.440512, 106.663296, 0.0])
    assert [r.predicted_tail_us for r in cmp_.rows] == pytest.approx(
        [187.77216, 355.54432, 1362.17728])


def test_agreement_and_what_the_model_leaves_out(m):
    cmp_ = m.compare()
    assert [r.error for r in cmp_.rows] == pytest.approx(
        [319.212672 / 300 - 1, 462.207616 / 600 - 1, 1362.17728 / 1400 - 1])
    assert [r.within() for r in cmp_.rows] == [True, False, True]   # 64 MiB: −23 %
    assert cmp_.agreeing == 2 and not cmp_.all_within
    (note,) = cmp_.notes
    assert note.startswith("buckets of 64 MiB") and "(-23 %)" in note
    assert "+12.5 % longer" in note                     # the all-reduces slowed by the GEMMs
    assert "compute slowed by 100.0 µs measured vs 106.7 µs modelled" in note
    text = repr(cmp_)
    assert "2 of 3 within 20 %" in text and "µs" in text and "GB/s" in text
    assert "<table>" in cmp_._repr_html_()
    assert cmp_.markdown().count("\n") == 4            # header, rule, three rows


def test_tolerance_and_sm_share_are_the_callers(m):
    assert m.compare(tolerance=0.25).all_within
    bare = m.compare(comm_sm_fraction=0.0)
    assert [r.predicted_us for r in bare.rows] == pytest.approx(
        [r.predicted_no_sharing_us for r in bare.rows])
    for bad, exc in (("half", TypeError), (0.99, ValueError), (True, TypeError)):
        with pytest.raises(exc, match="comm_sm_fraction"):
            m.compare(comm_sm_fraction=bad)
    with pytest.raises(ValueError, match="tolerance"):
        m.compare(tolerance=-1)


def test_predictions_call_the_model(m, monkeypatch):
    calls = []
    real = system.training_step

    def spy(*a, **kw):
        calls.append(kw)
        return real(*a, **kw)
    monkeypatch.setattr(system, "training_step", spy)
    overlap_model.predicted_exposed_us(m, [32 * MiB], fit=overlap_model.fit_for(m),
                                       comm_sm_fraction=0.1)
    (kw,) = calls
    assert kw["gpus"] == 2 and kw["latency_us"] == pytest.approx(10)
    assert kw["link_bandwidth"] == pytest.approx(200e9) and kw["comm_sm_fraction"] == 0.1


def test_smoke_tests_are_not_compared():
    raw = fx.build()
    raw.update(world_size=1, smoke_test=True, by_rank=raw["by_rank"][:1])
    smoke = overlap_from_raw(raw)
    assert "smoke test" in smoke.label
    with pytest.raises(ValueError, match="smoke test"):
        smoke.compare()
    report = overlap_model.report_markdown(smoke)
    assert "Smoke test on one GPU" in report and "The model beside" not in report


def test_report_markdown(m):
    md = overlap_model.report_markdown(m)
    assert md.startswith("# Communication/computation overlap")
    assert "α = 10.00 µs" in md and "B = 200.0 GB/s" in md
    assert "| 256 MiB | 1,362.2 µs | 197.06 GB/s | 197.06 GB/s |" in md
    assert "NCCL_NVLS_ENABLE=0" in md and "2 of 3 within 20 %" in md
    assert "- buckets of 64 MiB" in md


def test_gradient_buckets_follow_ddp():
    # backward order, a bucket closes once it holds at least the cap (PyTorch DDP)
    assert system.gradient_buckets([4] * 5, 8) == [[4, 3], [2, 1], [0]]
    assert system.gradient_buckets([4] * 5, 9) == [[4, 3, 2], [1, 0]]
    assert system.gradient_buckets([1, 2, 3]) == [[2], [1], [0]]
    assert system.gradient_buckets([10, 1, 1], 2) == [[2, 1], [0]]
    with pytest.raises(ValueError, match="bucket_bytes"):
        system.gradient_buckets([1, 2], 0)


# -- records and configurations from outside -------------------------------------------------

def test_load_refuses_what_is_not_a_record(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_overlap(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_overlap(tmp_path / "bad.json")
    with pytest.raises(TypeError, match="raw must be a dict"):
        overlap_from_raw([1, 2])
    with pytest.raises(ValueError, match="no 'schema'"):
        overlap_from_raw({})


@pytest.mark.parametrize("damage, words", [
    (lambda r: r.update(schema=7), "schema"),
    (lambda r: r.pop("by_rank"), "by_rank"),
    (lambda r: r.update(world_size=3), "3 ranks"),
    (lambda r: r["by_rank"][1].pop("overlap"), "overlap"),
    (lambda r: r["by_rank"][0].update(compute_samples=[]), "non-empty"),
    (lambda r: r["by_rank"][0].update(compute_samples=[-1.0]), "positive"),
    (lambda r: r["by_rank"][0].update(compute_samples=[float("nan")]), "positive"),
    (lambda r: r["by_rank"][0]["allreduce"][0].update(nbytes=3), "all-reduce 0"),
    (lambda r: r["by_rank"][0]["allreduce"].pop(), "not an overlap record"),
    (lambda r: r["config"].update(evil=1), "unknown keys"),
    (lambda r: r["config"].update(n_layers="8"), "n_layers"),
    (lambda r: r.update(backend="mpi"), "backend"),
])
def test_damaged_records_raise_clearly(damage, words):
    raw = fx.build()
    damage(raw)
    with pytest.raises((ValueError, TypeError), match=words):
        overlap_from_raw(raw)


@pytest.mark.parametrize("kw, exc, words", [
    (dict(gemm_n=4.5), TypeError, "gemm_n"),
    (dict(gemm_n=0), ValueError, "gemm_n"),
    (dict(dtype="int8"), ValueError, "dtype"),
    (dict(grad_bytes_per_layer=6), ValueError, "multiples of 4"),
    (dict(bucket_bytes=()), ValueError, "at least one"),
    (dict(bucket_bytes=(64, 32)), ValueError, "increasing"),
    (dict(bucket_bytes="64"), TypeError, "bucket_bytes"),
    (dict(allreduce_bytes=(1024, True)), TypeError, "allreduce_bytes"),
    (dict(repeats=0), ValueError, "repeats"),
    (dict(n_layers=1024, grad_bytes_per_layer=2**30), ValueError, "16 GiB"),
])
def test_config_checks_its_arguments(kw, exc, words):
    with pytest.raises(exc, match=words):
        OverlapConfig(**kw)


def test_config_round_trip_and_defaults():
    c = OverlapConfig()
    assert OverlapConfig.from_raw(json.loads(json.dumps(c.to_raw()))) == c
    assert c.total_grad_bytes == 2**30 and c.bucket_bytes[0] == system.DDP_BUCKET_BYTES
    assert c.allreduce_bytes[0] == 64 * 1024 and c.allreduce_bytes[-1] == 2**30
    assert c.gemm_flops == 2 * 4096**3


def test_run_arguments_are_checked_before_anything_starts():
    with pytest.raises(TypeError, match="config"):
        overlap.run_overlap_raw({"gemm_n": 8})
    with pytest.raises(ValueError, match="backend"):
        overlap.run_overlap_raw(backend="mpi")
    with pytest.raises(ValueError, match="world_size must be 1"):
        overlap.run_overlap_raw(backend="gloo", world_size=2, in_process=True)


# -- skip lines: the notebook cell without enough GPUs ---------------------------------------

@pytest.fixture
def gpus_enabled(monkeypatch):
    monkeypatch.delenv("GPU_LESSONS_NO_GPU", raising=False)


def _fake_torch(count, nccl=True):
    cuda = types.SimpleNamespace(is_available=lambda: count > 0, device_count=lambda: count)
    dist = types.SimpleNamespace(is_available=lambda: True, is_nccl_available=lambda: nccl)
    return types.SimpleNamespace(__version__="9.9", cuda=cuda, distributed=dist)


def _install(monkeypatch, fake):
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.distributed", None if fake is None else
                        fake.distributed)


TAIL = " — skipped; the rest of this notebook runs without it."


@pytest.mark.parametrize("fake, line", [
    (None, "No CUDA GPU (PyTorch not installed)" + TAIL),
    (_fake_torch(0), "No CUDA GPU (PyTorch found no CUDA device)" + TAIL),
    (_fake_torch(1), "Needs 2 GPUs, found 1" + TAIL),
    (_fake_torch(2, nccl=False), "Needs NCCL (PyTorch 9.9 was built without it)" + TAIL),
])
def test_one_line_when_the_cell_cannot_run(monkeypatch, capsys, gpus_enabled, fake, line):
    _install(monkeypatch, fake)
    called = []
    assert on_gpus(2, lambda: called.append(1)) is None
    assert capsys.readouterr().out == line + "\n"            # exactly one line
    assert called == []
    assert multigpu.skip_line(2) == line


def test_the_lines_share_the_course_wording(monkeypatch, gpus_enabled):
    _install(monkeypatch, _fake_torch(3))
    assert multigpu.skip_line(4) == GPUS_LINE.format(need=4, found=3)
    assert multigpu.skip_line(3) is None
    monkeypatch.setenv("GPU_LESSONS_NO_GPU", "1")
    assert multigpu.skip_line(2) == SKIP_LINE.format(why="GPU_LESSONS_NO_GPU is set")


def test_on_gpus_runs_and_reports_a_failed_run_in_one_line(monkeypatch, capsys, gpus_enabled):
    _install(monkeypatch, _fake_torch(2))
    assert on_gpus(2, lambda x: x + 1, 41) == 42

    def broken():
        raise multigpu.MultiGpuError("a worker failed: NCCL error\nlong traceback")
    assert on_gpus(2, broken) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("GPU measurement failed (MultiGpuError: a "
                                                   "worker failed: NCCL error)")
    with pytest.raises(ValueError):          # a bug is not hidden as a skip
        on_gpus(2, lambda: int("x"))
    with pytest.raises(TypeError, match="measurement"):
        on_gpus(2, "not a function")
    with pytest.raises(ValueError, match="min_gpus"):
        on_gpus(0, lambda: 1)


def test_importing_the_overlap_modules_does_not_import_torch(tmp_path):
    trap = tmp_path / "torch"
    trap.mkdir()
    (trap / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    code = ("import gpu_lessons.measure, gpu_lessons.measure.overlap, "
            "gpu_lessons.overlap, gpu_lessons.overlap_record, gpu_lessons.measure.multigpu, "
            "gpu_lessons.views.overlap_measured; print('ok')")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_every_started_process_switches_multicast_off():
    assert multigpu.NVLS_OFF == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                 "NVSHMEM_DISABLE_NVLS": "1"}
    tool = (ROOT / "tools" / "device" / "overlap_nccl.py").read_text()
    head = tool.split("import argparse")[0]       # set before anything imports torch
    for k, v in multigpu.NVLS_OFF.items():
        assert f'"{k}": "{v}"' in head
    src = (ROOT / "gpu_lessons" / "measure" / "multigpu.py").read_text()
    assert src.count("switch_off_multicast()") >= 3   # spawn, the worker's init, the helper


def test_tool_prints_the_report_of_a_record():
    out = subprocess.run([sys.executable, "tools/device/overlap_nccl.py", "--report",
                          str(FIXTURE)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == overlap_model.report_markdown(load_overlap(FIXTURE))


def test_model_line_is_a_staircase_between_whole_layers(m):
    fit = overlap_model.fit_for(m)
    # caps of 33..64 MiB all make buckets of two 32 MiB layers
    a, b, c = overlap_model.predicted_exposed_us(m, [33 * MiB, 48 * MiB, 64 * MiB], fit=fit)
    assert a == b == c
    assert np.all(np.isfinite(overlap_model.predicted_exposed_us(m, [1, 2**40], fit=fit)))


def test_only_all_reduces_wholly_beside_the_gemms_count():
    # all-reduces end at 100, 400, 600, 900 µs; the GEMMs run 300..1000 µs: the one from 100 to
    # 400 started before them and is left out; 400→600 and 600→900 µs count: median 250 µs
    ends = [100e-6, 400e-6, 600e-6, 900e-6]
    assert overlap_record._comm_under(ends, 300e-6, 1000e-6) == pytest.approx(250e-6)
    assert overlap_record._comm_under(ends, 0.0, 1000e-6) == pytest.approx(300e-6)
    assert overlap_record._comm_under(ends, 300e-6, 500e-6) is None


def test_nccl_set_up_is_read_from_its_log(m):
    # NCCL's INFO lines (src/init.cc: "%d coll channels, %d collnet channels, %d nvls channels,
    # %d p2p channels, %d p2p channels per peer"; src/transport.cc: "Channel %02d/%01d : %d[%d]
    # -> %d[%d] via %s"), as NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT writes them
    log = ("host:10:10 [0] NCCL INFO NCCL version 2.27.3+cuda12.9\n"
           "host:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
           "host:10:10 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
           "host:10:10 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, "
           "32 p2p channels, 32 p2p channels per peer\n"
           "host:10:10 [0] NCCL INFO Init COMPLETE\n")
    other = log.replace("24 coll", "16 coll").replace("P2P/CUMEM/read", "SHM/direct/direct")
    s = overlap.nccl_init_summary([log, other])
    assert s["coll_channels"] == 24 and s["transports"] == ["P2P/CUMEM/read", "SHM/direct/direct"]
    assert len(s["lines"]) == 8 and not any("Init COMPLETE" in ln for ln in s["lines"])
    assert overlap.nccl_init_summary([]) == {"coll_channels": None, "transports": [], "lines": []}
    raw = fx.build()
    raw["meta"]["nccl_init"] = s
    raw["by_rank"][0]["meta"]["sms"] = 132
    md = overlap_model.report_markdown(overlap_from_raw(raw))
    assert ("24 channels: a collective runs at most 24 thread blocks, one per SM = 18.2 % of the "
            "132 SMs") in md


def test_environment_is_put_back(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    import os

    with multigpu.environment({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/tmp/x.%p"}):
        assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_FILE"] == "/tmp/x.%p"
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_FILE" not in os.environ


def test_comparison_table_rows_name_each_bucket_and_its_times(m):
    # the fixture's buckets are 32, 64 and 256 MiB; each row gives the measured exposed time
    # (step − compute alone) to 0.1 µs beside the model's, and says whether they agree
    caption, head, rows = overlap_model.compare_overlap(m).table()
    assert caption.startswith(f"Exposed communication on {m.label}")
    assert head[0] == "bucket" and head[2] == "measured exposed" and head[-1] == "within"
    assert [r[0] for r in rows] == ["32 MiB", "64 MiB", "256 MiB"]
    for r, p in zip(rows, m.points, strict=True):
        assert r[2] == f"{p.total_us - m.compute_us:,.1f} µs"
        assert r[3].endswith(" µs") and r[-1] in ("yes", "no")
