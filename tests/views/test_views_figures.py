"""The lessons' static figures draw their data: the catalog's SMs, the occupancy model's
blocks, the ladder's sizes and speeds, the simulator's record of a kernel's stores, the cost
models' intensities and the transformer's FLOP counts."""

import numpy as np
import pytest

from gpu_lessons import costs, hardware
from gpu_lessons._format import memory_size, si
from gpu_lessons.ladder import memory_ladder
from gpu_lessons.occupancy import occupancy
from gpu_lessons.transformer import PRESETS, compare_estimates
from gpu_lessons.views import figures


def _sources(fig):
    return [r.data_source.data for r in fig.renderers]


@pytest.mark.parametrize("gpu", ["H100", "A100", "V100"])
def test_execution_hierarchy_draws_every_sm_and_its_resident_blocks(gpu):
    fig = figures.execution_hierarchy(gpu, threads_per_block=128, registers_per_thread=64).figure
    sms, blocks = _sources(fig)[:2]
    g = hardware.gpu(gpu)
    r = occupancy(g.cc, threads_per_block=128, registers_per_thread=64)
    assert len(sms["x"]) == g.sms
    assert len(blocks["x"]) == g.sms * r.blocks_per_sm
    assert f"{g.sms} SMs × {r.blocks_per_sm} blocks of 128 threads" in fig.title.text


def test_memory_hierarchy_labels_are_the_ladder_s_numbers():
    fig = figures.memory_hierarchy("H200").figure
    data = _sources(fig)[0]
    levels = [lv for lv in memory_ladder("H200").levels if lv.total_bytes]
    assert data["size"] == [lv.total_bytes for lv in levels]
    assert data["log_size"] == pytest.approx([np.log2(lv.total_bytes) for lv in levels])
    dram = levels[-1]
    head = f"{memory_size(dram.total_bytes)} · {si(dram.bandwidth, 'B/s')}"
    assert data["text"][-1].startswith(head)
    assert "600 ns" in data["text"][-1]


def _series(fig):
    """The data of each line (a line and its dots share one source): every other renderer."""
    return _sources(fig)[::2]


def test_intensity_by_size_draws_the_cost_models_intensities():
    """By hand, FP32: a matrix product does 2N³ FLOPs on 3N² floats (N/6 FLOP/byte); c = a + b
    one FLOP per 12 bytes; a sum one add per 4-byte value read."""
    sizes = (64, 512, 4096)
    gemm, add, total = _series(figures.intensity_by_size(sizes).figure)
    assert gemm["x"] == list(sizes)
    assert gemm["y"] == [costs.gemm(n, n, n).intensity for n in sizes]
    assert gemm["y"] == pytest.approx([n / 6 for n in sizes])
    assert add["y"] == pytest.approx([1 / 12] * 3)
    assert total["y"] == [costs.reduction(n * n).intensity for n in sizes]
    assert total["y"] == pytest.approx([0.25] * 3, rel=1e-3)
    assert add["text"][0] == "0.0833 FLOP/byte"


def test_tile_reuse_draws_the_tiled_model_for_each_tile():
    """By hand: square N, T × T tiles, s bytes per element move s·(2N³/T + N²) bytes for 2N³
    FLOPs, so I = 2N³ / (s·(2N³/T + N²)) = T / (s·(1 + T/2N))."""
    n, tiles = 4096, (1, 16, 128)
    fp32, fp16 = _series(figures.tile_reuse(n, tiles).figure)
    assert fp32["x"] == list(tiles)
    assert fp32["y"] == [costs.gemm_tiled(n, n, n, tile=t).intensity for t in tiles]
    assert fp32["y"] == pytest.approx([t / (4 * (1 + t / (2 * n))) for t in tiles])
    assert fp16["y"] == pytest.approx([t / (2 * (1 + t / (2 * n))) for t in tiles])
    assert fp32["y"][0] == costs.gemm_naive(n, n, n).intensity
    assert fp32["per_flop"][1] == "0.25 B/FLOP"


