"""Kernels written as a Python programmer writes them, on an H200 (tests/data/h200_plain_python.json,
written by tools/device/plain_python_h200.py): the GPU gave the simulator's output.

Every kernel of tests/kernels/plain_python_kernels.py, three random inputs each, ran through
``gpu_lessons.kernels.run`` and through ``run_on_gpu`` (NVRTC through CuPy, ``-fmad=false``).
"""

from __future__ import annotations

import json
from pathlib import Path

import plain_python_kernels as ppk

RECORD = json.loads((Path(__file__).resolve().parents[2] / "tests" / "data"
                     / "h200_plain_python.json").read_text("utf-8"))
ROWS = RECORD["rows"]

#: ``transcendental`` sums five float32 functions whose CUDA implementations are within 1 to 2
#: ulps each (Programming Guide, "Mathematical Functions": expf, tanhf, sinf, cosf 2 ulps; logf
#: 1 ulp); their errors add, and where terms cancel, a term's ulp is several ulps of the sum, so
#: the sum is held to 4 ulps per function and factor of cancellation (5 x 2 x 4 = 40).
TRANSCENDENTAL_ULPS = 40


def test_every_kernel_ran_on_every_seed():
    assert RECORD["meta"]["gpu"] == "NVIDIA H200"
    assert {r["kernel"] for r in ROWS} == set(ppk.CASES)
    assert all(len([r for r in ROWS if r["kernel"] == k]) == 3 for k in ppk.CASES)
    assert not [r for r in ROWS if "error" in r]


def test_the_gpu_gave_the_simulators_bits():
    exact = [r for r in ROWS if ppk.CASES[r["kernel"]].ulps == 0]
    assert len(exact) == 3 * (len(ppk.CASES) - 1)
    assert all(r["matches_simulator"] and r["worst_ulps"] == 0 for r in exact), \
        [r for r in exact if not r["matches_simulator"]]


def test_math_functions_are_within_their_documented_error():
    rows = [r for r in ROWS if r["kernel"] == "transcendental"]
    assert rows and all(0 <= r["worst_ulps"] <= TRANSCENDENTAL_ULPS for r in rows)


def test_every_output_is_numpys():
    assert all(r["matches_numpy"] for r in ROWS)
