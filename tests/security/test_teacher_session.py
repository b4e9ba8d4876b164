"""A teacher session worth its name: the key is exchanged, server-side, for an HttpOnly,
SameSite=Strict session cookie of hours (Secure under https), set by the app's own route; the
key is never written to the address; "Sign out" ends the session, "New teacher key" ends the
old key and every session; the join link on the teacher's browser is the join form, with the
dashboard a separate action; the teacher gives a student a new personal link."""

from __future__ import annotations

import urllib.parse
from datetime import timedelta
from pathlib import Path

import pytest

from bench.classcore import (
    run_async,  # asyncio.run on its own thread: the worker may host a running loop (Playwright)
)
from classroom import Classroom, core

ROUTE_CLIENT = ("192.0.2.10", 50000)
ROOT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_url(tmp_path, monkeypatch):
    """A private store, for the route's Classroom() and the page's alike."""
    import ui.classroom
    import ui.teacher_session

    url = f"sqlite:///{tmp_path / 'sessions.sqlite'}"
    monkeypatch.setenv("ATTENTION_LAB_DATABASE_URL", url)
    ui.teacher_session._rooms.clear()
    ui.classroom._room.clear()
    yield url
    ui.teacher_session._rooms.clear()
    ui.classroom._room.clear()


# ---- the store ------------------------------------------------------------------------------


def test_a_session_lasts_hours_and_ends_on_sign_out_alone(store_url, monkeypatch):
    room = Classroom(store_url)
    code, key = room.create_class("Sessions", n_items=1)
    first, second = room.sign_in(code, key), room.sign_in(code, key)
    assert key not in (first, second) and first != second and len(first) >= 43
    room.sign_out(first)
    with pytest.raises(PermissionError):
        room.teacher_class(code, first)
    assert room.teacher_class(code, second).code == code, "another browser stays in"

    assert timedelta(hours=12) >= core.SESSION_LIFE, "hours, not months"
    later = core._now() + core.SESSION_LIFE + timedelta(seconds=1)
    monkeypatch.setattr(core, "_now", lambda: later)
    with pytest.raises(PermissionError):
        room.teacher_class(code, second)
    assert room.teacher_class(code, key).code == code, "the key itself does not expire"


def test_a_new_teacher_key_ends_the_old_key_and_every_session_and_ticket(store_url):
    room = Classroom(store_url)
    code, key = room.create_class("Keys", n_items=1)
    sessions = [room.sign_in(code, key) for _ in range(3)]
    ticket = room.ticket(code, sessions[0])
    new_key = room.new_teacher_key(code, sessions[0])
    for old in [key, *sessions]:
        with pytest.raises(PermissionError):
            room.teacher_class(code, old)
    with pytest.raises(LookupError):
        room.redeem_ticket(ticket)
    assert room.teacher_class(code, room.sign_in(code, new_key)).code == code


def test_a_ticket_is_spent_once_within_its_minute(store_url, monkeypatch):
    room = Classroom(store_url)
    code, key = room.create_class("Tickets", n_items=1)
    ticket = room.ticket(code, key)
    with pytest.raises(PermissionError):
        room.teacher_class(code, ticket), "a ticket opens nothing by itself"
    got, session = room.redeem_ticket(ticket)
    assert got == code and room.teacher_class(code, session).code == code
    with pytest.raises(LookupError):
        room.redeem_ticket(ticket)
    stale = room.ticket(code, key)
    later = core._now() + core.TICKET_LIFE + timedelta(seconds=1)
    monkeypatch.setattr(core, "_now", lambda: later)
    with pytest.raises(LookupError):
        room.redeem_ticket(stale)


