"""Kernels written as a Python programmer writes them (tests/kernels/plain_python_kernels.py):
each translates to CUDA C that NVRTC compiles for sm_90 and sm_80, that shows the C the
construct is meant to become, and that computes NumPy's answer when it runs on the CPU (the g++
harness, tests/kernels/cuda_cpu.py) - bit for bit, or within a few ulps for exp-like functions;
and the simulator gives the same bits as the translated C.
"""

import numpy as np
import pytest
from plain_python_kernels import CASES

from gpu_lessons import kernels
from gpu_lessons.kernels import nvrtc

cpu = pytest.importorskip("cuda_cpu", reason="tests/kernels/cuda_cpu.py is the CPU harness")
needs_gxx = pytest.mark.skipif(not cpu.available(), reason="g++ is needed to run CUDA C on the CPU")
needs_nvrtc = pytest.mark.skipif(nvrtc.nvrtc_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")


def _args(name, seed=11):
    return CASES[name].make(np.random.default_rng(seed))


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.fixture(scope="module")
def sources():
    return {name: kernels.to_cuda(c.kernel, *_args(name)) for name, c in CASES.items()}


@pytest.fixture(scope="module")
def launchers(sources):
    names = sorted(sources)
    return dict(zip(names, cpu.build([sources[n] for n in names]), strict=True))


def test_there_are_enough_plain_python_kernels():
    assert len(CASES) >= 15


@pytest.mark.parametrize("name", sorted(CASES))
def test_translation_shows_the_c_of_each_construct(name, sources):
    for text in CASES[name].shows:
        assert text in sources[name].body, f"{name}: {text!r} not in\n{sources[name].body}"


@needs_nvrtc
@pytest.mark.parametrize("arch", ("sm_90", "sm_80"))
def test_every_plain_python_kernel_compiles_with_nvrtc(arch, sources):
    for name, src in sources.items():
        result = nvrtc.compile_ptx(src, arch)
        assert result.ok, f"{name} for {arch}:\n{result.log}\n{src}"
        assert f".entry {src.kernel_name}" in result.ptx


def _check(name, got, expected, ulps):
    if ulps:
        tol = ulps * np.spacing(np.maximum(np.abs(expected), 1).astype(expected.dtype))
        assert np.all(np.abs(got - expected) <= tol), f"{name}:\n{got}\n{expected}"
    else:
        assert got.dtype == expected.dtype, name
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), \
            f"{name}:\n{got}\n{expected}"


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_translated_c_gives_numpys_answer(name, sources, launchers):
    case = CASES[name]
    args = _copy(_args(name))
    expected = case.expected(_copy(args))
    cpu.run_cpu(sources[name], case.grid, case.block, *args, launcher=launchers[name])
    for k, want in expected.items():
        _check(name, args[k], np.asarray(want, dtype=args[k].dtype), case.ulps)


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_gives_the_translations_bits(name, sources, launchers):
    case = CASES[name]
    sim_args, cpu_args = _copy(_args(name)), _copy(_args(name))
    kernels.run(case.kernel, case.grid, case.block, *sim_args)
    cpu.run_cpu(sources[name], case.grid, case.block, *cpu_args, launcher=launchers[name])
    for p, s, c in zip(sources[name].params, sim_args, cpu_args, strict=True):
        if p.kind == "array" and p.written:
            _check(name, s, c, case.ulps)
