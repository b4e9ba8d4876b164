"""Forwarded addresses from the balancer alone (issue 46): Streamlit 1.67 serves on uvicorn,
which by default takes X-Forwarded-For from any caller at 127.0.0.1, so a local program that
bypasses HAProxy could claim any address and get a fresh bucket of guesses. A replica as
`make serve` starts it believes no one's header but its own balancer's (by the per-run
secret HAProxy adds); a forged header straight to it gains nothing. The same forgery on a
plain `streamlit run` (uvicorn's default) is believed: what the test would catch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import urllib.request
from http.cookies import SimpleCookie

import pytest

# asyncio.run on a thread of its own: a worker may host Playwright's running loop
from bench.classcore import run_async
from deploy.ports import FORWARDED_ALLOW_IPS_ENV, TRUST_NO_PROXY, free_port
from deploy.serve import Replica, end_processes, healthy, streamlit_command, wait_healthy
from ui.classroom import BALANCER_HEADER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A page that says who the class's slow-down takes the caller for (ui.classroom.client).
WHO_APP = """
import streamlit as st
from ui.classroom import client
st.markdown(f"client=[{client()}]")
"""
FORGED = "6.6.6.6"
SECRET = "this-runs-balancer-secret"


def test_uvicorn_as_the_lab_configures_it_rewrites_no_ones_address(monkeypatch):
    """The middleware uvicorn puts in front of the app leaves a loopback caller's forged
    header alone (uvicorn's own default would take it)."""
    import uvicorn

    seen = []

    async def app(scope, receive, send):
        seen.append(scope["client"])

    def client_seen(allow: str | None) -> tuple:
        if allow is None:
            monkeypatch.delenv(FORWARDED_ALLOW_IPS_ENV, raising=False)
        else:
            monkeypatch.setenv(FORWARDED_ALLOW_IPS_ENV, allow)
        config = uvicorn.Config(app)
        config.load()
        scope = {
            "type": "http",
            "client": ("127.0.0.1", 5000),
            "headers": [(b"x-forwarded-for", FORGED.encode())],
        }
        run_async(config.loaded_app(scope, None, None))
        return seen[-1][0]

    assert client_seen(None) == FORGED  # uvicorn's default: the hole
    assert client_seen(TRUST_NO_PROXY) == "127.0.0.1"


def _who(base: str, headers: dict[str, str]) -> str:
    """Open the page over Streamlit's websocket as a browser would, with ``headers`` on the
    handshake; what the page says the client is."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.asyncio.client import connect

    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=10) as response:
        jar = SimpleCookie()
        for raw in response.headers.get_all("Set-Cookie") or []:
            jar.load(raw)
    cookies = {k: m.value for k, m in jar.items()}
    xsrf = cookies.get("_streamlit_xsrf", "")

    async def run() -> str:
        async with connect(
            "ws" + base.removeprefix("http") + "/_stcore/stream",
            subprotocols=["streamlit", xsrf] if xsrf else ["streamlit"],
            origin=base,
            additional_headers={
                **headers,
                "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
            },
            proxy=None,
            open_timeout=10,
        ) as ws:
            msg = BackMsg()
            msg.rerun_script.CopyFrom(ClientState(query_string=""))
            await ws.send(msg.SerializeToString())
            while True:
                fwd = ForwardMsg()
                fwd.ParseFromString(await asyncio.wait_for(ws.recv(), 60))
                if fwd.WhichOneof("type") == "delta":
                    body = fwd.delta.new_element.markdown.body
                    if body.startswith("client="):
                        return body.removeprefix("client=[").removesuffix("]")

    return run_async(run())


@pytest.fixture(scope="module")
def who_app(tmp_path_factory):
    path = tmp_path_factory.mktemp("who") / "who.py"
    path.write_text(WHO_APP, encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_local_caller_that_bypasses_the_balancer_gains_nothing_by_forging(
    tmp_path, who_app, monkeypatch
):
    env_path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", env_path)  # the tiny page imports ui.classroom
    replica = Replica("r1", free_port(), tmp_path / "r1.log", "1", app=str(who_app))
    replica.balancer_secret = SECRET
    plain_port = free_port()
    plain_env = {k: v for k, v in os.environ.items() if k != FORWARDED_ALLOW_IPS_ENV}
    plain = None
    try:
        replica.start()  # as make serve starts a replica (deploy.launch, its environment)
        plain = subprocess.Popen(  # a bare `streamlit run`: uvicorn's default trust
            streamlit_command(plain_port, ("streamlit",), str(who_app)),
            cwd=ROOT,
            env=plain_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_healthy([replica], 120)
        plain_url = f"http://127.0.0.1:{plain_port}"
        for _ in range(600):
            if healthy(plain_url, timeout=1.0):
                break
            assert plain.poll() is None, "the plain streamlit did not start"
            time.sleep(0.2)
        forged = {"X-Forwarded-For": FORGED}
        # straight to the replica, from a local socket that is not its balancer
        assert _who(replica.url, forged) == "local"
        assert _who(replica.url, {**forged, BALANCER_HEADER: "a-guess"}) == "local"
        # the balancer's own request (its secret) is believed, as HAProxy sends it
        assert _who(replica.url, {**forged, BALANCER_HEADER: SECRET}) == FORGED
        # and uvicorn's default, without the lab's setting, is the hole this closes
        assert _who(plain_url, forged) == FORGED
    finally:
        end_processes([replica.process, plain])
