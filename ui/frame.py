"""Keeps every page inside app.py's frame (sidebar, navigation, language)."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def require_frame() -> None:
    """Call first on every page.

    Streamlit still treats a ``pages/`` folder beside the entry script as a legacy
    multipage app until some session has run ``st.navigation``. So the first request
    after a server start, if it is a permalink to a page, runs that page bare: no sidebar,
    no model picker, a wrong menu. Clearing the (process-wide) flag and rerunning hands the
    same URL to app.py's navigation instead.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
