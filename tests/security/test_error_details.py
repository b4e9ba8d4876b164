"""A served replica hides error details: its effective config (.streamlit/config.toml under
the very flags deploy.serve starts it with, for `make serve` and `make run`) says
``client.showErrorDetails = "none"``, and an exception raised in a script shows the browser
no traceback, no file path and not the exception's own text."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.loadtest import CHROMIUM, CHROMIUM_ARGS
from deploy.ports import free_port
from deploy.serve import healthy, run_command, streamlit_command

ROOT = Path(__file__).resolve().parents[2]
SECRET_DETAIL = "detail-only-the-server-log-may-hold-7c1f"

READ_CONFIG = """
import json, sys
from streamlit import config
config._main_script_path = sys.argv[1]
flags = json.loads(sys.argv[2])
config.get_config_options(force_reparse=True, options_from_flags=flags)
print(json.dumps({k: config.get_option(k) for k in json.loads(sys.argv[3])}))
"""


def flags_of(command: list[str]) -> dict[str, str]:
    """The ``--section.option value`` pairs of a `streamlit run` command line."""
    args = command[command.index("run") + 2 :]
    return {args[i][2:]: args[i + 1] for i in range(0, len(args) - 1, 2)}


def effective(command: list[str], options: list[str]) -> dict:
    """What Streamlit itself makes of config.toml and ``command``'s flags (a fresh process:
    Streamlit's config is process-wide)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            READ_CONFIG,
            str(ROOT / "app.py"),
            json.dumps(flags_of(command)),
            json.dumps(options),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["make serve", "make run"])
def test_a_served_replicas_effective_config_hides_error_details(how):
    command = streamlit_command(9999) if how == "make serve" else run_command(9999)
    assert not any(a.startswith("--client.showErrorDetails") for a in command)
    got = effective(command, ["client.showErrorDetails", "client.toolbarMode"])
    assert got == {"client.showErrorDetails": "none", "client.toolbarMode": "minimal"}


@pytest.mark.browser
@pytest.mark.slow
def test_a_raised_exception_shows_no_traceback_in_the_browser(tmp_path):
    """A script that raises, served as a replica is (cwd the repository, so its config):
    the browser shows Streamlit's short notice, never the traceback, the file or the text."""
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
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
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                tab = browser.new_page()
                tab.goto(f"http://127.0.0.1:{port}/", timeout=120_000)
                tab.get_by_text("before the error").wait_for(timeout=120_000)
                tab.get_by_test_id("stException").wait_for(timeout=60_000)
                shown = tab.inner_text("body")
            finally:
                browser.close()
    for leak in (SECRET_DETAIL, "Traceback", "raises.py", "RuntimeError", str(tmp_path)):
        assert leak not in shown, leak
    assert SECRET_DETAIL in log.read_text(), "the server's log keeps the detail"
