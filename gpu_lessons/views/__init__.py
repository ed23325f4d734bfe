"""Interactive explorers: ipywidgets controls + bokeh plots, each built on one model.

A view builds controls and plots from model functions and never redoes a model's arithmetic.
Every explorer is an :class:`~gpu_lessons.views._base.Explorer` (an ipywidgets ``VBox``): show it
by leaving it as the last expression of a cell.
"""

#: Every explorer, as "module:factory" (called with no arguments for a sensible default state).
#: The browser test and ``tools/bench_views.py`` walk this registry.
EXPLORERS = {
    "catalog": "gpu_lessons.views.catalog:catalog_explorer",
    "roofline": "gpu_lessons.views.roofline:roofline_explorer",
    "occupancy": "gpu_lessons.views.occupancy:occupancy_explorer",
    "mfu": "gpu_lessons.views.mfu:mfu_explorer",
    "simt": "gpu_lessons.views.simt:simt_explorer",
    "latency": "gpu_lessons.views.latency:latency_explorer",
    "launch": "gpu_lessons.views.system:launch_explorer",
    "overlap": "gpu_lessons.views.system:overlap_explorer",
    "allocator": "gpu_lessons.views.allocator:allocator_explorer",
    "coalescing": "gpu_lessons.views.coalescing:coalescing_explorer",
    "banks": "gpu_lessons.views.banks:bank_explorer",
    "cache": "gpu_lessons.views.cache:cache_explorer",
}


def load(name: str):
    """Return the factory of explorer ``name`` (see :data:`EXPLORERS`)."""
    import importlib

    module, func = EXPLORERS[name].split(":")
    return getattr(importlib.import_module(module), func)
