"""Every teaching kernel and every puzzle's worked kernel translates to CUDA C that NVRTC compiles
to PTX for sm_90 (Hopper) and sm_80 (Ampere), without a GPU (the nvidia-cuda-nvrtc-cu12 wheel of
the test extra); and the test extra and environment.yml both list that wheel."""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from gpu_lessons import kernels
from gpu_lessons.kernels import nvrtc
from gpu_lessons.kernels.simt import examples as simt_kernels

ROOT = Path(__file__).resolve().parents[2]
needs_nvrtc = pytest.mark.skipif(nvrtc.nvrtc_library() is None,
                                 reason="NVRTC is not installed (the test extra brings it)")
ARCHS = ("sm_90", "sm_80")


def _sources():
    out = {}
    for name, k in simt_kernels.KERNELS.items():
        out[f"teaching/{name}"] = kernels.to_cuda(k, *simt_kernels.cuda_launch(name).inputs)
    path = ROOT / "solutions" / "puzzle_kernels.py"
    try:
        from gpu_lessons import puzzles
    except ImportError:
        return out
    if path.exists():
        spec = importlib.util.spec_from_file_location("puzzle_kernels", path)
        pk = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pk)
        for p in puzzles.puzzles():
            args = p.make_inputs(p.sizes[0], seed=0)
            out[f"puzzle/{p.id}"] = kernels.to_cuda(getattr(pk, p.kernel_name), *args.values())
    return out


SOURCES = _sources()


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_translation_compiles_to_ptx(name, arch):
    src = SOURCES[name]
    result = nvrtc.compile_ptx(src, arch)
    assert result.ok, f"{name} for {arch}:\n{result.log}\n{src}"
    assert f".target {arch}" in result.ptx
    assert f".entry {src.kernel_name}" in result.ptx   # extern "C": the name is not mangled


def test_every_puzzle_is_covered_when_the_puzzles_exist():
    puzzles = pytest.importorskip("gpu_lessons.puzzles")
    if not (ROOT / "solutions" / "puzzle_kernels.py").exists():
        pytest.skip("no worked kernels in this checkout")
    assert {f"puzzle/{p.id}" for p in puzzles.puzzles()} <= set(SOURCES)


@needs_nvrtc
def test_hand_written_teaching_kernels_compile_too_and_errors_come_back_as_a_log():
    for name, text in simt_kernels.SIMT_CUDA_SOURCES.items():
        assert nvrtc.compile_ptx(text, "sm_90").ok, name
    bad = nvrtc.compile_ptx('extern "C" __global__ void k() { undeclared = 1; }', "sm_90")
    assert not bad.ok and "undeclared" in bad.log


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_nvrtc_wheel_is_in_the_test_extra_and_environment_yml():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    test_extra = {_name(d) for d in project["optional-dependencies"]["test"]}
    assert "nvidia-cuda-nvrtc-cu12" in test_extra
    env = (ROOT / "environment.yml").read_text()
    pinned = [line for line in env.splitlines() if "nvidia-cuda-nvrtc-cu12" in line]
    spec = next(d for d in project["optional-dependencies"]["test"] if "nvrtc" in d)
    assert pinned and spec.replace(" ", "") in pinned[0].replace(" ", "")
