"""The course's book (``python3 course.py book``): built, then read page by page like a reader.

The fixture builds the site with the command ``course.py book`` runs (into ``build/book``), with
warnings as errors, from an empty cache of its own (``build/book-test-cache``): every lesson runs
in that build, and this is where the suite runs the lessons (``course.py test`` leaves them out
of nbval; a cell that fails or runs past 300 s fails the build).  Then:

* the site has a page for every lesson, exercise and doc, and no solution;
* every local link and ``#anchor`` of every page resolves (parsed with ``html.parser``);
* no page names anything outside the site to load (scripts, styles, images, fonts);
* in headless Chromium, served by a local HTTP server, every page: no console error, no request
  leaves the machine (each is routed to an abort and reported), maths typeset by MathJax with
  no raw ``$…$`` left in the prose, every bokeh plot drawn, every explorer's with data;
* the search page finds a lesson offline, and pages opened from ``file://`` work the same;
* a rebuild from scratch (``-E``) takes every notebook's outputs from the cache.

Needs Debian's ``/usr/bin/chromium`` for the browser part; without it that part skips, unless
``GPU_LESSONS_REQUIRE_BROWSER`` is set (CI), where it fails.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, _colourful_pixels, _need_browser

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.book, pytest.mark.slow]

#: The test's own Sphinx and jupyter-cache folders, emptied before the first build so that it
#: runs every lesson (``course.py book``'s ``build/book-cache`` is left as it is).
CACHE = ROOT / "build" / "book-test-cache"


def _course():
    spec = importlib.util.spec_from_file_location("course", ROOT / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(*args: str) -> subprocess.CompletedProcess:
    course = _course()
    return subprocess.run(course.book_command(sys.executable, course.BOOK_OUT, list(args), CACHE),
                          cwd=ROOT, env=course.book_env(CACHE), capture_output=True, text=True,
                          timeout=1500)


@pytest.fixture(scope="module")
def site() -> Path:
    shutil.rmtree(CACHE, ignore_errors=True)
    proc = _build()
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    log = proc.stdout + proc.stderr
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):  # each lesson ran, top to bottom
        assert re.search(rf"{nb.name}: Executing notebook", log), f"{nb.name} was not run"
    return _course().BOOK_OUT


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


class _Page(HTMLParser):
    """What a page links to, loads and names as anchors."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.loads: list[str] = []
        self.rel: dict[str, str] = {}                   # <link rel="prev|next" href=...>

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            if a.get("rel") in ("next", "prev", "index", "search", "canonical"):
                self.rel[a["rel"]] = a["href"]
            else:
                self.loads.append(a["href"])


@functools.cache
def _parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


# -- the build -----------------------------------------------------------------------------


def test_every_lesson_exercise_and_doc_is_a_page_and_no_solution_is(site):
    expected = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "exercises").glob("*.ipynb"),
                *(ROOT / "docs").rglob("*.md")]
    assert len(expected) > 20
    for src in expected:
        page = site / src.relative_to(ROOT).with_suffix(".html")
        assert page.exists(), f"no page for {src.relative_to(ROOT)}"
    assert (site / "index.html").exists() and (site / "search.html").exists()
    assert not [p for p in site.rglob("*") if "solutions" in p.parts], "solutions in the site"
    # the exercise notebooks offered for download are the hand-outs themselves
    for ex in (ROOT / "exercises").glob("*.ipynb"):
        copy = site / "_sources" / "exercises" / ex.name
        assert copy.read_bytes() == ex.read_bytes()


