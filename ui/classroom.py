"""Streamlit helpers for the class page: the shared store, links, the client behind a request,
every store call with the same bounded, visible retry, and text that shows names as typed."""

from __future__ import annotations

import hmac
import json
import logging
import os
import string
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

# classroom.store alone: the rest of `classroom` (classroom.core) imports practice and with it
# torch, and is imported where a page first uses the store, so a page that needs only this
# module's helpers (ui.teacher_session, a replica's address check) starts without torch.
from classroom import redacted
from ui.i18n import t

if TYPE_CHECKING:
    from classroom import Classroom

PAGE_PATH = "classroom"
# The teacher's session-cookie route (ui.teacher_session.ROUTE, named again here: that module
# reads this one's client_from, and the import graph has no cycle; a test holds them equal).
TEACHER_ROUTE = "/lab/teacher"
# The variable through which deploy.serve gives each replica the balancer's secret (named again
# here, not imported: deploy sits above ui; a test holds the two names equal).
BALANCER_SECRET_ENV = "ATTENTION_LAB_BALANCER_SECRET"
# Every store call a page makes: 10 tries, 0.5, 1, 2, then 4 s apart (about 30 s in all, a
# PostgreSQL restart or a short outage), each one said on the page, before giving up plainly.
STORE_TRIES = 10
BALANCER_HEADER = "X-Lab-Balancer"
# Every ASCII punctuation mark may be backslash-escaped in Markdown; escaping all of them also
# breaks the autolinks (http://, www., a@b) a name or title would otherwise become.
_MD_SPECIAL = set(string.punctuation)
log = logging.getLogger("attention_lab.classroom")
T = TypeVar("T")


class StoreGaveUp(ConnectionError):
    """The class database did not answer through every retry; the page says so plainly."""


def pause(attempt: int) -> float:
    """Seconds to wait after failed try ``attempt`` (0-based): 0.5, 1, 2, 4, 4, ..."""
    return min(4.0, 0.5 * 2**attempt)


