"""Every page at 1024 and 1440 px, in both languages: drawn without a traceback, every chart
drawn, in Korean in Korean (not the English title), no control or formula cut off, and in
Korean none of Streamlit's own English (the uploader's "Upload" and size line, the charts'
"Fullscreen"). Each page is loaded once per language for all of these checks.
Screenshots in tests/artifacts/chrome-<page>-<lang>-<width>.png."""

from __future__ import annotations

import re

import pytest

from ui.i18n import translate

pytestmark = pytest.mark.browser

TIMEOUT_MS = 120_000
HANGUL = re.compile(r"[\uac00-\ud7a3]")
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
    # Every chart on the page drawn (an open tab's; a closed lazy tab has none yet).
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
                 .filter(c => c.offsetParent).every(c => c.querySelector('.main-svg'))""",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_timeout(500)  # the last charts and columns settle
    page.evaluate("document.fonts.ready")


def text_problems(page, path: str, lang: str) -> list[str]:
    """What a reader would see wrong in the page's text: a traceback, or in Korean, no Korean
    or the English title."""
    text = page.get_by_test_id("stMain").inner_text()
    found = ["a traceback"] if "Traceback" in text else []
    if lang == "ko" and not HANGUL.search(text):
        found.append("no Korean")
    if lang == "ko" and translate(PAGES[path][1], "en") in text:
        found.append("the English title")
    return found


@pytest.mark.timeout(600)  # thirteen pages at two widths in one test, on a busy machine
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_page_draws_in_its_language_with_nothing_cut_off(
    page, artifacts_dir, clipped_controls, clipped_formulas, lang
):
    # Each page opened once, then checked at both widths: Streamlit's layout is CSS, so a
    # narrower window reflows the same page without a rerun (half the page loads).
    cut, wrong = {}, {}
    for path in PAGES:
        page.set_viewport_size({"width": 1440, "height": 900})
        open_drawn(page, path, lang)
        found = text_problems(page, path, lang)
        for width in (1440, 1024):
            if width != 1440:
                page.set_viewport_size({"width": width, "height": 900})
                page.wait_for_timeout(400)  # columns and charts reflow
            screenshot(page, artifacts_dir / f"chrome-{path or 'home'}-{lang}-{width}.png")
            if clipped := clipped_controls(page) + clipped_formulas(page):
                cut[f"{path or 'home'} at {width} px"] = clipped
        if path in PAGE_CHECKS:  # after the screenshots: a hovered chart shows its toolbar
            found += PAGE_CHECKS[path](page, lang)
        if found:
            wrong[path or "home"] = found
    assert wrong == {}
    assert cut == {}
    assert page.problems == []


def korean_uploader_problems(page, lang: str) -> list[str]:
    """The training page's uploader in Korean: Korean button, Korean size limit, no "Upload"."""
    if lang != "ko":
        return []
    uploader = page.get_by_test_id("stFileUploader")
    button = uploader.locator("button")
    label = button.evaluate(
        "b => getComputedStyle(b.querySelector('[data-testid=stMarkdownContainer]'), '::after')"
        ".content"
    )
    found = []
    if label != f'"{translate("chrome.upload_button", "ko")}"':
        found.append(f"uploader button says {label}")
    shown = page.get_by_test_id("stMain").inner_text()
    if "Upload" in shown or "per file" in shown:
        found.append("Streamlit's English uploader text")
    if translate("training.upload_limit", "ko", mb=20) not in shown:
        found.append("no Korean size limit")
    return found


def fullscreen_problems(page, lang: str) -> list[str]:
    """The first chart's toolbar: our translated camera button, no Fullscreen button."""
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.hover()
    chart.locator("button.modebar-btn[data-title]").first.wait_for(timeout=TIMEOUT_MS)
    titles = chart.locator("button.modebar-btn:visible").evaluate_all(
        "bs => bs.map(b => b.getAttribute('data-title'))"
    )
    found = []
    if translate("chart.toolbar.download_png", lang) not in titles:
        found.append(f"no translated camera button in {titles}")
    if "Fullscreen" in titles:
        found.append("a Fullscreen button")
    return found


# Checks of one page that need it loaded and nothing else: run in the same visit.
def chart_code_problems(page, lang: str) -> list[str]:
    """The home page draws no chart, yet the browser has fetched plotly.js (ui.warm): the
    first chart page a student opens does not wait for its 4.7 MB after the server's run."""
    fetched = page.evaluate(
        "performance.getEntriesByType('resource').some(e => /PlotlyChart\\.[^/]+\\.js$/"
        ".test(e.name))"
    )
    return [] if fetched else ["plotly.js not fetched ahead of the first chart"]


PAGE_CHECKS = {
    "training": korean_uploader_problems,
    "explorer": fullscreen_problems,
    "": chart_code_problems,
}
