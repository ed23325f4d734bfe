"""The book's own Sphinx extension: what a static, offline course site needs beyond myst-nb.

* copies MathJax (from the ``sphinx-mathjax-offline`` wheel) and BokehJS (from the installed
  ``bokeh``) into ``_static``, and loads BokehJS once on each page that draws bokeh figures;
* puts a "run it" box under the title of every lesson and exercise page: the command that opens
  it locally, its Binder link, and the matching exercises (or lesson);
* leaves out the widget state myst-nb would embed in every page (it needs the widget manager
  from a CDN, and the explorers' static HTML already shows the same state), and bokeh's notebook
  loader (``gpu_lessons.setup()``'s output: all of BokehJS inlined, about 4 MB a page);
* turns links to repository files that are not pages of the book (``solutions/``, the package's
  source, data files) into links to the file in the repository;
* shows images attached to notebook cells (``![…](attachment:name.png)``, which myst-nb does not
  read) by inlining them as ``data:`` URIs.
"""

from __future__ import annotations

import json
import posixpath
import shutil
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

import bokeh
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

log = logging.getLogger(__name__)

#: The parts of MathJax 3 a page can load: the TeX-to-SVG component (SVG needs no web fonts, so
#: it also works from file://) and what it may fetch later (TeX packages on first use, the menu,
#: the assistive MathML it turns on).
MATHJAX_PARTS = ("tex-svg.js", "input/tex/extensions", "a11y", "ui")

#: BokehJS bundles the static figures need: plots only (widgets and tables are never embedded;
#: an explorer that adds a DataTable needs "bokeh-tables" here, and the book test says so).
BOKEH_BUNDLES = ("bokeh",)

#: Marks in a page's HTML that bokeh content is there: every bokeh root's div carries it (the
#: explorers' static HTML and ``bokeh.io.show`` output alike).
BOKEH_MARK = "data-root-id"

RUN_FOLDERS = ("notebooks", "exercises")


def _mathjax_dir() -> Path:
    dist = metadata.distribution("sphinx-mathjax-offline")
    return Path(str(dist.locate_file("sphinx-mathjax-offline/static/mathjax")))


