"""The worked kernels' registers and SASS against an H200: the committed record of
``tools/device/registers_h200.py`` (tests/data/h200_registers.json), replayed.

On the H200 the cubin ``compile(kernel, *args, ftz=False)`` wrote here was loaded by the driver
and its attributes read twice (``cuFuncGetAttribute`` and the runtime's
``cudaFuncGetAttributes``); the device's own NVRTC compiled the same source to the same SASS.
``compile()``'s defaults add CuPy's ``-ftz=true``, as every ``run_on_gpu`` compile does: those
registers are checked against what CuPy's own compile of the same source had on the H200 in the
same run.  With the same NVRTC installed (the test extra pins it)
every kernel is compiled again and must give the recorded numbers and instructions.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from gpu_lessons import puzzles
from gpu_lessons.kernels import compile, compiled, nvrtc

ROOT = Path(__file__).resolve().parents[2]
RECORD = json.loads((ROOT / "tests" / "data" / "h200_registers.json").read_text())
ROWS = {r["puzzle"]: r for r in RECORD["rows"]}


def _worked():
    path = ROOT / "solutions" / "puzzle_kernels.py"
    if not path.exists():
        pytest.skip("solutions/puzzle_kernels.py is not in this checkout")
    spec = importlib.util.spec_from_file_location("puzzle_kernels", path)
    pk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pk)
    return pk


#: Puzzles written after this record: their H200 registers are in tests/data/h200_attention.json
#: (run_on_gpu's build, tests/puzzles/test_attention_record.py).
LATER = ("flash_attention", "decode_attention")


def test_the_record_covers_every_puzzle_and_says_where_it_ran():
    assert sorted(ROWS) == sorted(p.id for p in puzzles.puzzles() if p.id not in LATER)
    dev = RECORD["device"]
    assert dev["gpu"] == "NVIDIA H200" and dev["cc"] == "9.0"
    assert "580.159.04" in dev["nvidia_smi"] and dev["cupy"] == "14.2.0"
    # the same NVRTC on both sides: what makes "the same registers" a claim about compile()
    assert dev["device_nvrtc"] == [13, 0] and dev["cupy_nvrtc"] == [13, 0]
    assert dev["nvrtc_wheel"] == RECORD["local"]["nvrtc_wheel"] == "13.0.88"
    assert RECORD["compile_nvrtc"] == "13.0"


@pytest.mark.parametrize("puzzle", sorted(ROWS))
def test_compile_matches_the_h200_for_the_same_cubin(puzzle):
    r = ROWS[puzzle]
    mine = r["compile_ftz_false"]
    for key in ("h200_cubin_cuFuncGetAttribute", "h200_cubin_cudaFuncGetAttributes"):
        gpu = r[key]
        assert (gpu["num_regs"], gpu["local_size_bytes"], gpu["shared_size_bytes"]) == \
            (mine["registers"], mine["local_bytes"], mine["static_shared_bytes"]), key
        assert gpu["binary_version"] == 90   # machine code for sm_90, not PTX the driver compiled
    assert r["h200_ptx_driver_jit"]["num_regs"] == mine["registers"]
    dev = r["h200_device_nvrtc"]
    assert dev["registers_per_thread"] == mine["registers"] and dev["version"] == [13, 0]
    assert r["h200_device_nvrtc_sass_equal"] is True
    # no worked kernel spills but the ladder's last rung: two unrolled stages of 8 x 8 results
    # under t.launch_bounds(256, 2)'s 128 registers leave a few index values on the stack
    spill = 40 if puzzle == "sgemm_warptile" else 0
    assert mine["spill_store_bytes"] == mine["spill_load_bytes"] == spill


@pytest.mark.parametrize("puzzle", sorted(ROWS))
def test_compile_defaults_give_the_registers_run_on_gpu_had_on_the_h200(puzzle):
    """compile()'s defaults (-fmad=false -ftz=true) against CuPy's own compile of the same source
    on the H200 in the same run: what run_on_gpu launches."""
    r = ROWS[puzzle]
    assert r["compile"]["registers"] == r["h200_cupy_run_on_gpu"]["num_regs"]
    assert r["compile"]["local_bytes"] == r["h200_cupy_run_on_gpu"]["local_size_bytes"]
    assert "EXIT" in r["sass"]   # a whole kernel's instructions, not an empty disassembly


def test_flushing_subnormals_changes_the_code_where_floats_are_added():
    """CuPy's -ftz=true is why compile() adds it: float adds become FADD.FTZ, so the SASS differs
    wherever a kernel adds floats (softmax), not where it only moves and counts them
    (histogram_global); for today's worked kernels it costs no register."""
    same = [p for p, row in ROWS.items() if row["sass"] == row["sass_ftz_false"]]
    assert "histogram_global" in same and "softmax" not in same
    assert all(row["compile_ftz_false"]["registers"] == row["compile"]["registers"]
               for row in ROWS.values())


def _same_nvrtc():
    lib = nvrtc.newest_library()
    if lib is None:
        pytest.skip("NVRTC is not installed (the test extra brings it)")
    here = ".".join(map(str, nvrtc.version(lib)))
    if here != RECORD["compile_nvrtc"]:
        pytest.skip(f"NVRTC {here} here, the record is from {RECORD['compile_nvrtc']}")


@pytest.mark.parametrize("puzzle", sorted(ROWS))
def test_this_nvrtc_compiles_what_the_record_holds(puzzle):
    _same_nvrtc()
    if compiled.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed (the test extra brings it)")
    pk = _worked()
    p = next(q for q in puzzles.puzzles() if q.id == puzzle)
    args = tuple(p.make_inputs(p.sizes[0], seed=0).values())
    kernel = getattr(pk, p.kernel_name)
    r = ROWS[puzzle]
    ck = compile(kernel, *args)
    assert {"registers": ck.registers_per_thread, "local_bytes": ck.local_bytes,
            "spill_store_bytes": ck.spill_store_bytes, "spill_load_bytes": ck.spill_load_bytes,
            "static_shared_bytes": ck.static_shared_bytes} == r["compile"]
    assert list(ck.instructions) == r["sass"]
    # the cubin the H200 loaded: the same source without -ftz=true (registers from ptxas -v)
    res = nvrtc.compile_cubin(str(ck.cuda), "sm_90", ("-fmad=false", "--ptxas-options=-v"))
    got = compiled.ptxas_resources(res.log, ck.kernel)
    gpu = r["h200_cubin_cudaFuncGetAttributes"]
    assert (got["registers_per_thread"], got["local_bytes"], got["static_shared_bytes"]) == \
        (gpu["num_regs"], gpu["local_size_bytes"], gpu["shared_size_bytes"])


@pytest.mark.parametrize("puzzle", sorted(ROWS))
def test_cupys_own_compile_on_the_h200_agrees_where_the_record_has_it(puzzle):
    """This record's CuPy step failed on the device (its cache file's bytes were not a cubin
    nvdisasm would read, so the attributes were lost too); a re-record brings them, and then
    they must be compile()'s."""
    r = ROWS[puzzle]
    cupy = r["h200_cupy_run_on_gpu"]
    assert "num_regs" in cupy or "error" in cupy
    if "num_regs" in cupy:
        assert cupy["num_regs"] == r["compile"]["registers"]
    assert r["h200_cupy_sass_equal"] in (None, True)
