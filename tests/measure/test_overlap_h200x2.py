"""Replay of the overlap measurement recorded on two H200s, against the model and the docs.

The record, ``tests/data/h200x2_overlap.json``, is what

    python3 tools/device/overlap_nccl.py --out $OUT/overlap.json

wrote on a machine with two H200s; ``docs/measured/h200x2_overlap.md`` is its report
(``python3 tools/device/overlap_nccl.py --report tests/data/h200x2_overlap.json``).  Until a
two-GPU machine has run it, the record does not exist and these tests are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_lessons import overlap as overlap_model
from gpu_lessons import system
from gpu_lessons.measure import multigpu
from gpu_lessons.overlap import load_overlap

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "data" / "h200x2_overlap.json"
DOC = ROOT / "docs" / "measured" / "h200x2_overlap.md"

if not RECORD.exists():
    pytest.skip("no two-GPU record yet: tests/data/h200x2_overlap.json comes from "
                "tools/device/overlap_nccl.py on two H200s", allow_module_level=True)


@pytest.fixture(scope="module")
def m():
    return load_overlap(RECORD)


def test_it_is_a_real_two_gpu_measurement(m):
    assert not m.synthetic and not m.smoke_test
    assert m.world_size >= 2 and m.backend == "nccl"
    assert all("H200" in name for name in m.gpu_names)
    env = m.meta["env"]
    assert all(env.get(k) == v for k, v in multigpu.NVLS_OFF.items())
    assert m.meta.get("nccl") and m.meta.get("torch") and m.meta.get("driver")


def test_bus_bandwidth_is_physical(m):
    # bus bandwidth cannot exceed one direction of the GPU's NVLink (H200 SXM: 450 GB/s)
    peak = system.LINKS["nvlink4"][0] / 1e9
    assert all(0 < p.busbw_gbs <= peak for p in m.allreduce)
    # and grows with size towards its plateau (small all-reduces are latency-bound)
    assert m.allreduce[-1].busbw_gbs > m.allreduce[0].busbw_gbs


def test_one_bucket_exposes_the_whole_all_reduce(m):
    # with one bucket the all-reduce starts after the last GEMM: nothing can overlap, so the
    # exposed time is the all-reduce of every gradient, measured alone in phase (b)
    total = m.config.total_grad_bytes
    alone = {p.nbytes: p.time_us for p in m.allreduce}
    last = m.points[-1]
    assert last.n_buckets == 1 and last.slowdown_us < 0.05 * last.exposed_us
    if total in alone:
        assert last.exposed_us == pytest.approx(alone[total], rel=0.2)


def test_the_docs_show_this_record(m):
    assert DOC.read_text() == overlap_model.report_markdown(m)


def test_each_point_agrees_or_the_docs_say_why(m):
    cmp_ = m.compare()
    text = DOC.read_text()
    for r, note in zip([r for r in cmp_.rows if not r.within()], cmp_.notes, strict=True):
        assert note in text, r
