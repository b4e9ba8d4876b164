"""Keyboard only: Tab, Shift+Tab, Enter, Space, the arrow keys, and typing.

Four flows a student must be able to do without a mouse: type a sentence in the explorer and
reach its chart's summary (and the table behind it); step through decoding, each step said
by the live region with the token it chose; answer an exercise and read its feedback;
switch the language (there and back, on one load: the English exercise's). At every stop the focus is visible (a
ring of at least 2 px), and nothing traps it: Tab leaves the head view's frame again.

The explorer and decoding are the toy's (model=en2ko): the controls, the live region and
the head view's frame are the pages' own, the same for a real model, without its run. Each
flow runs in one language, the Korean ones where a screen reader hears the page's own words
(the chart's summary, a decoding step's sentence), the exercise in English beside the
language switch, there and back: a language changes the words, not the keys (the page sweep,
tests/e2e/test_accessibility.py, holds every page's words in both). The tests share one
browser context, a new tab each (the pages keep no cookies), but for the explorer's two,
which share one load (explorer_tab), the English exercise and the language switch, which
share one too (practice_tab).
"""

from __future__ import annotations

import re

import pytest

import practice
from tests.e2e.pagechecks import LanguageTab, live_text, mark_unseen, watch_problems
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py

TIMEOUT_MS = 120_000
MAX_TABS = 120  # more stops than any page has before the end of its sidebar and main part
QUOTED = re.compile(r"‘([^’]*)’")

_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]');
}"""

# What has the focus: its text or name, and whether a reader can see where it is.
_FOCUSED_JS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return {tag: 'BODY', text: '', visible: false};
  // the ring is on the control or on the box drawn for it (a toggle's label, a text or
  // select box's frame, a slider's thumb); tests/e2e/test_focus_and_speech.py checks pixels
  const boxes = [el, el.closest('label, [data-testid$=RootElement], .react-aria-ComboBox > div, '
    + '[data-testid=stNumberInputContainer], div:has(> div > input[type=range])')].filter(Boolean);
  const ring = boxes.some(b => {
    const st = getComputedStyle(b);
    return st.outlineStyle !== 'none' && parseFloat(st.outlineWidth) >= 2;
  });
  const s = getComputedStyle(el);
  const label = el.getAttribute('aria-label') || '';
  return {
    tag: el.tagName,
    text: (el.innerText || el.value || '').trim(),
    label: label,
    visible: ring || s.boxShadow !== 'none',
    expander: !!el.closest('[data-testid=stExpander]'),
    sidebar: !!el.closest('[data-testid=stSidebar]'),
  };
}"""


@pytest.fixture(scope="module")
def explorer_tab(shared_context, app_url):
    """``explorer_tab(lang)``: the toy's explorer in ``lang``, loaded once per language in a
    tab of the shared context, for its two tests in their written order: the typed
    sentence's, then the head view's (a view picked on the same load)."""
    tabs = TabPerLanguage(shared_context, app_url, "/explorer?model=en2ko")  # the sentence's words
    yield tabs
    tabs.close()


class TabPerLanguage(dict):
    """``tabs(lang)``: a tab of ``context`` at ``address`` in ``lang``, loaded and settled
    the first time that language is asked for, the same tab after."""

    def __init__(self, context, app_url: str, address: str):
        super().__init__()
        self.context, self.app_url, self.address = context, app_url, address

    def __call__(self, lang: str):
        if lang not in self:
            self[lang] = watch_problems(self.context.new_page(), self.app_url)
            self[lang].goto(f"{self.address}&lang={lang}")
            settle(self[lang])
        return self[lang]

    def close(self) -> None:
        for page in self.values():
            page.close()


def settle(tab) -> None:
    tab.locator("[data-testid=stMain] h1").first.wait_for(timeout=TIMEOUT_MS)
    tab.wait_for_timeout(300)  # a rerun starts a moment after the key press
    tab.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)


def text_is(wanted: str):
    """A button's own text, after the icon's ligature name ("chevron_right\\n\\nStep")."""
    return lambda f: f["tag"] == "BUTTON" and f["text"].split("\n")[-1].strip() == wanted


def focused(tab) -> dict:
    return tab.evaluate(_FOCUSED_JS)


