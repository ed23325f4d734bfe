"""System explorers: the plots and readouts are the system models' numbers, and hand-derived ones."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import system
from gpu_lessons._format import duration
from gpu_lessons.views import system as view
from gpu_lessons.views.system import launch_explorer, overlap_explorer


def _bars(ex, lane):
    d = ex.bars.data
    return [(s, e, lab) for ln, s, e, lab in zip(d["lane"], d["start"], d["end"], d["label"],
                                                 strict=True) if ln == lane]


# -- launch overhead ----------------------------------------------------------------------------

H200 = system.LAUNCH_FIGURES["H200"]


def test_launch_default_hand_derived():
    e = launch_explorer()
    assert e.warning.value == ""
    # H200 (recorded run, tests/data/h200_measurements.json): launch o = 6.05 µs back to back,
    # sync r = 10.97 − 6.05 = 4.92 µs.  Batch 32: kernel = 2 + 0.05·32 = 3.6 µs.
    # async, 10 kernels: end = max(o + n·d, n·o + d) = max(42.05, 64.1) = 64.1, + r = 69.02 µs;
    # GPU busy 36 / 69.02 = 52.2 %.  Synced: 10 × (6.05 + 3.6 + 4.92) = 145.7 µs.
    assert (H200.launch_us, H200.sync_us) == (6.05, 4.92)
    assert e.current.data["kernel_us"] == [pytest.approx(3.6)]
    assert e.current.data["utilisation"][0] == pytest.approx(100 * 36 / 69.02)
    text = e.readout.value
    assert "69 µs" in text and "52.2 %" in text and "146 µs" in text
    # kernel = launch at (6.05 − 2) / 0.05 = 81 items
    assert e.knee.location == pytest.approx(81)
    assert "batch 81" in text
    # the timeline: 10 launches on the CPU, then the wait for the GPU; 10 kernels on the GPU
    cpu, gpu = _bars(e, "CPU"), _bars(e, "GPU")
    assert len(gpu) == 10 and len(cpu) == 11
    assert cpu[0][:2] == (0, pytest.approx(6.05))
    # launch-bound: kernel i starts when its launch returns, (i+1)·6.05 µs
    assert [s for s, _, _ in gpu] == pytest.approx([6.05 * (i + 1) for i in range(10)])
    assert max(end for _, end, _ in cpu) == pytest.approx(69.02)


def test_launch_bound_forty_percent():
    # 50 kernels of 2 µs, 5 µs launches, no final sync: max(5 + 100, 250 + 2) = 252 µs,
    # GPU busy 100 / 252 = 39.7 %
    e = launch_explorer(n_kernels=50, fixed_us=2.0, per_item_us=0.0, launch_us=5.0,
                        final_sync=False)
    assert e.run.step_us == pytest.approx(252)
    assert e.current.data["utilisation"][0] == pytest.approx(100 * 100 / 252)
    assert "252 µs" in e.readout.value


def test_launch_modes_and_graph():
    e = launch_explorer()
    e.controls["mode"].value = "sync"
    # every kernel pays o + d + r: 10 × 14.57 µs
    assert e.run.step_us == pytest.approx(145.7)
    assert len(_bars(e, "CPU")) == 20   # a launch and a wait per kernel
    e.controls["mode"].value = "graph"
    # one launch g = 6.05 µs, then n × (node cost c + d), then r
    c = H200.graph_node_us
    assert e.run.step_us == pytest.approx(6.05 + 10 * (c + 3.6) + 4.92)
    assert [lab for _, _, lab in _bars(e, "CPU")] == ["graph launch", "sync wait"]
    # the bars are coloured by the model's kind of segment, named in words in the legend
    assert set(e.bars.data["kind"]) == {"graph launch", "sync", "kernel"}
    assert set(e.bars.data["legend"]) == {"graph launch", "sync wait", "kernel"}


def test_launch_curves_are_the_models_sweep():
    e = launch_explorer(batch=256, n_kernels=5)
    for m in system.MODES:
        direct = system.batch_sweep(view.BATCHES, fixed_us=2.0, per_item_us=0.05,
                                    n_kernels=5, mode=m, figures="H200")
        assert np.allclose(e.curves.data[m], 100 * direct.utilisation)
    # large batches: kernels of 2 + 0.05·65536 µs dwarf every overhead
    assert e.curves.data["async"][-1] > 99


def test_launch_v100_reproduces_grays_blog():
    # A. Gray, "Getting Started with CUDA Graphs" (NVIDIA blog, 2019), V100: 20 kernels of
    # 2.9 µs per step, one sync per step: 3.8 µs per kernel with launches overlapped, 9.6 µs
    # with a sync after each, 3.4 µs in a CUDA Graph.
    e = launch_explorer(n_kernels=20, fixed_us=2.9, per_item_us=0.0)
    e.controls["figures"].value = "V100"
    assert e.controls["launch_us"].value == pytest.approx(
        system.launch_figures("V100").launch_us)   # the system's own launch cost
    assert e.warning.value == ""
    per_kernel = {r.mode: r.per_kernel_us for r in e.modes.runs}
    assert per_kernel["async"] == pytest.approx(3.8, abs=0.05)
    assert per_kernel["sync"] == pytest.approx(9.6, abs=0.05)
    assert per_kernel["graph"] == pytest.approx(3.4, abs=0.05)
    assert f"{duration(per_kernel['sync'] * 1e-6)} per kernel" in e.readout.value


def test_launch_zero_kernel_is_refused_visibly():
    e = launch_explorer()
    e.controls["fixed_us"].value = 0
    e.controls["per_item_us"].value = 0
    assert "fixed_us" in e.warning.value and "per_item_us" in e.warning.value
    e.controls["per_item_us"].value = 0.1
    assert e.warning.value == ""


def test_launch_extreme_controls(control_extremes):
    e = launch_explorer()
    for key, w in e.controls.items():
        for v in control_extremes(w):
            w.value = v
            assert e.warning.value == "", (key, v, e.warning.value)


# -- overlap --------------------------------------------------------------------------------------

PCIE4 = 16e9 * 128 / 130 * 16 / 8            # PCIe 4.0 x16: 31.5 GB/s per direction
RING_64MIB_8 = 2 * 7 / 8 * 64 * 2**20 / PCIE4 * 1e3   # ms: 3.727 ms per layer's all-reduce


def test_overlap_default_hand_derived():
    e = overlap_explorer()
    assert e.warning.value == ""
    off, on = e.runs[False], e.runs[True]
    # 12 layers × (2 ms forward + 4 ms backward) = 72 ms; 12 all-reduces of 3.727 ms
    assert off.compute_ms == pytest.approx(72)
    assert off.comm_ms == pytest.approx(12 * RING_64MIB_8)
    # no overlap: every all-reduce after the backward pass
    assert off.step_ms == pytest.approx(72 + 12 * RING_64MIB_8)
    assert "44.7 ms in all" in e.readout.value
    assert f"Overlap off: {duration((72 + 12 * RING_64MIB_8) * 1e-3)}" in e.readout.value
    assert e.breakdown.data["compute"] == [pytest.approx(72)] * 2
    assert e.breakdown.data["exposed"][0] == pytest.approx(12 * RING_64MIB_8)
    assert on.step_ms < off.step_ms


def test_overlap_hides_all_but_the_last_bucket():
    e = overlap_explorer(comm_sm_percent=0)
    on = e.runs[True]
    # each all-reduce (3.727 ms) fits inside the next layer's 4 ms backward; only the last
    # layer's is exposed: step = 72 + 3.727 ms
    assert on.step_ms == pytest.approx(72 + RING_64MIB_8)
    assert on.exposed_comm_ms == pytest.approx(RING_64MIB_8)
    # 11 of the 12 equal all-reduces hidden: 92 %
    assert (f"{duration(11 * RING_64MIB_8 * 1e-3)} of it (91.7 %) hidden behind backward"
            in e.readout.value)
    comm = _bars(e, "comm")
    assert len(comm) == 12
    assert comm[0][0] == pytest.approx(24 + 4)   # layer 11's backward ends at 28 ms


def test_overlap_sm_sharing_two_layers():
    e = overlap_explorer(n_layers=2, comm_sm_percent=50)
    t = RING_64MIB_8
    # forward: 2 layers × 2 ms = 0–4 ms; backward of layer 1: 4–8 ms; its all-reduce: 8 to
    # 8 + t.  Layer 0's 4 ms of backward start at 8 and run at half speed for t ms (t/2 ms of
    # work done), then at full speed for 4 − t/2: they end at 12 + t/2, and the last
    # all-reduce at 12 + t/2 + t.
    on = e.runs[True]
    assert on.slowdown_ms == pytest.approx(t / 2)
    assert on.step_ms == pytest.approx(12 + t / 2 + t)
    assert e.breakdown.data["sharing"][1] == pytest.approx(t / 2)


def test_overlap_controls_reach_the_model():
    e = overlap_explorer()
    c = e.controls
    c["link"].value = "nvlink4"
    c["gpus"].value = 4
    c["bucket_mib"].value = 100
    c["comm_sm_percent"].value = 20
    direct = system.training_step(2.0, None, 64 * 2**20, n_layers=12, gpus=4,
                                  link_bandwidth="nvlink4", overlap=True,
                                  bucket_bytes=100 * 2**20, comm_sm_fraction=0.2)
    assert e.step.step_ms == pytest.approx(direct.step_ms)
    assert len(_bars(e, "comm")) == len(direct.buckets)
    c["overlap"].value = False
    assert e.step.overlap is False
    assert "overlap off" in e.gantt_figure.title.text


def test_overlap_single_gpu_has_no_communication():
    e = overlap_explorer(gpus=1)
    # a ring of one GPU moves 2(1−1)/1 = 0 bytes
    assert e.runs[True].comm_ms == 0 and e.runs[True].step_ms == pytest.approx(72)
    assert _bars(e, "comm") == []


def test_overlap_extreme_controls(control_extremes):
    e = overlap_explorer()
    for key, w in e.controls.items():
        for v in control_extremes(w):
            w.value = v
            assert e.warning.value == "", (key, v, e.warning.value)


def test_model_refusal_is_shown(monkeypatch):
    e = overlap_explorer()

    def refuse(*a, **k):
        raise ValueError("comm_sm_fraction must be <= 0.95, got 0.99")

    monkeypatch.setattr(view.system, "training_step", refuse)
    e.controls["n_layers"].value = 3
    assert "comm_sm_fraction" in e.warning.value


_shared = {}


@settings(max_examples=6)
@given(n=st.integers(1, 64), fixed=st.floats(0.5, 50), batch=st.sampled_from(view.BATCH_CHOICES),
       mode=st.sampled_from(system.MODES))
def test_launch_gantt_is_the_models_timeline(n, fixed, batch, mode):
    e = _shared.setdefault("launch", launch_explorer())
    c = e.controls
    c["n_kernels"].value, c["fixed_us"].value = n, fixed
    c["batch"].value, c["mode"].value = batch, mode
    assert e.warning.value == ""
    d = e.current.data["kernel_us"][0]
    run = system.kernel_sequence(n, d, mode=mode, launch_us=c["launch_us"].value)
    assert e.bars.data["start"] == pytest.approx([s.start for s in run.timeline])
    assert e.bars.data["end"] == pytest.approx([s.end for s in run.timeline])
    assert 0 < e.current.data["utilisation"][0] <= 100


def test_overlap_bucket_menu_shows_its_default_entry():
    # ipywidgets treats value=None as "no selection": the menu must still show the entry
    # "one per layer" (whose value is None) rather than an empty box.
    menu = overlap_explorer().controls["bucket_mib"]
    assert menu.label == "one per layer" and menu.value is None
    assert overlap_explorer(bucket_mib=25).controls["bucket_mib"].label.startswith("25 MiB")
    with pytest.raises(ValueError, match="bucket_mib must be one of"):
        overlap_explorer(bucket_mib=7)
