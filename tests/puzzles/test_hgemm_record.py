"""The hgemm_mma worked kernel against cuBLAS BF16, as one H200 run recorded it.

tests/data/h200_hgemm.json comes from tools/device/hgemm_h200.py: the puzzle's worked kernel,
in the course's kernel language, timed with run_on_gpu beside torch.matmul (cuBLAS) on the same
bfloat16 matrices, and the variants of its tile tried in the same run.  Here the record's rates
are recomputed from its times, its answers checked against the tolerance of a float32 product,
the kernel it timed checked to be the worked kernel of today, and the share of cuBLAS it
reached is the one docs/measured/tensor_cores.md quotes.
"""

import importlib.util
import inspect
import json
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORD = json.loads((ROOT / "tests" / "data" / "h200_hgemm.json").read_text())


def _worked():
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.hgemm_mma_kernel


@pytest.mark.parametrize("row", RECORD["sizes"] + RECORD["configs"],
                         ids=lambda r: f"n={r['n']}-{r.get('tile', 'worked')}")
def test_rates_are_the_record_s_times(row):
    flops = 2 * row["n"] ** 3
    assert row["kernel_s"] == pytest.approx(float(np.median(row["kernel_samples_s"])))
    assert row["kernel_tflops"] == pytest.approx(flops / row["kernel_s"] / 1e12)
    if "cublas_s" in row:
        assert row["cublas_s"] == pytest.approx(float(np.median(row["cublas_samples_s"])))
        assert row["cublas_tflops"] == pytest.approx(flops / row["cublas_s"] / 1e12)
        assert row["of_cublas"] == pytest.approx(row["cublas_s"] / row["kernel_s"])
    # float32 accumulation of bfloat16 products: within 1e-4 of the largest value
    assert row["max_rel_error"] < 1e-4


def test_the_record_timed_today_s_worked_kernel():
    assert RECORD["kernel_source"] == inspect.getsource(_worked())
    # its shared memory: two stages of a (128 x 40) and b (32 x 136), 2 bytes an element
    assert RECORD["shared_bytes"] == 2 * (128 * 40 + 32 * 136) * 2 == 37_888
    assert (RECORD["tile"], RECORD["stages"], RECORD["threads"]) == ([128, 128, 32], 2, 256)


def test_the_share_of_cublas_the_docs_quote():
    assert RECORD["gpu"].startswith("NVIDIA H200")
    at = {r["n"]: r for r in RECORD["sizes"]}
    # docs/measured/tensor_cores.md: 269.1 TFLOP/s against 725.4, 37.1 % at n = 4096
    assert at[4096]["kernel_tflops"] == pytest.approx(269.1, abs=0.05)
    assert at[4096]["cublas_tflops"] == pytest.approx(725.4, abs=0.05)
    assert at[4096]["of_cublas"] == pytest.approx(0.371, abs=0.0005)
    # 4.2 times the 32 x 32 tile's 64.3 TFLOP/s, but short of the 70 % of cuBLAS aimed at
    assert 4 * 64.3 < at[4096]["kernel_tflops"] < 0.70 * at[4096]["cublas_tflops"]


def test_the_worked_tile_was_the_fastest_of_two_stages():
    worked = {r["n"]: r for r in RECORD["sizes"]}[4096]["kernel_s"]
    two = [r for r in RECORD["configs"] if r["stages"] == 2]
    fastest = min(two, key=lambda r: r["kernel_s"])
    assert fastest["tile"] == [128, 128, 32] and fastest["launch_bounds_blocks"] == 0
    # the worked kernel is that config; two timings of it in the run agree within 2 %
    assert fastest["kernel_s"] == pytest.approx(worked, rel=0.02)


def test_a_third_stage_buys_little():
    """Three stages of the same tile (56,832 B of dynamic shared memory: 3 x (128 x 40 +
    32 x 136) x 2 B) are 5 % faster, the same answers: the pipeline's depth is not what keeps
    the kernel from 70 % of cuBLAS."""
    three = next(r for r in RECORD["configs"] if r["stages"] == 3)
    two = next(r for r in RECORD["configs"] if r["stages"] == 2 and r["tile"] == [128, 128, 32]
               and r["launch_bounds_blocks"] == 0)
    assert three["shared_bytes"] == 3 * (128 * 40 + 32 * 136) * 2 == 56_832
    assert 1.0 < two["kernel_s"] / three["kernel_s"] < 1.1
    assert three["of_cublas"] < 0.70
