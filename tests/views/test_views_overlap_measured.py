"""The overlap explorer with measured points beside its prediction.

Points come from the SYNTHETIC fixture ``tests/data/overlap_fixture.json`` (made-up numbers
for testing the plumbing, see ``tests/overlap_fixture.py``): 8 layers of 200 µs, 32 MiB of
gradients each, two "GPUs", all-reduces exactly 20 µs + S / (200 GB/s), GEMMs 10 % slower
beside NCCL.  The predictions below are derived by hand in ``tests/models/test_overlap.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import overlap_fixture as fx
import pytest

from gpu_lessons.overlap import load_overlap
from gpu_lessons.views.overlap_measured import MeasuredOverlapPanel
from gpu_lessons.views.system import overlap_explorer

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "overlap_fixture.json"
MiB = 2**20


@pytest.fixture(scope="module")
def m():
    return load_overlap(FIXTURE)


def test_measured_markers_and_model_line(m):
    e = overlap_explorer(measured=m)
    assert e.warning.value == ""
    panel = e.measured
    assert panel.figure in e.figures[0].children         # drawn under the Gantt chart
    pts = panel.points.data
    assert pts["bucket_mib"] == [32, 64, 256]
    assert pts["measured_us"] == pytest.approx([300, 600, 1400])
    assert pts["n_buckets"] == [8, 4, 1]
    # the SM slider starts at the measured share (10 %), so the model is the hand-derived one
    assert e.controls["comm_sm_percent"].value == 10
    assert pts["model_us"] == pytest.approx([319.212672, 462.207616, 1362.17728])
    assert pts["error"] == ["+6.4 %", "-23 %", "-2.7 %"]
    # the staircase: caps of k whole layers (32 MiB each) for k = 1..8, plus both ends
    line = panel.line.data
    assert list(line["bucket_mib"]) == [16, *range(32, 257, 32), 512]
    x = list(line["bucket_mib"])
    assert line["model_us"][x.index(32)] == pytest.approx(319.212672)
    assert line["model_us"][x.index(256)] == pytest.approx(1362.17728)
    assert line["bare_us"][x.index(64)] == pytest.approx(355.54432)   # no SM sharing


def test_the_sm_slider_moves_the_model_not_the_measurement(m):
    e = overlap_explorer(measured=m)
    before = list(e.measured.points.data["measured_us"])
    e.controls["comm_sm_percent"].value = 0
    assert e.measured.points.data["measured_us"] == before
    assert e.measured.points.data["model_us"] == pytest.approx([187.77216, 355.54432,
                                                                1362.17728])
    assert list(e.measured.line.data["model_us"]) == pytest.approx(
        list(e.measured.line.data["bare_us"]))
    assert "With 0 % of the SMs taken: 1 of 3 points within 20 %" in e.readout.value


def test_readout_has_units_and_says_synthetic(m):
    e = overlap_explorer(measured=m)
    text = e.readout.value
    assert "SYNTHETIC test fixture, not a measurement" in text
    assert "1.6 ms alone" in text and "α = 10 µs" in text and "B = 200 GB/s" in text
    assert "2 of 3 points within 20 %" in text
    assert "buckets of 64 MiB: measured 600 µs, model 462 µs (-23 %)" in text
    assert "SYNTHETIC" in e.measured.figure.title.text


def test_measured_from_a_path_or_a_record(m):
    a = overlap_explorer(measured=str(FIXTURE))
    b = overlap_explorer(measured=json.loads(FIXTURE.read_text()))
    assert a.measured.measurement == b.measured.measurement == m


def test_without_measurement_nothing_changes():
    e = overlap_explorer()
    assert e.measured is None and len(e.figures[0].children) == 2
    assert e.controls["comm_sm_percent"].value == 10
    assert "Measured" not in e.readout.value
    assert overlap_explorer(measured=None, comm_sm_percent=30).controls[
        "comm_sm_percent"].value == 30


def test_bad_measurements_are_refused():
    with pytest.raises(TypeError, match="measured must be"):
        overlap_explorer(measured=42)
    with pytest.raises(ValueError, match="no such file"):
        overlap_explorer(measured="no/such/record.json")
    raw = fx.build()
    raw.update(world_size=1, smoke_test=True, by_rank=raw["by_rank"][:1])
    with pytest.raises(ValueError, match="smoke test"):
        MeasuredOverlapPanel(raw)
    with pytest.raises(ValueError, match="not an overlap record"):
        overlap_explorer(measured={"schema": 1})


def test_extreme_sm_share_is_not_an_error(m):
    e = overlap_explorer(measured=m)
    for v in (e.controls["comm_sm_percent"].min, e.controls["comm_sm_percent"].max):
        e.controls["comm_sm_percent"].value = v
        assert e.warning.value == ""
