"""Every page at 1024 and 1440 px, in both languages: no control or formula cut off, and in
Korean none of Streamlit's own English (the uploader's "Upload" and size line, the charts'
"Fullscreen").
Screenshots in tests/artifacts/chrome-<page>-<lang>-<width>.png."""

from __future__ import annotations

import pytest

from ui.i18n import translate

pytestmark = pytest.mark.browser

TIMEOUT_MS = 120_000
# url path -> (query, the catalog key of the page's title)
PAGES = {
    "": ("", "home.title"),
    "explorer": ("model=en2ko&text=I+study+math+at+school", "explorer.title"),
    "decoding": ("model=en2ko", "decoding.title"),
    "training": ("", "training.title"),
    "concept_attention": ("model=minilm", "concepts.attention.title"),
    "concept_positional": ("model=minilm", "concepts.positional.title"),
    "concept_layernorm": ("model=minilm", "concepts.layernorm.title"),
    "concept_warmup": ("model=minilm", "concepts.warmup.title"),
    "concept_family": ("model=minilm", "concepts.family.title"),
    "practice": ("", "practice.title"),
    "find_the_bug": ("", "bugs.title"),
    "modern": ("", "modern.title"),
    "mechanisms": ("", "mech.title"),
}


def screenshot(page, path) -> None:
    """The whole page (grown to its content, as conftest's screenshot_whole_page does), with
    a longer wait for a busy machine; the first screen if even that is too slow."""
    viewport = page.viewport_size
    height = page.evaluate(
        "Math.max(...[...document.querySelectorAll('[data-testid=stMain] *')]"
        ".map(e => e.scrollHeight))"
    )
    page.set_viewport_size({"width": viewport["width"], "height": max(height, viewport["height"])})
    try:
        page.screenshot(path=path, full_page=True, timeout=90_000)
    except Exception:  # noqa: BLE001 - a slow screenshot is no failure of the page
        page.set_viewport_size(viewport)
        page.screenshot(path=path, timeout=60_000)
    page.set_viewport_size(viewport)


def open_drawn(page, path: str, lang: str) -> None:
    query, title = PAGES[path]
    page.goto(f"/{path}?{query}&lang={lang}")
    page.locator("h1", has_text=translate(title, lang)[:12]).first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    page.wait_for_timeout(500)  # the last charts and columns settle
    page.evaluate("document.fonts.ready")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_no_control_or_formula_is_cut_off(
    page, artifacts_dir, clipped_controls, clipped_formulas, lang
):
    # Each page opened once, then checked at both widths: Streamlit's layout is CSS, so a
    # narrower window reflows the same page without a rerun (half the page loads).
    cut = {}
    for path in PAGES:
        page.set_viewport_size({"width": 1440, "height": 900})
        open_drawn(page, path, lang)
        for width in (1440, 1024):
            if width != 1440:
                page.set_viewport_size({"width": width, "height": 900})
                page.wait_for_timeout(400)  # columns and charts reflow
            screenshot(page, artifacts_dir / f"chrome-{path or 'home'}-{lang}-{width}.png")
            if found := clipped_controls(page) + clipped_formulas(page):
                cut[f"{path or 'home'} at {width} px"] = found
    assert cut == {}
    assert page.problems == []


def test_the_korean_uploader_speaks_korean_and_says_its_limit(page):
    open_drawn(page, "training", "ko")
    uploader = page.get_by_test_id("stFileUploader")
    button = uploader.locator("button")
    label = button.evaluate(
        "b => getComputedStyle(b.querySelector('[data-testid=stMarkdownContainer]'), '::after')"
        ".content"
    )
    assert label == f'"{translate("chrome.upload_button", "ko")}"'
    shown = page.get_by_test_id("stMain").inner_text()
    assert "Upload" not in shown and "per file" not in shown
    assert translate("training.upload_limit", "ko", mb=20) in shown


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_charts_have_no_fullscreen_button(page, lang):
    open_drawn(page, "explorer", lang)
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.hover()
    chart.locator("button.modebar-btn[data-title]").first.wait_for(timeout=TIMEOUT_MS)
    titles = chart.locator("button.modebar-btn:visible").evaluate_all(
        "bs => bs.map(b => b.getAttribute('data-title'))"
    )
    assert translate("chart.toolbar.download_png", lang) in titles
    assert "Fullscreen" not in titles