def patient(call: Callable[..., T], *args: Any, saving: bool = False, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` on the store, tried again while the database is away, with
    "trying again (n of N)" on the page; StoreGaveUp after the last try. Only a lost
    connection is retried (the store's StoreUnavailableError): other errors go up at once."""
    from classroom import StoreUnavailableError

    notice = st.empty()
    for attempt in range(STORE_TRIES):
        try:
            result = call(*args, **kwargs)
        except StoreUnavailableError as err:
            log.warning(
                "class store did not answer %s (try %d of %d): %r",
                getattr(call, "__name__", "call"),
                attempt + 1,
                STORE_TRIES,
                err.__cause__ or err,
            )
            key = "classroom.saving_retry" if saving else "classroom.loading_retry"
            notice.warning(t(key, n=attempt + 1, total=STORE_TRIES), icon=":material/sync_problem:")
            if attempt + 1 < STORE_TRIES:
                time.sleep(pause(attempt))
            continue
        notice.empty()
        return result
    notice.empty()
    raise StoreGaveUp("the class database did not answer")


def trouble(err: BaseException, *, key: str = "class_try_again") -> None:
    """What a page shows instead of a traceback: a plain message and a button to try again.
    The detail goes to the server's log."""
    if isinstance(err, StoreGaveUp):
        st.error(t("classroom.store_gave_up"), icon=":material/cloud_off:")
    else:
        log.error("class page failed", exc_info=err)
        st.error(t("classroom.unexpected"), icon=":material/error:")
    st.button(t("classroom.try_again"), icon=":material/refresh:", key=key)


@st.cache_resource(show_spinner=False)
def _room() -> Classroom:
    from classroom import Classroom

    return Classroom()


def _opened_room() -> Classroom:
    """The cached Classroom; a database that refuses the first connection is retry-able."""
    from sqlalchemy.exc import OperationalError

    from classroom import StoreUnavailableError

    try:
        return _room()
    except OperationalError as err:
        raise StoreUnavailableError("the class database does not answer") from err


def room_or_stop() -> Classroom:
    """The process's Classroom; retried while the database is away, then a clear message
    (not a traceback) with a button to try again."""
    try:
        return patient(_opened_room)
    except Exception as err:  # noqa: BLE001 - any store failure is said the same way
        from classroom import default_url

        log.error("class store cannot be opened", exc_info=err)
        st.error(t("classroom.store_down", url=plain(redacted(default_url()))))
        st.button(t("classroom.try_again"), icon=":material/refresh:", key="class_store_again")
        st.stop()


def plain(text: object) -> str:
    """``text`` for st.markdown exactly as typed: every markdown or HTML character escaped."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in str(text))


def client_from(headers: Mapping[str, str], peer: str | None, secret: str | None) -> str:
    """Who asks, for the slow-down of wrong keys and codes.

    Behind our own HAProxy (the request carries the secret deploy.serve gave it and this
    replica) the client is the address HAProxy appended to X-Forwarded-For: the last one, as
    HAProxy removes whatever the browser sent first. Anything else is judged by the socket's
    peer: a forged X-Forwarded-For from outside the balancer gains no fresh bucket.
    """
    lower = {str(name).lower(): str(value) for name, value in headers.items()}  # names ignore case
    given = lower.get(BALANCER_HEADER.lower(), "")
    if secret and given and hmac.compare_digest(given.encode(), secret.encode()):
        forwarded = [a.strip() for a in lower.get("x-forwarded-for", "").split(",")]
        if forwarded and forwarded[-1]:
            return forwarded[-1]
    return peer or "local"


def client() -> str:
    """The client of this session's request (see client_from)."""
    try:
        headers = st.context.headers
        peer = st.context.ip_address
    except Exception:  # noqa: BLE001 - no request context (AppTest): one local client
        return "local"
    return client_from(headers or {}, peer, os.environ.get(BALANCER_SECRET_ENV))


def site_url(path: str) -> str:
    """``path`` at this site's absolute address as the browser sees it (``path`` alone when
    unknown)."""
    url = None
    try:
        url = st.context.url
    except Exception:  # noqa: BLE001
        url = None
    if not url:
        return path
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def page_url() -> str:
    """This page's absolute address as the browser sees it (``/classroom`` when unknown)."""
    return site_url(f"/{PAGE_PATH}")


def join_link(code: str) -> str:
    return f"{page_url()}?class={urllib.parse.quote(code)}"


def student_link(student_key: str) -> str:
    return f"{page_url()}?student={urllib.parse.quote(student_key)}"


def teacher_link(code: str, teacher_key: str) -> str:
    """The teacher's link: the cookie route (ui.teacher_session), which trades the key for a
    session cookie and redirects to the dashboard, so no history entry keeps the key."""
    query = urllib.parse.urlencode({"class": code, "key": teacher_key})
    return f"{site_url(TEACHER_ROUTE)}?{query}"


def save_answer(room: Classroom, student_key: str, index: int, answer, submission_id: str):
    """Store the answer (committed) and return its feedback, retrying while the database is
    away and saying so; None, with a plain "not saved, press again" message, when it could
    not be stored (the same submission id makes pressing again safe)."""
    from classroom import ClassClosedError

    try:
        return patient(
            room.submit, student_key, index, answer, submission_id, saving=True, client=client()
        )
    except ClassClosedError:
        raise  # the page says the class is closed
    except StoreGaveUp:
        pass
    except Exception as err:  # noqa: BLE001 - said plainly; the log keeps the detail
        log.error("an answer could not be stored", exc_info=err)
    st.error(t("classroom.saving_failed"), icon=":material/cloud_off:")
    return None


def _number(x: object) -> str:
    return str(x) if isinstance(x, int) else repr(float(x))


def stored_widgets(ex, stored: object) -> dict[str, object]:
    """A stored answer as the values of ``ex``'s answer boxes (ui.exercise.answer_widgets'
    keys), so a resumed student sees it in the box; {} when there is none."""
    if stored is None:
        return {}
    if ex.form == "numbers":
        return {
            f"answer_{f.name}": ", ".join(map(_number, answer))
            if isinstance(answer, list)
            else _number(answer)
            for f, answer in zip(ex.fields, stored)
        }
    if ex.form == "shape":
        return {"answer_shape": ", ".join(map(str, stored))}
    if ex.form == "tokens":
        return {"answer_tokens": " ".join(map(str, stored))}
    if ex.form == "choice":
        return {"answer_choice": stored}
    if ex.form == "cells":
        return {f"answer_cell_{i}": j for i, j in enumerate(stored)}
    return {}


def unsaved_answer(ex, raw: dict[str, object], stored: object) -> bool:
    """The boxes hold a sent answer that is not the stored one: its Check was lost (a replica
    died, the connection dropped) or not saved. Boxes reach the server only when the form is
    sent, so what is here was pressed, not merely typed."""
    from classroom import as_stored
    from practice.parse import AnswerError
    from ui.practice import read_answer

    if all(answer is None or answer == "" for answer in raw.values()):
        return False
    try:
        answer = read_answer(ex, raw)
    except AnswerError:
        return False  # said when it was pressed; nothing a store could have kept
    return as_stored(answer) != stored


# ---- a press that no server answered is sent again -------------------------------------------

SID_KEY = "class_sid"  # the hidden box in the answer form holding the press's id
CHECK_KEY = "class_check"
RESEND_AFTER_MS = 4000
_RESEND_JS = """<script>
(() => {
  const w = window;
  w.__labPending = null;  // this runs when the server has drawn the page to its end
  if (w.__labWatch) return;
  w.__labWatch = true;
  // The press's id as the form holds it now: the server gives a new one once it has
  // stored the press, so a changed id means "stored" even when the end of that page never
  // arrived (a replica killed just then): sending it again would store it twice.
  const pressId = () => {
    const box = document.querySelector(".st-key-%(sid)s input");
    return box ? box.value : null;
  };
  document.addEventListener("click", (e) => {
    if (e.target.closest(".st-key-%(check)s")) {
      w.__labPending = Date.now();
      w.__labPressId = pressId();
    }
  }, true);
  const resend = () => {
    const button = document.querySelector(".st-key-%(check)s button");
    if (!w.__labPending || !button || button.disabled) return;
    if (w.__labPressId !== null && pressId() !== w.__labPressId) {
      w.__labPending = null;  // renewed: that press was stored
      return;
    }
    button.click();
  };
  const Native = w.WebSocket;
  w.WebSocket = function (...args) {
    const socket = new Native(...args);
    socket.addEventListener("open", () => setTimeout(resend, %(after)d));
    return socket;
  };
  w.WebSocket.prototype = Native.prototype;
  Object.assign(w.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();
</script><!-- %(nonce)s -->"""


def press_guard() -> None:
    """Draw last on the student's page. A press of Check whose run no server finished (the
    replica died with it, before or after storing it) is sent again once the browser has
    reconnected: Streamlit's frontend does not, and its new session never hears of it. The
    press carries its id in the form (hidden_press_id), so sending it again stores it once;
    a press whose id the server has already renewed was stored and is not sent again (the
    browser run of the chaos bench stored two presses twice that way: the new id had
    arrived, the end of the page had not)."""
    st.html(resend_html(uuid.uuid4().hex), unsafe_allow_javascript=True)


def resend_html(nonce: str, after_ms: int = RESEND_AFTER_MS) -> str:
    """press_guard's script; ``nonce`` makes each one new, so the browser runs it again.
    ``after_ms``: how long after a reconnect an unanswered press is sent again."""
    return _RESEND_JS % {
        "check": CHECK_KEY,
        "sid": SID_KEY,
        "after": after_ms,
        "nonce": nonce,
    }


def hidden_press_id(pressing: bool = False) -> None:
    """Inside the answer form: the press's id, kept by the browser with the typed answer.
    A new id is given once an answer is stored (renew_press_id); a press the server never
    answered is sent again with the same one, even to another replica.

    ``pressing``: this run is a press of Check. Its id is the one the browser sent, so a
    pending renewal waits for the next run: renewed here, the press was stored under an id
    the browser never held, and sent again after a replica died it was stored twice."""
    st.html(press_id_css())
    start = {}
    if not pressing and st.session_state.pop("class_sid_renew", False):
        st.session_state[SID_KEY] = uuid.uuid4().hex
    elif SID_KEY not in st.session_state:
        start = {"value": uuid.uuid4().hex}  # a default: an id the browser holds wins
    st.text_input("id", key=SID_KEY, label_visibility="collapsed", **start)


def press_id_css() -> str:
    """The press id's box is the browser's, not the student's: hidden."""
    return f"<style>.st-key-{SID_KEY} {{display: none}}</style>"


def renew_press_id() -> None:
    """The answer is stored: the next press gets a new id (set before the form is drawn)."""
    st.session_state["class_sid_renew"] = True


def press_id(index: int, answer: object) -> str:
    """The submission id of this press: the form's id, the item and the answer, so the same
    answer sent again is kept once, and a changed answer is a new one."""
    import hashlib

    sid = str(st.session_state.get(SID_KEY) or "")[:40] or uuid.uuid4().hex
    digest = hashlib.sha256(repr((index, answer)).encode("utf-8")).hexdigest()[:16]
    return f"{sid}:{digest}"


# ---- what a student typed but has not sent yet: kept by the browser -------------------------

DRAFT_PREFIX = "lab-draft|"
DRAFT_DAYS = 30  # a draft older than this is forgotten
_DRAFT_JS = """<script>
(() => {
  const w = window, c = %(config)s;
  let store = null;
  try { store = w.localStorage; } catch (err) { return; }  // storage blocked: no drafts
  if (!store) return;
  w.__labDraft = c;  // the item the page shows now; the typing below is kept under it
  const boxOf = (input) => {
    const holder = input.closest('[class*="st-key-answer_"]');
    const name = holder && [...holder.classList].find((k) => k.startsWith("st-key-answer_"));
    return name ? name.slice(7) : null;
  };
  if (!w.__labDraftWatch) {
    w.__labDraftWatch = true;
    document.addEventListener("input", (e) => {
      const d = w.__labDraft, input = e.target;
      if (!d || !(input instanceof HTMLInputElement) || !input.closest(d.form)) return;
      const box = boxOf(input);
      if (!box) return;
      const draft = {text: input.value, base: d.base, at: Date.now()};
      try { store.setItem(d.prefix + box, JSON.stringify(draft)); } catch (err) {}
    }, true);
  }
  const read = (key) => {
    try { return JSON.parse(store.getItem(key)); } catch (err) { return null; }
  };
  const old = Date.now() - c.days * 86400000;
  for (let i = store.length - 1; i >= 0; i--) {
    const key = store.key(i);
    if (!key || !key.startsWith(c.all)) continue;
    const draft = read(key);
    // forgotten: a draft of an answer stored since (its item's count of stored answers moved
    // on: Check was confirmed), or one left for a month
    const stale = key.startsWith(c.prefix) && draft && draft.base !== c.base;
    if (!draft || stale || !(draft.at > old)) store.removeItem(key);
  }
  const setValue = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set;
  let tries = 0;
  const restore = () => {
    const inputs = [...document.querySelectorAll(c.form + " input[type=text]")];
    const boxes = inputs.map((input) => [input, boxOf(input)]).filter(([, box]) => box);
    if (!boxes.length) {
      if (tries++ < 100) setTimeout(restore, 100);  // drawn a moment after this script
      return;
    }
    for (const [input, box] of boxes) {
      const draft = read(c.prefix + box);
      if (!draft || typeof draft.text !== "string" || input.value === draft.text) continue;
      // only into a box that shows what the server has (empty or the stored answer), never
      // over what the student is typing now; the React way, so Streamlit hears of it
      if (input.value !== "" && input.value !== (c.stored[box] ?? "")) continue;
      setValue.call(input, draft.text);
      input.dispatchEvent(new Event("input", {bubbles: true}));
    }
  };
  restore();
})();
</script><!-- %(nonce)s -->"""


def keep_drafts(code: str, student_key: str, index: int, holder: str, stored, attempts: int):
    """Draw with the student's answer form. The browser keeps what is typed in its boxes but
    not yet sent (localStorage, per class, student, item and box) and puts it back when the
    page is shown again (a reload, a discarded phone tab, a return to the item) into a box
    that shows only what the server has. A draft is forgotten once its item has a newer
    stored answer (``attempts`` moved on). The key holds nothing the personal link does not.
    ``holder``: the key of the container that holds the item's form; ``stored``: the boxes'
    stored values (stored_widgets)."""
    st.html(
        draft_html(code, student_key, index, holder, stored, attempts, uuid.uuid4().hex),
        unsafe_allow_javascript=True,
    )


def draft_html(code, student_key, index, holder, stored, attempts, nonce: str) -> str:
    """keep_drafts' script; JSON config with "<" and ">" escaped, so nothing leaves it."""
    config = {
        "all": DRAFT_PREFIX,
        "prefix": f"{DRAFT_PREFIX}{code}|{student_key}|{index}|",
        "form": f".st-key-{holder} [data-testid=stForm]",
        "base": int(attempts),
        "stored": {name: text for name, text in stored.items() if isinstance(text, str)},
        "days": DRAFT_DAYS,
    }
    text = json.dumps(config, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
    return _DRAFT_JS % {"config": text, "nonce": nonce}


# ---- the results as a file a spreadsheet opens safely ---------------------------------------

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_columns() -> tuple[str, ...]:
    """The CSV's English headers, the stable names for scripts (classroom.RESULT_COLUMNS)."""
    from classroom import RESULT_COLUMNS

    return tuple(RESULT_COLUMNS)


def neutralised(value: object) -> object:
    """A cell a spreadsheet shows as text, never runs (OWASP's CSV injection): text that
    begins with = + - @, a tab or a carriage return gets a leading apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def results_csv(results, lang: str, english_headers: bool = False) -> bytes:
    """The dashboard's results as CSV: items numbered from 1 as on the page, headers in the
    page's language (English ones, the stable names, for scripts), formula-safe cells,
    UTF-8 with a BOM so spreadsheets read Korean names."""
    from ui.i18n import translate

    columns = csv_columns()
    table = results[list(columns)].copy()
    table["index"] = table["index"] + 1
    table["kind"] = [translate(f"practice.kind.{k}", lang) for k in table["kind"]]
    if not english_headers:
        table.columns = [translate(f"classroom.csv.{c}", lang) for c in columns]
    table = table.map(neutralised)
    return table.to_csv(index=False).encode("utf-8-sig")


# ---- what the browser remembers: a student's key and a teacher's key, per class -------------

REMEMBER_DAYS = 180


def student_cookie(code: str) -> str:
    return f"lab_student_{code.strip().upper()[:16]}"


def teacher_cookie(code: str) -> str:
    return f"lab_teacher_{code.strip().upper()[:16]}"


def remember_in_browser(name: str, value: str | None) -> None:
    """Keep ``value`` in a cookie of this site (SameSite=Strict; None forgets it), once per
    session. Streamlit lets a page send no Set-Cookie header, so the page's script sets it
    and removes itself; the server reads it back from the next connection
    (st.context.cookies)."""
    done = st.session_state.setdefault("_class_cookies", {})
    sent = done.get(name) == value
    done[name] = value
    page_script(None if sent else cookie_html(name, value))


def page_script(html: str | None) -> None:
    """A one-time page script (``html``; None: none this run) in a slot drawn every run: a
    run that drew a script and the next that did not would place everything after it
    differently, and Streamlit shows the old run's elements beside the new ones until the new
    run ends (the teacher's key panel, a student's exercise, twice)."""
    slot = st.empty()
    if html is not None:
        slot.html(html, unsafe_allow_javascript=True)


def cookie_html(name: str, value: str | None) -> str:
    """A script that keeps ``name=value`` in this browser's cookie jar (or forgets it, for
    None) and removes itself; "<" and ">" escaped, so nothing can leave the script."""
    age = REMEMBER_DAYS * 86400 if value else 0
    cookie = json.dumps(f"{name}={value or ''}; path=/; max-age={age}; samesite=strict")
    cookie = cookie.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<script>document.cookie = {cookie}; document.currentScript?.remove();</script>"


def _script_json(value: object) -> str:
    """``value`` as a JavaScript literal that cannot end its <script>."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


def session_cookie_html(ticket: str) -> str:
    """A script that spends the one-time ``ticket`` on the cookie route: the server answers
    with the HttpOnly session cookie (no script, this one included, can read it); then the
    script removes itself."""
    body = _script_json("ticket=" + urllib.parse.quote(ticket))
    return (
        f"<script>fetch({_script_json(TEACHER_ROUTE + '/ticket')}, {{method: 'POST', "
        "credentials: 'same-origin', headers: {'Content-Type': "
        f"'application/x-www-form-urlencoded'}}, body: {body}}});"
        " document.currentScript?.remove();</script>"
    )


def sign_out_html(code: str) -> str:
    """A script that asks the cookie route to end this browser's session of ``code`` and
    clear its cookie (a script cannot clear an HttpOnly cookie itself)."""
    url = _script_json(f"{TEACHER_ROUTE}/signout?{urllib.parse.urlencode({'class': code})}")
    return (
        f"<script>fetch({url}, {{method: 'POST', credentials: 'same-origin'}});"
        " document.currentScript?.remove();</script>"
    )


def go_to_html(url: str) -> str:
    """A script that replaces this history entry by ``url`` (location.replace: the entry it
    leaves, a link holding a key, is gone from Back)."""
    return f"<script>window.location.replace({_script_json(url)});</script>"


def remembered(name: str) -> str | None:
    """A cookie this browser sent with its connection, if any."""
    try:
        value = st.context.cookies.get(name)
    except Exception:  # noqa: BLE001 - no request (AppTest)
        return None
    forgotten = st.session_state.get("_class_cookies", {})
    if name in forgotten and not forgotten[name]:
        return None  # forgotten in this session, though the connection still carried it
    return value or None
