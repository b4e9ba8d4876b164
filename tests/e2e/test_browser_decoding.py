"""Step-by-step decoding in a real browser: each Step press adds one row to the mask."""

from __future__ import annotations

import re

import pytest

from bench import loadtest, scripttiming
from tests.e2e.pagechecks import watch_problems
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py


TIMEOUT_MS = 90_000
ADDRESS = "/decoding?model=en2ko&text=I+study+math+at+school"


@pytest.fixture(scope="module")
def decoding_tab(shared_context, app_url):
    """The page at ADDRESS, loaded once in one tab for the module's two tests, in their
    written order: the first one's presses (step, step, back, reset) leave it at its start,
    as a load would, where the second begins. Neither needs a load of its own."""
    tab = watch_problems(shared_context.new_page(), app_url)
    tab.goto(ADDRESS)
    tab.get_by_role("button", name=translate("decoding.step", "en"), exact=True).wait_for(
        timeout=TIMEOUT_MS
    )
    yield tab
    tab.close()


@pytest.fixture
def page(decoding_tab):
    return decoding_tab


def wait_for_mask_rows(page, rows: int) -> None:
    """Until the growing-mask heatmap draws ``rows`` query labels (fails by timeout if a
    row is missing or extra)."""
    loadtest.wait_for_mask_rows(page, rows, TIMEOUT_MS)


def press_step(page, lang: str, expected_step: int, total_pattern: str) -> None:
    page.get_by_role("button", name=translate("decoding.step", lang), exact=True).click()
    text = translate("decoding.position", lang, step=expected_step, total="__")
    # the step's own line (the live region says it too, for screen readers)
    page.get_by_test_id("stProgress").get_by_text(
        re.compile(re.escape(text).replace("__", total_pattern))
    ).wait_for(timeout=TIMEOUT_MS)


def test_step_back_and_reset_rerun_only_the_step_fragment(page, script_runs_log):
    """A press redraws the step's part of the page; the model, the controls and the rest of
    the page are not run again (that is what keeps a step fast)."""
    wait_for_mask_rows(page, 0)  # the page at its start: no step taken
    seen = scripttiming.settled(script_runs_log)
    presses = [("step", 1), ("step", 2), ("back", 1), ("reset", 0)]  # (button, mask rows after)
    logged = []
    for button, rows in presses:
        page.get_by_role("button", name=translate(f"decoding.{button}", "en"), exact=True).click()
        wait_for_mask_rows(page, rows)
        # Every run this press caused: the browser draws before a run is logged, and another
        # tab's late run may be logged first (taking the first run logged missed ours).
        assert scripttiming.runs_after(script_runs_log, seen), f"{button}: no run was logged"
        total = scripttiming.settled(script_runs_log)
        runs = scripttiming.read_runs(script_runs_log)[seen:total]
        logged.append((button, runs))
        seen = total
    # This tab's session: the one whose step part ran at every press (the server is shared by
    # the module's other tabs, whose late runs, fragments too, may land in the log meanwhile).
    ours = set.intersection(*({r["session"] for r in runs if r["fragment"]} for _, runs in logged))
    assert len(ours) == 1, f"no session ran the step fragment at every press: {logged}"
    for button, runs in logged:
        mine = [run for run in runs if run["session"] in ours]
        assert all(run["fragment"] for run in mine), f"{button} reran the whole page: {mine}"
    assert page.problems == []


def test_stepping_through_a_sentence_grows_the_mask_one_row_per_step(
    page, artifacts_dir, screenshot_whole_page
):
    """From the page's start (decoding_tab), three steps in English, then a fourth in Korean
    after the sidebar's language switch."""
    page.locator("h1", has_text=translate("decoding.title", "en")).wait_for(timeout=TIMEOUT_MS)
    wait_for_mask_rows(page, 0)
    for step in (1, 2, 3):
        press_step(page, "en", step, r"\d+")
        wait_for_mask_rows(page, step)  # fails by timeout if a row is missing or extra
    page.wait_for_url(re.compile(r"step=3"), timeout=TIMEOUT_MS)
    screenshot_whole_page(page, artifacts_dir / "decoding-en.png")

    page.get_by_test_id("stSidebar").get_by_text("한국어", exact=True).click()
    page.locator("h1", has_text=translate("decoding.title", "ko")).wait_for(timeout=TIMEOUT_MS)
    press_step(page, "ko", 4, r"\d+")
    wait_for_mask_rows(page, 4)
    screenshot_whole_page(page, artifacts_dir / "decoding-ko.png")
    assert page.problems == []
