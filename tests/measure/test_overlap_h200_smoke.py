"""The overlap measurement's code path, run on one H200 (a smoke test, not a measurement).

``tests/data/h200_overlap_smoke.json`` is what ``python3 tools/device/overlap_nccl.py --quick
--out $OUT/overlap_smoke.json`` wrote on a machine with one H200: NCCL, CUDA events, the
second stream and the bucketed all-reduces all ran for real, but an all-reduce over one rank
moves nothing between GPUs, so the record must say so wherever it is shown
(``docs/measured/h200_overlap_smoke.md``).  The two-GPU record is replayed by
``tests/measure/test_overlap_h200x2.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_lessons.hardware import gpu
from gpu_lessons.overlap import load_overlap, report_markdown

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "data" / "h200_overlap_smoke.json"
DOC = ROOT / "docs" / "measured" / "h200_overlap_smoke.md"


def test_the_record_is_labelled_a_one_gpu_smoke_test():
    m = load_overlap(RECORD)
    assert m.smoke_test and not m.synthetic
    assert m.world_size == 1 and m.backend == "nccl" and m.gpu_names == ("NVIDIA H200",)
    env = m.meta["env"]
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_the_compute_phase_ran_below_the_dense_bf16_peak():
    # 32 GEMMs of 4096^3 in BF16: 32 x 2 x 4096^3 FLOPs over the measured time; a real GEMM
    # cannot beat the dense peak (989.4 TFLOP/s for the H200's BF16 tensor cores).
    m = load_overlap(RECORD)
    flops = 32 * 2 * 4096**3
    rate = flops / (m.compute_us * 1e-6)
    assert rate == pytest.approx(m.gemm_tflops * 1e12, rel=1e-3)
    assert 0.5 * gpu("h200").peak_flops("bf16") < rate < gpu("h200").peak_flops("bf16")


def test_the_report_says_no_communication_was_measured():
    text = report_markdown(load_overlap(RECORD))
    assert "smoke test" in text.lower() and "not a measurement of communication" in text
    assert DOC.read_text(encoding="utf-8") == text
