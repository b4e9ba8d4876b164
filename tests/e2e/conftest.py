"""A live `streamlit run app.py` and headless Debian Chromium for the browser tests.

Chromium comes from apt (`apt-get install -y chromium fonts-noto-cjk fonts-noto-color-emoji`), never from
`playwright install`, which downloads a browser. Without it the tests skip and say why.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from bench.loadtest import CHROMIUM, CHROMIUM_ARGS, serve

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
STARTUP_SECONDS = 90  # the first run imports torch; a busy 2-core machine needs a while


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def script_runs_log(artifacts_dir: Path) -> Path:
    """Where the app server records each script run: its time and whether it was a fragment
    rerun (bench.scripttiming), so a test can check what a click made the server do."""
    return artifacts_dir / "script-runs.jsonl"


@pytest.fixture(scope="session")
def app_url(artifacts_dir: Path, script_runs_log: Path):
    """Base URL of the app served by a real streamlit process, stopped after the session."""
    log_path = artifacts_dir / "streamlit.log"
    script_runs_log.unlink(missing_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            url, _ = stack.enter_context(
                serve(log_path, startup_s=STARTUP_SECONDS, timing_log=script_runs_log)
            )
        except RuntimeError as err:  # it did not start: show why
            pytest.fail(f"{err}:\n{log_path.read_text()}")
        yield url


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            f"browser tests need Debian's Chromium at {CHROMIUM}: "
            "apt-get install -y chromium fonts-noto-cjk fonts-noto-color-emoji"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need the playwright package (requirements-dev)"
    )
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def screenshot_whole_page():
    """``screenshot_whole_page(page, path)``: the whole page, not just the first screen."""
    return _screenshot_whole_page


def _screenshot_whole_page(page, path) -> None:
    """Streamlit scrolls inside its own container, so full_page=True alone stops at the
    fold: grow the viewport to the content's height first, then put it back."""
    viewport = page.viewport_size
    height = page.evaluate(
        "Math.max(...[...document.querySelectorAll('[data-testid=stMain] *')]"
        ".map(e => e.scrollHeight))"
    )
    page.set_viewport_size({"width": viewport["width"], "height": max(height, viewport["height"])})
    page.wait_for_timeout(300)  # let the layout settle at the new size
    page.screenshot(path=path, full_page=True)
    page.set_viewport_size(viewport)


@pytest.fixture
def clipped_formulas():
    """``clipped_formulas(page)``: the formulas whose last glyph ends past their own box.

    A formula wider than its column is cut off at the column's edge (the home page's
    attention formula once lost its final V); KaTeX's box then scrolls instead of growing.
    """
    return _clipped_formulas


def _clipped_formulas(page) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll('[data-testid=stMain] .katex-display')]
            .map(d => {
                const glyphs = [...d.querySelectorAll('.katex-html .base')];
                const right = Math.max(...glyphs.map(g => g.getBoundingClientRect().right));
                return [right - d.getBoundingClientRect().right, d.textContent.slice(0, 30)];
            })
            .filter(([over]) => over > 0.5)
            .map(([over, text]) => `${over.toFixed(1)}px past the edge: ${text}`)"""
    )


@pytest.fixture
def clipped_controls():
    """``clipped_controls(page)``: the controls whose label or option is cut off.

    A segmented control does not wrap: an option past its column's edge is hidden (the
    explorer's Korean "크로스 (디코더→인…"); labels, drop-down values and button texts end
    in an ellipsis when their box is too narrow. Text the reader types is not checked.
    """
    return _clipped_controls


def _clipped_controls(page) -> list[str]:
    return page.evaluate(_CLIPPED_CONTROLS_JS)


_CLIPPED_CONTROLS_JS = """() => {
  const out = [];
  const main = document.querySelector('[data-testid=stMain]');
  const cut = (el) => el.scrollWidth > el.clientWidth + 1;
  for (const g of main.querySelectorAll('[data-testid=stButtonGroup]')) {
    if (!g.offsetParent) continue;
    const box = g.parentElement.getBoundingClientRect();
    for (const b of g.querySelectorAll('button')) {
      const r = b.getBoundingClientRect();
      if (r.right > box.right + 0.5) out.push(`option ${(r.right - box.right).toFixed(0)}px past its box: ${b.textContent.trim()}`);
    }
  }
  for (const el of main.querySelectorAll('[data-testid=stSelectbox] input[role=combobox]')) {
    if (el.offsetParent && cut(el)) out.push(`choice cut: ${el.value}`);
  }
  const skip = 'input, textarea, pre, code, [data-testid=stDataFrame], [data-testid=stTable], .js-plotly-plot';
  for (const el of main.querySelectorAll('*')) {
    if (!el.offsetParent || !el.textContent.trim() || el.closest(skip)) continue;
    const style = getComputedStyle(el);
    if (style.textOverflow === 'ellipsis' && style.overflow !== 'visible' && cut(el)) {
      out.push(`text cut: ${el.textContent.trim().slice(0, 60)}`);
    }
  }
  return [...new Set(out)];
}"""


# Opened at a page's own address (/explorer), Streamlit's frontend first probes
# /explorer/_stcore/health and /explorer/_stcore/host-config for a base path, gets 404,
# then falls back to the root. Those two misses are Streamlit's, not the app's.
_BASE_PATH_PROBE = re.compile(r"/[^/?]+/_stcore/(health|host-config)$")
_RESOURCE_404 = "Failed to load resource: the server responded with a status of 404 (Not Found)"


def _offsite(url: str, app_url: str) -> bool:
    return not url.startswith((app_url, "data:", "blob:", "about:"))


@pytest.fixture
def page(browser, app_url):
    """A fresh browser tab. `page.problems` collects console errors, uncaught exceptions and
    any request that leaves the app's own server (the lab must work offline)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=app_url)
    tab = context.new_page()
    tab.problems = []
    probes = []

    def on_console(msg) -> None:
        if msg.type != "error":
            return
        if msg.text == _RESOURCE_404 and probes:
            probes.pop()  # the console's echo of one base-path probe
            return
        tab.problems.append(msg.text)

    tab.on(
        "response",
        lambda r: r.status == 404 and _BASE_PATH_PROBE.search(r.url) and probes.append(r.url),
    )
    tab.on("console", on_console)
    tab.on("pageerror", lambda exc: tab.problems.append(f"uncaught: {exc}"))
    tab.on(
        "request",
        lambda req: _offsite(req.url, app_url) and tab.problems.append(f"off-site: {req.url}"),
    )
    yield tab
    context.close()
