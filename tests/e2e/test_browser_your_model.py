"""A LLaMA and a GPT-2 folder from the models root in a real browser, English and Korean:
the explorer names the engine, shows the prompt's own map and offers generation, Mechanisms
scans the folder, and the address bar reopens the same view in a new browser context; both
pages drawn on a phone's width (the explorer's tab narrowed to 390 px, Mechanisms then opened
in it at that width)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.servers import DECODER_LAYOUTS, GROUP
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group(GROUP)]

TIMEOUT_MS = 180_000
LAYOUTS = DECODER_LAYOUTS  # the shared class server's models root holds tiny-<layout>
PROMPT = "the cat sat on the mat"
HEATMAP = "[data-testid=stPlotlyChart] .main-svg >> visible=true"


@pytest.fixture
def root_server(class_server) -> str:
    """The shared class server (tests/e2e/conftest.py), whose models root holds the two
    folders (the session's app server may have started with another root)."""
    return class_server.url


def new_page(browser, url: str, width: int = 1440):
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=url)
    return context, context.new_page()


def settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def explorer_ready(page, lang: str) -> None:
    page.get_by_text(translate("explorer.prompt_only", lang)).wait_for(timeout=TIMEOUT_MS)
    page.locator(HEATMAP).first.wait_for(timeout=TIMEOUT_MS)
    settled(page)


# Each layout and each language once (LLaMA in English, GPT-2 in Korean): the layout decides
# the engine's label and the map, the language every word around it; no check depends on the
# pair, and each case is two page loads, a generation and a head scan.
@pytest.mark.parametrize(("layout", "lang"), [("llama", "en"), ("gpt2", "ko")])
def test_a_root_folder_in_the_explorer_and_mechanisms_and_its_link_in_a_new_context(
    browser, root_server, artifacts_dir, screenshot_whole_page, layout, lang
):
    context, page = new_page(browser, root_server)
    page.goto(f"/explorer?model=folder:tiny-{layout}&text=the+cat+sat+on+the+mat&lang={lang}")
    explorer_ready(page, lang)
    engine = translate("model.engine.lab", lang)
    layout_text = translate("model.layout", lang, layout=LAYOUTS[layout])
    assert page.get_by_text(f"{engine} · {layout_text}").first.is_visible()
    toy = translate("explorer.output_tokens", "en", tokens="").split(".")[1].strip()[:30]
    assert page.get_by_text(toy).count() == 0  # no Korean-particle caption
    assert page.get_by_test_id("stNumberInputField").input_value() == "0"
    ticks = page.locator(".xtick text").all_text_contents()
    assert ticks and not any(t.endswith("⁺") for t in ticks)
    link = page.url
    screenshot_whole_page(page, artifacts_dir / f"your-model-explorer-{layout}-{lang}.png")

    # The same address in a new browser context (no session, no cookies): the same view.
    other, page2 = new_page(browser, root_server)
    page2.goto(link)
    explorer_ready(page2, lang)
    assert page2.locator(".xtick text").all_text_contents() == ticks
    assert page2.get_by_text(layout_text).count() >= 1
    other.close()

    # Generation on request: the generated tokens are marked on the axes.
    box = page.get_by_test_id("stNumberInputField")
    box.fill("3")
    box.press("Enter")
    page.locator(".xtick text", has_text="⁺").first.wait_for(timeout=TIMEOUT_MS)
    settled(page)
    on_a_phone(
        page, screenshot_whole_page, artifacts_dir / f"your-model-explorer-390-{layout}-{lang}.png"
    )

    # opened on the phone's width the tab was left at (what a phone opens), not widened first
    page.goto(f"/mechanisms?model=folder:tiny-{layout}&lang={lang}")
    none = translate("mech.scan.none.induction", lang, threshold="0.3").split("**")[-1]
    page.get_by_text(none.strip(" :")).first.wait_for(timeout=TIMEOUT_MS)
    page.locator("[data-testid=stDataFrame]").first.wait_for(timeout=TIMEOUT_MS)
    settled(page)
    selected = page.get_by_role("tab", selected=True).inner_text()
    assert selected.strip() == translate("mech.tab.scan", lang)
    on_a_phone(
        page,
        screenshot_whole_page,
        artifacts_dir / f"your-model-mechanisms-390-{layout}-{lang}.png",
    )
    if SCREENSHOTS:  # the desk's view too, for a person to look at
        page.set_viewport_size({"width": 1440, "height": 900})
        settled(page)
        screenshot_whole_page(page, artifacts_dir / f"your-model-mechanisms-{layout}-{lang}.png")
    context.close()


# A chart or table laid out again at the narrow width.
_DRAWN_NARROW_JS = """() => {
  const shown = [...document.querySelectorAll('[data-testid=stPlotlyChart], [data-testid=stDataFrame]')]
    .map(e => e.getBoundingClientRect().width).filter(w => w > 0);
  return shown.some(w => w <= innerWidth);
}"""


def on_a_phone(page, screenshot_whole_page, shot) -> None:
    """The page as it is, narrowed to 390 px: its chart or table drawn again at that width,
    the whole page saved as ``shot`` for a person to look at (screenshot_whole_page: only
    with LAB_SCREENSHOTS=1). Streamlit's layout is CSS and it folds the sidebar on a resize
    as on a phone's first load, so a narrowed tab shows what a phone opens (the page sweep,
    tests/e2e/test_accessibility.py, lays out every page so, in both languages)."""
    page.set_viewport_size({"width": 390, "height": 900})
    page.wait_for_function(_DRAWN_NARROW_JS, timeout=TIMEOUT_MS)
    settled(page)
    screenshot_whole_page(page, shot)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_link_to_a_folder_outside_the_root_is_refused(browser, root_server, lang):
    context, page = new_page(browser, root_server, width=390)
    page.goto(f"/explorer?model=folder:../etc&lang={lang}")
    refused = translate("model.problem.outside_root", lang, name="../etc", root="__").split("__")[0]
    page.get_by_text(refused.replace("`", "")[:25]).first.wait_for(timeout=TIMEOUT_MS)
    assert page.locator(HEATMAP).count() == 0
    context.close()