def test_the_teacher_gives_a_student_a_new_link_and_the_old_one_stops(store_url):
    room = Classroom(store_url)
    code, key = room.create_class("Links", n_items=2)
    ada, bo = room.join(code, "Ada"), room.join(code, "Bo")
    room.submit(ada, 0, room.exercise(ada, 0).answer, "a1")
    assert room.students(code, key) == ["Ada", "Bo"]
    new = room.new_student_link(code, room.sign_in(code, key), 1)
    with pytest.raises(LookupError):
        room.student(ada)
    assert room.student(new).name == "Ada" and room.progress(new)[0].correct, "work kept"
    assert room.student(bo).name == "Bo", "no one else's link changes"
    with pytest.raises(ValueError):
        room.new_student_link(code, key, 3)
    with pytest.raises(PermissionError):
        room.new_student_link(code, "not-the-key", 1)


# ---- the route: cookie flags and the redirect ------------------------------------------------


def call(method: str, path: str, *, query: dict | None = None, headers=(), body=b"", https=False):
    """One request to the lab's routes (ui.teacher_session), as uvicorn hands it over:
    (status, [(header, value)])."""
    from starlette.applications import Starlette

    from ui.teacher_session import routes

    app = Starlette(routes=routes())
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https" if https else "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": urllib.parse.urlencode(query or {}).encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": ROUTE_CLIENT,
        "server": ("lab.example", 443 if https else 80),
        "root_path": "",
    }
    sent, asked = [], []

    async def receive():
        if not asked:
            asked.append(1)
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    run_async(app(scope, receive, send))
    start = sent[0]
    return start["status"], [(k.decode(), v.decode()) for k, v in start["headers"]]


def cookie_of(headers) -> dict[str, str]:
    """The Set-Cookie header, as name -> value plus its attributes, lower-cased."""
    [raw] = [v for k, v in headers if k == "set-cookie"]
    first, *attrs = [p.strip() for p in raw.split(";")]
    name, value = first.split("=", 1)
    out = {"name": name, "value": value}
    for a in attrs:
        k, _, v = a.partition("=")
        out[k.lower()] = v or "true"
    return out


def test_the_teacher_link_sets_an_httponly_strict_cookie_of_hours_and_redirects(store_url):
    from ui.classroom import PAGE_PATH, TEACHER_ROUTE, teacher_link
    from ui.teacher_session import PAGE_PATH as REDIRECT_PAGE
    from ui.teacher_session import ROUTE, SESSION_HOURS, session_cookie

    assert timedelta(hours=SESSION_HOURS) == core.SESSION_LIFE
    assert (ROUTE, REDIRECT_PAGE) == (TEACHER_ROUTE, PAGE_PATH), "named twice, held equal"
    assert teacher_link("ABCDEF", "k").startswith(f"{ROUTE}?")
    room = Classroom(store_url)
    code, key = room.create_class("Route", n_items=1)
    status, headers = call("GET", ROUTE, query={"class": code, "key": key})
    assert status == 303
    location = dict(headers)["location"]
    assert location == f"/classroom?class={code}&view=teacher" and key not in location
    assert dict(headers)["cache-control"] == "no-store"
    assert dict(headers)["referrer-policy"] == "no-referrer"
    cookie = cookie_of(headers)
    assert cookie["name"] == session_cookie(code)
    assert cookie["httponly"] == "true" and cookie["samesite"].lower() == "strict"
    assert cookie["path"] == "/" and int(cookie["max-age"]) == SESSION_HOURS * 3600
    assert "secure" not in cookie, "plain http (make run on localhost) cannot keep Secure"
    assert cookie["value"] != key and room.teacher_class(code, cookie["value"]).code == code

    _, over_tls = call("GET", ROUTE, query={"class": code, "key": key}, https=True)
    assert cookie_of(over_tls)["secure"] == "true"


def test_a_forwarded_https_counts_only_from_our_own_balancer(store_url, monkeypatch):
    from ui.classroom import BALANCER_HEADER, BALANCER_SECRET_ENV
    from ui.teacher_session import ROUTE

    monkeypatch.setenv(BALANCER_SECRET_ENV, "per-run-secret")
    room = Classroom(store_url)
    code, key = room.create_class("Proxy", n_items=1)
    query = {"class": code, "key": key}
    _, forged = call("GET", ROUTE, query=query, headers=[("X-Forwarded-Proto", "https")])
    assert "secure" not in cookie_of(forged)
    balancer = [("X-Forwarded-Proto", "https"), (BALANCER_HEADER, "per-run-secret")]
    _, ours = call("GET", ROUTE, query=query, headers=balancer)
    assert cookie_of(ours)["secure"] == "true"


