"""What every explorer shares: the Explorer widget, a colour-blind-safe palette, labelled controls.

An explorer is a ``VBox`` of controls, a readout and bokeh figures.  Subclasses implement
``_update()``, which calls the model and writes the results into ``ColumnDataSource`` objects;
``update()`` times it, and ``last_update_ms`` is what the benchmark script reports.  Bokeh figures
are wrapped in ``jupyter_bokeh.BokehModel`` so they sit inside ipywidgets layouts and update in
place when a source changes.

Without a kernel (the course's book, an nbconvert HTML export, GitHub's notebook preview) a
widget view cannot be drawn, so every explorer is also displayed as static HTML
(:meth:`Explorer.static_html`): its title, control values and readout as plain HTML, and its
figures as bokeh documents that BokehJS draws in the page (pan, zoom and hover still work; the
controls do not).  JupyterLab prefers the live widget and never shows it.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import ipywidgets as widgets
from bokeh.core.json_encoder import serialize_json
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
        self.notes = notes
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
        self._snapshot_figures()
        bundle = super()._repr_mimebundle_(**kwargs)
        # Beside the widget view, the same state as static HTML for frontends without a kernel
        # (JupyterLab ranks the widget view first and never shows this).
        bundle["text/html"] = self._static_html()
        return bundle

    def _snapshot_figures(self) -> None:
        for model, fig in zip(self._bokeh, self.figures, strict=True):
            model.update_from_model(fig)

    def static_html(self) -> str:
        """The explorer as it is now, without widgets: title, control values, readout, and the
        figures as bokeh documents drawn by BokehJS (which the page must load once: the book
        does, and so does ``gpu_lessons.setup()`` in a notebook).  Where scripts are stripped
        (GitHub) the text parts still read."""
        self._snapshot_figures()
        return self._static_html()

    def _static_html(self) -> str:
        parts = [f"<p><b>{html.escape(self.title)}</b></p>"] if self.title else []
        if self.notes:
            parts.append(f"<p><small>{self.notes}</small></p>")
        settings = " · ".join(f"{html.escape(_label(k, c))}: <b>{html.escape(_value_text(c))}</b>"
                              for k, c in self.controls.items())
        if settings:
            parts.append(f"<p class='gpu-lessons-static-controls'><small>{settings}</small></p>")
        parts += [f"<div>{self.readout.value}</div>", f"<div>{self.warning.value}</div>"]
        if self._bokeh:  # render bundles just made by _snapshot_figures
            divs, scripts = embedded_documents(self._bokeh)
            parts += [f"<div class='gpu-lessons-static-figures' style='display:flex;flex-wrap:wrap;"
                      f"gap:8px'>{divs}</div>", scripts]
        parts.append("<p><small><i>A static picture of this explorer as it was shown: the "
                     "plots pan, zoom and show values on hover; run the notebook to move the "
                     "controls.</i></small></p>")
        return "<div class='gpu-lessons-static'>" + "".join(parts) + "</div>"

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


#: Draws the figures once BokehJS is there (the book loads it in the page head; a notebook's
#: ``setup()`` output loads it before any explorer); gives up quietly after 10 s without it.
def embedded_documents(models: Sequence[BokehModel]) -> tuple[str, str]:
    """The bokeh documents of ``models`` as static HTML: their divs, and the scripts that have
    BokehJS (which the page loads once: the book does, and so does ``gpu_lessons.setup()``)
    draw them there once it has loaded."""
    docs, items = {}, []
    for model in models:
        docs.update(model.render_bundle["docs_json"])
        items += model.render_bundle["render_items"]
    divs = "".join(m.render_bundle["div"] for m in models)
    data_id = f"gpu-lessons-doc-{items[0]['docid']}"
    # "<" escaped as \u003c keeps "</script>" inside a string from closing the tag.
    data = serialize_json({"docs_json": docs, "render_items": items}).replace("<", "\\u003c")
    return divs, (f"<script type='application/json' id='{data_id}'>{data}</script>"
                  f"<script>{_EMBED_JS % json.dumps(data_id)}</script>")


class Picture:
    """A bokeh layout as a notebook cell's value: a ``jupyter_bokeh`` widget, which JupyterLab
    draws without any setup call, and beside it the same document as static HTML (class
    ``gpu-lessons-picture``) for frontends without a kernel: the book, an HTML export.
    ``widget_class`` is a CSS class given to the widget (the browser test finds figures by it)."""

    widget_class = ""

    def __init__(self, layout):
        self.layout = layout
        self._widget = None

    def _repr_mimebundle_(self, **kwargs):
        if self._widget is None:  # one widget per picture: a bokeh model joins one document
            self._widget = BokehModel(self.layout)
            if self.widget_class:
                self._widget.add_class(self.widget_class)
        bundle = self._widget._repr_mimebundle_(**kwargs)
        divs, scripts = embedded_documents([self._widget])
        bundle["text/html"] = f"<div class='gpu-lessons-picture'>{divs}</div>{scripts}"
        return bundle


_EMBED_JS = """(function () {
  var tries = 0;
  function draw() {
    if (window.Bokeh && window.Bokeh.embed) {
      var data = JSON.parse(document.getElementById(%s).textContent);
      window.Bokeh.embed.embed_items(data.docs_json, data.render_items);
    } else if (++tries < 100) {
      setTimeout(draw, 100);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();"""


def _label(name: str, control) -> str:
    return getattr(control, "description", "") or name


def _value_text(control) -> str:
    """A control's value as a reader sees it: the menu entry's label, a slider's number."""
    if hasattr(control, "label") and hasattr(control, "options"):   # menus, toggle buttons
        label = control.label
        return ", ".join(map(str, label)) if isinstance(label, tuple) else str(label)
    value = control.value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, tuple):
        return "–".join(str(v) for v in value)
    return f"{value:,}" if isinstance(value, int) else str(value)


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
