"""``gpu_lessons.kernels.beside_simulator``: a kernel in the simulator and on a GPU, side by side.

There is no GPU here, so the GPU is played by the translated CUDA C compiled with g++ and run on
the CPU (``tests/cuda_cpu.py``, an execution independent of the simulator), with a made-up
timing.  The references are hand counts for a copy-and-scale kernel over 256 floats and the
H200 SXM's catalog bandwidth (NVIDIA H200 datasheet: 4.8 TB/s).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_lessons import kernels
from gpu_lessons.kernels import gpu as kernels_gpu
from gpu_lessons.measure import SKIP_LINE
from gpu_lessons.measure import gpu as gpu_module
from gpu_lessons.measure.timing import Timing

cpu = pytest.importorskip("cuda_cpu", reason="tests/cuda_cpu.py is the CPU harness")
needs_cxx = pytest.mark.skipif(not cpu.available(), reason="no C++20 compiler for the CPU harness")


def scale(t, x, out, n):
    i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
    t.return_if(i >= n)
    out[i] = x[i] * 3.0


def _inputs():
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    return x, np.zeros(256, np.float32)


def _fake_gpu(monkeypatch, device="NVIDIA H200", tamper=None):
    """Make ``run_on_gpu`` run the translated source on the CPU, 5 µs per run."""
    def run(kernel, grid, block, *args, repeats=20, warmup=2, exact=True):
        source = kernels.to_cuda(kernel, *args)
        cpu.run_cpu(source, grid, block, *args)
        if tamper is not None:
            tamper(args)
        return kernels.GpuRun(source.kernel_name, (grid, 1, 1), (block, 1, 1), device,
                           Timing((5e-6,) * repeats, warmup, "CUDA events"), 0, 10, exact)

    monkeypatch.setattr(gpu_module, "skip_line", lambda: None)
    monkeypatch.setattr(kernels_gpu, "run_on_gpu", run)


def test_without_a_gpu_it_translates_then_prints_the_skip_line(capsys, monkeypatch):
    monkeypatch.setattr(gpu_module, "skip_line", lambda: SKIP_LINE.format(why="test"))
    x, out = _inputs()
    assert kernels.beside_simulator(scale, 2, 128, x, out, 256) is None
    assert capsys.readouterr().out.strip() == SKIP_LINE.format(why="test")
    assert not out.any()                                  # nothing ran

    def outside_the_language(t, x, out, n):
        import os  # noqa: F401

    with pytest.raises(kernels.KernelLanguageError, match="`import os` is not part of the kernel"):
        kernels.beside_simulator(outside_the_language, 2, 128, x, out, 256)


@needs_cxx
def test_matches_the_simulator_and_sets_the_time_beside_the_models(monkeypatch):
    _fake_gpu(monkeypatch)
    x, out = _inputs()
    r = kernels.beside_simulator(scale, 2, 128, x, out, 256)
    assert r.matches and r.difference is None
    assert np.array_equal(out, x * np.float32(3.0))       # the "GPU"'s results, copied back
    # by hand: 8 warps, each loads 32 floats (4 sectors) and stores 32 (4 sectors)
    assert r.sectors_per_request == 4.0
    assert r.moved_bytes == 8 * (4 + 4) * 32 == 2048
    assert r.shared_wavefronts == 0 and r.bank_conflicts == 0
    assert r.bandwidth == pytest.approx(4.8e12)
    assert r.predicted_seconds == pytest.approx(2048 / 4.8e12)
    rows = {row.label: row.value for row in r.readout_rows()}
    assert rows["output"] == "the simulator's, bit for bit"
    assert rows["measured kernel time (median, CUDA events)"] == pytest.approx(5e-6)
    assert rows["timed runs"] == 20 and rows["memory model: bytes moved (32 B per sector)"] == 2048
    # 2048 B / 4.8 TB/s = 0.427 ns; 5 µs / 0.427 ns = 11,719; under 1 µs: the launch's time
    assert rows["memory model: time at the catalog bandwidth"] == pytest.approx(0.42667e-9,
                                                                                rel=1e-4)
    assert rows["measured / predicted"] == pytest.approx(11_718.75)
    assert "the measured time is the launch's" in rows["note"]


@needs_cxx
def test_a_difference_is_named_with_its_element(monkeypatch):
    def tamper(args):
        args[1][37] = 1.5

    _fake_gpu(monkeypatch, tamper=tamper)
    x, out = _inputs()
    r = kernels.beside_simulator(scale, 2, 128, x, out, 256)
    assert not r.matches
    assert r.difference.startswith("out[37] is 1.5 on the GPU, ")
    assert r.readout_rows()[0].value.startswith("DIFFERS from the simulator's: out[37]")


@needs_cxx
def test_a_gpu_outside_the_catalog_gets_no_model_time(monkeypatch):
    _fake_gpu(monkeypatch, device="Some Future GPU")
    x, out = _inputs()
    r = kernels.beside_simulator(scale, 2, 128, x, out, 256)
    assert r.predicted_seconds is None and r.bandwidth is None
    rows = {row.label: row.value for row in r.readout_rows()}
    assert "not in the course's GPU catalog" in rows["memory model: time"]
