"""Tests for the system-level models: launch overhead, host copies, all-reduce overlap.

References: hand derivations (written out in the comments), NVIDIA's published V100 figures
(A. Gray, "Getting Started with CUDA Graphs", 2019), the H200 launch and copy figures measured
with CuPy (tests/data/h200_measurements.json), PCI-SIG signalling
rates, and the ring all-reduce volume of Thakur, Rabenseifner & Gropp (2005).
"""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_lessons import system as S

MEASURED = pathlib.Path(__file__).parents[1] / "data" / "h200_measurements.json"


# -- launches: hand-derived cases -----------------------------------------------------------------

def test_launch_bound_stream_by_hand():
    # 100 kernels of 2 µs, 5 µs launches, no final sync.  Kernel i is ready at 5(i+1); the GPU
    # finishes each in 2 µs, well before the next is ready, so the last ends at 500 + 2 = 502 µs.
    # Busy 100 × 2 = 200 µs: 200 / 502 = 39.8 %, tending to d/o = 40 % as n grows.
    r = S.kernel_sequence(100, 2.0, launch_us=5.0, final_sync=False)
    assert r.step_us == pytest.approx(502.0)
    assert r.utilisation == pytest.approx(200 / 502)
    long = S.kernel_sequence(20_000, 2.0, launch_us=5.0, final_sync=False)
    assert long.utilisation == pytest.approx(0.40, abs=1e-4)


def test_gpu_bound_stream_by_hand():
    # 10 kernels of 8 µs, 5 µs launches: the GPU never waits after the first launch:
    # 5 + 10 × 8 = 85 µs; a final sync round trip of 3 µs makes it 88 µs.
    r = S.kernel_sequence(10, 8.0, launch_us=5.0, sync_us=3.0, final_sync=False)
    assert r.step_us == pytest.approx(85.0)
    r = S.kernel_sequence(10, 8.0, launch_us=5.0, sync_us=3.0)
    assert r.step_us == pytest.approx(88.0)
    assert r.utilisation == pytest.approx(80 / 88)


def test_sync_after_each_kernel_adds_the_round_trip():
    # Each kernel: launch 5 + run 2 + round trip 4 = 11 µs, nothing overlaps: 100 × 11 = 1100.
    r = S.kernel_sequence(100, 2.0, mode="sync", launch_us=5.0, sync_us=4.0)
    assert r.step_us == pytest.approx(1100.0)
    assert r.utilisation == pytest.approx(200 / 1100)
    # removing the round trip alone leaves launch + run in series: 100 × 7
    assert S.kernel_sequence(100, 2.0, mode="sync", launch_us=5.0,
                             sync_us=0.0).step_us == pytest.approx(700.0)


def test_graph_by_hand():
    # One 5 µs graph launch, then 100 nodes of 0.5 + 2 µs, then the 4 µs sync: 5 + 250 + 4.
    kw = dict(mode="graph", graph_launch_us=5.0, graph_node_us=0.5, sync_us=4.0)
    assert S.kernel_sequence(100, 2.0, **kw).step_us == pytest.approx(259.0)
    assert S.kernel_sequence(100, 2.0, final_sync=False, **kw).step_us == pytest.approx(255.0)
    assert S.kernel_sequence(100, 2.0, **kw).utilisation == pytest.approx(200 / 259)


def test_v100_blog_figures():
    # Gray's blog: a 2.9 µs kernel, 20 per step, V100: 9.6 µs per kernel with a sync after each,
    # 3.8 µs with launches overlapped (one sync per step), 3.4 µs in a CUDA graph.
    cmp = S.compare_modes(20, 2.9, figures="V100")
    assert cmp["sync"].per_kernel_us == pytest.approx(9.6, abs=0.05)
    assert cmp["async"].per_kernel_us == pytest.approx(3.8, abs=0.05)
    assert cmp["graph"].per_kernel_us == pytest.approx(3.4, abs=0.05)


def _median_us(samples):
    return statistics.median(samples) * 1e6