def tab_to(tab, wanted, *, key: str = "Tab", limit: int = MAX_TABS) -> dict:
    """Press ``key`` until ``wanted(focused)`` holds; every stop on the way must show focus."""
    for _ in range(limit):
        tab.keyboard.press(key)
        now = focused(tab)
        # a frame's own document draws its focus; BODY: past the page's end, in the browser
        if now["tag"] not in ("IFRAME", "BODY"):
            assert now["visible"], f"focus not visible on {now}"
        if wanted(now):
            return now
    raise AssertionError(f"{limit} × {key} never reached the wanted control (last: {now})")


def retype(tab, text: str) -> None:
    """Replace the focused box's text by typing, as a student at a keyboard does."""
    for _ in range(len(focused(tab)["text"])):
        tab.keyboard.press("Backspace")
    tab.keyboard.type(text)


@pytest.mark.parametrize("lang", ["ko"])
def test_type_a_sentence_and_reach_its_chart_summary_and_table(explorer_tab, lang):
    page = explorer_tab(lang)
    label = translate("input.label", lang)
    tab_to(page, lambda f: f["tag"] == "INPUT" and f["label"] == label)
    sentence = "my friend read a book at the library yesterday"
    retype(page, sentence)
    page.keyboard.press("Enter")
    # until the chart shows the new sentence (a rerun may start after settle's first look)
    page.wait_for_function(
        """(last) => [...document.querySelectorAll('[data-testid=stPlotlyChart] .xtick text')]
                 .some(t => t.textContent === last)""",
        arg=sentence.split()[-1],
        timeout=TIMEOUT_MS,
    )
    settle(page)

    show_table = translate("a11y.show_table", lang)
    summary = tab_to(page, lambda f: f["expander"] and show_table in f["text"])
    # the summary names two tokens of this sentence: who attends, and to what
    named = QUOTED.findall(summary["text"])
    assert len(named) == 2 and all(token in sentence.split() for token in named), summary
    # the chart itself carries the same sentence as its accessible name
    alt = page.locator("[data-testid=stPlotlyChart][aria-label]").first.get_attribute("aria-label")
    assert named[0] in alt and named[1] in alt

    page.keyboard.press("Enter")  # open: the plotted numbers as a table
    settle(page)
    page.locator("[data-testid=stExpander] [data-testid=stDataFrame]").first.wait_for(
        timeout=TIMEOUT_MS
    )
    assert page.problems == []


@pytest.mark.parametrize("lang", ["ko"])
def test_the_head_view_frame_does_not_trap_the_focus(explorer_tab, lang):
    """The toy's head view (the frame and its buttons are the same for a real model's), on
    the explorer's load the typing test used: the view picked by a click, which is not what
    this checks; the keyboard takes it from there."""
    page = explorer_tab(lang)
    page.get_by_test_id("stMain").locator(
        "button", has_text=translate("explorer.view.lines", lang)
    ).first.click()
    settle(page)
    frame = page.locator("[data-testid=stMain] iframe").first
    frame.wait_for(timeout=TIMEOUT_MS)
    tab_to(page, lambda f: f["tag"] == "IFRAME")
    # inside: the head toggles are buttons; Space switches one off and on again
    inner = page.frame_locator("[data-testid=stMain] iframe").first
    first = inner.locator("button.swatch").first
    assert first.get_attribute("aria-pressed") in ("true", "false")
    before = first.get_attribute("aria-pressed")
    page.keyboard.press("Space")
    assert first.get_attribute("aria-pressed") != before
    page.keyboard.press("Space")
    # ... and Tab goes on, out of the frame (to what follows it, or past the page's end)
    tab_to(page, lambda f: f["tag"] != "IFRAME", limit=len(inner.locator("button").all()) + 1)
    # Shift+Tab comes back into it
    tab_to(page, lambda f: f["tag"] == "IFRAME", key="Shift+Tab")


def heard_step(page, lang: str, step: int) -> None:
    """The live region said ``step`` with its token, the one the page shows as chosen
    (call mark_unseen before the key press)."""
    said = live_text(page)
    template = re.escape(
        translate("decoding.say_step", lang, step=step, total="TOTAL", token="TOKEN")
    )
    match = re.fullmatch(template.replace("TOTAL", r"\d+").replace("TOKEN", "(.+)"), said)
    assert match, f"{said!r} is not step {step}'s sentence"
    settle(page)
    shown = page.locator("[data-testid=stMain] code").all_inner_texts()
    assert match.group(1) in shown, (match.group(1), shown)


