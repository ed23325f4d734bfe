"""Every explorer without a kernel (``Explorer.static_html``): what the book, an nbconvert HTML
export and GitHub show instead of the live widget.

References: the explorers' own figures (the static HTML must carry exactly the data sources the
live widget draws, read back from the embedded JSON) and hand-written controls with known
labels.  What a browser draws from this HTML is checked in ``tests/test_book.py``.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from bokeh.plotting import figure

from gpu_lessons.views import EXPLORERS, load
from gpu_lessons.views._base import ColumnDataSource, Explorer, dropdown, slider

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class _Scripts(HTMLParser):
    """The contents of every <script> in a piece of HTML, by type, and the text outside them."""

    def __init__(self):
        super().__init__()
        self.scripts: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._type = None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._type = dict(attrs).get("type", "text/javascript")
            self.scripts.append((self._type, ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._type = None

    def handle_data(self, data):
        if self._type is None:
            self.text.append(data)
        else:
            kind, body = self.scripts[-1]
            self.scripts[-1] = (kind, body + data)


def _parse(fragment: str) -> _Scripts:
    p = _Scripts()
    p.feed(fragment)
    p.close()
    return p


def _embedded_docs(fragment: str) -> dict:
    [data] = [body for kind, body in _parse(fragment).scripts if kind == "application/json"]
    return json.loads(data)


def _decode(value):
    """Bokeh's JSON encoding of a value: maps as entry lists, arrays as (gzipped) base64."""
    if isinstance(value, dict) and value.get("type") == "map":
        return {k: _decode(v) for k, v in value.get("entries", [])}
    if isinstance(value, dict) and value.get("type") == "ndarray":
        raw = value["array"]["data"] if isinstance(value["array"], dict) else value["array"]
        if isinstance(raw, list):
            return raw
        buf = base64.b64decode(raw)
        if buf[:2] == b"\x1f\x8b":                      # bokeh gzips larger buffers
            buf = gzip.decompress(buf)
        return np.frombuffer(buf, dtype=value["dtype"]).tolist()
    return value


def _source_values(docs: dict) -> list[dict]:
    """Every ColumnDataSource's ``data`` in serialized bokeh documents, decoded."""
    found = []

    def walk(obj):
        if isinstance(obj, dict):
            if obj.get("name") == "ColumnDataSource":
                found.append(_decode(obj["attributes"]["data"]))
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(docs)
    return found


class _Tiny(Explorer):
    """One slider, one menu, one figure: the parts whose static HTML is written out below."""

    title = "tiny <explorer>"

    def __init__(self, label="a </script><script>alert(1)</script> b"):
        self.source = ColumnDataSource(dict(x=[], y=[], label=[]))
        self.label = label
        fig = figure(width=300, height=200)
        fig.scatter("x", "y", source=self.source)
        super().__init__({"n": slider("block size", 256, 32, 1024, 32, unit="threads"),
                          "gpu": dropdown("GPU", [("H100 SXM5", "h100"), ("A100", "a100")], "h100")},
                         [fig], notes="a note")

    def _update(self):
        n = self.controls["n"].value
        self.source.data = dict(x=[1, 2, 3], y=[n, 2 * n, 3 * n], label=[self.label] * 3)
        self.set_readout(f"<b>{n} threads</b> on {self.controls['gpu'].label}")


def test_mimebundle_has_the_widget_and_the_static_html():
    bundle = _Tiny()._repr_mimebundle_()
    assert WIDGET_MIME in bundle                       # JupyterLab draws the live widget
    assert "text/plain" in bundle
    assert bundle["text/html"].startswith("<div class='gpu-lessons-static'>")


def test_static_html_reads_without_scripts():
    """What GitHub shows (it strips scripts): the title, every control's value, the readout."""
    e = _Tiny()
    e.controls["n"].value = 512
    text = " ".join("".join(_parse(e._repr_mimebundle_()["text/html"]).text).split())
    assert "tiny <explorer>" in html.unescape(text)    # escaped in the HTML, readable as text
    assert "block size (threads): 512" in text
    assert "GPU: H100 SXM5" in text                     # the menu entry's label, not its value
    assert "512 threads on H100 SXM5" in text           # the readout
    assert "a note" in text