def test_h200_figures_replay_the_recorded_launches():
    # The H200 figures are fitted to one recorded run (tests/data/h200_measurements.json):
    # 1000 empty kernels back to back, with a sync after each, and as a CUDA graph.  The model
    # with those figures must give back that run's per-kernel times.  The fitted figures
    # already contain the empty kernel's own run time (in the sync round trip and the graph
    # node cost), so the kernel itself is taken as 0.001 µs; the figures are rounded to 0.01 µs.
    raw = json.loads(MEASURED.read_text())["launch"]
    cmp = S.compare_modes(raw["n_kernels"], 0.001, figures="H200")
    assert cmp["async"].per_kernel_us == pytest.approx(
        _median_us(raw["back_to_back"]["samples"]), abs=0.01)
    assert cmp["sync"].per_kernel_us == pytest.approx(_median_us(raw["synced"]["samples"]),
                                                      abs=0.01)
    assert cmp["graph"].per_kernel_us == pytest.approx(_median_us(raw["graph"]["samples"]),
                                                       abs=0.01)


def test_every_figure_has_a_source():
    for fig in S.LAUNCH_FIGURES.values():
        assert set(fig.sources) == {"launch_us", "sync_us", "graph_launch_us", "graph_node_us"}
        assert all(len(s) > 20 for s in fig.sources.values())
    assert all(len(src) > 20 for _, src in S.HOST_COPY_BANDWIDTH.values())
    assert all(len(src) > 20 for _, src in S.LINKS.values())
    assert all(len(src) > 10 for *_, src in S.PCIE.values())


def test_overrides_replace_one_figure():
    base = S.kernel_sequence(10, 1.0, figures="v100")   # case-insensitive
    assert base.launch_us == S.LAUNCH_FIGURES["V100"].launch_us
    r = S.kernel_sequence(10, 1.0, figures="V100", launch_us=9.0)
    assert (r.launch_us, r.sync_us) == (9.0, S.LAUNCH_FIGURES["V100"].sync_us)


# -- launches: timeline ----------------------------------------------------------------------------

def _lane(run, lane):
    return sorted((s for s in run.timeline if s.lane == lane), key=lambda s: s.start)


def test_async_timeline_by_hand():
    # 3 kernels of 2 µs, launch 5, sync 1: launches [0,5] [5,10] [10,15]; kernels start when
    # their launch returns: [5,7] [10,12] [15,17]; the CPU then waits from 15 to 17 + 1 = 18.
    r = S.kernel_sequence(3, 2.0, launch_us=5.0, sync_us=1.0)
    gpu = [(s.start, s.end) for s in _lane(r, "GPU")]
    assert gpu == [(5, 7), (10, 12), (15, 17)]
    cpu = [(s.start, s.end, s.label) for s in _lane(r, "CPU")]
    assert cpu == [(0, 5, "launch 0"), (5, 10, "launch 1"), (10, 15, "launch 2"),
                   (15, 18, "sync wait")]
    assert [s.kind for s in _lane(r, "CPU")] == ["launch", "launch", "launch", "sync"]
    assert [s.kind for s in _lane(r, "GPU")] == ["kernel"] * 3


def test_segment_kinds_of_each_mode():
    # sync: a launch, a kernel and a wait per kernel; graph: one graph launch, nodes, a wait
    kinds = {m: sorted(s.kind for s in S.kernel_sequence(2, 1.0, mode=m).timeline)
             for m in S.MODES}
    assert kinds["sync"] == ["kernel", "kernel", "launch", "launch", "sync", "sync"]
    assert kinds["graph"] == ["graph launch", "kernel", "kernel", "sync"]
    assert kinds["async"] == ["kernel", "kernel", "launch", "launch", "sync"]
    # a 2-layer step on 2 GPUs: two forwards, two backwards, two all-reduces
    step = S.training_step([1, 1], [2, 2], [1e6, 1e6], gpus=2, link_bandwidth=1e9)
    assert sorted(s.kind for s in step.timeline) == ["backward", "backward", "comm", "comm",
                                                      "forward", "forward"]


modes = st.sampled_from(S.MODES)
us = st.floats(0.0, 50.0, allow_nan=False)


@given(n=st.integers(1, 60), d=st.floats(0.01, 50.0), mode=modes, o=us, r=us, g=us, c=us,
       final=st.booleans())
