"""A view as a file, in a real browser: the explorer's heatmap downloaded as HTML, opened
with the network off, draws the same chart and says the same strongest weight as the page."""

from __future__ import annotations

import re

import pytest

from tests.e2e.pagechecks import LanguageTab
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


TIMEOUT_MS = 90_000
ADDRESS = "/explorer?model=minilm&layer=1&head=2"


@pytest.fixture(scope="module")
def explorer_in(shared_context, app_url):
    """``explorer_in(lang)``: the explorer at ADDRESS in ``lang``, in one tab: loaded in the
    first language asked for, then switched in place by the sidebar's language control (a
    rerun of the same session, as a reader switches; what is checked is the file, which the
    page writes in its language either way)."""
    opened = LanguageTab(shared_context, app_url, ADDRESS)

    def tab(lang: str):
        page = opened(lang)
        page.locator("h1", has_text=translate("explorer.title", lang)).wait_for(timeout=TIMEOUT_MS)
        return page

    yield tab
    opened.close()


def page_summary(page, lang: str) -> str:
    """The heatmap's one-line summary as the page says it (its table's disclosure label)."""
    suffix = f" ({translate('a11y.show_table', lang)})"
    label = (
        page.get_by_test_id("stExpander")
        .locator("summary")
        .filter(has_text=translate("a11y.show_table", lang))
        .first
    )
    label.wait_for(timeout=TIMEOUT_MS)
    text = label.inner_text().strip().splitlines()[-1]  # after the icon's ligature name
    return text.strip().removesuffix(suffix)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_heatmap_as_html_opens_offline_with_the_pages_top_weight(
    explorer_in, browser, lang, artifacts_dir
):
    page = explorer_in(lang)
    page.get_by_test_id("stPlotlyChart").first.locator(".xtick text").first.wait_for(
        timeout=TIMEOUT_MS
    )
    said = page_summary(page, lang)
    weight = re.search(r"\((\d\.\d+)\)", said).group(1)
    button = page.get_by_role("button", name=translate("chart.export_html", lang))
    with page.expect_download(timeout=TIMEOUT_MS) as download:
        button.click()
    assert download.value.suggested_filename.endswith(f"-{lang}.html")
    path = artifacts_dir / f"explorer-heatmap-{lang}.html"
    download.value.save_as(path)
    assert path.stat().st_size < 5_000_000
    assert page.problems == []

    offline = browser.new_context(viewport={"width": 1200, "height": 900}, offline=True)
    asked = []
    offline.route(
        re.compile(r"^(?!file:).*"),
        lambda route: (asked.append(route.request.url), route.abort()),
    )
    tab = offline.new_page()
    errors = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        tab.goto(path.as_uri())
        tab.locator("body[data-drawn=yes]").wait_for(timeout=TIMEOUT_MS)
        assert tab.evaluate("document.documentElement.lang") == lang
        assert "school" in tab.locator("#chart-0 .xtick text").all_text_contents()
        assert tab.locator("#summary-0").inner_text() == said  # the page's own words
        values = [
            float(v)
            for v in tab.locator("table.data tbody tr td:last-child").all_text_contents()
            if v.strip()
        ]
        assert f"{max(values):.2f}" == f"{float(weight):.2f}"  # its table's top weight
        tab.screenshot(path=str(artifacts_dir / f"explorer-heatmap-html-{lang}.png"))

        old = offline.new_page()  # a browser that cannot unpack plotly.js: words, and the table
        old.add_init_script("delete window.DecompressionStream")
        old.goto(path.as_uri())
        old.locator("body[data-drawn=no]").wait_for(timeout=TIMEOUT_MS)
        assert old.locator("#chart-0").inner_text() == translate("chart.export_no_chart", lang)
        assert old.locator("table.data tbody tr").count() == len(values)
    finally:
        offline.close()
    assert asked == [] and errors == []
