"""Every concept page in a real browser, in English and Korean; screenshots in tests/artifacts/."""

from __future__ import annotations

import re

import pytest

from tests.app.helpers import CONCEPT_PAGES
from ui.i18n import translate

pytestmark = pytest.mark.browser

HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 120_000
PAGES = CONCEPT_PAGES


def wait_until_drawn(page) -> None:
    """Until the script has finished and its last chart and the fonts are drawn."""
    page.get_by_test_id("stPlotlyChart").last.locator(".main-svg").first.wait_for(
        timeout=TIMEOUT_MS
    )
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    page.evaluate("document.fonts.ready")


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("name", list(PAGES))
def test_concept_page_renders_without_console_errors(
    page, artifacts_dir, screenshot_whole_page, name, lang
):
    page.goto(f"/{name}?model=minilm&lang={lang}")
    page.locator("h1", has_text=translate(PAGES[name], lang)).wait_for(timeout=TIMEOUT_MS)
    wait_until_drawn(page)
    screenshot_whole_page(page, artifacts_dir / f"{name}-{lang}.png")
    text = page.get_by_test_id("stMain").inner_text()
    if lang == "ko":
        assert HANGUL.search(text)
        assert translate(PAGES[name], "en") not in text
    assert "Traceback" not in text
    assert page.problems == []


@pytest.mark.parametrize("name", list(PAGES))
def test_no_formula_is_cut_off_on_a_small_laptop_screen(page, clipped_formulas, name):
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/{name}?model=minilm&lang=ko")
    page.locator("h1", has_text=translate(PAGES[name], "ko")).wait_for(timeout=TIMEOUT_MS)
    wait_until_drawn(page)
    assert clipped_formulas(page) == []