def test_timeline_invariants(n, d, mode, o, r, g, c, final):
    run = S.kernel_sequence(n, d, mode=mode, launch_us=o, sync_us=r, graph_launch_us=g,
                            graph_node_us=c, final_sync=final)
    gpu, cpu = _lane(run, "GPU"), _lane(run, "CPU")
    assert len(gpu) == n
    assert math.fsum(s.end - s.start for s in gpu) == pytest.approx(n * d)
    for lane in (gpu, cpu):   # one thing at a time per lane
        for a, b in itertools.pairwise(lane):
            assert b.start >= a.end - 1e-9
    # the GPU only runs kernels; the CPU only launches and waits
    assert {s.kind for s in gpu} == {"kernel"}
    assert {s.kind for s in cpu} <= {"launch", "graph launch", "sync"}
    assert sum(s.kind == "sync" for s in cpu) == (n if mode == "sync" else int(final))
    assert max(s.end for s in run.timeline) == pytest.approx(run.step_us)
    assert 0.0 < run.utilisation <= 1.0 + 1e-12
    assert run.step_us >= n * d - 1e-9
    if mode == "async":
        launches = [s for s in cpu if s.label.startswith("launch")]
        for k, ln in zip(gpu, launches, strict=True):   # a kernel never runs before its launch
            assert k.start >= ln.end - 1e-9


@given(n=st.integers(2, 500), d=st.floats(0.1, 4.0), o=st.floats(4.5, 10.0),
       c=st.floats(0.0, 0.4))
def test_graph_beats_stream_when_launch_bound(n, d, o, c):
    # d < o: the stream is launch-bound (≈ n·o); a graph costs o + n(c + d) < n·o when c + d < o.
    kw = dict(launch_us=o, sync_us=1.0, graph_launch_us=o, graph_node_us=c)
    a = S.kernel_sequence(n, d, **kw)
    g = S.kernel_sequence(n, d, mode="graph", **kw)
    assert g.step_us < a.step_us


# -- batch size --------------------------------------------------------------------------------------

def test_batch_sweep_by_hand():
    # One kernel of 1 + 0.1·b µs, launch 5, no sync cost: step = 5 + d, utilisation d / (5 + d).
    # b = 40 → d = 5 → 50 %; the kernel lasts as long as a launch at b = (5 − 1) / 0.1 = 40.
    sw = S.batch_sweep([1, 40, 400], fixed_us=1.0, per_item_us=0.1, launch_us=5.0, sync_us=0.0)
    assert np.allclose(sw.kernel_us, [1.1, 5.0, 41.0])
    assert np.allclose(sw.utilisation, [1.1 / 6.1, 0.5, 41 / 46])
    assert np.allclose(sw.items_per_s, [1 / 6.1e-6, 40 / 10e-6, 400 / 46e-6])
    assert sw.knee_batch == pytest.approx(40.0)


@given(batches=st.lists(st.integers(1, 4096), min_size=1, max_size=20), mode=modes,
       fixed=st.floats(0.0, 20.0), per=st.floats(0.001, 1.0), n=st.integers(1, 50))
def test_batch_sweep_agrees_with_the_timeline(batches, mode, fixed, per, n):
    # Two code paths: the sweep's closed form and kernel_sequence's event-by-event timeline.
    sw = S.batch_sweep(batches, fixed_us=fixed, per_item_us=per, n_kernels=n, mode=mode)
    for b, step in zip(batches, sw.step_us, strict=True):
        run = S.kernel_sequence(n, fixed + per * b, mode=mode)
        assert max(s.end for s in run.timeline) == pytest.approx(step)
    order = np.argsort(sw.batch, kind="stable")
    # a longer kernel never lowers the busy fraction
    assert np.all(np.diff(sw.utilisation[order]) >= -1e-12)
    assert np.all((sw.utilisation > 0) & (sw.utilisation <= 1 + 1e-12))


# -- host copies and PCIe --------------------------------------------------------------------------

def test_copy_time_by_hand():
    # 256 MiB pinned at 55.2 GB/s (H200, recorded): 268,435,456 / 55.2e9 s = 4863.0 µs,
    # + 10 µs latency.
    c = S.copy_time(256 * 2**20, memory="pinned")
    assert c.time_us == pytest.approx(10 + 268_435_456 / 55.2e9 * 1e6)
    # pageable at 7.9 GB/s is ≈ 7× slower for the same bytes
    p = S.copy_time(256 * 2**20, memory="pageable")
    assert p.time_us / c.time_us == pytest.approx((10 + 268_435_456 / 7.9e3) /
                                                  (10 + 268_435_456 / 55.2e3))


