"""tools/device/sgemm_h200.py's kernel, on the CPU: its product against NumPy in the simulator,
its shared-memory counts, and what NVRTC makes of it (registers within its launch bounds, no
local memory, 128-bit shared loads)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpu_lessons.kernels import compile, nvrtc, run

TOOL = Path(__file__).resolve().parents[2] / "tools" / "device" / "sgemm_h200.py"
_spec = importlib.util.spec_from_file_location("sgemm_h200", TOOL)
sgemm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sgemm)

needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")


def _problem(n=128):
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (n, n)).astype(np.float32)   # small integers: exact sums
    b = rng.integers(-4, 5, (n, n)).astype(np.float32)
    return a, b, np.zeros((n, n), np.float32), n


def test_the_timed_kernel_computes_the_product_and_its_operand_loads_do_not_conflict():
    a, b, c, n = _problem()
    r = run(sgemm.blocktile_8x8, (1, 1), 256, a.ravel(), b.ravel(), c.ravel(), n)
    np.testing.assert_array_equal(c, a @ b)
    loads = [e for e in r.events if e.kind == "ld.shared"]
    # 8 warps x 16 k-slices x 8 k-steps x 4 float4 operand loads, none bank-conflicted
    assert len(loads) == 8 * (n // 8) * 8 * 4
    assert sum(e.bank_conflicts for e in loads) == 0 and {e.width for e in loads} == {4}


@needs_nvrtc
def test_nvrtc_keeps_its_64_accumulators_in_registers_within_its_launch_bounds():
    a, b, c, n = _problem()
    ck = compile(sgemm.blocktile_8x8, a.ravel(), b.ravel(), c.ravel(), n, exact=False)
    assert ck.local_bytes == 0 and ck.spill_store_bytes == 0
    assert 64 < ck.registers_per_thread <= 128    # 64 accumulators; 2 blocks of 256 threads
    sass = [line.text for line in ck.sass]
    assert any("LDS.128" in s for s in sass)
    ffma = sum("FFMA" in s for s in sass)
    assert ffma >= 8 * 64                     # the unrolled k-step: 8 x 64 multiply-adds