def test_static_figure_carries_the_current_data_and_survives_script_text():
    e = _Tiny()
    e.controls["n"].value = 64
    fragment = e._repr_mimebundle_()["text/html"]
    docs = _embedded_docs(fragment)
    [data] = [d for d in _source_values(docs["docs_json"]) if "label" in d]
    assert list(data["y"]) == [64, 128, 192]
    assert data["label"] == ["a </script><script>alert(1)</script> b"] * 3
    # the text "</script>" inside the JSON did not end the script early: exactly two scripts
    assert [kind for kind, _ in _parse(fragment).scripts] == ["application/json", "text/javascript"]
    # each figure's div is in the HTML, with the root the render item names
    [item] = docs["render_items"]
    [(root_id, element_id)] = item["roots"].items()
    assert f'id="{element_id}"' in fragment and f'data-root-id="{root_id}"' in fragment


def test_a_later_display_shows_the_later_state():
    e = _Tiny()
    first = _embedded_docs(e._repr_mimebundle_()["text/html"])
    e.controls["n"].value = 1024
    second = _embedded_docs(e._repr_mimebundle_()["text/html"])
    ys = [next(d["y"] for d in _source_values(doc["docs_json"]) if "label" in d)
          for doc in (first, second)]
    assert ys == [[256, 512, 768], [1024, 2048, 3072]]


def test_a_refused_state_shows_its_warning():
    e = _Tiny()
    e.warning.value = "<span>⚠ threads_per_block must be a multiple of 32</span>"
    assert "⚠ threads_per_block must be a multiple of 32" in e.static_html()


@pytest.mark.parametrize("name", list(EXPLORERS))
def test_every_explorer_embeds_its_figures_not_bokehjs(name):
    e = load(name)()
    fragment = e._repr_mimebundle_()["text/html"]
    docs = _embedded_docs(fragment)
    # one render item per figure, each with its div in the HTML
    assert len(docs["render_items"]) == len(e.figures)
    for item in docs["render_items"]:
        [element_id] = item["roots"].values()
        assert f'id="{element_id}"' in fragment
    # the document JSON and a div, not a copy of BokehJS (bokeh.min.js alone is over 1 MB)
    assert len(fragment) < 400_000, f"{name}: {len(fragment):,} characters of static HTML"
    assert "Bokeh.embed.embed_items" in fragment
    assert not re.search(r"define\(|__webpack|function\s*\(\s*require", fragment)
    # every data source the explorer draws is in the page, with the same columns
    live = [set(s.data) for f in e.figures for s in f.select({"type": ColumnDataSource})]
    assert live
    embedded = [set(d) for d in _source_values(docs["docs_json"])]
    for columns in live:
        assert columns in embedded


def test_numpy_columns_round_trip():
    e = _Tiny()
    e.source.data = dict(x=np.arange(5.0), y=np.arange(5.0) ** 2, label=["p"] * 5)
    docs = _embedded_docs(e.static_html())
    [data] = [d for d in _source_values(docs["docs_json"]) if "label" in d]
    assert data["y"] == [0.0, 1.0, 4.0, 9.0, 16.0]     # a float64 buffer, decoded


def _exported(with_widget_state: bool) -> str:
    """nbconvert's HTML export of a notebook whose one output is an explorer's."""
    import nbformat
    from nbconvert import HTMLExporter

    bundle = _Tiny()._repr_mimebundle_()
    cell = nbformat.v4.new_code_cell("tiny()")
    cell.outputs = [nbformat.v4.new_output("execute_result", data=bundle, execution_count=1)]
    nb = nbformat.v4.new_notebook(cells=[cell])
    if with_widget_state:     # what `nbconvert --execute` (and Lab's "save widget state") store
        model = bundle[WIDGET_MIME]["model_id"]
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "version_major": 2, "version_minor": 0, "state": {model: {}}}}
    body, _ = HTMLExporter().from_notebook_node(nb)
    return body


def test_nbconvert_html_export_shows_the_static_picture_without_saved_widget_state():
    """nbconvert picks the widget view only when the notebook saved that widget's state;
    otherwise the static picture (README: `--ExecutePreprocessor.store_widget_state=False`)."""
    body = _exported(with_widget_state=False)
    assert "gpu-lessons-static" in body and "Bokeh.embed.embed_items" in body
    assert "<b>256 threads</b> on H100 SXM5" in body                  # the readout
    saved = _exported(with_widget_state=True)
    assert "gpu-lessons-static" not in saved           # the widget's view wins