@given(lat=st.floats(0.1, 100.0), bw=st.floats(1e9, 1e11))
def test_half_bandwidth_size(lat, bw):
    # Hockney: at n½ = latency × bandwidth the transfer takes 2 × latency: half the bandwidth.
    n_half = S.copy_time(1, bandwidth=bw, latency_us=lat).half_bandwidth_bytes
    assert n_half == pytest.approx(lat * 1e-6 * bw)
    # Whole bytes: rounding n½ moves the answer by at most 0.5 B / n½ (n½ >= 100 B here).
    n = round(n_half)
    c = S.copy_time(n, bandwidth=bw, latency_us=lat)
    assert c.effective_bandwidth == pytest.approx(n / (lat * 1e-6 + n / bw), rel=1e-9)
    assert c.effective_bandwidth == pytest.approx(bw / 2, rel=0.5 / n_half + 1e-9)


def test_copy_defaults_match_measurements():
    if not MEASURED.exists():
        pytest.skip("no raw H200 measurement file")
    raw = json.loads(MEASURED.read_text())["transfers"]
    for row in raw["rows"]:
        mem, way = row["memory"], "h2d" if row["direction"] == "host->device" else "d2h"
        measured = raw["bytes"] / statistics.median(row["timing"]["samples"])
        default = S.HOST_COPY_BANDWIDTH[mem, way][0]
        # the defaults are this record's figures, rounded to 0.1 GB/s
        assert default == pytest.approx(measured, abs=0.05e9), (mem, way)


def test_pcie_generations():
    # x16, per direction: gen1 2.5 GT/s·0.8·16/8 = 4 GB/s, gen2 8 GB/s, gen3 8·128/130·2 =
    # 15.75 GB/s, gen4 31.5 GB/s, gen5 63.0 GB/s, gen6 64·2 = 128 GB/s (PCI-SIG's figure).
    expected = {1: 4.0, 2: 8.0, 3: 15.754, 4: 31.508, 5: 63.015, 6: 128.0}
    for gen, gbs in expected.items():
        assert S.pcie_bandwidth(gen) / 1e9 == pytest.approx(gbs, abs=0.001)
    assert S.pcie_bandwidth(4, lanes=8) == pytest.approx(S.pcie_bandwidth(4) / 2)
    # the measured 55 GB/s pinned copies can only come from a gen5 x16 link (gen4 peaks at 31.5)
    pinned = S.HOST_COPY_BANDWIDTH["pinned", "h2d"][0]
    assert S.pcie_bandwidth(4) < pinned < S.pcie_bandwidth(5)


# -- all-reduce -------------------------------------------------------------------------------------

@pytest.mark.parametrize("p, sent", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (64, 2 * 63 / 64)])
def test_ring_allreduce_of_1_gb(p, sent):
    # reduce-scatter + all-gather each send (p−1)/p of the data per GPU
    assert S.ring_allreduce_bytes(1e9, p) == pytest.approx(sent * 1e9)


def test_allreduce_time_by_hand():
    # 1 GB over 8 GPUs at 100 GB/s: 1.75 GB / 100 GB/s = 17.5 ms; α = 5 µs adds 2·7·5 = 70 µs.
    assert S.allreduce_time(1e9, 8, 100e9) == pytest.approx(17.5e-3)
    assert S.allreduce_time(1e9, 8, 100e9, latency_us=5) == pytest.approx(17.5e-3 + 70e-6)
    # NVLink 4: 450 GB/s each way → 1.75 / 450 s
    assert S.allreduce_time(1e9, 8, "nvlink4") == pytest.approx(1.75 / 450)


# -- training step overlap ---------------------------------------------------------------------------

def _grads_for(ms, p=2, bw=1e9):
    # p = 2: a ring all-reduce sends 2·1/2 = 1× the bytes, so bytes = ms × 1e-3 × bandwidth
    return ms * 1e-3 * bw


def test_overlap_hides_comm_under_remaining_compute():
    # 2 layers, forward 5 ms each, backward 10 ms each, each layer's all-reduce 6 ms.
    # forward 0–10; backward layer 1: 10–20; its all-reduce 20–26 runs under backward layer 0
    # (20–30): hidden min(6, 10) = 6; layer 0's all-reduce 30–36 has no compute left: exposed 6.
    kw = dict(gpus=2, link_bandwidth=1e9)
    on = S.training_step([5, 5], [10, 10], [_grads_for(6)] * 2, **kw)
    assert on.step_ms == pytest.approx(36.0)
    assert on.compute_ms == pytest.approx(30.0)
    assert on.exposed_comm_ms == pytest.approx(6.0)
    assert on.hidden_comm_ms == pytest.approx(6.0)
    assert on.hidden_fraction == pytest.approx(6 / 12)     # 6 of the 12 ms of all-reduce
    assert [(b.start_ms, b.end_ms) for b in on.buckets] == [pytest.approx((20, 26)),
                                                           pytest.approx((30, 36))]
    off = S.training_step([5, 5], [10, 10], [_grads_for(6)] * 2, overlap=False, **kw)
    assert off.step_ms == pytest.approx(30 + 12)
    assert off.exposed_comm_ms == pytest.approx(12.0)
    assert off.hidden_fraction == pytest.approx(0.0)       # all of it after the backward pass


