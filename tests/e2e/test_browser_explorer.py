"""The Attention Explorer in a real browser: type, press Enter, see the new tokens."""

from __future__ import annotations

import re

import pytest

from tests.e2e.pagechecks import watch_problems
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


@pytest.fixture(scope="module")
def minilm_tab(shared_context, app_url):
    """One tab for the module's MiniLM explorer: loaded by the language-switch test, then
    typed into by the markup test (which loads it only when run alone)."""
    tab = watch_problems(shared_context.new_page(), app_url)
    yield tab
    tab.close()


HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 90_000


def heatmap_ticks(page) -> list[str]:
    """The key labels along the top of the first attention heatmap, as drawn."""
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".xtick text").first.wait_for(timeout=TIMEOUT_MS)
    return chart.locator(".xtick text").all_text_contents()


def test_a_typed_sentence_and_the_chosen_layer_survive_both_language_switches(
    minilm_tab, artifacts_dir, screenshot_whole_page
):
    """Typed, then switched to Korean and back: the sentence and the chosen layer stay, every
    drop-down is relabelled, and the chart's camera saves the chart as PNG, then as SVG,
    named in Korean (one load for all of it: each check reads the page as the switches and
    the typing leave it)."""
    page = minilm_tab
    page.goto("/explorer?model=minilm&layer=2")
    page.locator("h1", has_text=translate("explorer.title", "en")).wait_for(timeout=TIMEOUT_MS)
    assert "school" in heatmap_ticks(page)  # the first example
    layer_en = translate("common.layer_n", "en", n=3)
    assert shown_choices(page, "stMain")[0] == layer_en

    box = page.get_by_label(translate("input.label", "en"), exact=True).and_(
        page.get_by_role("textbox")
    )
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
    layer_ko = translate("common.layer_n", "ko", n=3)
    page.wait_for_function(
        "label => [...document.querySelectorAll('[data-testid=stMain] input')]"
        ".some(i => i.value === label)",
        arg=layer_ko,
        timeout=TIMEOUT_MS,
    )
    assert shown_choices(page, "stSidebar") == [
        translate("model.name.minilm", "ko"),
        translate("sidebar.device_choice.auto", "ko"),
    ]
    assert shown_choices(page, "stMain")[:2] == [layer_ko, translate("common.head_n", "ko", n=1)]
    screenshot_whole_page(page, artifacts_dir / "explorer-ko.png")
    assert HANGUL.search(page.get_by_test_id("stMain").inner_text())
    the_camera_saves_png_then_svg(page, artifacts_dir, "ko", token="arrow")

    page.get_by_test_id("stSidebar").get_by_text("English", exact=True).click()
    page.locator("h1", has_text=translate("explorer.title", "en")).wait_for(timeout=TIMEOUT_MS)
    page.wait_for_url(re.compile(r"lang=en"), timeout=TIMEOUT_MS)
    page.wait_for_function(
        "label => [...document.querySelectorAll('[data-testid=stMain] input')]"
        ".some(i => i.value === label)",
        arg=layer_en,
        timeout=TIMEOUT_MS,
    )
    assert shown_choices(page, "stSidebar")[0] == translate("model.name.minilm", "en")
    assert "model=minilm" in page.url and "layer=2" in page.url
    assert page.problems == []


def test_typed_markup_stays_text_in_every_view(minilm_tab, artifacts_dir, screenshot_whole_page):
    """Typed into the MiniLM explorer the language-switch test left in English (minilm_tab),
    drawn as text by the heatmap, then by the head view picked by a click."""
    page = minilm_tab
    if "/explorer" not in page.url:  # run alone
        page.goto("/explorer?model=minilm")
    page.locator("h1", has_text=translate("explorer.title", "en")).wait_for(timeout=TIMEOUT_MS)
    box = page.get_by_label(translate("input.label", "en"), exact=True).and_(
        page.get_by_role("textbox")
    )
    box.fill("<b>bold</b> <img src=x>")
    box.press("Enter")
    page.wait_for_function(  # the heatmap's keys: the pieces of "<b>" as characters
        """() => [...document.querySelectorAll('[data-testid=stPlotlyChart] .xtick text')]
                 .some(t => t.textContent === 'bold')""",
        timeout=TIMEOUT_MS,
    )
    assert "<" in heatmap_ticks(page)
    page.get_by_test_id("stMain").locator(
        "button", has_text=translate("explorer.view.lines", "en")
    ).first.click()
    frame = page.frame_locator("[data-testid=stMain] iframe").first
    frame.locator("text", has_text="bold").first.wait_for(timeout=TIMEOUT_MS)
    labels = frame.locator("text").all_text_contents()
    assert "<" in labels and ">" in labels  # the pieces of "<b>" are shown as characters
    assert frame.locator("img").count() == 0 and frame.locator("b").count() == 0
    screenshot_whole_page(page, artifacts_dir / "explorer-headview-markup.png")
    assert page.problems == []