def test_a_wrong_key_on_the_route_sets_nothing_and_counts_as_a_guess(store_url):
    from ui.teacher_session import ROUTE

    room = Classroom(store_url)
    code, _ = room.create_class("Route", n_items=1)
    status, headers = call("GET", ROUTE, query={"class": code, "key": "a-guess"})
    assert status == 303 and "set-cookie" not in dict(headers)
    assert dict(headers)["location"] == f"/classroom?class={code}&signin=refused"
    assert room.failures(f"guess:{ROUTE_CLIENT[0]}") == 1


def test_a_ticket_buys_the_cookie_once_and_sign_out_clears_it(store_url):
    from ui.teacher_session import ROUTE, session_cookie

    room = Classroom(store_url)
    code, key = room.create_class("Ticket", n_items=1)
    ticket = room.ticket(code, key)
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    body = f"ticket={urllib.parse.quote(ticket)}".encode()
    status, headers = call("POST", f"{ROUTE}/ticket", headers=form, body=body)
    assert status == 204
    session = cookie_of(headers)["value"]
    assert cookie_of(headers)["httponly"] == "true"
    assert room.teacher_class(code, session).code == code
    again, _ = call("POST", f"{ROUTE}/ticket", headers=form, body=body)
    assert again == 403, "spent"

    cookie = [("Cookie", f"{session_cookie(code)}={session}")]
    status, headers = call("POST", f"{ROUTE}/signout", query={"class": code}, headers=cookie)
    assert status == 204 and cookie_of(headers)["max-age"] == "0"
    with pytest.raises(PermissionError):
        room.teacher_class(code, session)


# ---- the page (AppTest), in English and Korean ------------------------------------------------


@pytest.fixture
def cookie_jar(monkeypatch) -> dict[str, str]:
    """The cookies this browser's connection carries (AppTest sends none)."""
    import ui.classroom

    jar: dict[str, str] = {}
    monkeypatch.setattr(ui.classroom, "remembered", jar.get)
    return jar


def open_class(lang: str, **query: str):
    from tests.app import helpers

    return helpers.open_page("classroom", timeout=180, lang=lang, **query)