def test_overlap_when_comm_is_longer_than_compute():
    # all-reduce 15 ms per layer: layer 1's runs 20–35, only 10 ms of compute remain to hide it;
    # layer 0's waits for the link: 35–50.  hidden = min(15, 10) = 10, exposed 30 − 10 = 20.
    on = S.training_step([5, 5], [10, 10], [_grads_for(15)] * 2, gpus=2, link_bandwidth=1e9)
    assert on.step_ms == pytest.approx(50.0)
    assert on.hidden_comm_ms == pytest.approx(10.0)
    assert on.exposed_comm_ms == pytest.approx(20.0)
    assert on.hidden_fraction == pytest.approx(10 / 30)


def test_comm_kernels_slow_the_compute_they_overlap():
    # As the first case, but an all-reduce takes half the SMs: backward layer 0 starts at 20, runs
    # at half speed while the all-reduce runs (20–26: 3 ms of its work), then 7 ms at full speed:
    # ends at 33; layer 0's all-reduce 33–39.  step 39 = 30 compute + 3 slowdown + 6 exposed.
    r = S.training_step([5, 5], [10, 10], [_grads_for(6)] * 2, gpus=2, link_bandwidth=1e9,
                        comm_sm_fraction=0.5)
    assert r.compute_end_ms == pytest.approx(33.0)
    assert r.step_ms == pytest.approx(39.0)
    assert r.slowdown_ms == pytest.approx(3.0)
    assert r.exposed_comm_ms == pytest.approx(6.0)


def test_buckets_gather_layers_in_backward_order():
    # 4 layers of 10 MB gradients, 20 MB buckets: {3, 2} then {1, 0}; the first is ready when
    # layer 2's backward ends: forward 4 × 1 + backward 2 × 2 = 8 ms.
    r = S.training_step(1.0, grad_bytes=10e6, n_layers=4, gpus=4, link_bandwidth=100e9,
                        bucket_bytes=20e6)
    assert [b.layers for b in r.buckets] == [(3, 2), (1, 0)]
    assert [b.nbytes for b in r.buckets] == [20e6, 20e6]
    assert r.buckets[0].ready_ms == pytest.approx(8.0)
    # 20 MB over 4 GPUs at 100 GB/s: 1.5 × 20e6 / 100e9 s = 0.3 ms each
    assert r.comm_ms == pytest.approx(0.6)
    # backward defaults to twice the forward
    assert r.compute_ms == pytest.approx(4 * 1 + 4 * 2)


def test_one_gpu_has_no_communication():
    r = S.training_step([1, 2, 3], [2, 4, 6], [1e9] * 3, gpus=1, link_bandwidth="pcie4")
    assert r.comm_ms == 0 and r.step_ms == pytest.approx(18.0)
    assert not [s for s in r.timeline if s.lane == "comm"]
    assert r.hidden_fraction == 1.0     # nothing to hide, nothing exposed


layer_times = st.lists(st.floats(0.0, 20.0), min_size=1, max_size=12)


@given(fwd=layer_times, data=st.data(), p=st.integers(1, 16), f=st.floats(0.0, 0.9),
       bucket=st.one_of(st.none(), st.floats(1e5, 1e8)))