def copy_assets(app: Sphinx, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    src = _mathjax_dir()
    for part in MATHJAX_PARTS:
        target = static / "mathjax" / part
        if (src / part).is_dir():
            shutil.copytree(src / part, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / part, target)
    js = Path(bokeh.__file__).parent / "server" / "static" / "js"
    (static / "bokeh").mkdir(parents=True, exist_ok=True)
    for name in BOKEH_BUNDLES:
        shutil.copy2(js / f"{name}.min.js", static / "bokeh" / _bokeh_file(name))


def _bokeh_file(name: str) -> str:
    # The version in the name: a page built with one bokeh never loads another's BokehJS.
    return f"{name}-{bokeh.__version__}.min.js"


def _binder_link(app: Sphinx, path: str) -> str:
    opts = app.config.html_theme_options
    repo, branch = opts["repository_url"].rstrip("/"), opts["repository_branch"]
    binder = opts["launch_buttons"]["binderhub_url"].rstrip("/")
    url = urlparse(repo)
    if url.netloc == "github.com":
        org, name = url.path.strip("/").split("/")[:2]
        base = f"{binder}/v2/gh/{org}/{name}/{branch}"
    else:
        from urllib.parse import quote
        base = f"{binder}/v2/git/{quote(repo, safe='')}/{branch}"
    return f"{base}?urlpath=lab/tree/{path}"


def run_it_box(app: Sphinx, pagename: str, has_explorers: bool) -> str:
    """The box under a lesson's or exercise's title: how to run this very notebook."""
    folder, _, stem = pagename.partition("/")
    path = f"{pagename}.ipynb"
    other = "exercises" if folder == "notebooks" else "notebooks"
    twin = Path(app.srcdir) / other / f"{stem}.ipynb"
    twin_link = ""
    if twin.exists():
        label = "Exercises for this lesson" if other == "exercises" else "The lesson"
        twin_link = (f'<li><b>{label}:</b> <a class="reference internal" '
                     f'href="../{other}/{stem}.html">{other}/{stem}.ipynb</a></li>')
    static = ("Run the notebook to change its inputs and see every output change with them."
              if not has_explorers else
              "The explorers on this page are static pictures of their first state: they pan, "
              "zoom and show values on hover; run the notebook to move their controls.")
    if folder == "exercises":
        static = ("Run the notebook to answer: each check cell says ✓, “not attempted”, "
                  "or names the likely mistake.")
    return (
        '<div class="admonition gpu-lessons-run-it"><p class="admonition-title">Run it</p>'
        f"<p>{static}</p><ul>"
        "<li><b>On your machine:</b> <code>python3 course.py start</code> in a clone of the "
        f"repository, then open <code>{path}</code> in JupyterLab.</li>"
        f'<li><b>In the browser:</b> <a class="reference external" '
        f'href="{_binder_link(app, path)}">launch this notebook on Binder</a>.</li>'
        f"{twin_link}</ul></div>")


def page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body", "")
    if BOKEH_MARK in body:
        for name in BOKEH_BUNDLES:
            app.add_js_file(f"bokeh/{_bokeh_file(name)}", priority=400)
    if pagename.split("/")[0] in RUN_FOLDERS and "</h1>" in body:
        head, _, rest = body.partition("</h1>")
        box = run_it_box(app, pagename, has_explorers="gpu-lessons-static" in body)
        context["body"] = head + "</h1>" + box + rest


#: What only bokeh's notebook loader script contains (its AUTOLOAD_NB_JS template); the script
#: that ``bokeh.io.show`` outputs to embed one plot does not.  If bokeh renames it, the book test
#: sees 4 MB pages and says so.
BOKEH_LOADER_MARK = "_bokeh_onload_callbacks"


def drop_widget_state_and_bokeh_loader(app: Sphinx, doctree) -> None:
    from myst_nb.sphinx_ import NbMetadataCollector

    if app.env.docname in NbMetadataCollector.get_doc_data(app.env):
        NbMetadataCollector.get_js_files(app.env, app.env.docname).pop("ipywidgets_state", None)
    # myst-nb keeps every mime type of an output until it picks one per builder: remove the
    # loader's JavaScript here, so the output has nothing left to show.
    for node in list(doctree.findall(nodes.container)):
        if (node.get("mime_type") == "application/javascript"
                and BOKEH_LOADER_MARK in node.astext()):
            node.parent.remove(node)


class RepositoryLinks:
    """Links to files outside the book: to the file in the repository, not a local copy."""

    @staticmethod
    def rewrite(app: Sphinx, doctree) -> None:
        docname = app.env.docname
        repo = app.config.html_theme_options["repository_url"].rstrip("/")
        branch = app.config.html_theme_options["repository_branch"]
        for node in list(doctree.findall(nodes.Element)):
            if node.tagname != "download_reference":
                continue
            target = node.get("reftarget", "")
            path = posixpath.normpath(posixpath.join(posixpath.dirname(docname), target))
            if path.startswith(".."):
                continue
            ref = nodes.reference("", "", *node.children, refuri=f"{repo}/blob/{branch}/{path}",
                                  classes=["external"])
            node.replace_self(ref)


def inline_attachments(app: Sphinx, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb") or '"attachments"' not in source[0]:
        return
    nb = json.loads(source[0])
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        for name, bundle in cell.get("attachments", {}).items():
            mime, data = next(iter(bundle.items()))
            data = "".join(data).replace("\n", "")
            text = text.replace(f"attachment:{name}", f"data:{mime};base64,{data}")
        cell["source"] = text
    source[0] = json.dumps(nb)


def setup(app: Sphinx) -> dict:
    app.connect("source-read", inline_attachments)
    app.connect("doctree-read", drop_widget_state_and_bokeh_loader)
    # before Sphinx's download collector (priority 500) would copy the file into the site
    app.connect("doctree-read", RepositoryLinks.rewrite, priority=400)
    app.connect("html-page-context", page_context)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
