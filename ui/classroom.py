"""Streamlit helpers for the class page: the shared store, links, the client behind a request,
saving an answer with visible retries, and text that shows names exactly as typed."""

from __future__ import annotations

import time
import urllib.parse

import streamlit as st

from classroom import Classroom, StoreUnavailableError, redacted
from practice.core import Feedback
from ui.i18n import t

PAGE_PATH = "classroom"
SAVE_TRIES = 6  # about 15 s of retries (0.5, 1, 2, 4, 4 s apart) before asking to press again
_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$&")


@st.cache_resource(show_spinner=False)
def _room() -> Classroom:
    return Classroom()


def room_or_stop() -> Classroom:
    """The process's Classroom; a clear message (not a traceback) when the store is down."""
    try:
        return _room()
    except Exception as err:  # noqa: BLE001 - any store failure is said the same way
        from classroom import default_url

        st.error(t("classroom.store_down", url=plain(redacted(default_url()))))
        st.caption(plain(type(err).__name__))
        st.stop()


def plain(text: object) -> str:
    """``text`` for st.markdown exactly as typed: every markdown or HTML character escaped."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in str(text))


def client() -> str:
    """Who asks, for the slow-down of wrong keys: the first X-Forwarded-For address (HAProxy
    sets it), else the socket's peer."""
    try:
        forwarded = st.context.headers.get("X-Forwarded-For", "") or ""
        return forwarded.split(",")[0].strip() or (st.context.ip_address or "")
    except Exception:  # noqa: BLE001 - no request context (AppTest): one shared bucket
        return ""


def page_url() -> str:
    """This page's absolute address as the browser sees it (``/classroom`` when unknown)."""
    url = None
    try:
        url = st.context.url
    except Exception:  # noqa: BLE001
        url = None
    if not url:
        return f"/{PAGE_PATH}"
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, f"/{PAGE_PATH}", "", ""))


def join_link(code: str) -> str:
    return f"{page_url()}?class={urllib.parse.quote(code)}"


def student_link(student_key: str) -> str:
    return f"{page_url()}?student={urllib.parse.quote(student_key)}"


def teacher_link(code: str, teacher_key: str) -> str:
    return (
        f"{page_url()}?class={urllib.parse.quote(code)}&teacher={urllib.parse.quote(teacher_key)}"
    )


def save_answer(room: Classroom, student_key: str, index: int, answer, submission_id: str):
    """Store the answer (committed) and return its feedback, retrying while the database is
    away and saying so; None when it is still away after the retries."""
    notice = st.empty()
    for attempt in range(SAVE_TRIES):
        try:
            fb: Feedback = room.submit(student_key, index, answer, submission_id=submission_id)
            notice.empty()
            return fb
        except StoreUnavailableError:
            notice.warning(
                t("classroom.saving_retry", n=attempt + 1, total=SAVE_TRIES),
                icon=":material/sync_problem:",
            )
            if attempt + 1 < SAVE_TRIES:
                time.sleep(min(4.0, 0.5 * 2**attempt))
    notice.error(t("classroom.saving_failed"), icon=":material/cloud_off:")
    return None