def test_start_page_has_the_notebook_map_and_the_table_of_contents(site):
    start = (site / "book" / "index.html").read_text(encoding="utf-8")
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f'href="../notebooks/{nb.stem}.html' in start, f"start page misses {nb.stem}"
    # the left-hand table of contents lists the lessons in course order (here on the index
    # page, where no lesson is the current one), and a lesson links to the previous and next
    index = (site / "genindex.html").read_text(encoding="utf-8")
    nav = index[index.index("bd-sidenav"):]
    order = [nav.index(f"notebooks/{nb.stem}.html")
             for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert order == sorted(order)
    stems = [nb.stem for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    for before, lesson, after in zip(stems, stems[1:], stems[2:], strict=False):
        rel = _parsed(site / "notebooks" / f"{lesson}.html").rel
        assert (rel["prev"], rel["next"]) == (f"{before}.html", f"{after}.html"), lesson


def test_every_lesson_and_exercise_says_how_to_run_it(site):
    for folder in ("notebooks", "exercises"):
        for nb in (ROOT / folder).glob("*.ipynb"):
            text = (site / folder / f"{nb.stem}.html").read_text(encoding="utf-8")
            assert "gpu-lessons-run-it" in text and "python3 course.py start" in text
            assert f"urlpath=lab/tree/{folder}/{nb.name}" in text, f"{folder}/{nb.name}: no Binder link"


def test_every_local_link_and_anchor_resolves(site):
    broken = []
    for page in _pages(site):
        for href in _parsed(page).links:
            url = urlparse(href)
            if url.scheme or href.startswith("//"):
                continue                                  # GitHub, Binder: followed only on a click
            target_url, anchor = urldefrag(urljoin(page.as_uri(), href))
            target = Path(unquote(urlparse(target_url).path))
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site)}: {href}"
            if not target.exists():
                broken.append(f"{where} (no file)")
            elif anchor and target.suffix == ".html" and unquote(anchor) not in _parsed(target).ids:
                broken.append(f"{where} (no #{anchor})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_nothing_is_loaded_from_outside_the_site(site):
    outside = [f"{p.relative_to(site)}: {src}" for p in _pages(site) for src in _parsed(p).loads
               if urlparse(src).scheme not in ("", "data") or src.startswith("//")]
    css = [f"{c.relative_to(site)}: {u}" for c in (site / "_static").rglob("*.css")
           for u in re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", c.read_text("utf-8"))]
    assert not outside + css, "loaded from outside the site:\n" + "\n".join(outside + css)


def test_bokehjs_is_loaded_once_per_page_with_figures_and_figures_carry_only_their_data(site):
    for page in _pages(site):
        text = page.read_text(encoding="utf-8")
        bokeh = [s for s in _parsed(page).loads if "/bokeh/" in s]
        if "data-root-id" in text:                       # a bokeh plot: an explorer's or show()'s
            assert len(bokeh) == 1, f"{page.relative_to(site)} loads BokehJS {len(bokeh)} times"
        # a page holds its figures' documents, never a copy of BokehJS (over 1 MB by itself)
        assert len(text) < 1_500_000, f"{page.relative_to(site)}: {len(text):,} bytes"


def test_a_rebuild_takes_every_notebooks_outputs_from_the_cache(site):
    proc = _build("-E")                                   # re-read every page from scratch
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    lessons = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert "Executing notebook" not in log
    for nb in lessons:
        assert re.search(rf"{nb.name}: Using cached notebook", log), f"{nb.name} not from the cache"
    # one executed copy per lesson is kept (older versions are pruned after each build)
    from jupyter_cache import get_cache

    records = get_cache(CACHE / "jupyter").list_cache_records()
    assert sorted(Path(r.uri).name for r in records) == [nb.name for nb in lessons]


# -- in a browser ------------------------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    sync_api = _need_browser()
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class _Reader:
    """One browser tab that records console errors and every request for outside the site."""

    def __init__(self, browser, local: str):
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status}: {r.url}")
                     if r.status >= 400 else None)
        self.page.route("**/*", lambda route: self._route(route, local))

    def _route(self, route, local: str) -> None:
        url = route.request.url
        if url.startswith((local, "data:", "blob:")):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def read(self, url: str) -> None:
        self.page.goto(url, wait_until="load")
        # MathJax typesets after load; bokeh draws once BokehJS has embedded every document
        self.page.wait_for_function(
            "() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)", timeout=30_000)
        self.page.evaluate("() => window.MathJax && MathJax.startup.promise")
        roots = self.page.locator("article [data-root-id]")
        for i in range(roots.count()):
            roots.nth(i).locator("canvas").first.wait_for(timeout=30_000)
        self.page.wait_for_timeout(300)

    def close(self) -> None:
        self.page.close()


def _maths_problems(page) -> list[str]:
    """Maths that MathJax did not typeset, and dollar-delimited TeX left raw in the prose."""
    return page.evaluate(r"""() => {
        const out = [], root = document.querySelector('article') || document.body;
        for (const m of root.querySelectorAll('.math')) {
            if (!m.querySelector('mjx-container')) out.push('not typeset: ' + m.textContent.slice(0, 60));
        }
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            const skip = 'pre, code, script, style, mjx-container, .highlight, .cell_output';
            if (n.parentElement.closest(skip)) continue;
            const raw = n.textContent.match(/\$\$[^$]+\$\$|\$[^\s$](?:[^$\n]*?[^\s$])?\$|\\\(|\\\[/);
            if (raw) out.push('raw TeX: ' + raw[0].slice(0, 60));
        }
        return out;
    }""")


def _undrawn_plots(page) -> list[str]:
    """Bokeh plots (an explorer's or a cell's own) that drew nothing."""
    out = []
    roots = page.locator("article [data-root-id]")
    for i in range(roots.count()):
        if not roots.nth(i).locator("canvas").count():
            out.append(f"plot {roots.nth(i).get_attribute('data-root-id')}: no canvas")
    explorers = page.locator(".gpu-lessons-static")
    for i in range(explorers.count()):
        box = explorers.nth(i)
        figures = box.locator(".gpu-lessons-static-figures")
        if not figures.count():
            continue
        title = box.locator("b").first.inner_text()[:60] if box.locator("b").count() else f"#{i}"
        box.scroll_into_view_if_needed()
        canvases = figures.locator("canvas").all()
        if not canvases or max(_colourful_pixels(c) for c in canvases) <= 100:
            out.append(f"{title}: its plots drew no data")
    return out


