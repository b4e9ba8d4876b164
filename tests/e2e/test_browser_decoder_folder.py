"""A tiny LLaMA-type folder typed into the sidebar, then the explorer's stages, a decoding step
and the logit lens in a real browser, in Korean: one session, pages switched
from the sidebar as a reader would."""

from __future__ import annotations

import re

import pytest

from tests.hf_folders import build_decoder_folder
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


TIMEOUT_MS = 120_000
VISIBLE_CHART = "[data-testid=stPlotlyChart] .main-svg >> visible=true"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return build_decoder_folder("llama", tmp_path_factory.mktemp("browser") / "tiny-llama")


def settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def go_to(page, nav_key: str, title_key: str, lang: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_text(translate(nav_key, lang)).click()
    page.locator("h1", has_text=translate(title_key, lang)).wait_for(timeout=TIMEOUT_MS)
    settled(page)


# one language: the words change, not the behaviour (the page sweep holds every page's
# words in both, tests/e2e/test_accessibility.py)
@pytest.mark.parametrize("lang", ["ko"])  # tests/e2e/test_browser_your_model.py: LLaMA in English
def test_a_llama_folder_in_the_explorer_decoding_and_mechanisms(
    page, llama, artifacts_dir, screenshot_whole_page, lang
):
    page.goto(f"/explorer?model=folder&view=stages&text=the+cat+sat+on+the+mat&lang={lang}")
    folder_box = page.get_by_label(translate("sidebar.folder", lang))
    folder_box.fill(str(llama))
    folder_box.press("Enter")
    # The four stages of our own engine, drawn for the folder's model (not the notice that a
    # transformers-run model has none).
    page.locator(VISIBLE_CHART).nth(3).wait_for(timeout=TIMEOUT_MS)
    settled(page)
    assert page.get_by_text(translate("explorer.stages_unavailable", lang)).count() == 0
    # Its own byte-level tokenizer labels the axes.
    assert page.locator(".xtick text", has_text="␣cat").count() >= 1
    assert page.locator(".xtick text", has_text="Ġ").count() == 0
    screenshot_whole_page(page, artifacts_dir / f"decoder-folder-explorer-{lang}.png")

    go_to(page, "nav.decoding", "decoding.title", lang)
    sentence = page.get_by_label(translate("input.label", lang), exact=True)
    sentence.fill("the cat sat")
    sentence.press("Enter")
    # Our engine: beam search is offered (a transformers-run folder has greedy and sampling).
    page.get_by_role("radio", name=translate("decoding.strategy.beam", lang)).wait_for(
        timeout=TIMEOUT_MS
    )
    page.get_by_role("button", name=translate("decoding.step", lang), exact=True).click()
    position = translate("decoding.position", lang, step=1, total="__")
    # the progress bar's own line (the live region says "Step 1 of N: ..." too)
    page.get_by_test_id("stProgress").get_by_text(
        re.compile(re.escape(position).replace("__", r"\d+"))
    ).wait_for(timeout=TIMEOUT_MS)
    settled(page)
    screenshot_whole_page(page, artifacts_dir / f"decoder-folder-decoding-{lang}.png")

    go_to(page, "nav.mechanisms", "mech.title", lang)
    page.get_by_role("tab", name=translate("mech.tab.lens", lang)).click()
    page.locator(VISIBLE_CHART).first.wait_for(timeout=TIMEOUT_MS)
    settled(page)
    lens = page.locator("[data-testid=stPlotlyChart] >> visible=true").first
    # a long title wraps onto two lines (<br>), so compare without white space
    title = "".join(translate("mech.lens.heatmap", lang).split())
    assert title in "".join(lens.inner_text().split())
    # The lens tab reads the sidebar's folder: its model picker shows the folder's name.
    chosen = page.evaluate(
        """() => [...document.querySelectorAll(
              '[data-testid=stMain] [data-testid=stSelectbox] input[role=combobox]')]
            .filter(e => e.offsetParent).map(e => e.value)"""
    )
    assert "tiny-llama" in chosen
    screenshot_whole_page(page, artifacts_dir / f"decoder-folder-mechanisms-{lang}.png")
    assert page.problems == []
