"""The kernel picture: built from a SimResult, containing the simulator's numbers (not pixels)."""

import numpy as np
import pytest
from bokeh.models import ColorBar, ColumnDataSource, Div
from bokeh.plotting import figure as Figure

from gpu_lessons.kernels import simt
from gpu_lessons.views import simt as simt_view
from gpu_lessons.views.kernel_picture import kernel_picture, sector_outlines


def _transpose_naive(t, a, out, n):
    x = t.block_idx.x * 32 + t.thread_idx.x
    y = t.block_idx.y * 8 + t.thread_idx.y
    out[x * n + y] = a[y * n + x]


def _run(record=True):
    n = 32
    a = np.arange(n * n, dtype=np.float32)
    out = np.zeros(n * n, np.float32)
    r = simt.run(_transpose_naive, (1, 4), (32, 8), a, out, n, record_indices=record)
    assert np.array_equal(out.reshape(n, n), a.reshape(n, n).T)
    return r


def _figures(layout):
    return [c for c in layout.children if isinstance(c, Figure)]


def _source(fig, field):
    return next(r.data_source for r in fig.renderers
                if isinstance(r.data_source, ColumnDataSource) and field in r.data_source.data)


def test_every_instruction_kind_has_a_style():
    assert set(simt_view.KIND_STYLE) == set(simt.KINDS)
    colours = {(c, h) for c, h in simt_view.KIND_STYLE.values()}
    assert len(colours) == len(simt.KINDS)   # no two kinds look alike


def test_picture_has_the_warp_and_the_access_map():
    r = _run()
    layout = kernel_picture(r, "out", block=1, warp=2)
    lanes, amap = _figures(layout)
    # (a) the lanes figure is the model's lane matrix of block 1, warp 2
    d = _source(lanes, "lane").data
    steps = r.lane_matrix(1, 2).shape[1]
    assert len(d["lane"]) == 32 * steps
    active = np.array(d["color"], dtype=object) != simt_view.INACTIVE
    assert active.sum() == r.lane_matrix(1, 2).sum()
    # (b) whole run: every one of the 1024 output elements is stored once by one lane
    cells = _source(amap, "accesses").data
    assert len(cells["accesses"]) == 1024 and set(cells["accesses"]) == {1}
    assert list(cells["stores"]).count(1) == 1024 and sum(cells["loads"]) == 0
    # a 1-D float array wraps at 128 B: 32 columns, so row = element // 32
    assert list(cells["y"][:33]) == [0] * 32 + [1]
    # 4 sectors of 8 floats per row, all touched over the whole run: 32 rows x 4 outlines
    outlines = _source(amap, "width").data
    assert len(outlines["x"]) == 128 and set(outlines["width"]) == {8.0}
    assert any(isinstance(m, ColorBar) for m in amap.right)


def test_one_instruction_shows_its_lanes_and_sectors():
    r = _run()
    store = next(e for e in r.warp_events(0, 0) if e.kind == "st.global")
    layout = kernel_picture(r, "out", block=0, warp=0, step=store.step)
    amap = _figures(layout)[1]
    cells = _source(amap, "accesses").data
    # warp 0 of block (0, 0) is x = 0..31, y = 0: lane l writes out[l * 32] (a column):
    # one element per row, first lane = l, and 32 sectors, one per row (the model says 32)
    touched = np.flatnonzero(np.array(cells["accesses"]) > 0)
    assert list(touched) == [32 * lane for lane in range(32)]
    assert list(np.array(cells["value"])[touched]) == list(range(32))
    assert len(_source(amap, "width").data["x"]) == store.sectors == 32
    assert f"step {store.step}, line {store.line}" in amap.title.text
    # the load of the same warp reads a row: 4 sectors
    load = next(e for e in r.warp_events(0, 0) if e.kind == "ld.global")
    amap = _figures(kernel_picture(r, "a", step=load.step))[1]
    assert len(_source(amap, "width").data["x"]) == load.sectors == 4


def test_shared_tile_column_is_one_bank():
    def k(t, out):
        tile = t.shared((32, 32), np.float32, name="tile")
        tile[t.thread_idx.x, t.lane] = 1.0     # lane l writes row x, column l
        t.sync()
        out[t.lane] = tile[t.lane, 0]           # lane l reads column 0: all in bank 0

    r = simt.run(k, 1, 32, np.zeros(32, np.float32), record_indices=True)
    read = next(e for e in r.warp_events() if e.kind == "ld.shared")
    assert read.bank_conflicts == 31
    amap = _figures(kernel_picture(r, "tile", step=read.step, colour_by="bank"))[1]
    cells = _source(amap, "bank").data
    touched = np.array(cells["accesses"]) > 0
    assert touched.sum() == 32
    assert set(np.array(cells["bank"])[touched]) == {0}
    assert set(np.array(cells["value"])) == set(range(32))   # every bank drawn
    assert "bank" in [t[0] for t in amap.tools[-1].tooltips]
    with pytest.raises(ValueError, match="shared arrays"):
        kernel_picture(r, "out", colour_by="bank")


def test_default_array_and_missing_indices():
    r = _run(record=False)
    layout = kernel_picture(r)
    assert len(_figures(layout)) == 1
    assert "record_indices=True" in next(c for c in layout.children if isinstance(c, Div)).text
    with pytest.raises(ValueError, match="record_indices=True"):
        kernel_picture(r, "a")
    # recorded: the busiest array is drawn (a and out both have 1024 lane accesses; a first)
    assert "a[1024]" in _figures(kernel_picture(_run()))[1].title.text


def test_bad_arguments_are_named():
    r = _run()
    with pytest.raises(ValueError, match="array must be one of"):
        kernel_picture(r, "nope")
    with pytest.raises(ValueError, match="warp must be"):
        kernel_picture(r, "a", warp=8)
    with pytest.raises(ValueError, match="colour_by must be one of"):
        kernel_picture(r, "a", colour_by="rainbow")
    with pytest.raises(TypeError, match="SimResult"):
        kernel_picture("result")


def test_sector_outlines_wrap_rows():
    # 12 floats per row (48 B): sector 0 = elements 0-7 (row 0), sector 1 = 8-15 spans
    # row 0 (cols 8-11) and row 1 (cols 0-3).
    sector = np.arange(24) * 4 // 32
    touched = np.zeros(24, bool)
    touched[9] = True
    out = sector_outlines(sector, touched, 12)
    assert list(out["y"]) == [0, 1] and list(out["width"]) == [4.0, 4.0]
    assert list(out["x"]) == [9.5, 1.5]
