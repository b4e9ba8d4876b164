"""The lab as Streamlit serves it: app.py, plus the teacher's session-cookie route.

    streamlit run asgi.py [streamlit options]     # deploy.launch runs this for app.py

Streamlit 1.67 serves an ``st.App`` (Starlette on uvicorn) when the script it is given holds
one; its extra routes are the only way an app answers plain HTTP with its own headers, and a
session cookie that scripts cannot read needs a Set-Cookie header (ui.teacher_session). Every
page, widget and websocket is Streamlit's own, run from app.py as before.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.teacher_session import routes

app = st.App(Path(__file__).with_name("app.py"), routes=routes())
