"""Sphinx configuration of the course's book: every lesson, exercise and doc page as one static site.

Build it with ``python3 course.py book`` (into ``build/book/``; open ``build/book/index.html``).

Why Sphinx + myst-nb + sphinx-book-theme: it is the stack Jupyter Book 1 was built on, kept up by
the Executable Books project, and it reads ``.ipynb`` files as they are (no conversion step, no
second copy of a lesson).  myst-nb executes the notebooks through jupyter-cache, so a rebuild
re-runs only the notebooks whose code changed; the theme gives a book's reading furniture (a
left-hand table of contents in course order, previous/next links, a per-page contents list,
print styles, a Binder launch button).  Jupyter Book 2 has moved to a Node.js toolchain (mystmd),
which CI cannot install from PyPI.

Everything a page loads is in the site (no CDN): MathJax 3 from the ``sphinx-mathjax-offline``
wheel, BokehJS from the installed ``bokeh`` package, the theme's own fonts and icons.  The
source directory is the repository root (so notebooks link to each other and to ``docs/`` by
their real paths); this folder holds only the configuration, the start page and templates.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Where the course lives online: the "repository" button, Binder's launch link and the links to
#: source files the book does not contain (solutions, the package's code) are made from it.
#: Change it here once the repository is published (or set GPU_LESSONS_REPOSITORY_URL).
REPOSITORY_URL = os.environ.get("GPU_LESSONS_REPOSITORY_URL",
                                 "https://github.com/your-org/gpu-lessons")
REPOSITORY_BRANCH = "main"
BINDER_URL = "https://mybinder.org"

project = "gpu-lessons"
html_title = "GPU performance from first principles"
author = "the gpu-lessons authors"
copyright = "the gpu-lessons authors, MIT licence"

extensions = ["myst_nb", "course_book"]

# -- What is in the book ---------------------------------------------------------------------
# The lessons, the exercise hand-outs (never the solutions), the docs; nothing else in the tree.
root_doc = "book/index"
include_patterns = ["book/index.md", "notebooks/*.ipynb", "exercises/*.ipynb", "docs/**.md"]
exclude_patterns = [".venv", "build", "artifacts", ".git", "solutions", "tests", "gpu_lessons",
                    "tools", "**/.ipynb_checkpoints", "README.md"]
templates_path = ["_templates"]
html_static_path = ["_static"]

# -- Notebooks: executed once, cached ----------------------------------------------------------
# jupyter-cache keeps each lesson's outputs keyed by its code cells: an edit to the prose of one
# lesson re-renders it without running anything, an edit to its code re-runs that one notebook.
nb_execution_mode = "cache"
nb_execution_cache_path = os.environ.get("GPU_LESSONS_BOOK_CACHE",
                                         str(HERE.parent / "build" / "book-cache" / "jupyter"))
# The exercises are hand-outs: their questions and stubs read best as they are given out.
nb_execution_excludepatterns = ["exercises/*"]
nb_execution_timeout = 300
nb_execution_raise_on_error = True   # a lesson that fails to run fails the build
nb_execution_show_tb = True
nb_merge_streams = True
# An explorer's live widget cannot draw without a kernel: use its static HTML (see
# gpu_lessons.views._base.Explorer.static_html).  (Bokeh's notebook loader, which inlines all
# of BokehJS into a notebook, is dropped by course_book: the book loads BokehJS from _static.)
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}                 # the default loads require.js and the widget manager from CDNs

# -- Markdown and maths ----------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3              # "#section-title" links inside and between pages
mathjax_path = "mathjax/tex-svg.js"   # copied from sphinx-mathjax-offline by course_book
suppress_warnings = [
    "myst.header",                    # notebooks go from a title straight to ### "Explore" boxes
    "mystnb.unknown_mime_type",       # bokeh's bokehjs_load/exec types: their JavaScript is used
    "misc.highlighting_failure",      # pseudo-code in a ```cuda block: shown unhighlighted
]

# -- Theme -----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_css_files = ["book.css"]
html_last_updated_fmt = ""
# Search snippets are fetched from the result pages, which a browser refuses for file:// pages:
# results list titles only, and search works from a double-clicked build/book/index.html too.
html_show_search_summary = False
html_show_sourcelink = False          # the download button (.ipynb, .md) serves the same file
html_context = {"default_mode": "light"}   # bokeh's plots are drawn on white
html_theme_options = {
    "repository_url": REPOSITORY_URL,
    "repository_branch": REPOSITORY_BRANCH,
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "launch_buttons": {"binderhub_url": BINDER_URL, "notebook_interface": "jupyterlab"},
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "navbar_persistent": [],          # one search field, in the sidebar (not a second in a top bar)
}
html_additional_pages = {"index": "redirect.html"}   # build/book/index.html -> the start page
