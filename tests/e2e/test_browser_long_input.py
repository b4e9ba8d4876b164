"""A long document in the explorer, in a real browser: the pooled overview with its caption,
a zoom picked with the keyboard on the range sliders drawn token by token, and no chart
larger than 2 MB on the wire (every websocket frame the browser receives is measured)."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.e2e.conftest import SCREENSHOTS
from tests.hf_folders import build_long_folder, long_text
from ui.i18n import translate
from ui.maps import WINDOW_MAX

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


TIMEOUT_MS = 240_000
FRAME_BYTES_MAX = 2 * 10**6
CHARTS = "[data-testid=stPlotlyChart]"


@pytest.fixture(scope="module")
def long_folder(tmp_path_factory):
    # 4,096 positions: today's loader reads half as input (2,048 tokens) and appends up to
    # 32 generated ones, well past the 512 a side where the overview takes over.
    return build_long_folder(tmp_path_factory.mktemp("browser-long") / "long-llama", 4096)


def settled(page) -> None:
    """No script run in flight (the status widget shows only after a while, so the app's own
    script state is read too): a key pressed during a run can be drawn over by its end."""
    page.wait_for_function(
        """() => !document.querySelector('[data-testid=stStatusWidget]')
            && document.querySelector('[data-testid=stApp]')
                ?.getAttribute('data-test-script-state') === 'notRunning'""",
        timeout=TIMEOUT_MS,
    )


def chart_title(page, n: int) -> str:
    return page.locator(CHARTS).nth(n).locator(".gtitle").first.text_content() or ""


# one language: the words change, not the behaviour (the page sweep holds every page's
# words in both, tests/e2e/test_accessibility.py)
@pytest.mark.parametrize("lang", ["ko"])
def test_a_long_input_shows_an_overview_and_a_keyboard_zoom_in_under_2_mb_a_chart(
    page, long_folder, artifacts_dir, screenshot_whole_page, lang
):
    frames: list[int] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda payload: frames.append(len(payload or b""))),
    )
    page.goto(f"/explorer?model=folder&lang={lang}&text={quote(long_text())}")
    folder_box = page.get_by_label(translate("sidebar.folder", lang))
    folder_box.fill(str(long_folder))
    folder_box.press("Enter")
    page.locator(f"{CHARTS} .main-svg").nth(1).wait_for(timeout=TIMEOUT_MS)
    settled(page)
    for n in (0, 1):  # plotly lays the axes out after the chart's first frame (CI: no ticks yet)
        page.locator(CHARTS).nth(n).locator(".ytick text").first.wait_for(timeout=TIMEOUT_MS)

    main = page.get_by_test_id("stMain")
    # the first pass ran in a worker under a bar of layers (tests/unit/test_background.py;
    # two tiny layers here may end before the bar's first poll): the bar is gone
    assert page.get_by_test_id("stProgress").count() == 0
    assert translate("explorer.reduce_said.max", lang) in main.inner_text()  # the caption
    overview = chart_title(page, 0)
    assert translate("explorer.overview", lang) in overview
    # The overview's axes give positions, the window's give tokens.
    overview_ticks = page.locator(CHARTS).nth(0).locator(".xtick text").all_text_contents()
    assert overview_ticks and all(t.isdigit() for t in overview_ticks)
    window_ticks = page.locator(CHARTS).nth(1).locator(".ytick text").all_text_contents()
    assert window_ticks and not all(t.isdigit() for t in window_ticks)
    last = WINDOW_MAX - 1  # the default window: the first WINDOW_MAX positions a side
    assert re.search(rf"0–{last}\D+0–{last}", chart_title(page, 1))
    screenshot_whole_page(page, artifacts_dir / f"explorer-long-{lang}-1440.png")

    # Zoom with the keyboard: Tab to the key range's lower handle, three steps right.
    settled(page)  # the screenshot resized the page: let any run it caused end first
    key_slider = page.get_by_test_id("stSlider").nth(1).get_by_role("slider").first
    key_slider.focus()
    for _ in range(3):
        key_slider.press("ArrowRight")
    page.wait_for_timeout(300)  # the slider sends its value once the keys stop
    settled(page)
    # as far as the presses took it (a range input's value, or an ARIA slider's)
    start = int(key_slider.evaluate("e => e.value ?? e.getAttribute('aria-valuenow')"))
    assert start > 0, "the key presses did not move the window"
    page.wait_for_function(
        """([start, last]) => {
            const t = document.querySelectorAll('[data-testid=stPlotlyChart] .gtitle')[1];
            return t && new RegExp(`${start}–${last}\\\\s*$`).test(t.textContent);
        }""",
        arg=[start, last],
        timeout=TIMEOUT_MS,
    )
    settled(page)
    tokens = page.locator(CHARTS).nth(1).locator(".xtick text").all_text_contents()
    assert tokens and not all(t.isdigit() for t in tokens)

    # The view as a file: the overview and the window shown, under 5 MB at any length
    button = main.get_by_role("button", name=translate("chart.export_html", lang))
    with page.expect_download(timeout=TIMEOUT_MS) as download:
        button.click()
    saved = artifacts_dir / f"explorer-long-{lang}.html"
    download.value.save_as(saved)
    html = saved.read_text(encoding="utf-8")
    assert saved.stat().st_size < 5 * 10**6 and html.count('<script class="figure"') == 2
    assert f"{start}–{last}" in html and f'lang="{lang}"' in html

    if SCREENSHOTS:  # the phone's view, for a person to look at: no check reads it
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        screenshot_whole_page(page, artifacts_dir / f"explorer-long-{lang}-390.png")

    # Head statistics: every head of both layers (too quick here for a bar), the table
    main.locator("button", has_text=translate("explorer.view.stats", lang)).first.click()
    page.get_by_test_id("stDataFrame").wait_for(timeout=TIMEOUT_MS)
    settled(page)
    assert page.get_by_test_id("stProgress").count() == 0
    assert frames and max(frames) <= FRAME_BYTES_MAX, sorted(frames)[-3:]
    assert page.problems == []
