"""The matrix-multiply ladder as run on an H200 (gpu_lessons/data/h200_sgemm_ladder.json,
written by tools/device/sgemm_h200.py): each rung's worked kernel computed cuBLAS's product,
ran the launch its puzzle defines, and was faster than the rung before it at n = 4096; the last
rung reached 85 % of cuBLAS.  Then the model that reads the record and the chart that draws it."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import pytest

from gpu_lessons.hardware import gpu
from gpu_lessons.sgemm_record import measured_ladder, sizes

ROOT = Path(__file__).resolve().parents[2]
RECORD = json.loads(resources.files("gpu_lessons").joinpath("data/h200_sgemm_ladder.json")
                    .read_text("utf-8"))
_spec = importlib.util.spec_from_file_location("sgemm_h200",
                                               ROOT / "tools" / "device" / "sgemm_h200.py")
TOOL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TOOL)


def test_the_record_is_the_tool_s_run_on_an_h200_without_tf32():
    assert RECORD["gpu"] == "NVIDIA H200" and RECORD["sm_count"] == 132
    assert RECORD["cupy_tf32"] == ""          # cuBLAS SGEMM, not TF32 tensor cores
    assert sizes() == TOOL.SIZES
    for row in RECORD["sizes"]:
        assert [k["kernel"] for k in row["rungs"]] == list(TOOL.RUNGS)
        assert [k["kernel"] for k in row["controls"]] == list(TOOL.CONTROLS)


def _as_list(dims):
    return list(dims) if isinstance(dims, tuple) else [dims]


@pytest.mark.parametrize("row", RECORD["sizes"], ids=lambda r: f"n={r['n']}")
def test_every_rung_computed_the_product_with_its_puzzle_s_launch(row):
    n = row["n"]
    for k in row["rungs"] + row["controls"]:
        p, _ = TOOL._kernel(TOOL.worked_kernels(), k["kernel"])
        grid, block = p.launch(**TOOL.size_of(p, n))
        assert (k["grid"], k["block"]) == (_as_list(grid), _as_list(block)), k["kernel"]
        # float32 sums of n products in another order than cuBLAS's (and FMA on both sides)
        assert k["max_rel_error"] < 1e-5, k["kernel"]
        # the rate is 2 n³ over the median time, below the GPU's dense FP32 peak
        assert k["tflops"] == pytest.approx(2 * n**3 / k["seconds"] / 1e12)
        assert k["tflops"] * 1e12 < gpu("H200").peak_flops("fp32")
        assert k["of_cublas"] == pytest.approx(row["cublas_s"] / k["seconds"])
        assert k["seconds"] == pytest.approx(sorted(k["rounds_s"])[len(k["rounds_s"]) // 2])


def test_each_rung_is_faster_than_the_one_before_and_the_last_reaches_85_percent():
    row = next(r for r in RECORD["sizes"] if r["n"] == 4096)
    rates = [k["tflops"] for k in row["rungs"]]
    assert rates == sorted(rates) and len(set(rates)) == len(rates), rates
    last = row["rungs"][-1]
    assert last["kernel"] == "sgemm_warptile" and last["of_cublas"] >= 0.85
    # the 8 x 8 rungs fit 2 blocks of 256 threads an SM (65,536 registers)
    assert all(k["registers"] <= 128 for k in row["rungs"][4:])


def test_the_controls_show_where_the_last_rung_s_gain_comes_from():
    """The warp tile alone runs within 2 % of rung 4; rung 4 with its stages unrolled within
    2 % of rung 5: the unrolled stages, not the warp tile, make the difference on the H200."""
    row = next(r for r in RECORD["sizes"] if r["n"] == 4096)
    rate = {k["kernel"]: k["tflops"] for k in row["rungs"] + row["controls"]}
    assert rate["rung5_stages_not_unrolled"] == pytest.approx(rate["sgemm_double_buffered"],
                                                              rel=0.02)
    assert rate["rung4_stages_unrolled"] == pytest.approx(rate["sgemm_warptile"], rel=0.02)


def test_the_model_reads_the_record():
    rec = measured_ladder(4096)
    row = next(r for r in RECORD["sizes"] if r["n"] == 4096)
    assert [k.name for k in rec.rungs] == list(TOOL.RUNGS)
    assert rec.rung("sgemm_warptile").tflops == row["rungs"][-1]["tflops"]
    assert rec.cublas_tflops == row["cublas_tflops"]
    # H200: 132 SMs x 128 FP32 lanes x 2 FLOPs x 1.98 GHz = 66.9 TFLOP/s
    assert rec.peak_tflops == pytest.approx(132 * 128 * 2 * 1.98e9 / 1e12, rel=1e-3)
    text = repr(rec)
    assert "TFLOP/s" in text and "of cuBLAS" in text and "registers" in text
    assert f"{rec.rung('matmul_naive').tflops:.1f} TFLOP/s" in text
    with pytest.raises(ValueError, match="n=1000: the record holds n = 2048, 4096, 8192"):
        measured_ladder(1000)
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        rec.rung("nope")


def test_the_chart_draws_the_record_and_the_learner_s_kernels():
    from gpu_lessons.views.sgemm_ladder import ladder_chart

    rec = measured_ladder(4096)
    fig = ladder_chart(4096, mine={"my rung 2": 30.0}).figure
    (bars,) = [r for r in fig.renderers if "tflops" in r.data_source.data]
    data = bars.data_source.data
    assert list(data["tflops"]) == [k.tflops for k in rec.rungs] + [30.0]
    assert list(data["kernel"])[-1] == "my rung 2"
    # the learner's 30 TFLOP/s against this run's cuBLAS, e.g. 61.3 % of 48.9
    assert f"{100 * 30.0 / rec.cublas_tflops:.1f} % of cuBLAS" in data["text"][-1]
    spans = sorted(s.location for s in fig.center if type(s).__name__ == "Span")
    assert spans == [rec.cublas_tflops, rec.peak_tflops]
    with pytest.raises(ValueError, match=r"mine\['x'\]"):
        ladder_chart(4096, mine={"x": -1})
    with pytest.raises(TypeError, match="labels must be str"):
        ladder_chart(4096, mine={1: 2.0})


def test_the_measured_page_is_the_report_of_the_record():
    spec = importlib.util.spec_from_file_location("sgemm_report",
                                                  ROOT / "tools" / "sgemm_report.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    page = (ROOT / "docs" / "measured" / "sgemm_ladder.md").read_text("utf-8")
    assert page == tool.report()


def test_the_sass_counts_are_what_this_nvrtc_makes(tmp_path):
    """Recompiled here when the recorded NVRTC is installed (register allocation changes
    between compiler versions)."""
    from gpu_lessons.kernels import nvrtc

    lib = nvrtc.newest_library()
    if lib is None or "NVRTC {}.{},".format(*nvrtc.version(lib)) not in RECORD["sass"]["compiler"]:
        pytest.skip("the recorded NVRTC is not installed")
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"sizes": []}))
    TOOL.add_sass(str(path))
    assert json.loads(path.read_text())["sass"] == RECORD["sass"]
    rows = {k["kernel"]: k for k in RECORD["sass"]["kernels"]}
    # the float4 rungs load shared memory 128 bits at a time, 4 a k-step, 8 k-steps a tile
    assert all(rows[r]["lds128"] >= 32 for r in ("sgemm_vectorized", "sgemm_double_buffered"))
    assert rows["sgemm_2d_blocktile"]["ffma"] == rows["sgemm_vectorized"]["ffma"] == 512


def test_the_sass_readout_is_the_record_s():
    from gpu_lessons.sgemm_record import sass_counts

    counts = sass_counts()
    rows = {k["kernel"]: k for k in RECORD["sass"]["kernels"]}
    assert [k[0] for k in counts.kernels] == list(rows)
    warp = rows["sgemm_warptile"]
    text = repr(counts)
    # 1,024 FFMA of 1,340 instructions: 76.4 %
    assert f"{warp['ffma']:,}" in text and f"{100 * warp['ffma'] / warp['instructions']:.1f} %" in text
    assert "<table" in counts._repr_html_() and "FFMA share" in counts._repr_html_()


def test_the_readme_quotes_the_record():
    rec = measured_ladder(4096)
    readme = (ROOT / "README.md").read_text("utf-8").replace("\n", " ")
    first, last = rec.rung("sgemm_1d_blocktile"), rec.rung("sgemm_warptile")
    assert (f"climb from {first.tflops:.1f} to {last.tflops:.1f} TFLOP/s, "
            f"{100 * last.of_cublas:.0f} % of cuBLAS's FP32 {rec.cublas_tflops:.1f}") in readme
