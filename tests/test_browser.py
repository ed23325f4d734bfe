"""Every explorer in a real browser: JupyterLab + headless Chromium, driven by Playwright.

Starts JupyterLab on 127.0.0.1 (no token) over a temporary folder holding one notebook that shows
every explorer in ``gpu_lessons.views.EXPLORERS``, runs all cells, and checks that

* every explorer rendered its widgets and at least one bokeh canvas,
* moving a slider (or picking another menu entry) changes the plot's pixels,
* the browser console logged no errors.

Screenshots go to ``artifacts/browser/``.  Needs Debian's ``/usr/bin/chromium``; without it the
test skips, unless ``GPU_LESSONS_REQUIRE_BROWSER`` is set (CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from gpu_lessons.views import EXPLORERS

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _explorer_notebook(path: Path) -> None:
    cells = [nbformat.v4.new_code_cell("import gpu_lessons\n_ = gpu_lessons.setup(report=False)")]
    for name, target in EXPLORERS.items():
        module, func = target.split(":")
        cells.append(nbformat.v4.new_markdown_cell(f"### {name}"))
        cells.append(nbformat.v4.new_code_cell(f"from {module} import {func}\n{func}()"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("lab")
    _explorer_notebook(work / "explorers.ipynb")
    # No "get notified about Jupyter news?" toast over the plots, and no update checks.
    settings = work / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    port = _free_port()
    log = open(work / "lab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={work}", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={work / '.settings'}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env=dict(os.environ, BOKEH_RESOURCES="inline"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/lab", timeout=5):
                break
        except OSError:
            time.sleep(0.5)
    else:
        pytest.fail("JupyterLab did not start:\n" + (work / "lab.log").read_text()[-3000:])
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


def test_every_explorer_renders_and_responds(lab):
    sync_api = _need_browser()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
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
            before = canvas.screenshot()
            box.screenshot(path=str(ARTIFACTS / f"{name}_before.png"))
            _nudge_first_control(box, page)
            page.wait_for_timeout(1500)
            after = canvas.screenshot()
            box.screenshot(path=str(ARTIFACTS / f"{name}_after.png"))
            assert before != after, f"{name}: moving its first control did not change the plot"
        browser.close()
    assert not errors, "browser console errors:\n" + "\n".join(errors)


def _nudge_first_control(box, page):
    """Move the explorer's first slider one step right, or pick the next entry of its first menu."""
    handle = box.locator(".noUi-handle")
    select = box.locator(".widget-dropdown select")
    if handle.count():
        handle.first.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        handle.first.blur()  # continuous_update=False: the value is sent on release/blur
        page.keyboard.press("Tab")
    elif select.count():
        options = select.first.locator("option").all_inner_texts()
        current = select.first.input_value()
        nxt = next((o for o in options if o != current), current)
        select.first.select_option(label=nxt)
    else:
        raise AssertionError("explorer has no slider or menu to move")
