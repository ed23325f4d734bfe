"""The H200's tensor cores beside the simulator: the record of ``tools/device/mma_h200.py``.

The inputs are regenerated from the record's seeds and the simulator runs here; the GPU's
output bits come from the record.  ldmatrix moves bits and the mma_tile puzzle's small whole
numbers make every sum exact, so those agree bit for bit (the fragment layouts are the
hardware's); on random inputs the tensor cores' sums differ from the simulator's float32 sums
in the last bits (more ulp where a long sum cancels to a small result), and both stay within
float32's rounding bound of the exact product."""

import base64
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORD_PATH = ROOT / "tests" / "data" / "mma_h200.json"
if not RECORD_PATH.exists():
    pytest.skip("tests/data/mma_h200.json is not recorded yet: run python3 "
                "tools/device/mma_h200.py --out mma_h200.json on a GPU with CuPy and copy it "
                "there", allow_module_level=True)
RECORD = json.loads(RECORD_PATH.read_text())
_spec = importlib.util.spec_from_file_location("mma_h200", ROOT / "tools/device/mma_h200.py")
TOOL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TOOL)
CASES = {name: (kernel, make, outputs, exact, launch)
         for name, kernel, make, outputs, exact, launch in TOOL.cases()}


def _gpu(out) -> np.ndarray:
    raw = base64.b64decode(out["bits_base64"])
    bits = np.frombuffer(raw, "<u2" if out["dtype"] != "float32" else "<u4").copy()
    return bits.view(np.dtype(out["dtype"]) if out["dtype"] != "bfloat16" else
                     TOOL.BF16).reshape(out["shape"])


def test_the_record_is_an_h200_run_of_every_kernel_and_seed():
    assert RECORD["gpu"] == "NVIDIA H200" and RECORD["cc"] == "9.0"
    assert RECORD["options"] == ["-fmad=false"]
    assert {(r["kernel"], r["seed"]) for r in RECORD["runs"]} == \
        {(name, s) for name in CASES for s in RECORD["seeds"]}


@pytest.mark.parametrize("row", RECORD["runs"], ids=lambda r: f"{r['kernel']}-{r['seed']}")
def test_the_gpu_beside_the_simulator_run_here(row):
    kernel, make, outputs, exact, launch = CASES[row["kernel"]]
    args = make(row["seed"])
    want = TOOL.simulate(kernel, args, outputs, launch)
    for name in outputs:
        got, rec = _gpu(row["outputs"][name]), row["outputs"][name]
        equal = int((TOOL.bits_of(got) == TOOL.bits_of(want[name])).sum())
        assert equal == rec["equal"] and TOOL.ulps(got, want[name]) == rec["max_ulp"]
        if exact:
            np.testing.assert_array_equal(TOOL.bits_of(got), TOOL.bits_of(want[name]))
        else:
            # both within float32's bound for k additions of the exact products
            m, kk = args.get("m", 16), args.get("k", 16)
            a = args["a"].astype(np.float64).reshape(m, kk)
            b = args["b"].astype(np.float64).reshape(kk, -1)
            c = args["c"] if name == "d" else 0.0
            exact_d = a @ b + c
            bound = kk * 2.0**-24 * (np.abs(a) @ np.abs(b) + np.abs(c))
            shape = got.shape
            assert np.all(np.abs(got - exact_d.reshape(shape)) <= bound.reshape(shape))
            assert np.all(np.abs(want[name] - exact_d.reshape(shape)) <= bound.reshape(shape))
    if row["kernel"] in TOOL.PUZZLES:
        assert row["matches_spec"]


def test_random_inputs_show_the_tensor_cores_own_rounding():
    """Not a promise of the hardware: what this H200 did, a few ulp from the simulator's sums."""
    worst = {r["kernel"]: 0 for r in RECORD["runs"]}
    for r in RECORD["runs"]:
        worst[r["kernel"]] = max(worst[r["kernel"]],
                                 *(o["max_ulp"] for o in r["outputs"].values()))
    assert worst["mma_tile"] == worst["hgemm_mma"] == worst["ldmatrix_x4_x2_x1"] == 0
    assert 0 < worst["mma_tile_random_bf16"] < 100 and 0 < worst["tile_f16_random"] < 100
