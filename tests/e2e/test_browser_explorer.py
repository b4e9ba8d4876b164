"""The Attention Explorer in a real browser: type, press Enter, see the new tokens."""

from __future__ import annotations

import re

import pytest

from ui.i18n import translate

pytestmark = pytest.mark.browser

HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 90_000


def heatmap_ticks(page) -> list[str]:
    """The key labels along the top of the first attention heatmap, as drawn."""
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".xtick text").first.wait_for(timeout=TIMEOUT_MS)
    return chart.locator(".xtick text").all_text_contents()


def test_typing_a_sentence_redraws_the_heatmap_with_its_tokens(
    page, artifacts_dir, screenshot_whole_page
):
    page.goto("/explorer?model=minilm")
    page.locator("h1", has_text=translate("explorer.title", "en")).wait_for(timeout=TIMEOUT_MS)
    assert "school" in heatmap_ticks(page)  # the first example

    box = page.get_by_label(translate("input.label", "en"), exact=True).and_(page.get_by_role("textbox"))
    box.fill("time flies like an arrow")
    box.press("Enter")
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=stPlotlyChart] .xtick text')]
                 .some(t => t.textContent === 'arrow')""",
        timeout=TIMEOUT_MS,
    )
    assert heatmap_ticks(page) == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    page.wait_for_url(re.compile(r"text=time"), timeout=TIMEOUT_MS)  # the link keeps it
    screenshot_whole_page(page, artifacts_dir / "explorer-en.png")

    page.get_by_test_id("stSidebar").get_by_text("한국어", exact=True).click()
    page.locator("h1", has_text=translate("explorer.title", "ko")).wait_for(timeout=TIMEOUT_MS)
    assert "arrow" in heatmap_ticks(page)  # the sentence survived the switch
    screenshot_whole_page(page, artifacts_dir / "explorer-ko.png")
    assert HANGUL.search(page.get_by_test_id("stMain").inner_text())
    assert page.problems == []


def test_typed_markup_stays_text_in_every_view(page, artifacts_dir, screenshot_whole_page):
    page.goto("/explorer?model=minilm&view=lines&text=%3Cb%3Ebold%3C%2Fb%3E+%3Cimg+src%3Dx%3E")
    frame = page.frame_locator("iframe").first
    frame.locator("text").first.wait_for(timeout=TIMEOUT_MS)
    labels = frame.locator("text").all_text_contents()
    assert "<" in labels and ">" in labels  # the pieces of "<b>" are shown as characters
    assert frame.locator("img").count() == 0 and frame.locator("b").count() == 0
    screenshot_whole_page(page, artifacts_dir / "explorer-headview-markup.png")
    assert page.problems == []