@pytest.fixture(scope="module")
def decoding_in(shared_context, app_url):
    """``decoding_in(lang)``: the toy's decoding in one tab, loaded in the first language
    asked for, then switched in place by the sidebar's language control (a rerun of the
    same session: the steps taken stay, each test counts its own from where it starts)."""
    opened = LanguageTab(shared_context, app_url, "/decoding?model=en2ko")

    def tab(lang: str):
        page = opened(lang)
        page.locator("h1", has_text=translate("decoding.title", lang)).wait_for(timeout=TIMEOUT_MS)
        settle(page)
        return page

    yield tab
    opened.close()


@pytest.mark.parametrize("lang", ["ko"])
def test_step_through_decoding_and_hear_each_steps_token(decoding_in, lang):
    # the toy's decoding: Step, its focus and the live region are the page's own, the same
    # for a real model's run (whose tokens tests/e2e/test_browser_real_models.py reads)
    page = decoding_in(lang)
    assert page.locator("#lab-live[aria-live=polite]").count() == 1
    step = translate("decoding.step", lang)
    tab_to(page, text_is(step))
    progress = page.get_by_test_id("stProgress")
    first = progress.inner_text()
    taken = int(re.findall(r"\d+", first)[0])  # steps taken before (0 on a fresh load)
    mark_unseen(page)
    page.keyboard.press("Enter")
    heard_step(page, lang, taken + 1)
    assert progress.inner_text() != first
    # the focus stays on Step, so Space takes the next step
    if not text_is(step)(focused(page)):
        tab_to(page, text_is(step))
    mark_unseen(page)
    page.keyboard.press("Space")
    heard_step(page, lang, taken + 2)
    numbers = [int(n) for n in re.findall(r"\d+", progress.inner_text())[:1]]
    assert numbers and numbers[0] == taken + 2
    assert page.problems == []


SEED, TOPIC = 2026, "layernorm"  # set 2026 opens on the layernorm kind (numbers)


@pytest.fixture(scope="module")
def practice_tab(shared_context, app_url):
    """``practice_tab(lang)``: class set SEED's exercise in ``lang``, loaded once per language
    in a tab of the shared context: the answering test's, then (English) the language
    switch's, whose sidebar control is the same on every page."""
    tabs = TabPerLanguage(shared_context, app_url, f"/practice?seed={SEED}&topic={TOPIC}")
    yield tabs
    tabs.close()


@pytest.mark.parametrize("lang", ["en"])
def test_answer_an_exercise_and_read_the_feedback(practice_tab, lang):
    page = practice_tab(lang)
    seed, topic = SEED, TOPIC
    ex = practice.make(*practice.item(seed, topic, 0))
    field = translate("practice.field.out", lang, step="").strip()
    tab_to(page, lambda f: f["tag"] == "INPUT" and f["label"].startswith(field[:8]))
    page.keyboard.type(", ".join(f"{v:.3f}" for v in ex.answer[0]))
    check = translate("practice.check", lang)
    tab_to(page, text_is(check))
    page.keyboard.press("Enter")
    settle(page)
    feedback = page.get_by_test_id("stAlert").get_by_text(
        translate("practice.feedback.correct", lang)
    )
    feedback.wait_for(timeout=TIMEOUT_MS)
    # a screen reader hears it: the feedback sits in a live region
    live = "xpath=ancestor-or-self::*[@role='alert' or @role='status']"
    assert feedback.locator(live).count() >= 1
    assert page.problems == []


def test_switch_the_language_there_and_back(practice_tab):
    """English to Korean (the arrow to the right) and back (to the left), on one load: the
    English exercise's (practice_tab), answered or not (the switch is the sidebar's, the
    same on every page)."""
    page = practice_tab("en")
    assert page.evaluate("document.documentElement.lang") == "en"
    names = {"en": "English", "ko": "한국어"}

    def on_the_switch(f):
        return f.get("sidebar") and f["tag"] == "BUTTON" and f["text"] in names.values()

    for start, other in (("en", "ko"), ("ko", "en")):
        # a segmented control is one Tab stop; the arrows move between its options (back
        # in the redrawn page the focus may still be on it)
        now = focused(page)
        if not on_the_switch(now):
            now = tab_to(page, on_the_switch)
        if now["text"] != names[other]:
            arrow = (
                "ArrowRight" if list(names).index(other) > list(names).index(start) else "ArrowLeft"
            )
            tab_to(page, lambda f, other=other: f["text"] == names[other], key=arrow, limit=3)
        page.keyboard.press("Enter")
        page.locator("h1", has_text=translate("practice.title", other)).wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(
            f"() => document.documentElement.lang === '{other}'", timeout=TIMEOUT_MS
        )
        settle(page)
    assert page.problems == []
