"""The book's Sphinx extension (``book/course_book.py``) on a tiny project, in seconds.

A folder laid out like the course (a lesson, its exercises, a solution, a package file) with
the content the extension must handle: an image attached to a Markdown cell, links to a
solution and to a source file, and bokeh's notebook loader in a cell's outputs.  Built with the
book's extension and theme, without executing anything; the expectations are written out.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPO = "https://github.com/some-org/some-course"
PNG = base64.b64encode(bytes.fromhex(  # a 1×1 PNG
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e5273ee60000000049454e44ae426082"
)).decode()

pytestmark = pytest.mark.book

CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / "book")!r})
extensions = ["myst_nb", "course_book"]
root_doc = "index"
exclude_patterns = ["_build", "solutions", "pkg"]
nb_execution_mode = "off"
suppress_warnings = ["mystnb.unknown_mime_type"]   # as book/conf.py: bokeh's own mime types
html_theme = "sphinx_book_theme"
html_theme_options = {{"repository_url": {REPO!r}, "repository_branch": "main",
                       "launch_buttons": {{"binderhub_url": "https://mybinder.org"}}}}
"""


def _notebook(path: Path, cells) -> None:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("tiny")
    (src / "conf.py").write_text(CONF)
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\n:glob:\n\nnotebooks/*\nexercises/*\n```\n")
    picture = nbformat.v4.new_markdown_cell(
        "# 01 · A lesson\n\n![a chip](attachment:chip.png)\n\n"
        "See [the solution](../solutions/01_lesson.ipynb) and [the code](../pkg/model.py).\n\n"
        "Next: `02_alone`; practise with `exercises/01_lesson.ipynb`; not a page: `03_missing`.")
    picture.attachments = {"chip.png": {"image/png": PNG}}
    loader = nbformat.v4.new_code_cell("import gpu_lessons")
    loader.outputs = [nbformat.v4.new_output(
        "display_data", data={"application/javascript": "(function(root) { root._bokeh_onload_callbacks = [];"
                                                        " /* all of BokehJS */ })(window);",
                              "application/vnd.bokehjs_load.v0+json": ""})]
    _notebook(src / "notebooks" / "01_lesson.ipynb", [picture, loader])
    _notebook(src / "notebooks" / "02_alone.ipynb", [nbformat.v4.new_markdown_cell("# 02 · Alone")])
    _notebook(src / "exercises" / "01_lesson.ipynb", [nbformat.v4.new_markdown_cell("# Exercises 01")])
    _notebook(src / "solutions" / "01_lesson.ipynb", [nbformat.v4.new_code_cell("answer = 42")])
    (src / "pkg").mkdir()
    (src / "pkg" / "model.py").write_text("ANSWER = 42\n")
    out = src / "_build"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going",
                           "-q", str(src), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_an_attached_image_is_inlined(built):
    page = (built / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    assert f'src="data:image/png;base64,{PNG}"' in page
    assert "attachment:" not in page


def test_links_to_files_outside_the_book_go_to_the_repository(built):
    page = (built / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    assert f'href="{REPO}/blob/main/solutions/01_lesson.ipynb"' in page
    assert f'href="{REPO}/blob/main/pkg/model.py"' in page
    assert not list(built.rglob("_downloads/**/*.ipynb")), "a solution was copied into the site"
    assert not list(built.rglob("model.py"))


def test_run_it_box_links_binder_and_the_exercises(built):
    page = (built / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    box = page[page.index("gpu-lessons-run-it"):]
    box = box[:box.index("</div>")]
    assert "python3 course.py start" in box and "notebooks/01_lesson.ipynb" in box
    assert ('href="https://mybinder.org/v2/gh/some-org/some-course/main'
            '?urlpath=lab/tree/notebooks/01_lesson.ipynb"') in box
    assert 'href="../exercises/01_lesson.html"' in box
    exercise = (built / "exercises" / "01_lesson.html").read_text(encoding="utf-8")
    assert 'href="../notebooks/01_lesson.html"' in exercise
    alone = (built / "notebooks" / "02_alone.html").read_text(encoding="utf-8")
    assert "gpu-lessons-run-it" in alone and "exercises/02_alone" not in alone
    assert "explorers on this page" not in alone          # it has none


def test_bokeh_loader_is_dropped_and_bokehjs_not_loaded_without_plots(built):
    page = (built / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    assert "_bokeh_onload_callbacks" not in page
    assert not re.search(r"_static/bokeh/bokeh-[\d.]+\.min\.js", page)  # no plot on this page
    assert list((built / "_static" / "bokeh").glob("bokeh-*.min.js"))
    assert (built / "_static" / "mathjax" / "tex-svg.js").exists()


def test_code_spans_naming_pages_become_links(built):
    page = (built / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    for href, text in (("02_alone.html", "02_alone"),
                       ("../exercises/01_lesson.html", "exercises/01_lesson.ipynb")):
        assert re.search(rf'<a class="reference internal" href="{re.escape(href)}">'
                         rf'<span[^>]*><code[^>]*><span class="pre">{re.escape(text)}<', page), text
    assert re.search(r'(?<!">)<code[^>]*><span class="pre">03_missing<', page)   # left as code
