"""What every explorer shares: the Explorer widget, a colour-blind-safe palette, labelled controls.

An explorer is a ``VBox`` of controls, a readout and bokeh figures.  Subclasses implement
``_update()``, which calls the model and writes the results into ``ColumnDataSource`` objects;
``update()`` times it, and ``last_update_ms`` is what the benchmark script reports.  Bokeh figures
are wrapped in ``jupyter_bokeh.BokehModel`` so they sit inside ipywidgets layouts and update in
place when a source changes.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import ipywidgets as widgets
from bokeh.models import ColumnDataSource  # noqa: F401  (re-exported for explorers)
from jupyter_bokeh import BokehModel

#: Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
#: deficiency.  Order: blue, orange, bluish green, vermillion, reddish purple, sky blue, yellow, black.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

#: Control width that fits a label with its unit.
STYLE = {"description_width": "250px"}
LAYOUT = widgets.Layout(width="540px")


class Explorer(widgets.VBox):
    """Base class: controls on top, a one-line readout, then the plots."""

    title = ""

    def __init__(self, controls: dict, figures: list, notes: str = ""):
        self.controls = controls
        self.figures = figures
        self.readout = widgets.HTML()
        self.warning = widgets.HTML()
        self.last_update_ms = float("nan")
        self._quiet = False
        for c in controls.values():
            c.observe(self._notify, names="value")
        header = [widgets.HTML(f"<b>{html.escape(self.title)}</b>")] if self.title else []
        if notes:
            header.append(widgets.HTML(f"<small>{notes}</small>"))
        grid = widgets.GridBox(list(controls.values()),
                               layout=widgets.Layout(grid_template_columns="repeat(2, 550px)"))
        self._bokeh = [BokehModel(f) for f in figures]
        plots = widgets.HBox(self._bokeh)
        super().__init__([*header, grid, self.readout, self.warning, plots])
        self.add_class("gpu-lessons-explorer")  # the browser test finds explorers by this class
        self.update()

    def _notify(self, change):
        if not self._quiet:
            self._on_change(change)

    def _on_change(self, _change):
        """A control changed (not from inside :meth:`quietly`): recompute.  Subclasses that
        must react to one control first (a preset that sets other sliders) override this."""
        self.update()

    @contextmanager
    def quietly(self) -> Iterator[None]:
        """Change controls from code without each change starting its own update (the caller
        updates once afterwards, or is itself inside an update)."""
        before = self._quiet
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = before

    def _repr_mimebundle_(self, **kwargs):
        # jupyter_bokeh drops data-source patches sent before a figure is on screen, so
        # everything set since construction (the first update, points added before display)
        # travels in a fresh snapshot of each figure at the moment the explorer is shown.
        for model, fig in zip(self._bokeh, self.figures, strict=True):
            model.update_from_model(fig)
        return super()._repr_mimebundle_(**kwargs)

    def update(self) -> None:
        """Recompute from the model and refresh the plots; a bad state is explained, not raised."""
        start = time.perf_counter()
        try:
            self._update()
            self.warning.value = ""
        except (ValueError, TypeError) as exc:  # the model refused this combination: say why
            self.warning.value = f"<span style='color:{PALETTE[3]}'>⚠ {html.escape(str(exc))}</span>"
        self.last_update_ms = (time.perf_counter() - start) * 1e3

    def _update(self) -> None:
        raise NotImplementedError

    def set_readout(self, text: str) -> None:
        self.readout.value = text

    def control_values(self) -> dict:
        """Every control's current value, by control name."""
        return {k: c.value for k, c in self.controls.items()}

    def use_only(self, names, *, always=()) -> None:
        """Grey out the controls the current choice does not read: all but ``names`` and
        ``always``."""
        for name, c in self.controls.items():
            c.disabled = name not in names and name not in always


def slider(label: str, value, low, high, step=1, *, integer=True, unit: str = "") -> widgets.Widget:
    """A labelled slider whose label carries its unit, e.g. 'block size (threads)'."""
    cls = widgets.IntSlider if integer else widgets.FloatSlider
    desc = f"{label} ({unit})" if unit else label
    return cls(value=value, min=low, max=high, step=step, description=desc, style=STYLE,
               layout=LAYOUT, continuous_update=False)


def log_slider(label: str, value, low_exp, high_exp, *, unit: str = "") -> widgets.Widget:
    desc = f"{label} ({unit})" if unit else label
    return widgets.FloatLogSlider(value=value, min=low_exp, max=high_exp, step=0.05, base=10,
                                  description=desc, style=STYLE, layout=LAYOUT,
                                  continuous_update=False)


def dropdown(label: str, options, value=None) -> widgets.Dropdown:
    options = list(options)
    return widgets.Dropdown(options=options, value=value if value is not None else options[0],
                            description=label, style=STYLE, layout=LAYOUT)


def lane_ranges(values: Sequence[int]) -> str:
    """Ascending lane numbers as ranges: [0, 1, 2, 5] -> '0–2, 5'."""
    parts, start = [], values[0]
    for a, b in zip(values, [*values[1:], None], strict=True):
        if b != a + 1:
            parts.append(str(a) if a == start else f"{start}–{a}")
            start = b
    return ", ".join(parts)
