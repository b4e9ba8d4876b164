"""Keeps every page inside app.py's frame (sidebar, navigation, language)."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

_FRAMED = "_frame_this_run"  # set by app.py just before the page runs, taken by the page
_BARE_RETRIES = "_frame_bare_reruns"
MAX_BARE_RERUNS = 3  # a page that still runs bare after this many reruns is shown as it is


def mark_framed() -> None:
    """app.py, right before ``page.run()``: the page about to run is inside the frame."""
    st.session_state[_FRAMED] = True


def require_frame() -> None:
    """Call first on every page.

    Streamlit still treats a ``pages/`` folder beside the entry script as a legacy
    multipage app until some session has run ``st.navigation``. So the first requests
    after a server start, if they are permalinks to a page, run that page bare: no sidebar,
    no model picker (the default model, not the link's), a wrong menu. Clearing the
    (process-wide) flag and rerunning hands the same URL to app.py's navigation instead.

    Whether this run is bare is asked of this run, not of the flag: when a class opens a
    link together on a freshly started server, several sessions start bare before the
    first of them clears the flag, and each of them must rerun (bench.classsim found it).
    A server started through deploy.launch (`make run`, `make serve`) clears the flag at
    start, so there this only matters under a plain ``streamlit run``.
    """
    if st.session_state.pop(_FRAMED, False):
        st.session_state.pop(_BARE_RETRIES, None)
        return
    retries = st.session_state.get(_BARE_RETRIES, 0)
    if retries >= MAX_BARE_RERUNS:  # never a rerun loop
        return
    st.session_state[_BARE_RETRIES] = retries + 1
    PagesManager.uses_pages_directory = False
    st.rerun()
