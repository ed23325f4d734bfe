"""The overlap measurement's own code, run for real on the CPU: PyTorch processes joined over
gloo, the same phases, buffers, buckets, barriers and gathering that run over NCCL on GPUs
(only the clock and the "second stream" differ: host clocks and gloo's asynchronous
all-reduce).  The timings mean nothing here; the structure and the sums are checked.

PyTorch is optional (not a course dependency): without it these tests are skipped, and the
skip reason says exactly that.  ``pip install torch==2.13.0`` (a CPU build) runs them.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the CPU (gloo) run of "
                            "the overlap measurement needs it (pip install torch==2.13.0)")

from gpu_lessons import overlap as overlap_model  # noqa: E402
from gpu_lessons import system  # noqa: E402
from gpu_lessons.measure import multigpu, overlap  # noqa: E402
from gpu_lessons.overlap import overlap_from_raw  # noqa: E402
from gpu_lessons.overlap_record import OverlapConfig  # noqa: E402

pytestmark = pytest.mark.slow
CONFIG = OverlapConfig.cpu_test()


@pytest.fixture(scope="module")
def two_ranks():
    """Two spawned processes over gloo (about 15 s on two shared cores)."""
    return overlap.run_overlap_raw(CONFIG, world_size=2, backend="gloo", timeout_s=300)


@pytest.fixture(scope="module")
def one_rank():
    """A one-process group in this process: the world-size-1 (smoke test) path."""
    return overlap.run_overlap_raw(CONFIG, world_size=1, backend="gloo", in_process=True,
                                   timeout_s=300)


def _check_record(raw, world):
    assert raw["schema"] == overlap.SCHEMA and raw["world_size"] == world
    assert raw["backend"] == "gloo" and raw["synthetic"] is False
    assert raw["smoke_test"] is (world == 1)
    assert raw["config"] == CONFIG.to_raw()
    ranks = raw["by_rank"]
    assert len(ranks) == world
    assert len({r["meta"]["pid"] for r in ranks}) == world       # one process per rank
    for r in ranks:
        assert len(r["compute_samples"]) == CONFIG.repeats
        assert all(s > 0 for s in r["compute_samples"])
        assert [a["nbytes"] for a in r["allreduce"]] == list(CONFIG.allreduce_bytes)
        assert all(len(a["samples"]) == CONFIG.repeats for a in r["allreduce"])
        for cap, o in zip(CONFIG.bucket_bytes, r["overlap"], strict=True):
            # the buckets the run launched are the model's DDP buckets
            want = system.gradient_buckets([CONFIG.grad_bytes_per_layer] * CONFIG.n_layers, cap)
            assert o["buckets"] == want and o["bucket_bytes"] == cap
            # every layer in exactly one bucket
            assert sorted(x for g in o["buckets"] for x in g) == list(range(CONFIG.n_layers))
            # the compute stream's end never comes after the end of everything
            assert all(c <= t * (1 + 1e-9) for c, t in
                       zip(o["compute_samples"], o["total_samples"], strict=True))
        c = r["contention"]
        assert c["count"] >= 2 and all(len(e) == c["count"] for e in c["comm_end_samples"])
    m = overlap_from_raw(raw)
    assert m.world_size == world and len(m.points) == len(CONFIG.bucket_bytes)
    assert m.compute_us > 0 and all(p.time_us > 0 for p in m.allreduce)
    return m


def test_two_processes_over_gloo(two_ranks):
    m = _check_record(two_ranks, 2)
    assert not m.smoke_test and "smoke" not in m.label
    # the processes ran with NVLink multicast off (read from the worker's own environment)
    env = two_ranks["meta"]["env"]
    assert all(env.get(k) == v for k, v in multigpu.NVLS_OFF.items())
    assert [p.n_buckets for p in m.points] == [6, 3, 1]   # 64 KiB layers: caps 64, 128, 384 KiB
    report = overlap_model.report_markdown(m)
    assert "host clocks (gloo on the CPU)" in report and "CUDA events" not in report


def test_one_process_is_a_smoke_test(one_rank):
    m = _check_record(one_rank, 1)
    assert m.smoke_test and "smoke test" in m.label
    assert all(p.busbw_gbs == 0 for p in m.allreduce)       # nothing crosses a link
    with pytest.raises(ValueError, match="smoke test"):
        m.compare()
    assert "Smoke test on one GPU" in overlap_model.report_markdown(m)


def test_a_failing_worker_is_one_clear_error():
    with pytest.raises(multigpu.MultiGpuError, match=r"a worker failed: .*failed on purpose"):
        multigpu.spawn(_fails, 1, (), timeout_s=120)


def _fails(rank):
    raise RuntimeError(f"rank {rank} failed on purpose")
