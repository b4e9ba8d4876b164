"""The family page's token-cost table in a real browser, in English and Korean, on a wide
screen and a phone: a Korean sentence's tokens read as Korean (jamo, syllables and their
byte parts), never as byte stand-ins."""

from __future__ import annotations

import re

import pytest

from model.hf.pieces import _bytes_to_unicode
from tests.e2e.pagechecks import phone_problems
from ui.i18n import translate

pytestmark = pytest.mark.browser

TIMEOUT_MS = 240_000
# Byte stand-ins a raw byte-level piece would show (ì í ë Ġ Ċ ...), and SentencePiece's ▁.
MOJIBAKE = {c for b, c in _bytes_to_unicode().items() if b >= 0x80 or b <= 0x20} | {"▁"}
MOJIBAKE -= {"·", "×", "÷"}  # the lab's own part mark and the table's signs


def settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def cost_table(page, lang: str):
    header = translate("tokens.cost.col.korean", lang)
    table = page.get_by_test_id("stTable").filter(has_text=header)
    table.wait_for(timeout=TIMEOUT_MS)
    return table


def mojibake_in(text: str) -> list[str]:
    return sorted({c for c in re.sub(r" · \d+/\d+", "", text) if c in MOJIBAKE})


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_token_cost_table_reads_korean_as_korean(
    page, artifacts_dir, screenshot_whole_page, lang, width
):
    page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
    page.goto(f"/concept_family?lang={lang}")
    page.get_by_text(translate("tokens.cost.title", lang)).wait_for(timeout=TIMEOUT_MS)
    table = cost_table(page, lang)
    settled(page)
    text = table.inner_text()
    assert "ᄋ | ##ᅡ | ##ᆫ" in text  # MiniLM's jamo for 안
    assert mojibake_in(page.get_by_test_id("stMain").inner_text()) == []
    table.scroll_into_view_if_needed()
    screenshot_whole_page(page, artifacts_dir / f"token-cost-{lang}-{width}.png")


def test_the_real_decoders_show_syllables_and_their_byte_parts(page, artifacts_dir):
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
    page.screenshot(path=artifacts_dir / "token-cost-real-ko.png", full_page=True)
    # The same table on a phone: the tab narrowed, not loaded again (the columns reflow).
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(600)
    assert table.inner_text() == text
    assert phone_problems(page) == []
    table.scroll_into_view_if_needed()
    page.screenshot(path=artifacts_dir / "token-cost-real-ko-390.png")
