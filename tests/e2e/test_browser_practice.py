"""Practice in a real browser: a class-set link shows two students the same exercise, and
answering shows the feedback, in English and Korean; screenshots in tests/artifacts/.

The second student answers wrong twice: the live region says "Not right" with the hint,
again on the identical second try, now with the worked solution, and after Check the focus
is on the feedback (what a screen-reader user hears; on the page both students open, so it
costs no page load of its own)."""

from __future__ import annotations

import re

import pytest

import practice
from tests.e2e.pagechecks import LanguageTab, live_text, mark_unseen
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 120_000
TOPIC = "layernorm"
# A set that opens on the LayerNorm kind itself (the topic holds pre-/post-LN as well).
SEED = next(s for s in range(2024, 2124) if practice.item(s, TOPIC, 0)[0] == "layernorm")


def wait_for_exercise(tab, lang: str) -> str:
    """Until the exercise is drawn and the script is idle; returns its heading."""
    heading = tab.get_by_test_id("stMain").locator("h3").first
    heading.wait_for(timeout=TIMEOUT_MS)
    tab.get_by_role("button", name=translate("practice.check", lang)).wait_for(timeout=TIMEOUT_MS)
    tab.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    tab.evaluate("document.fonts.ready")
    return heading.inner_text()


def answer(tab, lang: str, text: str) -> None:
    box = tab.get_by_label(translate("practice.field.out", lang, step=""))
    box.fill(text)
    box.press("Tab")  # leave the box, as a student would before clicking
    tab.get_by_role("button", name=translate("practice.check", lang)).click()


def wrong_twice_is_said(tab, lang: str, ex) -> None:
    """A wrong answer says so in words and moves the focus to the feedback; the same wrong
    answer again is said again, now with the worked solution."""
    not_right = translate("practice.not_right", lang)
    wrong = ", ".join(f"{v + 1:.3f}" for v in ex.answer[0])
    check = tab.get_by_role("button", name=translate("practice.check", lang))
    field = translate("practice.field.out", lang, step="").strip()[:8]
    tab.locator(f"[data-testid=stForm] input[aria-label^='{field}']").first.fill(wrong)
    mark_unseen(tab)
    check.click()
    first = live_text(tab)
    assert first.startswith(not_right), first
    tab.wait_for_function(
        "document.activeElement && document.activeElement.closest('.st-key-practice_feedback')"
    )
    mark_unseen(tab)
    check.click()
    second = live_text(tab)
    assert second.startswith(first.split(".")[0]), (first, second)
    assert second.endswith(translate("practice.solution_shown", lang)), second
    # and the feedback seen says it in words too, not only in red
    assert tab.locator(".st-key-practice_feedback").get_by_text(not_right).count()


# one language: the words change, not the behaviour (the page sweep holds every page's
# words in both, tests/e2e/test_accessibility.py)
@pytest.mark.parametrize("lang", ["ko"])
def test_a_class_set_link_gives_two_students_the_same_exercise_and_feedback(
    shared_context, artifacts_dir, screenshot_whole_page, page, lang
):
    """The second student is a tab of the same browser context: a Streamlit session of its
    own (the practice pages keep no cookies or storage), without a context's start-up."""
    link = f"/practice?seed={SEED}&topic={TOPIC}&lang={lang}"
    page.goto(link)
    first = wait_for_exercise(page, lang)
    ex = practice.make(*practice.item(SEED, TOPIC, 0))
    tab = shared_context.new_page()
    try:
        tab.goto(link)
        assert wait_for_exercise(tab, lang) == first
        prompt = translate("practice.layernorm.prompt", lang, x="", gamma="", beta="", d="")[:12]
        assert tab.get_by_test_id("stMain").get_by_text(prompt).first.inner_text() == (
            page.get_by_test_id("stMain").get_by_text(prompt).first.inner_text()
        )
        wrong_twice_is_said(tab, lang, ex)  # the second student, heard by a screen reader
    finally:
        tab.close()

    assert translate(f"practice.kind.{ex.kind}", lang) in first
    # A wrong answer (the unbiased variance) first: its own hint.
    unbiased = next(w for w in ex.wrong if w.key.endswith(".unbiased"))
    answer(page, lang, ", ".join(f"{v:.3f}" for v in unbiased.answer[0]))
    hint = translate(unbiased.key, lang, **unbiased.params)
    page.get_by_test_id("stAlert").get_by_text(hint[:20]).wait_for(timeout=TIMEOUT_MS)
    # Then the right one: "correct", the worked solution, and a score of 0 / 1 (first try).
    answer(page, lang, ", ".join(f"{v:.3f}" for v in ex.answer[0]))
    correct = translate("practice.feedback.correct", lang)
    page.get_by_test_id("stAlert").get_by_text(correct).wait_for(timeout=TIMEOUT_MS)
    page.get_by_text(translate("practice.solution", lang), exact=True).wait_for()
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    screenshot_whole_page(page, artifacts_dir / f"practice-{lang}.png")
    text = page.get_by_test_id("stMain").inner_text()
    assert "0 / 1" in text
    if lang == "ko":
        assert HANGUL.search(text)
    assert "Traceback" not in text
    assert page.problems == []


@pytest.fixture(scope="module")
def bugs_in(shared_context, app_url):
    """``bugs_in(lang)``: "Find the bug" (seed 4) in ``lang``, in one tab: loaded in the first
    language asked for, then switched in place by the sidebar's language control (a rerun of
    the same session that draws both runs again in the new language)."""
    tab = LanguageTab(shared_context, app_url, "/find_the_bug?seed=4")
    yield tab
    tab.close()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_find_the_bug_draws_both_runs(bugs_in, artifacts_dir, screenshot_whole_page, lang):
    page = bugs_in(lang)
    page.locator("h1", has_text=translate("bugs.title", lang)).wait_for(timeout=TIMEOUT_MS)
    page.get_by_test_id("stPlotlyChart").nth(1).locator(".main-svg").first.wait_for(
        timeout=TIMEOUT_MS
    )
    page.wait_for_function(  # the run that drew this language's page has ended
        """() => !document.querySelector('[data-testid=stStatusWidget]')
            && document.querySelector('[data-testid=stApp]')
                ?.getAttribute('data-test-script-state') === 'notRunning'""",
        timeout=TIMEOUT_MS,
    )
    page.evaluate("document.fonts.ready")
    screenshot_whole_page(page, artifacts_dir / f"find_the_bug-{lang}.png")
    assert "Traceback" not in page.get_by_test_id("stMain").inner_text()
    assert page.problems == []


def test_typed_markdown_is_never_echoed_as_a_live_link(page, artifacts_dir, screenshot_whole_page):
    page.goto("/practice?seed=5&topic=noam")
    wait_for_exercise(page, "en")
    page.get_by_label(translate("practice.field.peak", "en")).fill("4000")
    box = page.get_by_label(re.compile(translate("practice.field.lr", "en", step="")))
    box.fill("[x](http://e.vil)**b**www.e.vil")
    box.press("Tab")
    page.get_by_role("button", name=translate("practice.check", "en")).click()
    alert = page.get_by_test_id("stAlert").filter(has_text="is not a number")
    alert.wait_for(timeout=TIMEOUT_MS)
    assert alert.locator("a").count() == 0 and alert.locator("strong").count() == 0
    assert "[x](http://e.vil)**b**www.e.vil" in alert.inner_text()
    screenshot_whole_page(page, artifacts_dir / "practice-markdown-echo.png")
