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
* makes a code span that names a page of the book a link to it: `docs/measured/h200.md`,
  `notebooks/05_roofline.ipynb`, or a lesson's name as the README's table writes it,
  `05_roofline`;
* shows images attached to notebook cells (``![…](attachment:name.png)``, which myst-nb does not
  read) by inlining them as ``data:`` URIs;
* after a build, forgets executed notebooks that no longer match their source (jupyter-cache
  keeps every version, about 8 MB each, mostly the inlined BokehJS of ``setup()``).
"""

from __future__ import annotations

import json
import posixpath
import shutil
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from urllib.parse import quote, urlparse

import bokeh
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

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


def link_outside_files_to_the_repository(app: Sphinx, doctree) -> None:
    """Links to repository files that are not pages of the book -- a solution notebook, the
    package's source, a data file -- go to the file in the repository, not to a local copy
    (MyST would copy a plain file into the site, and call a notebook outside it a broken link)."""
    opts = app.config.html_theme_options
    blob = f"{opts['repository_url'].rstrip('/')}/blob/{opts['repository_branch']}"
    docdir = posixpath.dirname(app.env.docname)
    for node in list(doctree.findall(addnodes.download_reference)):
        path = posixpath.normpath(posixpath.join(docdir, node["reftarget"]))
        if not path.startswith(".."):
            node.replace_self(_external(f"{blob}/{path}", node.children))
    for node in list(doctree.findall(addnodes.pending_xref)):
        target = node.get("reftarget", "")
        if node.get("reftype") != "myst" or node.get("refdomain") != "doc" or (
                target in app.env.found_docs):
            continue
        for suffix in app.config.source_suffix:
            if (Path(app.srcdir) / f"{target}{suffix}").is_file():
                node.replace_self(_external(f"{blob}/{target}{suffix}", node.children))
                break


def link_code_spans_that_name_pages(app: Sphinx, doctree) -> None:
    """`docs/sources.md` or `05_roofline` in backticks becomes a link to that page."""
    pages = {}
    for doc in app.env.found_docs:
        path = Path(app.env.doc2path(doc)).relative_to(app.srcdir).as_posix()
        pages[path] = doc
        if doc.startswith("notebooks/"):
            pages[posixpath.basename(doc)] = doc         # a lesson by its name alone
    for node in list(doctree.findall(nodes.literal)):
        doc = pages.get(node.astext())
        if doc is None or doc == app.env.docname or _inside(node, (nodes.reference, nodes.title,
                                                                    addnodes.pending_xref)):
            continue
        # resolved by MyST as if written [`docs/sources.md`](docs/sources.md): the code kept
        ref = addnodes.pending_xref("", nodes.inline("", "", node.deepcopy()), refdomain="doc",
                                    reftype="myst", reftarget=doc, reftargetid=None,
                                    refexplicit=True, refdoc=app.env.docname)
        node.replace_self(ref)


def _inside(node, kinds) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, kinds):
            return True
        parent = parent.parent
    return False


def _external(url: str, children) -> nodes.reference:
    return nodes.reference("", "", *[c.deepcopy() for c in children], refuri=url,
                           classes=["external"])


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


def prune_cache(app: Sphinx, exc) -> None:
    """Keep one executed copy per notebook: the one that matches its source now."""
    if exc is not None or app.config.nb_execution_mode != "cache":
        return
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(app.config.nb_execution_cache_path)
    current, keep = set(), set()
    for docname in app.env.found_docs:
        path = Path(app.env.doc2path(docname))
        if path.suffix == ".ipynb":
            current.add(str(path))
            with suppress(KeyError):                       # not executed (the exercises)
                keep.add(cache.match_cache_notebook(nbformat.read(path, as_version=4)).pk)
    for record in cache.list_cache_records():
        if record.uri in current and record.pk not in keep:
            cache.remove_cache(record.pk)


def setup(app: Sphinx) -> dict:
    app.connect("source-read", inline_attachments)
    app.connect("doctree-read", drop_widget_state_and_bokeh_loader)
    # before Sphinx's download collector (priority 500) would copy the file into the site
    app.connect("doctree-read", link_outside_files_to_the_repository, priority=400)
    app.connect("doctree-read", link_code_spans_that_name_pages)
    app.connect("html-page-context", page_context)
    app.connect("build-finished", copy_assets)
    app.connect("build-finished", prune_cache)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
