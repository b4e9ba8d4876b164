""" "Attention since 2017" in a real browser, in Korean: every section drawn, the
online-softmax stepper reaches ordinary attention, bad calculator input is explained.
Screenshots in tests/artifacts/. One load (modern_tab): the sections' sweep and the stepper
share it."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.pagechecks import watch_problems
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 180_000
# Charts per tab (only the open tab is drawn): length, q·k, RoPE; none; two cache layers
# and two cache sizes; online softmax and memory; sinks.
TAB_CHARTS = {"positions": 3, "gqa": 0, "cache": 4, "flash": 2, "sinks": 1}


def wait_until_drawn(page, charts: int = 1) -> None:
    page.wait_for_function(
        "(n) => document.querySelectorAll('[data-testid=stPlotlyChart] .main-svg').length >= n",
        arg=charts,
        timeout=TIMEOUT_MS,
    )
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    page.evaluate("document.fonts.ready")


# What each language opens: the Korean link sets the FlashAttention tab's sliders (12 keys in
# blocks of 5: three tiles), so its sweep and the last-tile test share one load.
LINKS = {"ko": "/modern?lang=ko&mfkeys=12&mfblock=5"}


@pytest.fixture(scope="module")
def modern_tab(shared_context, app_url):
    """``modern_tab(lang)``: the page opened from LINKS[lang], once per module, in a tab of
    the module's context that the tests in that language share."""
    opened: dict = {}

    def tab(lang: str):
        if lang not in opened:
            page = watch_problems(shared_context.new_page(), app_url)
            page.goto(LINKS[lang])
            page.locator("h1", has_text=translate("modern.title", lang)).wait_for(
                timeout=TIMEOUT_MS
            )
            if "mfkeys" in LINKS[lang]:  # a link to a widget opens its tab
                page.locator(
                    "[role=tab][aria-selected=true]",
                    has_text=translate("tabs.modern.flash", lang),
                ).wait_for(timeout=TIMEOUT_MS)
            opened[lang] = page
        return opened[lang]

    yield tab
    for page in opened.values():
        page.close()


def test_every_section_is_drawn(modern_tab, artifacts_dir, screenshot_whole_page):
    """In Korean, the language whose words could be left out (tests/app/test_modern.py
    renders every section in both; the page sweep opens the page in both at every width)."""
    lang = "ko"
    page = modern_tab(lang)
    text = ""
    for key, charts in TAB_CHARTS.items():  # one tab open at a time
        page.get_by_role("tab", name=translate(f"tabs.modern.{key}", lang)).click()
        page.get_by_role("heading", name=translate(f"modern.{key}.header", lang)).wait_for(
            timeout=TIMEOUT_MS
        )
        wait_until_drawn(page, charts)
        screenshot_whole_page(page, artifacts_dir / f"modern-{key}-{lang}.png")
        text += page.get_by_test_id("stMain").inner_text()
    assert translate("modern.cache.equal", lang).split("{")[0] in text
    assert HANGUL.search(text) and translate("modern.title", "en") not in text
    assert "Traceback" not in text
    assert page.problems == []


def test_the_last_tile_equals_ordinary_attention_and_bad_shapes_are_explained(
    modern_tab, artifacts_dir, screenshot_whole_page
):
    """On the Korean page the sweep above drew (its link opens the FlashAttention tab with
    12 keys in blocks of 5; the sweep left it on another tab)."""
    from playwright.sync_api import expect  # the browser fixture has made sure it is there

    page = modern_tab("ko")
    page.get_by_role("tab", name=translate("tabs.modern.flash", "ko")).click()
    wait_until_drawn(page, TAB_CHARTS["flash"])
    keys = page.get_by_test_id("stSlider").filter(has_text=translate("modern.flash.keys", "ko"))
    # the link's 12 keys, once the tab's run is over (one suite run read the default 10 the
    # moment the tab was drawn: Streamlit may show a run's first frame of the slider before
    # the kept value arrives)
    expect(keys.first.get_by_test_id("stSliderThumbValue")).to_have_text("12", timeout=30_000)
    tiles = page.get_by_test_id("stSlider").filter(has_text=translate("modern.flash.tile", "ko"))
    thumb = tiles.get_by_role("slider")
    shown = tiles.get_by_test_id("stSliderThumbValue")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    # Press until the slider itself shows the last of the three tiles: a key pressed before
    # the widget is ready is lost.
    while (value := int(shown.inner_text())) != 3:
        assert time.monotonic() < deadline, f"the tile slider stuck at {value}"
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_timeout(400)
    page.get_by_text(translate("modern.flash.equal", "ko", diff="")[:20]).wait_for(
        timeout=TIMEOUT_MS
    )
    page.get_by_role("tab", name=translate("tabs.modern.cache", "ko")).click()
    page.get_by_text(translate("modern.calc.header", "ko")).click()
    kv = page.get_by_label(translate("modern.calc.kv_heads", "ko"))
    kv.fill("3")
    kv.press("Enter")
    message = translate("modern.calc.kv_divide", "ko", n_kv_heads=3, n_heads=32)
    page.get_by_text(message).wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    screenshot_whole_page(page, artifacts_dir / "modern-steps-ko.png")
    assert "Traceback" not in page.get_by_test_id("stMain").inner_text()
    assert page.problems == []
