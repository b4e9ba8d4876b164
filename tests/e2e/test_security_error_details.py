"""A raised exception shows the browser no traceback (a security test: it lives here, not in
tests/security/, to share this folder's one Chromium; the config half is
tests/security/test_error_details.py). A script that raises, served as a replica is (cwd the
repository, so its config): the browser shows Streamlit's short notice, never the traceback,
the file or the exception's text; the server's log keeps them."""

from __future__ import annotations

import contextlib
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from deploy.ports import free_port
from deploy.serve import healthy, streamlit_command

ROOT = Path(__file__).resolve().parents[2]
SECRET_DETAIL = "detail-only-the-server-log-may-hold-7c1f"


@pytest.mark.browser
@pytest.mark.slow
def test_a_raised_exception_shows_no_traceback_in_the_browser(tmp_path, browser):
    script = tmp_path / "raises.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import streamlit as st
            st.write("before the error")
            raise RuntimeError("{SECRET_DETAIL}")
            """
        )
    )
    port = free_port()
    command = streamlit_command(port, launcher=("streamlit",), app=str(script))
    log = tmp_path / "server.log"
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(log, "w"))
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        stack.callback(server.wait, 15)
        stack.callback(server.terminate)
        deadline = time.monotonic() + 120
        while not healthy(f"http://127.0.0.1:{port}"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        context = browser.new_context()
        try:
            tab = context.new_page()
            tab.goto(f"http://127.0.0.1:{port}/", timeout=120_000)
            tab.get_by_text("before the error").wait_for(timeout=120_000)
            tab.get_by_test_id("stException").wait_for(timeout=60_000)
            shown = tab.inner_text("body")
        finally:
            context.close()
    for leak in (SECRET_DETAIL, "Traceback", "raises.py", "RuntimeError", str(tmp_path)):
        assert leak not in shown, leak
    assert SECRET_DETAIL in log.read_text(), "the server's log keeps the detail"
