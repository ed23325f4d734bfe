"""The cache explorer shows the cache simulator's numbers for lesson-sized traces.

Independent references:
* hand-derived hit and miss counts for traces whose behaviour can be worked out on paper
  (derivations in comments): streaming, column walks, AoS vs SoA, sectors;
* direct calls of :class:`gpu_lessons.cache.Cache` and
  :func:`gpu_lessons.traces.hit_rate_vs_line_size` (the view must show the model's numbers);
  the simulator itself agrees exactly with pycachesim (``tests/models/test_cache.py``).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lessons import traces
from gpu_lessons.cache import POLICIES, Cache
from gpu_lessons.views.cache import (
    CACHE_KIB,
    LINE_SIZES,
    TILED,
    TRACES,
    WAYS,
    CacheExplorer,
    cache_explorer,
)


@pytest.fixture(scope="module")
def ex() -> CacheExplorer:
    return cache_explorer()


def _set(ex, **values):
    for key, v in values.items():
        ex.controls[key].value = v


def _reset(ex):
    _set(ex, trace="row-major", size_kib=4, line_bytes=128, ways=4, policy="lru", tile=8,
         sectors=False)


# -- hand-derived --------------------------------------------------------------------------------

def test_default_streams_a_matrix():
    # 64 x 64 floats read in order: 16 KiB, one miss per 128-byte line = 128 misses, the other
    # 4096 - 128 = 3968 accesses hit (96.875 %); 16 KiB fetched, nothing written
    ex = cache_explorer()
    s = ex.stats
    assert (s.accesses, s.hits, s.misses) == (4096, 3968, 128)
    assert (s.bytes_from_next, s.bytes_to_next) == (16384, 0)
    assert "hit rate 96.9 %" in ex.readout.value and "128 misses" in ex.readout.value
    assert "fetched 16 KiB" in ex.readout.value
    assert "8 sets × 4 ways × 128 B" in ex.readout.value  # 4096 / (4 x 128) = 8 sets
    # a line of L bytes holds L/4 floats and misses once: hit rate 1 - 4/L for every L;
    # whatever the line, exactly the 16 KiB footprint is fetched
    assert ex.sweep.data["line"] == [str(lb) for lb in LINE_SIZES]
    assert ex.sweep.data["hit_rate"] == pytest.approx([100 * (1 - 4 / lb) for lb in LINE_SIZES])
    assert ex.traffic.data["fetched_kib"] == [16.0] * len(LINE_SIZES)
    assert ex.traffic.data["ratio"] == pytest.approx([1.0] * len(LINE_SIZES))
    assert ex.footprint.data["kib"] == [16.0] * len(LINE_SIZES)
    assert ex.current.data == {"line": ["128"], "hit_rate": [pytest.approx(96.875)]}


def test_column_major_never_hits(ex):
    # column walk: consecutive accesses are one 256-byte row apart, so one column touches 64
    # lines; line 2r + c//32 maps to set (2r + c//32) mod 8, i.e. 16 lines per used set for
    # 4 ways: every line is evicted before the walk returns to it -> 4096 misses, 0 hits,
    # 4096 x 128 B = 512 KiB fetched (32 x the 16 KiB footprint)
    _reset(ex)
    _set(ex, trace="column-major")
    assert (ex.stats.hits, ex.stats.misses) == (0, 4096)
    assert ex.stats.bytes_from_next == 4096 * 128
    assert "fetched 512 KiB" in ex.readout.value
    # with 32-byte sectors the same misses move 32 B each: 4096 x 32 B = 128 KiB
    _set(ex, sectors=True)
    assert (ex.stats.hits, ex.stats.misses) == (0, 4096)
    assert ex.stats.bytes_from_next == 4096 * 32
    assert "32 B sectors" in ex.readout.value
    # the sweep stays unsectored: its 128-byte point still fetches 512 KiB
    assert ex.traffic.data["fetched_kib"][LINE_SIZES.index(128)] == 512.0
    assert ex.current_traffic.data["fetched_kib"] == [128.0]
    _reset(ex)


def test_aos_wastes_three_quarters_of_each_line(ex):
    # one float field of 4096 16-byte structs: 64 KiB of structs, one miss per 128-byte line
    # = 512 misses, 64 KiB fetched; the same field as its own array (SoA) is 16 KiB:
    # 128 misses, 16 KiB fetched
    _reset(ex)
    _set(ex, trace="aos")
    assert (ex.stats.misses, ex.stats.bytes_from_next) == (512, 65536)
    _set(ex, trace="soa")
    assert (ex.stats.misses, ex.stats.bytes_from_next) == (128, 16384)
    _reset(ex)


def test_tiling_cuts_gemm_misses(ex):
    _reset(ex)
    _set(ex, trace="gemm-naive")
    naive = ex.stats.misses
    _set(ex, trace="gemm-tiled")
    assert ex.stats.misses * 4 < naive  # 576 vs 5304 with the default 4 KiB cache
    _reset(ex)


# -- the view shows the model's numbers ------------------------------------------------------------

def _model(trace, size_kib, line_bytes, ways, policy, sectors):
    c = Cache(size_kib * 1024, line_bytes, ways or None, policy,
              sector_bytes=32 if sectors else None)
    return c.run(trace) + c.flush()


@pytest.mark.parametrize("state", [
    dict(trace="transpose-naive"),
    dict(trace="transpose-tiled", tile=4),
    dict(trace="stencil", size_kib=1, ways=1),
    dict(trace="random", policy="random", line_bytes=64),
    dict(trace="gemm-tiled", tile=16, size_kib=2, ways=0),
    dict(trace="row-major", policy="fifo", line_bytes=32, sectors=True),
])
def test_each_control_shows_the_model(ex, state):
    _reset(ex)
    _set(ex, **state)
    v = {k: c.value for k, c in ex.controls.items()}
    trace = TRACES[v["trace"]][1](v["tile"])
    expected = _model(trace, v["size_kib"], v["line_bytes"], v["ways"], v["policy"],
                      v["sectors"])
    assert ex.stats == expected
    sweep = traces.hit_rate_vs_line_size(trace, v["size_kib"] * 1024, v["ways"] or None,
                                         LINE_SIZES, policy=v["policy"])
    assert ex.sweep.data["misses"] == [p.misses for p in sweep.points]
    assert ex.sweep.data["compulsory"] == [p.compulsory for p in sweep.points]
    assert ex.traffic.data["fetched_kib"] == [p.bytes_from_next / 1024 for p in sweep.points]
    assert f"{expected.misses:,} misses" in ex.readout.value
    _reset(ex)


def test_tile_control_only_for_tiled_traces(ex):
    for key in TRACES:
        _set(ex, trace=key)
        assert ex.controls["tile"].disabled == (key not in TILED)
    _reset(ex)
    _set(ex, trace="transpose-tiled", tile=2)
    misses_2 = ex.stats.misses
    _set(ex, tile=8)
    assert ex.stats.misses != misses_2
    assert ex.stats == _model(traces.transpose(64, 64, 4, tile=8), 4, 128, 4, "lru", False)
    _reset(ex)


def test_sweep_skips_geometries_the_model_refuses(ex):
    # 1 KiB with 16 ways: 16 lines of 64 B fit, 8 lines of 128 B do not -> the sweep stops at 64
    _reset(ex)
    _set(ex, size_kib=1, line_bytes=32, ways=16)
    assert ex.warning.value == ""
    assert ex.sweep.data["line"] == ["16", "32", "64"]


# -- robustness ---------------------------------------------------------------------------------

def test_extreme_control_values_never_raise(ex):
    for name in ("size_kib", "line_bytes", "tile"):
        options = ex.controls[name].options
        for v in (options[0], options[-1]):
            for ways in (1, 16, 0):
                _reset(ex)
                _set(ex, trace="gemm-tiled", ways=ways, **{name: v})
                assert ex.readout.value or ex.warning.value
    _reset(ex)


@pytest.mark.parametrize(("state", "says"), [
    (dict(size_kib=1, ways=16), "ways must be &lt;= 8"),            # 8 lines of 128 B
    (dict(line_bytes=16, sectors=True), "sector_bytes must divide"),  # 32 B sectors, 16 B lines
])
def test_model_refusals_show_as_warning(ex, state, says):
    _reset(ex)
    _set(ex, **state)
    assert says in ex.warning.value
    assert ex.readout.value == ""
    _reset(ex)
    assert ex.warning.value == "" and "hit rate" in ex.readout.value


@pytest.mark.parametrize(("kwargs", "error", "names"), [
    (dict(trace="zigzag"), ValueError, "trace"),
    (dict(size_kib=3), ValueError, "size_kib"),
    (dict(line_bytes=100), ValueError, "line_bytes"),
    (dict(ways=3), ValueError, "ways"),
    (dict(policy="plru"), ValueError, "policy"),
    (dict(tile=5), ValueError, "tile"),
    (dict(sectors="yes"), TypeError, "sectors"),
])
def test_bad_factory_arguments(kwargs, error, names):
    with pytest.raises(error, match=names):
        cache_explorer(**kwargs)


def test_fully_associative_argument():
    ex = cache_explorer("column-major", ways=None)
    assert ex.controls["ways"].value == 0
    assert "1 sets × 32 ways" in ex.readout.value  # 4 KiB / 128 B = 32 lines, one set


def test_building_warms_the_compiled_kernels(monkeypatch):
    # numba's kernels are loaded by a warm-up when the explorer is built, not inside the
    # first update a learner waits for; how long it takes is tools/bench_cache.py's business
    from gpu_lessons.views import cache as view

    calls = []
    real = view._warm_up

    def recorded():
        calls.append(len(calls))
        return real()

    monkeypatch.setattr(view, "_warm_up", recorded)
    ex = cache_explorer()
    assert isinstance(ex, CacheExplorer) and calls == [0]
    assert math.isfinite(ex.warmup_ms)
    ex.update()
    assert calls == [0]                          # updates never warm up again


@settings(max_examples=15)
@given(trace=st.sampled_from(sorted(TRACES)), size_kib=st.sampled_from(CACHE_KIB),
       line_bytes=st.sampled_from(LINE_SIZES), ways=st.sampled_from([w for _, w in WAYS]),
       policy=st.sampled_from(POLICIES))
def test_readout_is_the_model_or_a_warning(ex, trace, size_kib, line_bytes, ways, policy):
    _reset(ex)
    _set(ex, trace=trace, size_kib=size_kib, line_bytes=line_bytes, ways=ways, policy=policy)
    try:
        expected = _model(TRACES[trace][1](8), size_kib, line_bytes, ways, policy, False)
    except ValueError:
        assert ex.warning.value and ex.readout.value == ""
        return
    assert ex.warning.value == ""
    assert ex.stats == expected
    # the diamond sits on the sweep's point for the same line size (both unsectored)
    i = ex.sweep.data["line"].index(str(line_bytes))
    assert ex.current.data["hit_rate"][0] == pytest.approx(ex.sweep.data["hit_rate"][i])
    assert 0 <= min(ex.sweep.data["hit_rate"]) <= max(ex.sweep.data["hit_rate"]) <= 100
