"""Interactive explorers: ipywidgets controls + bokeh plots, each built on one model.

A view builds controls and plots from model functions and never redoes a model's arithmetic.
Every explorer is an :class:`~gpu_lessons.views._base.Explorer` (an ipywidgets ``VBox``): show it
by leaving it as the last expression of a cell.
"""
