"""Every explorer in a real browser: JupyterLab + headless Chromium, driven by Playwright.

Starts JupyterLab on 127.0.0.1 (no token) over a temporary folder holding one notebook that shows
every explorer in ``gpu_lessons.views.EXPLORERS`` and every lesson figure in
``gpu_lessons.views.figures.FIGURES``, runs all cells, and checks that

* every explorer rendered its widgets and at least one bokeh canvas,
* every figure drew a canvas with data on it (coloured pixels, not only axes),
* moving a slider (or picking another menu entry) changes the plot's pixels,
* the browser console logged no errors.

Screenshots go to ``artifacts/browser/``.  Needs Debian's ``/usr/bin/chromium``; without it the
test skips, unless ``GPU_LESSONS_REQUIRE_BROWSER`` is set (CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from gpu_lessons.views import EXPLORERS
from gpu_lessons.views.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-dev-shm-usage"]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _need_browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("GPU_LESSONS_REQUIRE_BROWSER"):
            pytest.fail(f"Chromium not found at {CHROMIUM} but GPU_LESSONS_REQUIRE_BROWSER is set")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


def _explorer_notebook(path: Path) -> None:
    cells = [nbformat.v4.new_code_cell("import gpu_lessons\n_ = gpu_lessons.setup(report=False)")]
    for name, target in EXPLORERS.items():
        module, func = target.split(":")
        cells.append(nbformat.v4.new_markdown_cell(f"### {name}"))
        cells.append(nbformat.v4.new_code_cell(f"from {module} import {func}\n{func}()"))
    for name, target in FIGURES.items():
        module, func = target.split(":")
        cells.append(nbformat.v4.new_markdown_cell(f"### figure: {name}"))
        cells.append(nbformat.v4.new_code_cell(f"from {module} import {func}\n{func}()"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, jupyterlab):
    work = tmp_path_factory.mktemp("lab")
    _explorer_notebook(work / "explorers.ipynb")
    # No "get notified about Jupyter news?" toast over the plots, and no update checks.
    settings = work / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    argv = [sys.executable, "-m", "jupyter", "lab", "--no-browser",
            f"--ServerApp.root_dir={work}", "--LabApp.expose_app_in_browser=True",
            f"--LabApp.user_settings_dir={work / '.settings'}",
            f"--LabApp.workspaces_dir={work / '.workspaces'}",  # restore no tabs of other sessions
            "--allow-root"]
    with jupyterlab(argv, work / "lab.log", wait_s=120,
                    env=dict(os.environ, BOKEH_RESOURCES="inline")) as url:
        yield url


def test_every_explorer_renders_and_responds(lab):
    sync_api = _need_browser()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}")
                if r.status >= 400 else None)
        page.goto(f"{lab}/lab/tree/explorers.ipynb")
        page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')",
                               timeout=90_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                               timeout=90_000, state="attached")
        page.wait_for_timeout(2000)  # let the notebook panel become the current widget
        # Fire and forget: awaiting the command's promise would wait for every cell.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        explorers = page.locator(".gpu-lessons-explorer")
        explorers.nth(len(EXPLORERS) - 1).wait_for(timeout=180_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                               timeout=180_000, state="attached")
        page.wait_for_timeout(3000)  # let bokeh finish drawing
        assert explorers.count() == len(EXPLORERS)
        page.screenshot(path=str(ARTIFACTS / "all_explorers.png"), full_page=True)

        for i, name in enumerate(EXPLORERS):
            box = explorers.nth(i)
            box.scroll_into_view_if_needed()
            canvas = box.locator("canvas").first
            canvas.wait_for(timeout=60_000)
            assert box.locator(".widget-slider, .widget-dropdown, .widget-toggle-buttons").count()
            page.wait_for_timeout(500)
            box.screenshot(path=str(ARTIFACTS / f"{name}_before.png"))
            colour = max(_colourful_pixels(c) for c in box.locator("canvas").all())
            assert colour > 100, f"{name}: its plots drew no data (only axes and grid)"
            assert _some_control_changes_the_plot(box, canvas, page), (
                f"{name}: moving its sliders and menus did not change the plot")
            box.screenshot(path=str(ARTIFACTS / f"{name}_after.png"))
        drawings = page.locator(".gpu-lessons-figure")
        assert drawings.count() == len(FIGURES)
        for i, name in enumerate(FIGURES):
            box = drawings.nth(i)
            box.scroll_into_view_if_needed()
            box.locator("canvas").first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)
            box.screenshot(path=str(ARTIFACTS / f"figure_{name}.png"))
            colour = max(_colourful_pixels(c) for c in box.locator("canvas").all())
            assert colour > 100, f"figure {name}: drew no data (only axes and grid)"
        browser.close()
    assert not errors, "browser console errors:\n" + "\n".join(errors)


def _colourful_pixels(canvas) -> int:
    """Pixels of a canvas that are clearly coloured: data glyphs use the Okabe-Ito palette,
    while axes, grid lines and text are grey, so an empty plot scores about zero."""
    return canvas.evaluate("""c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
            const hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
            if (d[i + 3] > 0 && hi - lo > 60) n++;
        }
        return n;
    }""")


def _some_control_changes_the_plot(box, canvas, page, tries: int = 3) -> bool:
    """Move the explorer's sliders (a click near the end of the track) and then its menus (the
    next entry), one at a time, until the first plot's pixels change."""
    before = canvas.screenshot()
    tracks = box.locator(".widget-slider .noUi-target")
    selects = box.locator(".widget-dropdown select")
    for i in range(min(tries, tracks.count())):
        track = tracks.nth(i)
        if track.is_disabled() or "disabled" in (track.get_attribute("class") or ""):
            continue
        size = track.bounding_box()
        if size is None:
            continue
        track.click(position={"x": size["width"] * 0.85, "y": size["height"] / 2})
        if _redrawn_within(canvas, page, before):
            return True
    for i in range(min(tries, selects.count())):
        select = selects.nth(i)
        if select.is_disabled():
            continue
        options = select.locator("option").all_inner_texts()
        current = select.locator("option:checked").inner_text()
        nxt = next((o for o in options if o != current), current)
        select.select_option(label=nxt)
        if _redrawn_within(canvas, page, before):
            return True
    return False


def _redrawn_within(canvas, page, before: bytes, ms: int = 1500, step: int = 250) -> bool:
    """Whether the canvas no longer looks like ``before`` within ``ms``: looked at every
    ``step`` ms, so a plot that redraws at once does not wait out the whole allowance."""
    for _ in range(ms // step):
        page.wait_for_timeout(step)
        if canvas.screenshot() != before:
            return True
    return False