def test_training_step_invariants(fwd, data, p, f, bucket):
    n = len(fwd)
    bwd = data.draw(st.lists(st.floats(0.0, 40.0), min_size=n, max_size=n))
    grads = data.draw(st.lists(st.floats(0.0, 5e8), min_size=n, max_size=n))
    kw = dict(gpus=p, link_bandwidth=50e9, bucket_bytes=bucket)
    on = S.training_step(fwd, bwd, grads, comm_sm_fraction=f, **kw)
    off = S.training_step(fwd, bwd, grads, overlap=False, **kw)
    plain = S.training_step(fwd, bwd, grads, **kw)
    tol = 1e-9 * (1 + off.step_ms)
    assert off.step_ms == pytest.approx(on.compute_ms + on.comm_ms)
    assert plain.step_ms <= off.step_ms + tol          # overlap never hurts without contention
    assert on.step_ms >= max(on.compute_ms, on.comm_ms) - tol
    assert on.step_ms == pytest.approx(on.compute_ms + on.slowdown_ms + on.exposed_comm_ms)
    assert on.exposed_comm_ms >= -tol and on.slowdown_ms >= -tol
    assert on.slowdown_ms <= on.comm_ms * f / (1 - f) + tol   # at most the overlapped part
    assert 0 <= on.hidden_comm_ms <= on.comm_ms + tol
    assert 0 <= on.hidden_fraction <= 1
    assert off.hidden_comm_ms <= tol              # without overlap nothing is hidden
    assert sorted(x for b in on.buckets for x in b.layers) == list(range(n))
    lane_kinds = {"compute": {"forward", "backward"}, "comm": {"comm"}}
    assert all(s.kind in lane_kinds[s.lane] for s in on.timeline)
    assert sum(s.kind == "forward" for s in on.timeline) == n
    for lane in ("compute", "comm"):
        segs = sorted((s for s in on.timeline if s.lane == lane), key=lambda s: s.start)
        for a, b in itertools.pairwise(segs):
            assert b.start >= a.end - tol
    for b in on.buckets:
        assert b.start_ms >= b.ready_ms - tol


# -- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, exc, words", [
    (lambda: S.kernel_sequence(0, 1.0), ValueError, "n_kernels"),
    (lambda: S.kernel_sequence(10, -1.0), ValueError, "kernel_us"),
    (lambda: S.kernel_sequence(10, 1.0, mode="eager"), ValueError, "mode"),
    (lambda: S.kernel_sequence(10, 1.0, figures="A100"), ValueError, "figures"),
    (lambda: S.kernel_sequence(10, 1.0, launch_us=-2), ValueError, "launch_us"),
    (lambda: S.kernel_sequence(10, 1.0, final_sync="yes"), TypeError, "final_sync"),
    (lambda: S.kernel_sequence(10, "1"), TypeError, "kernel_us"),
    (lambda: S.batch_sweep([0, 1], fixed_us=1, per_item_us=1), ValueError, "batch_sizes"),
    (lambda: S.batch_sweep([1.5], fixed_us=1, per_item_us=1), TypeError, "batch_sizes"),
    (lambda: S.batch_sweep([1], fixed_us=0, per_item_us=0), ValueError, "fixed_us"),
    (lambda: S.copy_time(-1), ValueError, "nbytes"),
    (lambda: S.copy_time(10, memory="unified"), ValueError, "memory"),
    (lambda: S.copy_time(10, direction="d2d"), ValueError, "direction"),
    (lambda: S.pcie_bandwidth(7), ValueError, "gen"),
    (lambda: S.pcie_bandwidth(4, lanes=3), ValueError, "lanes"),
    (lambda: S.ring_allreduce_bytes(1e9, 0), ValueError, "gpus"),
    (lambda: S.allreduce_time(1e9, 8, "nvlink9"), ValueError, "link_bandwidth"),
    (lambda: S.allreduce_time(1e9, 8, 0), ValueError, "link_bandwidth"),
    (lambda: S.training_step([1, 2], [1], gpus=2, link_bandwidth=1e9), ValueError, "backward_ms"),
    (lambda: S.training_step(1.0, gpus=2, link_bandwidth=1e9), ValueError, "n_layers"),
    (lambda: S.training_step([], gpus=2, link_bandwidth=1e9), ValueError, "forward_ms"),
    (lambda: S.training_step([1, -1], gpus=2, link_bandwidth=1e9), ValueError, "forward_ms"),
    (lambda: S.training_step(["a"], gpus=2, link_bandwidth=1e9), TypeError, "forward_ms"),
    (lambda: S.training_step([1], gpus=2, link_bandwidth=1e9, comm_sm_fraction=1.0), ValueError,
     "comm_sm_fraction"),
    (lambda: S.training_step([1], gpus=2, link_bandwidth=1e9, bucket_bytes=0), ValueError,
     "bucket_bytes"),
    (lambda: S.training_step([1], gpus=2, link_bandwidth=1e9, overlap=1), TypeError, "overlap"),
])
def test_bad_input_names_the_parameter(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


# -- presentation and speed ------------------------------------------------------------------------

def test_launch_comparison_table_carries_units():
    assert "µs" in repr(S.compare_modes(10, 2.0)) and "<table>" in S.compare_modes(
        10, 2.0)._repr_html_()