def scripts(at) -> str:
    return "\n".join(h.proto.body for h in at.get("html"))


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_join_link_on_the_teachers_browser_is_the_join_form_and_sign_out_ends_it(
    lang, store_url, cookie_jar
):
    from ui.i18n import translate
    from ui.teacher_session import session_cookie

    room = Classroom(store_url)
    code, key = room.create_class("Shared computer", n_items=1)
    session = room.sign_in(code, key)
    cookie_jar[session_cookie(code)] = session

    at = open_class(lang, **{"class": code})  # the join link, on the teacher's browser
    assert not at.exception
    assert at.text_input(key="join_name"), "the student's join form"
    assert not at.metric, "no dashboard without asking"
    assert translate("classroom.join.teacher_here", lang) in [i.value for i in at.info]
    at = at.button(key="open_dashboard").click().run()
    assert not at.exception and at.metric, "the dashboard, once asked for"
    assert at.query_params["view"] == "teacher"
    assert key not in scripts(at) and session not in scripts(at)

    at = at.button(key="sign_out").click().run()
    assert not at.exception and not at.metric
    assert translate("classroom.teacher.signed_out", lang) in [s.value for s in at.success]
    assert "/lab/teacher/signout" in scripts(at), "the browser clears its cookie"
    with pytest.raises(PermissionError):
        room.teacher_class(code, session)
    again = open_class(lang, **{"class": code, "view": "teacher"})  # Back, or a reload
    assert not again.metric
    said = translate("classroom.teacher.signin_needed", lang, hours=8)
    assert said in [w.value for w in again.warning]


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_new_teacher_key_and_a_students_new_link_from_the_dashboard(lang, store_url, cookie_jar):
    from ui.classroom import student_link
    from ui.i18n import translate
    from ui.teacher_session import session_cookie

    room = Classroom(store_url)
    code, key = room.create_class("Renewals", n_items=1)
    elsewhere = room.sign_in(code, key)  # another browser, signed in with the old key
    old_student = room.join(code, "민수")
    cookie_jar[session_cookie(code)] = room.sign_in(code, key)
    at = open_class(lang, **{"class": code, "view": "teacher"})
    assert not at.exception and at.metric

    at.session_state["class_own_link"] = True  # "Your teacher link (secret)" opened
    at = at.run()
    captions = [c.value for c in at.caption]
    assert translate("classroom.teacher.own_link_gone", lang) in captions, "no key held here"
    at = at.button(key="new_key").click().run()
    assert not at.exception and at.metric, "this browser stays signed in"
    _, new_key = at.session_state["class_key_shown"]
    assert translate("classroom.teacher.new_key_done", lang) in [s.value for s in at.success]
    assert any(urllib.parse.quote(new_key) in c.value for c in at.code), "shown, once asked"
    for old in (key, elsewhere):
        with pytest.raises(PermissionError):
            room.teacher_class(code, old)
    assert room.teacher_class(code, new_key).code == code

    at = at.button(key="relink").click().run()
    assert not at.exception
    said = translate("classroom.teacher.relink_done", lang, name="민수")
    assert said in [i.value for i in at.info]
    [link] = [c.value for c in at.code if "?student=" in c.value]
    new_student = urllib.parse.unquote(link.split("?student=", 1)[1])
    assert link == student_link(new_student)
    with pytest.raises(LookupError):
        room.student(old_student)
    assert room.student(new_student).name == "민수"
    old_page = open_class(lang, student=old_student)  # the old link: "ask your teacher"
    assert [e.value for e in old_page.error] == [translate("classroom.bad_student", lang)]


@pytest.mark.slow
def test_an_old_style_teacher_link_leaves_for_the_route_and_writes_nothing_to_the_address(
    store_url,
):
    room = Classroom(store_url)
    code, key = room.create_class("Old link", n_items=1)
    at = open_class("en", **{"class": code, "teacher": key})
    assert not at.exception and not at.metric
    assert "window.location.replace(" in scripts(at), "the keyed entry is replaced, not kept"
    assert "/lab/teacher?" in scripts(at)
    assert dict(at.query_params) == {"class": code, "teacher": key, "lang": "en"}, "untouched"


@pytest.mark.slow
def test_make_run_serves_the_cookie_route_and_still_stops_cleanly(tmp_path):
    """`make run` (deploy.launch, no balancer) serves app.py inside st.App with the route;
    SIGTERM still ends it with exit 0 and its run record removed (atexit ran)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    from deploy.launch import RUN_RECORD_ENV
    from deploy.ports import free_port
    from deploy.serve import healthy, run_command

    port = free_port()
    record = tmp_path / f"{port}.json"
    env = {
        **os.environ,
        "ATTENTION_LAB_DATA": str(tmp_path),
        "ATTENTION_LAB_DATABASE_URL": "",
        "ATTENTION_LAB_PRELOAD": "0",
        RUN_RECORD_ENV: str(record),
    }
    command = [sys.executable, *run_command(port)[1:]]
    server = subprocess.Popen(command, cwd=ROOT_DIR, env=env, stdout=subprocess.DEVNULL)
    try:
        record.write_text(json.dumps({"run": server.pid}))
        deadline = time.monotonic() + 120
        while not healthy(f"http://127.0.0.1:{port}"):
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as answer:
            opener.open(f"http://127.0.0.1:{port}/lab/teacher?class=NOPE22&key=x", timeout=60)
        assert answer.value.code == 303
        assert answer.value.headers["Location"] == "/classroom?class=NOPE22&signin=refused"
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=90)
    assert code == 0 and not record.exists(), "stopped cleanly, its record removed"
