"""The family page's token-cost table in a real browser, with the real decoders asked for: a
Korean sentence's tokens read as Korean (syllables and their byte parts), never as byte
stand-ins, on a wide screen and a phone.

The table of the page as it opens (MiniLM's jamo, in English and Korean, at 1440 px and on a
phone) is checked by the one page sweep, tests/e2e/test_accessibility.py, on its load of the
page (pagechecks.token_cost_problems)."""

from __future__ import annotations

import pytest

from tests.e2e.pagechecks import mojibake_in, phone_problems
from ui.i18n import translate

pytestmark = pytest.mark.browser

TIMEOUT_MS = 240_000


def settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def cost_table(page, lang: str):
    header = translate("tokens.cost.col.korean", lang)
    table = page.get_by_test_id("stTable").filter(has_text=header)
    table.wait_for(timeout=TIMEOUT_MS)
    return table


def test_the_real_decoders_show_syllables_and_their_byte_parts(
    page, artifacts_dir, screenshot_whole_page
):
    """SmolLM2 splits 안 into three byte tokens, shown as its parts; Gemma 3 keeps 저는 whole.
    Skipped where their wheels are not installed."""
    gguf_cache = pytest.importorskip("model.runtime.gguf_cache")
    if not (gguf_cache.installed("smollm2") and gguf_cache.installed("gemma3")):
        pytest.skip("SmolLM2's or Gemma 3's wheel is not installed")
    page.goto("/concept_family?lang=ko")
    cost_table(page, "ko")
    asked = translate("tokens.cost.large", "ko", names="").rstrip(": ")
    page.get_by_text(asked).click()
    table = page.get_by_test_id("stTable").filter(has_text="안 · 1/3")
    table.wait_for(timeout=TIMEOUT_MS)
    settled(page)
    text = table.inner_text()
    assert "안 · 1/3 | 안 · 2/3 | 안 · 3/3" in text and "␣저는" in text
    assert mojibake_in(page.get_by_test_id("stMain").inner_text()) == []
    screenshot_whole_page(page, artifacts_dir / "token-cost-real-ko.png")  # for a person
    # The same table on a phone: the tab narrowed, not loaded again (the columns reflow).
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(600)
    assert table.inner_text() == text
    assert phone_problems(page) == []
    screenshot_whole_page(page, artifacts_dir / "token-cost-real-ko-390.png")
