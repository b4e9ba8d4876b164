"""The teacher's session cookie: the HTTP route the lab adds to Streamlit's server (asgi.py).

A page script cannot set an HttpOnly cookie (Streamlit sends no Set-Cookie from a script, and
one set by ``document.cookie`` is readable by every script on the page), so the key, or a
one-time ticket the page made, is exchanged here, server-side, for a session cookie:
HttpOnly, SameSite=Strict, Secure when the browser came over https, living SESSION_LIFE
(hours). The class page reads it back from its websocket's handshake (st.context.cookies).

    GET  /lab/teacher?class=CODE&key=KEY   the teacher link: sign in, then 303 to the
                                          dashboard (a redirect leaves no history entry
                                          holding the key)
    POST /lab/teacher/ticket               body ``ticket=T`` (the page's fetch): 204 + cookie
    POST /lab/teacher/signout?class=CODE   the session ends, the cookie is cleared: 204

Every failure is counted and slowed like any other guess (classroom.core), off the event loop.
"""

from __future__ import annotations

import hmac
import logging
import os
import urllib.parse
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from classroom import Classroom

ROUTE = "/lab/teacher"
COOKIE_PREFIX = "lab_teach_"
PAGE_PATH = "classroom"  # ui.classroom.PAGE_PATH (not imported at start-up: see _room)
SESSION_HOURS = 8  # classroom.core.SESSION_LIFE; a test holds the two equal
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
log = logging.getLogger("attention_lab.classroom")
_rooms: dict[str, Classroom] = {}


def session_cookie(code: str) -> str:
    """The cookie that holds the teacher's session for class ``code``."""
    return f"{COOKIE_PREFIX}{str(code).strip().upper()[:16]}"


def dashboard_url(code: str, refused: bool = False) -> str:
    query = {"class": code, "view": "teacher"}
    if refused:
        query = {"class": code, "signin": "refused"}
    return f"/{PAGE_PATH}?{urllib.parse.urlencode(query)}"


def _room() -> Classroom:
    """The store, imported on the first request, after the warm-up thread's imports (this
    module is imported before the server starts: the store's imports, torch among them, would
    hold up its first answer, and two threads importing one circle of modules deadlock)."""
    room = _rooms.get("room")
    if room is None:
        from ui.warm import wait_for_warm_imports

        wait_for_warm_imports()
        from classroom import Classroom

        room = _rooms["room"] = Classroom()
    return room


def _client(request: Request) -> str:
    from ui.classroom import BALANCER_SECRET_ENV, client_from

    peer = request.client.host if request.client else None
    return client_from(request.headers, peer, os.environ.get(BALANCER_SECRET_ENV))


def over_https(request: Request) -> bool:
    """The browser's connection was https: to this server, or to our own balancer (its
    X-Forwarded-Proto believed only with the balancer's secret, as client_from does)."""
    if request.url.scheme == "https":
        return True
    from ui.classroom import BALANCER_HEADER, BALANCER_SECRET_ENV

    secret = os.environ.get(BALANCER_SECRET_ENV)
    given = request.headers.get(BALANCER_HEADER, "")
    if secret and given and hmac.compare_digest(given.encode(), secret.encode()):
        return request.headers.get("x-forwarded-proto", "").lower() == "https"
    return False


def with_cookie(response: Response, request: Request, code: str, token: str | None) -> Response:
    """``response`` setting (or, for None, clearing) the session cookie of ``code``."""
    response.set_cookie(
        session_cookie(code),
        token or "",
        max_age=SESSION_HOURS * 3600 if token else 0,
        path="/",
        httponly=True,
        samesite="strict",
        secure=over_https(request),
    )
    return response


async def sign_in(request: Request) -> Response:
    """The teacher link: the key for a session cookie, then the dashboard (303)."""
    code = request.query_params.get("class", "")[:16]
    key = request.query_params.get("key", "")
    room = await run_in_threadpool(_room)
    try:
        token = await run_in_threadpool(room.sign_in, code, key, client=_client(request))
        info = await run_in_threadpool(room.teacher_class, code, token)
    except (LookupError, PermissionError):
        return RedirectResponse(dashboard_url(code, refused=True), 303, headers=NO_STORE)
    except ConnectionError:
        return _store_away()
    response = RedirectResponse(dashboard_url(info.code), 303, headers=NO_STORE)
    return with_cookie(response, request, info.code, token)


async def spend_ticket(request: Request) -> Response:
    """The page's fetch: a one-time ticket for a session cookie (204), 403 otherwise."""
    body = (await request.body())[:1000].decode("utf-8", "replace")
    ticket = urllib.parse.parse_qs(body).get("ticket", [""])[0]
    room = await run_in_threadpool(_room)
    try:
        code, token = await run_in_threadpool(room.redeem_ticket, ticket, client=_client(request))
    except LookupError:
        return Response(status_code=403, headers=NO_STORE)
    except ConnectionError:
        return _store_away()
    return with_cookie(Response(status_code=204, headers=NO_STORE), request, code, token)


async def sign_out(request: Request) -> Response:
    """This browser's session of the class ends, and its cookie is cleared (204)."""
    code = request.query_params.get("class", "")[:16]
    token = request.cookies.get(session_cookie(code))
    room = await run_in_threadpool(_room)
    if token:
        try:
            await run_in_threadpool(room.sign_out, token)
        except ConnectionError:
            return _store_away()
    return with_cookie(Response(status_code=204, headers=NO_STORE), request, code, None)


def _store_away() -> Response:
    """The class database did not answer: said plainly, to be tried again."""
    text = "The class database does not answer; try again in a moment."
    return Response(text, status_code=503, media_type="text/plain", headers=NO_STORE)


def routes() -> list[Route]:
    return [
        Route(ROUTE, sign_in, methods=["GET"]),
        Route(f"{ROUTE}/ticket", spend_ticket, methods=["POST"]),
        Route(f"{ROUTE}/signout", sign_out, methods=["POST"]),
    ]
