"""The performance model against the matrix-multiply ladder's H200 record.

gpu_lessons/data/h200_sgemm_ladder.json timed every rung's worked kernel at n = 2048 (and
4096, 8192) with CuPy's default NVRTC build (FMA contraction on), beside cuBLAS.  Here each rung
is predicted with ``exact=False`` (that build) at n = 2048: registers from NVRTC equal the CUDA
runtime's, and the times stay within the errors docs/performance_model.md quotes.  Nothing in
the model is fitted to this record.
"""

import importlib.util
import inspect
import json
import pathlib

import numpy as np
import pytest

from gpu_lessons.perf.model import _predict

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORD = json.loads((ROOT / "gpu_lessons/data/h200_sgemm_ladder.json").read_text())


def _worked():
    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ladder():
    """rung -> (prediction, internals, measured seconds, recorded registers) at n = 2048."""
    size = next(s for s in RECORD["sizes"] if s["n"] == 2048)
    n = size["n"]
    a = np.ones(n * n, np.float32)     # the values do not change what the rungs do
    c = np.zeros(n * n, np.float32)
    pk = _worked()
    out = {}
    for r in size["rungs"]:
        kernel = getattr(pk, r["kernel"] + "_kernel")
        params = list(inspect.signature(kernel).parameters)[1:]
        args = (a, a, c, n) if len(params) == 4 else (a, a, c, n, n, n)
        pred, x = _predict(kernel, tuple(r["grid"]), tuple(r["block"]), args, "H200", False,
                           None, 8, 4.0)
        out[r["kernel"]] = (pred, x, r["seconds"], r["registers"])
    return out


def test_every_rung_is_predicted_with_its_real_register_count(ladder):
    assert len(ladder) == 8
    for name, (pred, x, _, regs) in ladder.items():
        assert x["registers"] == regs, name
        assert not pred.exact


def test_the_rungs_times_within_the_recorded_errors(ladder):
    ratios = {name: v[0].seconds / v[2] for name, v in ladder.items()}
    within = [n for n, r in ratios.items() if abs(r - 1) <= 0.25]
    assert len(within) >= 7, ratios
    assert max(max(ratios.values()), 1 / min(ratios.values())) < 1.4, ratios
    # the ladder's order: every blocked rung predicted faster than the one-row tile
    assert ladder["sgemm_warptile"][0].seconds < ladder["sgemm_1d_blocktile"][0].seconds
    assert ladder["sgemm_2d_blocktile"][0].seconds < ladder["sgemm_1d_blocktile"][0].seconds


def test_the_tiled_rungs_are_limited_on_chip(ladder):
    # between the barriers of a k step the pipes, not the loads, take the time
    for name in ("sgemm_2d_blocktile", "sgemm_vectorized", "sgemm_warptile"):
        pred = ladder[name][0]
        chain, onchip = pred.evidence["phases between barriers"][0]
        assert onchip > chain, name
        assert pred.limiter in ("FP32 pipe", "integer/ALU issue", "shared memory"), name