def test_flops_per_token_draws_compare_estimates():
    m = PRESETS["gpt2-small"]
    seq = (256, 1024, 4096)
    exact, six_n, palm = _series(figures.flops_per_token("gpt2-small", seq).figure)
    c = compare_estimates(seq, d_model=m.d_model, n_layers=m.n_layers, d_ff=m.d_ff,
                          vocab_size=m.vocab_size, n_heads=m.n_heads)
    assert (exact["y"], six_n["y"], palm["y"]) == (list(c.exact), list(c.six_n), list(c.palm))
    # 6N does not see the sequence; PaLM's term adds 6·L·H·Q... per token, linear in T:
    # 12·L·h·T for GPT-2 small's 12 layers of width 768, by hand
    assert len(set(six_n["y"])) == 1
    assert palm["y"][1] - palm["y"][0] == pytest.approx(12 * 12 * 768 * (1024 - 256))
    with pytest.raises(ValueError, match="not a preset"):
        figures.flops_per_token("gpt-5")


def test_memory_hierarchy_menu_switches_to_each_gpu_s_ladder():
    """Every GPU the menu offers carries its own ladder's numbers (B200: no L1/shared figure
    in the catalog, so one bar fewer), and a click on a name installs them."""
    drawing = figures.memory_hierarchy("H100", switch=("V100", "B200"))
    assert list(drawing.ladders) == ["H100 SXM5", "V100 SXM2", "B200"]
    for gpu, data in drawing.ladders.items():
        levels = [lv for lv in memory_ladder(gpu).levels if lv.total_bytes]
        assert data["size"] == [lv.total_bytes for lv in levels]
        assert data["level"] == [lv.name for lv in levels]
    assert "L1 / shared" not in drawing.ladders["B200"]["level"]
    menu = _sources(drawing.layout.children[0])[0]
    assert menu["name"] == list(drawing.ladders)
    (callback,) = menu_source(drawing).selected.js_property_callbacks["change:indices"]
    assert callback.args["ladders"] is drawing.ladders
    assert callback.args["src"].data is _sources(drawing.figure)[0]
    plain = figures.memory_hierarchy("H100", switch=())
    assert plain.layout is plain.figure and not hasattr(plain, "ladders")


def test_copy_staircase_draws_the_measured_steps_and_the_cache_sizes():
    """A staircase written by hand (a 48 KiB L1d, a 2 MiB L2): each working set at its
    bandwidth, on a log axis, a dashed line at each cache size; what is not a Staircase is
    refused."""
    from bokeh.models import Span

    from gpu_lessons.measure.cpu import Staircase

    stairs = Staircase("CPU (test)", (16384, 1048576, 67108864), (80.0, 40.0, 10.0),
                       {"L1d": 49152, "L2": 2097152})
    fig = figures.copy_staircase(stairs).figure
    line, dots = _sources(fig)
    assert list(line["x"]) == [16384, 1048576, 67108864] and list(line["y"]) == [80, 40, 10]
    assert dots is line and fig.x_scale.__class__.__name__ == "LogScale"
    assert line["size"] == ["16 KiB", "1 MiB", "64 MiB"]
    assert line["rate"] == ["80 GB/s", "40 GB/s", "10 GB/s"]
    spans = [r for r in fig.center if isinstance(r, Span)]
    assert sorted(s.location for s in spans) == [49152, 2097152]
    assert fig.title.text.startswith("CPU (test):")
    with pytest.raises(TypeError, match="stairs must be the Staircase"):
        figures.copy_staircase({"working_set": (1,), "gbps": (1.0,)})


def menu_source(drawing):
    return drawing.layout.children[0].renderers[0].data_source


def test_a_drawing_carries_its_document_as_static_html_for_the_book():
    """Without a kernel (the book, an HTML export) the widget cannot draw: the cell's HTML is
    the same bokeh document, with the menu's ladders, for BokehJS to draw in the page."""
    drawing = figures.memory_hierarchy("H100", switch=("V100",))
    bundle = drawing._repr_mimebundle_()
    page = bundle["text/html"]
    assert "gpu-lessons-picture" in page and "data-root-id" in page
    assert drawing.figure.title.text in page and "V100 SXM2" in page
    assert "application/vnd.jupyter.widget-view+json" in bundle


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_every_registered_figure_draws_by_default(name):
    module, func = figures.FIGURES[name].split(":")
    import importlib

    drawing = getattr(importlib.import_module(module), func)()
    assert any(len(next(iter(d.values()))) for d in _sources(drawing.figure))
    assert "gpu-lessons-figure" in str(drawing._repr_mimebundle_()) or drawing._widget is not None
