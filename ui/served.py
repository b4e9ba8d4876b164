"""Whether this server is served to others (a class), where nothing a visitor sends may name a
server path, or runs for the person at this machine (`make run` on localhost).

Two signs, either one enough: deploy.serve sets ATTENTION_LAB_SERVED=1 for every replica it
starts (they listen on 127.0.0.1 behind HAProxy, so their address alone would look local),
and a server listening on any address but the loopback one is reachable by others. Streamlit
listens on every interface when no address is set, so a real server without one counts as
served; `make run` sets 127.0.0.1.
"""

from __future__ import annotations

import os

# deploy.serve gives every replica this variable (named again there: deploy sits above ui; a
# test holds the two names equal).
SERVED_ENV = "ATTENTION_LAB_SERVED"
LOCAL_ADDRESSES = frozenset({"localhost", "127.0.0.1", "::1"})
# Shown instead of the models root's own path once served: it would name a server folder.
ROOT_SHOWN = "$ATTENTION_LAB_MODELS"


def served_by(flag: str | None, address: str | None, real_server: bool) -> bool:
    """The rule: the flag set (not "" or "0"), or a listening address that is not the
    loopback one; an unset address counts as every interface on a real server (a test's
    AppTest or a notebook runs no server)."""
    if flag not in (None, "", "0"):
        return True
    if address:
        return address.strip().strip("[]").lower() not in LOCAL_ADDRESSES
    return real_server


def _real_server() -> bool:
    """Whether a real Streamlit server runs this process (AppTest puts a stand-in there)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.exists() and type(Runtime.instance()) is Runtime
    except Exception:  # noqa: BLE001 - no runtime at all: a notebook or a script
        return False


def served() -> bool:
    """Whether this process serves others (see the module's docstring)."""
    from streamlit import config

    return served_by(
        os.environ.get(SERVED_ENV), config.get_option("server.address"), _real_server()
    )
