"""A live `streamlit run app.py` and headless Debian Chromium for the browser tests.

Chromium comes from apt (`apt-get install -y chromium fonts-noto-cjk`), never from
`playwright install`, which downloads a browser. Without it the tests skip and say why.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_SECONDS = 90  # the first run imports torch; a busy 2-core machine needs a while


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def app_url(artifacts_dir: Path):
    """Base URL of the app served by a real streamlit process, stopped after the session."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = artifacts_dir / "streamlit.log"
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log_path.open("w") as log:
        server = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _healthy(url):
            if server.poll() is not None:
                pytest.fail(f"streamlit exited with {server.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"streamlit not healthy after {STARTUP_SECONDS}s:\n{log_path.read_text()}"
                )
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            f"browser tests need Debian's Chromium at {CHROMIUM}: "
            "apt-get install -y chromium fonts-noto-cjk"
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