def test_every_page_reads_offline_in_a_browser(site, server, browser):
    reader = _Reader(browser, server)
    problems, explorers = [], 0
    # a lesson that builds an explorer (the views' factories are named *_explorer); lesson
    # figures (views.figures, kernel_picture) are plain bokeh plots, not explorer boxes
    explorer_lessons = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")
                        if "_explorer(" in p.read_text(encoding="utf-8")}
    for page in _pages(site):
        rel = page.relative_to(site).as_posix()
        reader.errors.clear()
        reader.read(server + rel)
        if rel == "index.html":                           # the redirect to the start page
            assert reader.page.url.endswith("book/index.html")
            continue
        found = reader.page.locator(".gpu-lessons-static").count()
        explorers += found
        if page.stem in explorer_lessons and page.parent.name == "notebooks" and not found:
            problems.append(f"{rel}: the lesson shows an explorer, the page none")
        problems += [f"{rel}: console: {e}" for e in reader.errors]
        problems += [f"{rel}: {p}" for p in _maths_problems(reader.page)]
        problems += [f"{rel}: {p}" for p in _undrawn_plots(reader.page)]
    reader.close()
    assert not reader.outside, "requests that left the machine:\n" + "\n".join(reader.outside)
    assert not problems, "\n".join(problems)
    assert explorers >= len(explorer_lessons)


def test_search_works_offline(site, server, browser):
    reader = _Reader(browser, server)
    reader.page.goto(server + "search.html?q=occupancy")
    results = reader.page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=30_000)
    hrefs = [a.get_attribute("href") for a in results.locator("a").all()]
    assert any("06_occupancy_latency" in h for h in hrefs), hrefs
    assert not reader.outside and not reader.errors, reader.outside + reader.errors
    reader.close()


def test_pages_work_from_file_urls(site, browser):
    """Double-clicking build/book/index.html: the redirect, explorers, maths and search."""
    reader = _Reader(browser, "file://")
    reader.read((site / "index.html").as_uri())
    assert reader.page.url.endswith("book/index.html")
    lesson = next(p for p in _pages(site) if p.parent.name == "notebooks"
                  and "gpu-lessons-static-figures" in p.read_text(encoding="utf-8")
                  and 'class="math' in p.read_text(encoding="utf-8"))
    reader.read(lesson.as_uri())
    assert not _maths_problems(reader.page) and not _undrawn_plots(reader.page)
    reader.page.goto((site / "search.html").as_uri() + "?q=roofline")
    reader.page.locator("#search-results ul.search li").first.wait_for(timeout=30_000)
    assert not reader.outside and not reader.errors, reader.outside + reader.errors
    reader.close()


def test_figures_pan_zoom_and_hover(site, server, browser):
    """A static figure keeps bokeh's tools: a toolbar, and a tooltip where the mouse is over data."""
    reader = _Reader(browser, server)
    page = next(p for p in _pages(site) if p.parent.name == "notebooks"
                and "gpu-lessons-static-figures" in p.read_text(encoding="utf-8"))
    reader.read(server + page.relative_to(site).as_posix())
    figure = reader.page.locator(".gpu-lessons-static-figures").first
    figure.scroll_into_view_if_needed()
    box = figure.locator("canvas").first.bounding_box()
    tooltip = reader.page.locator(".bk-Tooltip")          # bokeh puts tooltips at the page's end
    shown = False
    for fy in (0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6):
        for fx in (0.3, 0.5, 0.2, 0.7, 0.4, 0.6, 0.8):
            reader.page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            reader.page.wait_for_timeout(50)
            if tooltip.count() and tooltip.first.is_visible():
                shown = True
                break
        if shown:
            break
    assert shown, f"{page.name}: no tooltip anywhere over the first figure"
    assert not reader.errors, reader.errors
    reader.close()


def test_a_figure_with_the_pan_tool_pans(site, server, browser):
    reader = _Reader(browser, server)
    page = next(p for p in _pages(site) if p.parent.name == "notebooks"
                and '"name":"PanTool"' in p.read_text(encoding="utf-8"))
    reader.read(server + page.relative_to(site).as_posix())
    moved = False
    for canvas in reader.page.locator(".gpu-lessons-static-figures canvas").all():
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        if not box or box["width"] < 100:
            continue
        before = canvas.screenshot()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        reader.page.mouse.move(x, y)
        reader.page.mouse.down()
        reader.page.mouse.move(x + 80, y + 40, steps=8)
        reader.page.mouse.up()
        reader.page.wait_for_timeout(300)
        if canvas.screenshot() != before:
            moved = True
            break
    assert moved, f"{page.name}: dragging no figure moved its picture"
    assert not reader.errors, reader.errors
    reader.close()
