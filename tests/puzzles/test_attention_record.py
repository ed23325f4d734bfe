"""The attention puzzles' worked kernels on an H200, as one run recorded them
(tests/data/h200_attention.json, from tools/device/attention_h200.py): flash_attention beside
PyTorch's FlashAttention, decode_attention beside a 1 GiB device copy.  The rates are recomputed
from the record's times, the errors checked against the puzzles' tolerance, and the recorded
kernels are the worked kernels' current sources; the figures are those
docs/measured/attention.md quotes.
"""

import hashlib
import importlib.util
import inspect
import json
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = ROOT / "tests" / "data" / "h200_attention.json"
if not PATH.exists():
    pytest.skip("no H200 record: run tools/device/attention_h200.py on an H200 and copy its "
                "output to tests/data/h200_attention.json", allow_module_level=True)
RECORD = json.loads(PATH.read_text())
FLASH = RECORD["flash"]
DECODE = RECORD["decode"]


def test_the_recorded_kernel_is_the_worked_kernel():
    spec = importlib.util.spec_from_file_location("pk", ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    source = inspect.getsource(mod.flash_attention_kernel)
    assert RECORD["kernel_source"] == source
    assert RECORD["kernel_sha256"] == hashlib.sha256(source.encode()).hexdigest()
    source = inspect.getsource(mod.decode_attention_kernel)
    assert RECORD["decode_kernel_source"] == source
    assert RECORD["decode_kernel_sha256"] == hashlib.sha256(source.encode()).hexdigest()


def test_rates_are_the_record_s_times():
    s, d, heads = FLASH["seq"], FLASH["head_dim"], FLASH["heads"]
    assert (s, d, heads, FLASH["batch"]) == (4096, 128, 32, 1)
    flops = 4 * s * s * d * heads                 # two products, a multiply-add = 2 FLOPs
    assert FLASH["flops"] == flops
    assert FLASH["kernel_s"] == pytest.approx(float(np.median(FLASH["kernel_samples_s"])))
    assert FLASH["sdpa_flash_s"] == pytest.approx(float(np.median(FLASH["sdpa_flash_samples_s"])))
    assert FLASH["kernel_tflops"] == pytest.approx(flops / FLASH["kernel_s"] / 1e12)
    assert FLASH["sdpa_flash_tflops"] == pytest.approx(flops / FLASH["sdpa_flash_s"] / 1e12)
    assert FLASH["of_sdpa_flash"] == pytest.approx(FLASH["sdpa_flash_s"] / FLASH["kernel_s"])
    copy = RECORD["copy"]
    assert copy["bytes"] == 2 ** 30
    assert copy["s"] == pytest.approx(float(np.median(copy["samples_s"])))
    assert copy["gb_per_s"] == pytest.approx(2 * copy["bytes"] / copy["s"] / 1e9)
    # decoding: 256 heads (batch 8 of 32) x 8,192 keys x 128 x K and V x 2 bytes = 1 GiB
    assert (DECODE["heads"], DECODE["seq"], DECODE["head_dim"]) == (256, 8192, 128)
    assert DECODE["kv_bytes"] == 256 * 8192 * 128 * 2 * 2 == 2 ** 30
    assert DECODE["kernel_s"] == pytest.approx(float(np.median(DECODE["kernel_samples_s"])))
    assert DECODE["gb_per_s"] == pytest.approx(DECODE["kv_bytes"] / DECODE["kernel_s"] / 1e9)
    assert DECODE["of_copy"] == pytest.approx(DECODE["gb_per_s"] / copy["gb_per_s"])


def test_the_answer_is_within_the_puzzle_s_tolerance():
    # |o - ref| <= 0.01 + 0.01 |ref| (the puzzle's), and o's values are below 1
    assert FLASH["max_abs_error"] < 0.01
    assert FLASH["sdpa_max_abs_error"] < 0.01
    assert DECODE["max_abs_error"] < 0.01


def test_the_figures_the_docs_quote():
    assert RECORD["gpu"].startswith("NVIDIA H200")
    # docs/measured/attention.md: 80.7 TFLOP/s against SDPA flash's 323.5, 24.9 %
    assert FLASH["kernel_tflops"] == pytest.approx(80.7, abs=0.05)
    assert FLASH["sdpa_flash_tflops"] == pytest.approx(323.5, abs=0.05)
    assert FLASH["of_sdpa_flash"] == pytest.approx(0.249, abs=0.0005)
    # the copy roof: 4,083 GB/s read + written, of the H200's 4.8 TB/s
    assert RECORD["copy"]["gb_per_s"] == pytest.approx(4083, abs=0.5)
    assert RECORD["copy"]["gb_per_s"] < 4800
    # decoding: 3,902 GB/s of KV cache read, 95.6 % of the copy
    assert DECODE["gb_per_s"] == pytest.approx(3902, abs=0.5)
    assert DECODE["of_copy"] == pytest.approx(0.956, abs=0.0005)


def test_decode_reaches_70_percent_of_the_copy_bandwidth():
    assert DECODE["of_copy"] >= 0.7


@pytest.mark.xfail(strict=True, reason="the worked kernel reaches 25 % of SDPA's flash kernel: "
                   "the target of half needs more work (docs/measured/attention.md)")
def test_flash_reaches_half_of_sdpa_flash():
    assert FLASH["of_sdpa_flash"] >= 0.5
