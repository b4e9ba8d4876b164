"""A live `streamlit run app.py` and headless Debian Chromium for the browser tests.

Chromium comes from apt (`apt-get install -y chromium-headless-shell chromium fonts-noto-cjk
fonts-noto-color-emoji`), never from `playwright install`, which downloads a browser. The tests
drive the headless shell where it is installed (bench.classcore.chromium_for_tests: the same
engine for less CPU; the suite is CPU-bound), else the full browser. Without either they skip
and say why.

Under xdist the browser tests are two groups, each on its own worker with its own server
(``app_url`` is per worker): ``app-server`` (tests/conftest.py: the page sweep, the real
models, the token cost: the pages whose real-model runs they share through the server's
caches) and ``app-server-b``, named by hand in the other modules. Measured back to back
under -n 0, the group of them all kept about half a core busy (277 s of CPU in a 1,691 s
run), so one worker for all of it was the suite's critical path; a second server costs
about 3 s of CPU to start (``app-server-b``'s, without the preload: NO_PRELOAD_GROUP). Its
script-run log and its streamlit log are its own (named after the worker).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from bench.classcore import chromium_for_tests, launch_args, serve
from tests.e2e import servers
from tests.e2e.pagechecks import watch_problems

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
STARTUP_SECONDS = 90  # the first run imports torch; a busy 2-core machine needs a while
# Each xdist worker's server writes logs of its own ("-gw1"); without xdist, no suffix.
_WORKER = f"-{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def script_runs_log(artifacts_dir: Path) -> Path:
    """Where the app server records each script run: its time and whether it was a fragment
    rerun (bench.scripttiming), so a test can check what a click made the server do."""
    return artifacts_dir / f"script-runs{_WORKER}.jsonl"


# The group whose server needs no background preload (ui.preload: SmolLM2, Gemma 3, MiniLM,
# the toy and the concept pages' numbers): its pages run the toys, MiniLM and folders, never a
# real model or the attention page's numbers, and would pay ~5 s of the server's CPU for them.
NO_PRELOAD_GROUP = "app-server-b"


def _needs_preload(request) -> bool:
    """Whether the test that starts this worker's server is outside NO_PRELOAD_GROUP. A
    worker that runs both groups and starts with NO_PRELOAD_GROUP's loads the real models
    when a page first asks (the page waits for them as a first visit after `make run` can)."""
    item = getattr(request, "_pyfuncitem", None)
    mark = item.get_closest_marker("xdist_group") if item is not None else None
    return not (mark and mark.args and mark.args[0] == NO_PRELOAD_GROUP)


@pytest.fixture(scope="session")
def app_url(request, artifacts_dir: Path, script_runs_log: Path):
    """Base URL of the app served by a real streamlit process, stopped after the session."""
    log_path = artifacts_dir / f"streamlit{_WORKER}.log"
    script_runs_log.unlink(missing_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            url, _ = stack.enter_context(
                serve(
                    log_path,
                    startup_s=STARTUP_SECONDS,
                    timing_log=script_runs_log,
                    preload=_needs_preload(request),
                )
            )
        except RuntimeError as err:  # it did not start: show why
            pytest.fail(f"{err}:\n{log_path.read_text()}")
        yield url


@pytest.fixture(scope="session")
def class_server(tmp_path_factory, artifacts_dir) -> servers.ClassServer:
    """A second live server, as `make run` starts it, with a private SQLite class store and
    a models root of a tiny LLaMA and a tiny GPT-2 folder (tests/e2e/servers.py).
    Without the background preload: its pages (classes, the root's folders) use none of
    the four models it loads."""
    from classroom import Classroom

    data = tmp_path_factory.mktemp("class-server")
    environ = servers.prepare(data, tmp_path_factory.mktemp("models"))
    log_path = artifacts_dir / "streamlit-class.log"
    with contextlib.ExitStack() as stack:
        try:
            url, _ = stack.enter_context(
                serve(log_path, startup_s=STARTUP_SECONDS, preload=False, environ=environ)
            )
        except RuntimeError as err:
            pytest.fail(f"{err}:\n{log_path.read_text()}")
        room = Classroom(f"sqlite:///{data / 'classes.sqlite'}")
        yield servers.ClassServer(url, room, log_path)


@pytest.fixture(scope="session")
def shared_deployment(artifacts_dir) -> servers.SharedDeployment:
    """`make serve`'s deployment for test_balancer, then test_class_chaos (tests/e2e/servers.py):
    started by the first to ask, stopped by the last; logs in tests/artifacts/serve/."""
    shared = servers.SharedDeployment(artifacts_dir / "serve")
    yield shared
    shared.close()


# The tests' own browser: every tab of a site in one renderer process (a new tab of a shared
# context then finds the app's scripts already compiled: 1.5-2.0 instead of 2.8-4.0 CPU-s to
# open a page, measured on four modules, Chromium -23 %), and the GPU thread inside the
# browser process (-5 % more; there is no GPU, only software compositing). A context is still
# a process of its own (its storage is). bench/ keeps Chromium's default process model: it
# measures what a person's browser does.
TEST_ONLY_ARGS = ["--process-per-site", "--in-process-gpu"]


@pytest.fixture(scope="session")
def browser():
    chromium = chromium_for_tests()
    if not chromium.exists():
        pytest.skip(
            f"browser tests need Debian's Chromium at {chromium}: apt-get install -y "
            "chromium-headless-shell chromium fonts-noto-cjk fonts-noto-color-emoji"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need the playwright package (requirements-dev)"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium), args=launch_args(chromium) + TEST_ONLY_ARGS
        )
        yield browser
        browser.close()


# Whole-page screenshots are for a person to look at (`make screenshots`, or LAB_SCREENSHOTS=1):
# no test reads them, and each re-lays out and redraws every chart at the page's full height
# (0.3-1 CPU-s on a chart-heavy page, 10 of the modern module's 27 Chromium CPU-s) in a suite
# that is CPU-bound. A test that fails on the `page` fixture keeps its page's screenshot anyway.
SCREENSHOTS = os.environ.get("LAB_SCREENSHOTS", "") not in ("", "0")


@pytest.fixture
def screenshot_whole_page():
    """``screenshot_whole_page(page, path)``: the whole page, not just the first screen; only
    with LAB_SCREENSHOTS=1 (`make screenshots`)."""
    return _screenshot_whole_page if SCREENSHOTS else _no_screenshot


def _no_screenshot(page, path) -> None:
    """A plain `make test`: no screenshot for a person to look at."""


def _screenshot_whole_page(page, path) -> None:
    """Streamlit scrolls inside its own container, so full_page=True alone stops at the
    fold: grow the viewport to the content's height first, then put it back."""
    viewport = page.viewport_size
    height = page.evaluate(
        "Math.max(...[...document.querySelectorAll('[data-testid=stMain] *')]"
        ".map(e => e.scrollHeight))"
    )
    page.set_viewport_size({"width": viewport["width"], "height": max(height, viewport["height"])})
    # the layout at the new size: laid out and painted by the second animation frame
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (``item.report_call``), for fixtures to read."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def shared_context(browser, app_url):
    """One browser context for the worker's app server (1440 × 900): every module's tests
    open tabs in it (``page``) and close them. A tab is a Streamlit session of its own, so
    no page state passes between them; cookies and storage do (the app server's pages keep
    none: only the class pages do, on the class server), so a test that needs its own makes a
    context of its own.

    An anchor tab on the server's health address stays open all along: with one renderer
    per site (TEST_ONLY_ARGS) the next tab joins that warm process and finds the app's
    scripts compiled, 1.9 instead of 3.6-4.4 CPU-s a page; without the anchor the process
    ends with the last tab and every test's tab starts a cold one."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=app_url)
    context.new_page().goto("/_stcore/health")
    yield context
    context.close()


@pytest.fixture
def page(request, shared_context, app_url, artifacts_dir):
    """A fresh tab of the worker's shared_context (the app server's pages keep no cookies or
    storage; a test that needs its own makes a context, as the class tests do).
    `page.problems` collects console errors, uncaught exceptions and any request that leaves
    the app's own server (watch_problems). If the test fails, the tab as it was is kept in
    tests/artifacts/failed-<test>.png (keep_if_failed). With TEST_ONLY_ARGS a new tab costs
    Chromium about half what a new context does."""
    tab = watch_problems(shared_context.new_page(), app_url)
    yield tab
    keep_if_failed(request, tab, artifacts_dir)
    tab.close()


def keep_if_failed(request, tab, artifacts_dir: Path) -> None:
    """A failed test's tab as it was, in tests/artifacts/failed-<test>.png."""
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        name = re.sub(r"[^\w.-]+", "-", request.node.name)[:120]
        with contextlib.suppress(Exception):  # a crashed tab: the failure says enough
            tab.screenshot(path=artifacts_dir / f"failed-{name}.png")
