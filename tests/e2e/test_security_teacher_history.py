"""(A security test: it lives here, not in tests/security/, to share this folder's one
Chromium: Playwright's sync API runs once per process.)

The teacher's key in a real browser (Chromium, the shared class server of
tests/e2e/conftest.py, started as `make run`): never in any history entry after creating a
class or opening the teacher link (every entry read by going Back through all of them), and
the session cookie's flags as the browser keeps them: HttpOnly (no script reads it),
SameSite=Strict, hours long; a reload stays signed in, "Sign out" ends it. The browser asks
for reduced motion, which the lab honours (ui/a11y.py): no animation redrawn while a page
waits, and neither the history nor the cookie moves with it."""

from __future__ import annotations

import time
import urllib.parse

import pytest

from tests.e2e.servers import GROUP
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group(GROUP)]

TIMEOUT_MS = 120_000


def idle(tab) -> None:
    tab.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def history(tab) -> list[str]:
    """Every entry of this tab's history, oldest first: the browser's own list of them, as
    Back would go through them (read over the DevTools protocol: going Back through each,
    a step between two entries of one address waited 3 s for a change that never came)."""
    session = tab.context.new_cdp_session(tab)
    try:
        return [entry["url"] for entry in session.send("Page.getNavigationHistory")["entries"]]
    finally:
        session.detach()


def session_cookie(context, code: str) -> dict:
    [cookie] = [c for c in context.cookies() if c["name"] == f"lab_teach_{code}"]
    return cookie


def test_creating_a_class_leaves_no_key_in_history_and_a_strict_httponly_cookie(
    browser, class_server
):
    url, room = class_server.url, class_server.room
    context = browser.new_context(base_url=url, reduced_motion="reduce")
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    try:
        tab.goto("/classroom?lang=en")
        tab.get_by_label(translate("classroom.create.name", "en")).fill("History")
        tab.get_by_role("button", name=translate("classroom.create.button", "en")).click()
        tab.get_by_text(translate("classroom.teacher.made", "en")).wait_for()
        idle(tab)
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(tab.url).query)["class"][0]
        tab.get_by_text(translate("classroom.teacher.own_link", "en"), exact=True).click()
        link = tab.get_by_test_id("stCode").filter(has_text="/lab/teacher?").inner_text()
        key = urllib.parse.parse_qs(urllib.parse.urlsplit(link.strip()).query)["key"][0]
        assert room.teacher_class(code, key).code == code

        deadline = time.monotonic() + 30  # the page's fetch spends the ticket
        while not [c for c in context.cookies() if c["name"] == f"lab_teach_{code}"]:
            assert time.monotonic() < deadline, "no session cookie arrived"
            tab.wait_for_timeout(200)
        cookie = session_cookie(context, code)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert not cookie["secure"], "plain http on localhost"
        hours = (cookie["expires"] - time.time()) / 3600
        assert 7.5 < hours <= 8.01, "hours, not months"
        assert cookie["value"] != key
        assert f"lab_teach_{code}" not in tab.evaluate("document.cookie"), "no script reads it"
        assert key not in tab.evaluate("document.cookie")

        tab.reload()  # the cookie alone opens the dashboard again
        tab.get_by_text(translate("classroom.teacher.join_link", "en")).wait_for()
        idle(tab)
        entries = history(tab)
        assert len(entries) >= 2
        for entry in entries:
            assert key not in entry and "teacher=" not in entry and "key=" not in entry, entry
    finally:
        context.close()


def test_the_teacher_link_and_an_old_style_link_leave_no_key_in_history(browser, class_server):
    url, room = class_server.url, class_server.room
    code, key = room.create_class("Links", n_items=1)
    contexts = []
    try:
        for link in (
            f"/lab/teacher?class={code}&key={urllib.parse.quote(key)}",
            f"/classroom?class={code}&teacher={urllib.parse.quote(key)}&lang=en",
        ):
            context = browser.new_context(base_url=url, reduced_motion="reduce")
            contexts.append(context)
            context.set_default_timeout(TIMEOUT_MS)
            tab = context.new_page()
            tab.goto("/classroom?lang=en")
            idle(tab)
            tab.goto(link)
            tab.get_by_text(translate("classroom.teacher.join_link", "en")).wait_for()
            idle(tab)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(tab.url).query)
            assert query["class"] == [code] and query["view"] == ["teacher"]
            assert "teacher" not in query and "key" not in query
            assert session_cookie(context, code)["httpOnly"]
            entries = history(tab)
            for entry in entries:
                assert key not in entry and "key=" not in entry, (link, entries)

        # Sign out (on the last browser, on the dashboard its link opened: the way in does
        # not change the way out): the dashboard does not come back on this browser.
        tab.get_by_role("button", name=translate("classroom.teacher.sign_out", "en")).click()
        tab.get_by_text(translate("classroom.teacher.signed_out", "en")).wait_for()
        idle(tab)
        deadline = time.monotonic() + 30
        while [c for c in context.cookies() if c["name"] == f"lab_teach_{code}"]:
            assert time.monotonic() < deadline, "the cookie is cleared"
            tab.wait_for_timeout(200)
        tab.goto(f"/classroom?class={code}&view=teacher&lang=en")
        tab.get_by_text(translate("classroom.teacher.signin_needed", "en", hours=8)).wait_for()
    finally:
        for context in contexts:
            context.close()
