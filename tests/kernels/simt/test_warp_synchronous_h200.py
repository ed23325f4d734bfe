"""The simulator's intra-warp race rule against an H200 (tests/data/h200_warp_synchronous.json,
from tools/device/warp_synchronous.py): the warp-synchronous reduction, which the simulator
runs in lockstep and reports as a race between lanes, gave a wrong sum in every block on the
GPU; the same steps ordered by t.syncwarp(), which the simulator passes, gave every sum right."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from gpu_lessons import puzzles
from gpu_lessons.kernels import simt

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((ROOT / "tests" / "data" / "h200_warp_synchronous.json").read_text("utf-8"))


def _script():
    spec = importlib.util.spec_from_file_location(
        "warp_synchronous", ROOT / "tools" / "device" / "warp_synchronous.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


W = _script()


def test_on_the_h200_only_the_kernel_with_syncwarp_was_right():
    by_kernel = {}
    for r in RECORD["runs"]:
        by_kernel.setdefault(r["kernel"], []).append(r)
        assert r["device"] == "NVIDIA H200"
    racy, ordered = by_kernel["warp_synchronous (no t.syncwarp)"], by_kernel["split by t.syncwarp"]
    assert len(racy) == len(ordered) == 4      # two builds x two sizes
    assert all(r["wrong_blocks"] == r["blocks"] for r in racy)
    assert all(r["wrong_blocks"] == 0 for r in ordered)


def test_the_simulator_flags_the_one_the_gpu_got_wrong():
    p = puzzles.find("reduce")
    args = p.make_inputs({"n": 512}, seed=1)
    racy = simt.run(W.warp_synchronous, *p.launch(n=512), *args.values())
    # in lockstep the sums come out right, so only the race rule can tell
    np.testing.assert_allclose(args["out"], p.expected(args)["out"], rtol=1e-5)
    assert racy.races and all(r.within_warp for r in racy.races)
    assert racy.races[0].missing == "t.syncwarp()"
    args = p.make_inputs({"n": 512}, seed=1)
    assert simt.run(W.split_by_syncwarp, *p.launch(n=512), *args.values()).races == ()
    assert puzzles.evaluate("reduce", W.split_by_syncwarp).passed


def test_the_puzzle_check_says_which_barrier_is_missing():
    """Lane 0 reads sdata[1] at the last step, which lane 1 wrote a step before with nothing
    between: the check names both lanes, the line and t.syncwarp(), not t.sync()."""
    from gpu_lessons.puzzles._core import WARP_RACE_SECTION

    r = puzzles.evaluate("reduce", W.warp_synchronous)
    assert r.failure == "race" and not r.correct and str(WARP_RACE_SECTION) in r.message
    assert "race on sdata[1]" in r.message and "of the same warp" in r.message
    assert "a t.syncwarp() is missing" in r.message
    assert r.line == W.warp_synchronous.__code__.co_firstlineno + 14
