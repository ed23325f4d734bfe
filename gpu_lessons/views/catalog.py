"""Catalog explorer: pick a GPU, see its dense peaks per precision and its ridge points."""

from __future__ import annotations

from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from .._format import bandwidth, intensity, memory_size
from ..hardware import PRECISIONS, catalog, gpu
from ._base import PALETTE, Explorer, dropdown

LABELS = {"fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32 (CUDA cores)",
          "tf32": "TF32 tensor", "fp16": "FP16 tensor", "bf16": "BF16 tensor",
          "fp16_acc16": "FP16 tensor, FP16 acc.", "fp8": "FP8 tensor"}


class CatalogExplorer(Explorer):
    title = "GPU catalog: dense peaks and ridge points"

    def __init__(self, name: str = "H100 SXM5"):
        self.source = ColumnDataSource(dict(precision=[], tflops=[], ridge=[], color=[]))
        fig = figure(y_range=[LABELS[p] for p in reversed(PRECISIONS)], x_axis_type="log",
                     height=300, width=620, x_axis_label="dense peak (TFLOP/s, log scale)",
                     toolbar_location=None)
        fig.hbar(y="precision", right="tflops", left=0.1, height=0.7, color="color",
                 source=self.source)
        fig.add_tools(HoverTool(tooltips=[("precision", "@precision"),
                                          ("peak", "@tflops{0,0.0} TFLOP/s"),
                                          ("ridge point", "@ridge{0,0.0} FLOP/byte")]))
        super().__init__({"gpu": dropdown("GPU", list(catalog()), gpu(name).name)}, [fig],
                         notes="Sparse (2:4) peaks are never shown: they are 2× the dense figure.")

    def _update(self):
        g = gpu(self.controls["gpu"].value)
        rows = [p for p in PRECISIONS if p in g.peak_tflops]
        self.source.data = dict(
            precision=[LABELS[p] for p in rows],
            tflops=[g.peak_tflops[p] for p in rows],
            ridge=[g.ridge_point(p) for p in rows],
            color=[PALETTE[0] if "tensor" in LABELS[p] else PALETTE[1] for p in rows])
        self.set_readout(
            f"{g.name}: {g.sms} SMs × {g.fp32_cores_per_sm} FP32 cores, "
            f"{memory_size(g.memory_gb * 1e9)} {g.memory_type} at {bandwidth(g.bandwidth_gbs * 1e9)}; "
            f"FP32 ridge point {intensity(g.ridge_point('fp32'))}")


def catalog_explorer(name: str = "H100 SXM5") -> CatalogExplorer:
    """Show a GPU's peaks; change the GPU with the dropdown."""
    return CatalogExplorer(name)
