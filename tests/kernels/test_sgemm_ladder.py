"""The matrix-multiply ladder's worked kernels (``solutions/puzzle_kernels.py``) as the GPU
gets them: their CUDA translations compute on the CPU (g++) bit for bit what the simulator
computes, with random floats, and NVRTC's machine code for sm_90 is what each rung claims
(registers within 2 blocks of 256 threads an SM, no local memory, 128-bit shared loads from the
float4 rung on, 512 FFMA in an unrolled k-step of the 8 x 8 rungs)."""

import importlib.util
from pathlib import Path

import cuda_cpu as cpu
import numpy as np
import pytest

from gpu_lessons import puzzles
from gpu_lessons.kernels import compile, nvrtc, run, to_cuda

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                               ROOT / "solutions" / "puzzle_kernels.py")
REF = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(REF)

LADDER = ("sgemm_1d_blocktile", "sgemm_2d_blocktile", "sgemm_vectorized",
          "sgemm_double_buffered", "sgemm_warptile")
needs_nvrtc = pytest.mark.skipif(nvrtc.newest_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")


def _args(pid, m, n, k, seed=3):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(m * k).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float32)
    return a, b, np.zeros(m * n, np.float32), m, n, k


@pytest.mark.skipif(not cpu.available(), reason="g++ is not installed")
@pytest.mark.parametrize("pid", LADDER)
def test_the_translation_computes_what_the_simulator_computes(pid):
    """Two blocks along m, k = 16 (both stages of the double-buffered rungs): every rounding
    of every multiply and add agrees, so the order of the sums is the same."""
    p = puzzles.find(pid)
    tile = p.sizes[0]["m"]
    a, b, c_sim, m, n, k = _args(pid, 2 * tile, tile, 16)
    c_cpu = c_sim.copy()
    grid, block = p.launch(m=m, n=n, k=k)
    kernel = getattr(REF, p.kernel_name)
    run(kernel, grid, block, a, b, c_sim, m, n, k, max_instructions=p.max_instructions)
    np.testing.assert_allclose(c_sim, (a.reshape(m, k) @ b.reshape(k, n)).ravel(), rtol=1e-4,
                               atol=1e-4)
    cpu.run_cpu(to_cuda(kernel, a, b, c_cpu, m, n, k), grid, block, a, b, c_cpu, m, n, k)
    np.testing.assert_array_equal(c_cpu.view(np.uint32), c_sim.view(np.uint32))


@needs_nvrtc
@pytest.mark.parametrize("pid", LADDER)
def test_nvrtc_keeps_the_thread_tiles_in_registers(pid):
    p = puzzles.find(pid)
    size = p.sizes[0]
    ck = compile(getattr(REF, p.kernel_name), *_args(pid, **size), exact=False)
    sass = [line.text for line in ck.sass]
    if pid == "sgemm_warptile":
        # two unrolled stages of 8 x 64 multiply-adds within 128 registers: ptxas parks a few
        # index values in local memory, read a few times a turn of the k loop (2 x 512 FFMA)
        assert ck.local_bytes <= 32 and sum("LDL" in s for s in sass) <= 8, pid
        assert sum("FFMA" in s for s in sass) >= 2 * 8 * 64
    else:
        assert ck.local_bytes == 0 and ck.spill_store_bytes == 0, pid
    ffma = sum("FFMA" in s for s in sass)
    lds128 = sum("LDS.128" in s for s in sass)
    if pid == "sgemm_1d_blocktile":   # 8 accumulators; one k-step of 8 x 8 multiply-adds
        assert ck.registers_per_thread <= 64 and ffma >= 64
        return
    # 64 accumulators; 2 blocks of 256 threads fit the 65,536 registers of an SM
    assert 64 < ck.registers_per_thread <= 128, (pid, ck.registers_per_thread)
    assert ffma >= 8 * 64, pid       # the unrolled k-step: 8 x 64 multiply-adds
    if pid != "sgemm_2d_blocktile":  # 4 float4 operand loads a k-step, 8 k-steps
        assert lds128 >= 8 * 4, pid


def test_the_device_tool_launches_each_rung_as_its_puzzle_does():
    """tools/device/sgemm_h200.py passes the arrays and sizes in the puzzle's order."""
    spec = importlib.util.spec_from_file_location(
        "sgemm_h200", ROOT / "tools" / "device" / "sgemm_h200.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.RUNGS[3:] == LADDER
    for name in tool.CONTROLS:   # the controls compute the product (k a multiple of 16)
        p, kernel = tool._kernel(REF, name)
        assert p.launch(m=256, n=256, k=16) == ((2, 2), 256)
        assert puzzles.evaluate("sgemm_warptile", kernel).correct, name
    assert [puzzles.find(pid).id for pid in tool.RUNGS]   # every rung is a puzzle
    p = puzzles.find("sgemm_warptile")
    assert tool.launch_args(p, 4096, "A", "B", "C") == ("A", "B", "C", 4096, 4096, 4096)
    assert tool.launch_args(puzzles.find("matmul_tiled"), 64, "A", "B", "C") == \
        ("A", "B", "C", 64)
