"""The home page in a real browser, in English and in Korean; screenshots go to tests/artifacts/.

That no formula is cut off at 1024 and 1440 px is checked by the one page sweep,
tests/e2e/test_accessibility.py, with every other page's."""

from __future__ import annotations

import re

import pytest

from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 60_000


def wait_for_home(page, lang: str) -> None:
    """Until the home page has fully rendered in `lang`: heading, formulas, code, sidebar, fonts."""
    page.locator("h1", has_text=translate("home.title", lang)).wait_for(timeout=TIMEOUT_MS)
    page.locator(".katex").last.wait_for(timeout=TIMEOUT_MS)
    page.get_by_test_id("stCode").wait_for(timeout=TIMEOUT_MS)
    device_prefix = translate("sidebar.device", lang, device="").strip()
    page.get_by_test_id("stSidebar").get_by_text(device_prefix).wait_for(timeout=TIMEOUT_MS)
    page.evaluate("document.fonts.ready")


def main_text(page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def test_home_renders_in_english_then_korean_without_errors_or_downloads(
    page, artifacts_dir, screenshot_whole_page
):
    page.goto("/")
    wait_for_home(page, "en")
    screenshot_whole_page(page, artifacts_dir / "home-en.png")
    assert translate("home.formula.header", "en") in main_text(page)

    # Switch the way a student would: the language control in the sidebar.
    page.get_by_test_id("stSidebar").get_by_text("한국어", exact=True).click()
    wait_for_home(page, "ko")
    page.wait_for_url(re.compile(r"[?&]lang=ko\b"), timeout=TIMEOUT_MS)
    screenshot_whole_page(page, artifacts_dir / "home-ko.png")

    text = main_text(page)
    assert HANGUL.search(text)
    assert translate("home.title", "en") not in text
    assert translate("home.formula.header", "ko") in text
    assert page.problems == []


def test_a_shared_korean_link_opens_in_korean_and_fits_a_phone_screen(
    page, artifacts_dir, screenshot_whole_page
):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/?lang=ko")
    wait_for_home(page, "ko")
    assert translate("home.intro", "en")[:40] not in main_text(page)
    screenshot_whole_page(page, artifacts_dir / "home-ko-phone.png")
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0  # no sideways scrolling
    assert page.problems == []
