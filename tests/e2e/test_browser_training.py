"""Live training in a real browser: the bar moves, snapshots appear, the timeline follows."""

from __future__ import annotations

import re
import time

import pytest

from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py

HANGUL = re.compile(r"[\uac00-\ud7a3]")
TIMEOUT_MS = 120_000
PROGRESS = "[data-testid=stProgress] [role=progressbar]"


def progress_value(page) -> float:
    return float(page.locator(PROGRESS).first.get_attribute("aria-valuenow") or 0)


def test_a_small_training_moves_the_bar_and_shows_snapshots_in_both_languages(
    page, artifacts_dir, screenshot_whole_page
):
    page.goto("/training?lang=en")
    page.locator("h1", has_text=translate("training.title", "en")).wait_for(timeout=TIMEOUT_MS)
    steps = page.get_by_test_id("stSlider").filter(has_text=translate("training.steps", "en"))
    thumb = steps.get_by_role("slider")
    thumb.wait_for(timeout=TIMEOUT_MS)
    # 300 -> 150 steps: long enough to watch, short enough for a test. Press until the
    # slider itself says 150: a key pressed before the widget is ready is lost.
    shown = steps.get_by_test_id("stSliderThumbValue")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while (value := int(shown.inner_text().replace(",", ""))) != 150:
        assert time.monotonic() < deadline, f"the steps slider stuck at {value}, not 150"
        thumb.focus()
        thumb.press("ArrowLeft" if value > 150 else "ArrowRight")
        page.wait_for_timeout(400)
    page.get_by_text("150", exact=True).first.wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=translate("training.start", "en")).click()

    page.locator(PROGRESS).first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        f"() => +document.querySelector('{PROGRESS}')?.getAttribute('aria-valuenow') > 0",
        timeout=TIMEOUT_MS,
    )
    first = progress_value(page)
    page.wait_for_function(
        f"() => +document.querySelector('{PROGRESS}')?.getAttribute('aria-valuenow') > {first}"
        " || !document.querySelector('{PROGRESS}')".replace("{PROGRESS}", PROGRESS),
        timeout=TIMEOUT_MS,
    )  # the bar moved (or the run finished in between)
    snapshot = page.get_by_text(re.compile(r"Step \d+")).first
    snapshot.wait_for(timeout=TIMEOUT_MS)  # an attention snapshot of the probe example
    screenshot_whole_page(page, artifacts_dir / "training-live-en.png")

    page.get_by_test_id("stSidebar").get_by_text("한국어", exact=True).click()
    page.locator("h1", has_text=translate("training.title", "ko")).wait_for(timeout=TIMEOUT_MS)
    screenshot_whole_page(page, artifacts_dir / "training-live-ko.png")

    timeline = page.get_by_text(translate("training.timeline", "ko"), exact=True)
    timeline.wait_for(timeout=TIMEOUT_MS)  # finished: the timeline replaces the live view
    page.get_by_text(re.compile(r"스텝 150\b")).first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    page.evaluate("document.fonts.ready")
    screenshot_whole_page(page, artifacts_dir / "training-done-ko.png")
    main = page.get_by_test_id("stMain").inner_text()
    assert HANGUL.search(main) and "학습 #1 · reverse (이 세션)" in main  # offered in the picker

    page.get_by_test_id("stSidebar").get_by_text("English", exact=True).click()
    page.get_by_text(translate("training.timeline", "en"), exact=True).wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )
    screenshot_whole_page(page, artifacts_dir / "training-done-en.png")
    text = page.get_by_test_id("stMain").inner_text()
    assert "Traceback" not in text
    assert page.problems == []
