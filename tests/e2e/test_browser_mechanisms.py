"""The Mechanisms page in a real browser, in English and Korean, with bad patching input."""

from __future__ import annotations

import re

import pytest

from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 120_000


VISIBLE_CHART = "[data-testid=stPlotlyChart] .main-svg >> visible=true"  # the open tab's


# Titles of the open tab's charts whose legend covers the chart's title or x-axis title.
COVERED_TITLES = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .filter(p => p.offsetParent !== null)
  .flatMap(p => {
    const box = s => { const e = p.querySelector(s); return e && e.getBoundingClientRect(); };
    const legend = box('g.legend');
    const hits = b => legend && b && b.width > 0 && legend.left < b.right
      && b.left < legend.right && legend.top < b.bottom && b.top < legend.bottom;
    const title = p.querySelector('.gtitle');
    return hits(box('.gtitle')) || hits(box('.xtitle')) ? [title ? title.textContent : '?'] : [];
  })"""


def wait_until_drawn(page) -> None:
    page.locator(VISIBLE_CHART).first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    page.evaluate("document.fonts.ready")


def open_tab(page, key: str, lang: str) -> None:
    page.get_by_role("tab", name=translate(key, lang)).click()
    page.wait_for_timeout(300)


def a_corrupted_input_of_another_length_is_explained(page, artifacts_dir, lang: str) -> None:
    """On the open patching tab: a corrupted input of another length than the clean one,
    then an empty one, each explained in words."""
    box = page.get_by_label(translate("mech.patch.corrupted", lang))
    box.fill("q w e r t y u i q w")
    box.press("Enter")
    # the letters typed (9 and 10), not the <bos> the model reads first
    message = translate("mech.patch.error.length", lang, clean=9, corrupted=10)
    page.get_by_text(message).wait_for(timeout=TIMEOUT_MS)
    box.fill("")
    box.press("Enter")
    which = translate("mech.patch.which.corrupted", lang)
    page.get_by_text(translate("mech.patch.error.empty", lang, which=which)).wait_for(
        timeout=TIMEOUT_MS
    )
    page.screenshot(path=str(artifacts_dir / f"mechanisms-bad-input-{lang}.png"))
    assert "Traceback" not in page.get_by_test_id("stMain").inner_text()


# one language: the words change, not the behaviour (the page sweep holds every page's
# words in both, tests/e2e/test_accessibility.py)
@pytest.mark.parametrize("lang", ["ko"])  # the longer titles: the legend check's harder case
def test_every_tab_draws_and_a_corrupted_input_of_another_length_is_explained(
    page, artifacts_dir, screenshot_whole_page, lang
):
    """Every tab drawn; on the patching tab, once drawn, the bad inputs
    (on this load: a tab left and opened again empties the patching inputs, so they are
    typed before the next tab is opened)."""
    page.goto(f"/mechanisms?lang={lang}&model=en2ko")  # the toys' tabs, not a real model's
    page.locator("h1", has_text=translate("mech.title", lang)).wait_for(timeout=TIMEOUT_MS)
    wait_until_drawn(page)
    screenshot_whole_page(page, artifacts_dir / f"mechanisms-induction-{lang}.png")
    # eight heads' legend wrapped over the head-score charts' titles in half-width columns
    assert page.evaluate(COVERED_TITLES) == []
    for tab, name in (
        ("mech.tab.lens", "lens"),
        ("mech.tab.patching", "patching"),
        ("mech.tab.heads", "heads"),
    ):
        open_tab(page, tab, lang)
        wait_until_drawn(page)
        screenshot_whole_page(page, artifacts_dir / f"mechanisms-{name}-{lang}.png")
        assert page.evaluate(COVERED_TITLES) == [], name
        if name == "patching":
            a_corrupted_input_of_another_length_is_explained(page, artifacts_dir, lang)
    text = page.get_by_test_id("stMain").inner_text()
    if lang == "ko":
        assert HANGUL.search(text)
        assert translate("mech.title", "en") not in text
    assert "Traceback" not in text
    assert page.problems == []