def shown_choices(page, where: str) -> list[str]:
    """What each drop-down in the sidebar or main area displays as its chosen value."""
    boxes = page.get_by_test_id(where).get_by_test_id("stSelectbox").locator("input")
    return [box.input_value() for box in boxes.all()]


def camera_button(page):
    """The first chart's camera button, revealed the way a person does: by hovering."""
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".xtick text").first.wait_for(timeout=TIMEOUT_MS)
    chart.hover()
    return chart.locator("button.modebar-btn[data-title]").first


def the_camera_saves_png_then_svg(page, artifacts_dir, lang: str, token: str) -> None:
    """The first chart's camera, named in ``lang``, saves a PNG; with SVG picked in the
    sidebar, a vector drawing whose text holds the sentence's ``token``."""
    assert camera_button(page).get_attribute("data-title") == translate(
        "chart.toolbar.download_png", lang
    )
    with page.expect_download(timeout=TIMEOUT_MS) as png:
        camera_button(page).click()
    assert png.value.suggested_filename == "attention-lab-heatmap.png"
    png_path = artifacts_dir / "explorer-camera.png"
    png.value.save_as(png_path)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    page.get_by_test_id("stSidebar").get_by_text("SVG", exact=True).click()
    page.wait_for_function(
        "title => document.querySelector(`button.modebar-btn[data-title='${title}']`)",
        arg=translate("chart.toolbar.download_svg", lang),
        timeout=TIMEOUT_MS,
    )
    with page.expect_download(timeout=TIMEOUT_MS) as svg:
        camera_button(page).click()
    assert svg.value.suggested_filename == "attention-lab-heatmap.svg"
    svg_path = artifacts_dir / "explorer-camera.svg"
    svg.value.save_as(svg_path)
    drawing = svg_path.read_text(encoding="utf-8")
    assert drawing.lstrip().startswith("<svg") and f">{token}<" in drawing  # vector text


WORDS = [
    "the",
    "student",
    "reads",
    "the",
    "notes",
    "then",
    "opens",
    "the",
    "lab",
    "to",
    "see",
    "how",
    "every",
    "head",
    "looks",
]
LONG = " ".join(WORDS[i % len(WORDS)] for i in range(254))
N_TOKENS = 256  # [CLS] + 254 words (one WordPiece each) + [SEP]


def test_a_256_token_sentence_draws_readable_labels_and_hover_names_the_token(
    page, artifacts_dir, screenshot_whole_page
):
    page.goto(f"/explorer?model=minilm&text={LONG.replace(' ', '+')}")
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".xtick text").first.wait_for(timeout=TIMEOUT_MS)
    # Tick labels as drawn: few enough that no two overlap, on either axis. Keys are
    # rotated 45°, so neighbours are parallel lines sqrt(1/2)·dx apart; queries stack dy apart.
    for axis, name, factor in (("xtick", "xaxis", 0.5**0.5), ("ytick", "yaxis", 1.0)):
        labels = chart.locator(f".{axis} text")
        font_px = float(labels.first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
        length_px, tickvals = chart.locator(".js-plotly-plot").evaluate(
            f"p => [p._fullLayout.{name}._length, p._fullLayout.{name}.tickvals]"
        )
        assert 10 <= labels.count() <= 60, axis
        gap_px = length_px * (tickvals[1] - tickvals[0]) / N_TOKENS * factor
        assert gap_px >= font_px, (axis, gap_px, font_px)  # at least one font size apart
    # Hover a cell well inside the map: the label names the query and key tokens.
    chart.scroll_into_view_if_needed()
    box = chart.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.3, steps=8)
    page.locator(".hoverlayer .hovertext").first.wait_for(state="attached", timeout=TIMEOUT_MS)
    text = page.locator(".hoverlayer").first.text_content()
    assert re.search(r"[a-z]+ #\d+", text), text  # "looks #158": the token and its position
    screenshot_whole_page(page, artifacts_dir / "explorer-256-tokens.png")
    assert page.problems == []


# one language: the words change, not the behaviour (the page sweep holds every page's
# words in both, tests/e2e/test_accessibility.py)
@pytest.mark.parametrize("lang", ["ko"])
def test_unknown_words_button_reads_the_sentence_with_minilm(
    page, lang, artifacts_dir, screenshot_whole_page
):
    page.goto(f"/explorer?model=en2ko&lang={lang}&text=the+quokkas+study+math")
    label = translate(
        "input.read_with_pretrained", lang, model=translate("model.name.minilm", lang)
    )
    button = page.get_by_role("button", name=label)
    button.wait_for(timeout=TIMEOUT_MS)
    screenshot_whole_page(page, artifacts_dir / f"explorer-unknown-{lang}.png")
    button.click()
    page.wait_for_url(re.compile(r"model=minilm"), timeout=TIMEOUT_MS)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=stPlotlyChart] .xtick text')]
                 .some(t => t.textContent.startsWith('##') || t.textContent === 'quo')""",
        timeout=TIMEOUT_MS,
    )
    assert "quokkas" in page.url  # the sentence went along
    assert page.get_by_role("button", name=label).count() == 0
    assert page.problems == []
