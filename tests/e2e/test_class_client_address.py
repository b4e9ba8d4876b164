"""The client address behind `make serve`'s HAProxy, as the class's slow-down counts it: the
real address reaches the replica (`option forwardfor`), a browser's own X-Forwarded-For is
dropped, and only a request carrying the balancer's secret is believed about it.
A stand-in replica records what HAProxy sends; no Streamlit is started."""

from __future__ import annotations

import http.server
import threading
import urllib.request

import pytest

from tests.e2e.servers import need_haproxy
from tests.e2e.test_balancer import _Replica, haproxy_in_front
from ui.classroom import BALANCER_HEADER, client_from

pytestmark = [pytest.mark.slow]


class _Recorder(_Replica):
    """test_balancer's stand-in replica, recording the headers HAProxy sends it."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).seen.append({k: v for k, v in self.headers.items()})
        super().do_GET()


def test_only_the_balancers_own_forwarded_address_is_believed(tmp_path):
    need_haproxy()
    replica = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    secret = "run-secret-123"
    try:
        with haproxy_in_front(tmp_path, [replica.server_address[1]], secret) as port:
            _Recorder.seen.clear()
            forged = urllib.request.Request(f"http://127.0.0.1:{port}/classroom")
            forged.add_header("X-Forwarded-For", "6.6.6.6")
            forged.add_header(BALANCER_HEADER, "my-own-guess")
            urllib.request.urlopen(forged, timeout=10).read()
            seen = [{k.lower(): v for k, v in h.items()} for h in _Recorder.seen]
            [headers] = [h for h in seen if "x-forwarded-for" in h][-1:]
            assert headers["x-forwarded-for"] == "127.0.0.1", "the browser's own header is dropped"
            assert headers[BALANCER_HEADER.lower()] == secret, "and its own secret replaced"
            # the replica (ui.classroom.client_from) believes the balancer, with its secret...
            assert client_from(headers, None, secret) == "127.0.0.1"
            # ... and nobody else: a forged header straight to a replica gains no fresh bucket
            straight = {"X-Forwarded-For": "6.6.6.6", BALANCER_HEADER: "my-own-guess"}
            assert client_from(straight, None, secret) == "local"
            assert client_from(straight, "192.0.2.4", secret) == "192.0.2.4"
            assert client_from({"X-Forwarded-For": "6.6.6.6"}, "192.0.2.4", None) == "192.0.2.4"
    finally:
        replica.shutdown()


def test_the_replica_reads_the_secret_from_the_variable_deploy_serve_sets():
    """ui.classroom names the variable again (deploy sits above ui): a rename on one side
    alone would leave every replica trusting no balancer and slowing the whole class."""
    from deploy.ports import BALANCER_SECRET_ENV as given
    from ui.classroom import BALANCER_SECRET_ENV as read

    assert read == given
