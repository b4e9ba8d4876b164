"""Ports for the lab's servers (replicas, HAProxy, PostgreSQL): free, and never from the
range the kernel gives outgoing connections (see free_port)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

REPLICA_PORT_OFFSET = 100  # replica i (1-based) listens on PORT + 100 + i


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes outgoing connections' own ports from."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def free_port() -> int:
    """A free port below the ephemeral range, with room for replicas at +101, +102, ...

    Not one the kernel picks (bind to port 0): those are ephemeral, and a health check that
    connects to such a port before its server listens can be given that very port as its own
    source (a TCP self-connect: it reads its own request back as the answer, and the server
    then cannot bind). Parallel tests hit it: "BadStatusLine: GET /_stcore/health", and a
    killed replica's port that still "answered" HAProxy.
    """
    low = ephemeral_ports()[0]
    top = low - REPLICA_PORT_OFFSET - 64
    for _ in range(500):
        port = random.randint(max(1024, top - 10_000), top)
        if not port_in_use(port):
            return port
    raise OSError("no free port below the ephemeral range")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


# deploy.serve gives HAProxy and each replica the same secret through this variable; a replica
# (ui/classroom.py) believes X-Forwarded-For only on a request that carries it.
BALANCER_SECRET_ENV = "ATTENTION_LAB_BALANCER_SECRET"

# deploy.serve sets this for every replica: the app is served to a class (ui/served.py), where
# nothing a visitor sends may name a server path.
SERVED_ENV = "ATTENTION_LAB_SERVED"
# uvicorn (under Streamlit 1.67) believes X-Forwarded-For from the addresses in this variable,
# 127.0.0.1 by default: any local program could then claim any address. Every lab server
# trusts no one there (a literal no peer can be); the app believes its own balancer alone,
# by the balancer's secret (ui.classroom.client_from).
FORWARDED_ALLOW_IPS_ENV = "FORWARDED_ALLOW_IPS"
TRUST_NO_PROXY = "none"
