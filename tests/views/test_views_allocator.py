"""Allocator explorer: the memory map and readout are the allocator model's numbers, and
hand-derived ones."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import allocator
from gpu_lessons._format import percent
from gpu_lessons.views import allocator as view
from gpu_lessons.views.allocator import allocator_explorer

_shared = {}


def _map_total(e):
    d = e.blocks.data
    return sum(b - a for a, b in zip(d["start"], d["end"], strict=True))


def test_allocator_default_shows_the_models_run():
    e = allocator_explorer()
    assert e.warning.value == ""
    # 200 requests, each one alloc and one free: 400 events
    assert e.controls["event"].max == 399
    direct = allocator.compare(allocator.serving_trace(200, seed=0),
                               page_bytes=16 * allocator.KV_BYTES_OPT_13B,
                               capacity=20 * allocator.GiB)
    best = direct["best_fit"]
    assert e.event == best.peak_event            # "peak reserved" is the default moment
    assert np.allclose(e.series.data["reserved"], best.reserved / allocator.GiB)
    assert np.allclose(e.series.data["used"], best.used / allocator.GiB)
    for r in direct.runs:
        assert f"{percent(r.used_fraction_at_peak)} used" in e.readout.value
        assert f"{len(r.failed)} failed" in e.readout.value if r.failed else True
    # the caching allocator's blocks tile its segments: the map covers all reserved memory
    assert _map_total(e) == pytest.approx(best.reserved[e.event] / allocator.GiB)
    # 16 tokens × 800 KiB (OPT-13B: 2 × 40 layers × 5120 × 2 B = 819,200 B) = 12.5 MiB pages
    assert "16 tokens = 12.5 MiB" in e.readout.value


def test_allocator_training_fixed_shapes_peak_by_hand():
    e = allocator_explorer(trace="training", vary_percent=0, capacity_gib=8)
    # 12 layers: weights 12 × 8 MiB = 96, Adam states 2 × 96 = 192 (from step 0 on); in step 1
    # the forward holds 12 × 32 MiB = 384 of activations, and the first backward layer adds a
    # 4 MiB workspace and an 8 MiB gradient: 96 + 192 + 384 + 4 + 8 = 684 MiB peak used.
    assert "peak used 684 MiB" in e.readout.value
    # no allocator comes near the 8 GiB pool (first fit, the worst, reserves under 1 GiB), so
    # the plots zoom in and count in MiB; the capacity line stays at 8 GiB = 8192 MiB
    assert e.series_figure.yaxis.axis_label == "memory (MiB)"
    assert e.capacity_span.location == pytest.approx(8192)
    # 12 weights + 3 steps × (12 × 3 forward + 12 × 4 backward + 12 gradient frees) + 12 Adam
    # states = 312 events
    assert e.controls["event"].max == 311
    e.controls["n_steps"].value = 1
    assert e.controls["event"].max == 12 + 36 + 48 + 12 + 12 - 1


def test_allocator_end_of_trace_is_empty():
    e = allocator_explorer(map_at="end of trace", policy="first_fit")
    # every request has finished: nothing is in use, and the map holds only free blocks
    assert e.event == 399
    assert "used 0 B" in e.readout.value
    assert set(e.blocks.data["state"]) <= {view.STATE_LABELS["free"]}


def test_allocator_first_oom_moment_and_marker():
    e = allocator_explorer(policy="first_fit", map_at="first out-of-memory", capacity_gib=12)
    direct = allocator.caching(allocator.serving_trace(200, seed=0), policy="first_fit",
                               capacity=12 * allocator.GiB)
    assert direct.first_oom is not None
    assert e.event == direct.first_oom.event
    assert e.oom.data["event"] == [direct.first_oom.event]
    assert f"First failure: event {direct.first_oom.event}" in e.readout.value
    # the dashed line is the pool's capacity
    assert e.capacity_span.location == pytest.approx(12)


def test_allocator_paged_map_and_no_fragmentation():
    e = allocator_explorer(policy="paged", map_at="end of trace")
    e.controls["map_at"].value = "peak reserved"
    run = e.run
    assert run.allocator == "paged"
    # any free page serves any request: the model's fragmentation is 0 at every event
    assert "fragmentation <b>0 %</b>" in e.readout.value
    # pages: one reserved range from 0 to the high-water mark
    assert e.segments.data["start"] == [0]
    assert e.segments.data["end"][0] == pytest.approx(run.reserved[e.event] / allocator.GiB)
    assert _map_total(e) == pytest.approx(run.reserved[e.event] / allocator.GiB)


def test_allocator_event_slider_picks_the_moment():
    e = allocator_explorer()
    e.controls["event"].value = 10
    assert e.controls["map_at"].value == view.MAP_AT[-1]
    assert e.event == 10
    assert e.event_span.location == 10
    e.controls["n_requests"].value = 10     # 20 events: the slider shrinks, the moment follows
    assert e.controls["event"].max == 19 and e.event == 10
    e.controls["n_requests"].value = 50
    e.controls["event"].value = 99
    e.controls["n_requests"].value = 20
    assert e.event == 39 and e.warning.value == ""


def test_allocator_extreme_controls(control_extremes):
    e = allocator_explorer()
    for key, w in e.controls.items():
        values = ([10 ** w.min, 10 ** w.max] if key == "capacity_gib" else control_extremes(w))
        for v in values:
            w.value = v
            assert e.warning.value == "", (key, v, e.warning.value)


def test_allocator_refusal_is_shown(monkeypatch):
    e = allocator_explorer()

    def refuse(*a, **k):
        raise ValueError("capacity (1 B) must hold at least one page of 13107200 B")

    monkeypatch.setattr(view.allocator, "compare", refuse)
    e.controls["capacity_gib"].value = 3.0
    assert "at least one page" in e.warning.value


@settings(max_examples=6)
@given(policy=st.sampled_from(["first_fit", "best_fit", "paged"]), seed=st.integers(0, 20),
       capacity=st.floats(0.5, 40), event=st.integers(0, 399))
def test_allocator_map_never_overlaps(policy, seed, capacity, event):
    e = _shared.setdefault("alloc", allocator_explorer())
    c = e.controls
    c["policy"].value, c["seed"].value, c["capacity_gib"].value = policy, seed, capacity
    c["event"].value = event
    assert e.warning.value == ""
    d = e.blocks.data
    spans = sorted(zip(d["start"], d["end"], strict=True))
    for (a0, a1), (b0, _) in itertools.pairwise(spans):
        assert a0 < a1 <= b0 + 1e-12
    k = e.event
    assert _map_total(e) <= e.run.reserved[k] * e.scale * (1 + 1e-9)
    assert e.run.used[k] <= e.run.reserved[k]
