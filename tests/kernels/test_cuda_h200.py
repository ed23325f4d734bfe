"""The translated kernels on an H200: the committed record of tools/device/cuda_translation.py.

tests/data/h200_cuda_translation.json is written on the GPU machine by
``python3 tools/device/cuda_translation.py --out $OUT/cuda_translation.json``; until it is
committed the replay test skips.  The report code is tested on a small record made here.
"""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "data" / "h200_cuda_translation.json"

spec = importlib.util.spec_from_file_location("cuda_translation",
                                              ROOT / "tools" / "device" / "cuda_translation.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def _timing(us):
    return {"samples": [us * 1e-6] * 3, "warmup": 2, "method": "CUDA events"}


def _record():
    teaching = {"kernel": "reduce_sequential", "sim_sectors_per_request": 4.0,
                "sim_shared_wavefronts": 200, "sim_bank_conflicts": 0,
                "sim_simt_efficiency": 0.5,
                "timings": {"translated_exact": _timing(110.0), "translated_default": _timing(
                    105.0), "hand_written": _timing(100.0)}}
    slow = {**teaching, "kernel": "transpose_naive",
            "timings": {"translated_exact": _timing(300.0), "translated_default": _timing(
                130.0), "hand_written": _timing(100.0)}}
    puzzle = {"puzzle": "map", "sim_bit_identical": True, "sim_close": True, "spec_close": True,
              "gpu_size": {"n": 1 << 24}, "timing": _timing(42.0)}
    broken = {"puzzle": "softmax", "error": "RuntimeError: boom"}
    return {"date": "2026-01-01T00:00:00Z", "device": "NVIDIA H200", "cupy": "14.0",
            "nvrtc": [13, 0], "repeats": 3, "puzzles": [puzzle, broken],
            "teaching": [teaching, slow]}


def test_summary_and_report_of_a_record():
    data = _record()
    s = tool.summary(data)
    assert s["puzzle_errors"] == ["softmax"]
    assert s["ratios"] == pytest.approx({"reduce_sequential": 1.05, "transpose_naive": 1.30})
    assert s["outside_target"] == ["transpose_naive"]          # 30 % > the 15 % target
    text = tool.report(data)
    assert "| reduce_sequential | 4.00 | 0 | 50.0% | 110.0 µs | 105.0 µs | 100.0 µs | 1.05 |" \
        in text
    assert "| map | yes | yes | n=16,777,216 | 42.0 µs |" in text
    assert "| softmax | error: RuntimeError: boom" in text


@pytest.mark.skipif(not RECORD.exists(), reason="the H200 record is not committed yet "
                                                "(tools/device/cuda_translation.py writes it)")
def test_recorded_h200_run_meets_the_targets():
    data = json.loads(RECORD.read_text())
    s = tool.summary(data)
    assert not s["puzzle_errors"] and not s["teaching_errors"], s
    assert not s["spec_mismatch"], s
    assert not s["not_close_to_simulator"], s
    # bit for bit except where the kernel calls exp (recorded as a tolerance, with its reason)
    for r in data["puzzles"]:
        if not r["sim_bit_identical"]:
            assert r["tolerance_used"], r["puzzle"]
    assert not s["outside_target"], {k: round(v, 3) for k, v in s["ratios"].items()}
    doc = (ROOT / "docs" / "measured" / "h200.md").read_text()
    for line in tool.report(data).splitlines():
        if line.startswith("| ") and "µs" in line:
            assert line in doc, f"docs/measured/h200.md lacks: {line}"
