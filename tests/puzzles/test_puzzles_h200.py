"""The puzzles' GPU cells as run on an H200 (tests/data/h200_puzzle_gpu_runs.json, written from
the solution notebooks' output by tools/device/run_notebooks.py): every worked kernel matched
its spec there, ran the launch the puzzle defines, and the prediction printed beside it is
what the models compute here, on the CPU, from the same kernel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpu_lessons import puzzles, roofline
from gpu_lessons.hardware import gpu
from gpu_lessons.puzzles.on_gpu import _array_bytes, predicted_work

ROOT = Path(__file__).resolve().parents[2]
RECORD = json.loads((ROOT / "tests" / "data" / "h200_puzzle_gpu_runs.json").read_text("utf-8"))
RUNS = {r["puzzle"]: r for r in RECORD["runs"]}
H200_SMS = 132


def _solutions():
    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = _solutions()


def _choices(p, run) -> dict:
    # the one launch choice (occupancy's block) is the block the run used
    return {name: run["block"][0] for name in p.choices}


#: The matrix-multiply ladder ran on the H200 in its own record, beside cuBLAS
#: (tests/puzzles/test_sgemm_record.py).
LADDER = ("sgemm_1d_blocktile", "sgemm_2d_blocktile", "sgemm_vectorized", "sgemm_double_buffered",
          "sgemm_warptile")


#: The tensor-core puzzles ran on the H200 in tools/device/mma_h200.py's record
#: (tests/kernels/test_mma_h200.py), the attention puzzles in tools/device/attention_h200.py's
#: (tests/puzzles/test_attention_record.py).
OWN_RECORDS = (*LADDER, "mma_tile", "hgemm_mma", "flash_attention", "decode_attention")


def test_every_puzzle_ran_and_matched_its_spec():
    assert list(RUNS) == [p.id for p in puzzles.puzzles() if p.id not in OWN_RECORDS]
    ladder = json.loads((ROOT / "gpu_lessons" / "data" / "h200_sgemm_ladder.json").read_text())
    assert {k["kernel"] for row in ladder["sizes"] for k in row["rungs"]} >= set(LADDER)
    assert all(r["matches_spec"] for r in RUNS.values())
    assert RECORD["gpu"] == "NVIDIA H200"


@pytest.mark.parametrize("pid", list(RUNS))
def test_the_run_used_the_puzzle_s_launch_and_the_models_prediction(pid):
    p, run = puzzles.find(pid), RUNS[pid]
    size, choices = run["size"], _choices(p, run)
    launch = (p.gpu_launch(H200_SMS, **size, **choices) if p.gpu_launch
              else p.launch(**size, **choices))
    grid, block = (tuple(d) if isinstance(d, tuple) else (d,) for d in launch)
    assert (list(grid), list(block)) == (run["grid"], run["block"])
    h200 = gpu("h200")
    nbytes = _array_bytes(p.make_inputs(size))
    _, moved, flops = predicted_work(p, getattr(REF, p.kernel_name), size, nbytes, **choices)
    predicted = roofline.kernel_time(flops, moved, h200.peak_flops("fp32"), h200.bandwidth)
    # the record holds the printed time, 3 significant figures
    assert predicted * 1e6 == pytest.approx(run["predicted_us"], rel=5e-3)


def test_the_figures_the_guide_quotes():
    """The grid-stride loop fills the GPU (47 µs; 4 blocks of 64 threads took 24.2 ms before
    its GPU launch did), ILP moves the same bytes 2.4x faster than one load per thread, and
    the matrix products run at 5-9 TFLOP/s of FP32 (2 n³ FLOPs), far from memory's time."""
    assert RUNS["grid_stride"]["grid"] == [32 * H200_SMS]
    assert RUNS["grid_stride"]["measured_us"] < 2 * RUNS["grid_stride"]["predicted_us"]
    assert RUNS["blocks"]["measured_us"] / RUNS["ilp"]["measured_us"] == pytest.approx(2.4, abs=0.1)
    for pid in ("matmul_naive", "matmul_tiled", "matmul_register"):
        n = RUNS[pid]["size"]["n"]
        rate = 2 * n**3 / (RUNS[pid]["measured_us"] * 1e-6)
        assert 4e12 < rate < 10e12


def test_the_model_s_bytes_by_hand():
    """predicted_work against arithmetic done here, not by the code under test.  ``blocks``
    (n = 2²⁴ floats) reads and writes each float once in whole sectors: 2 x 4 x 2²⁴ B =
    134,217,728 B, 27.96 µs at 4.8 TB/s.  ``reduce`` reads 4 x 2²⁴ B and each of its 65,536
    blocks stores one float, a whole 32-byte sector: 67,108,864 + 2,097,152 = 69,206,016 B,
    14.42 µs."""
    for pid, nbytes, us in (("blocks", 134_217_728, 27.96), ("reduce", 69_206_016, 14.42)):
        p, run = puzzles.find(pid), RUNS[pid]
        size = run["size"]
        _, moved, flops = predicted_work(p, getattr(REF, p.kernel_name), size,
                                         _array_bytes(p.make_inputs(size)))
        assert moved == nbytes and flops == 0.0
        assert moved / 4.8e12 * 1e6 == pytest.approx(us, abs=0.01)
        assert run["predicted_us"] == pytest.approx(us, rel=5e-3)
