"""A real PostgreSQL for the class-store tests: started by a fixture, skipped with the reason
when the server binaries (Debian's `postgresql` package) are missing."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator

import pytest

from deploy import postgres

PORTS = range(5433, 5441)  # the test servers' ports; a busy one is skipped


def worker_ports() -> list[int]:
    """This pytest-xdist worker's share of PORTS (all of them without xdist). Workers whose
    modules each start a server at the same moment would otherwise all find 5433 free, and
    all but one fail to bind it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return list(PORTS)
    index, count = int(worker[2:]), max(1, int(count))
    return [port for i, port in enumerate(PORTS) if i % count == index % count]


def free_test_port() -> int:
    for port in worker_ports():
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip(f"no free port for a PostgreSQL test server among {worker_ports()}")


@contextlib.contextmanager
def server() -> Iterator[postgres.Server]:
    reason = postgres.missing_reason()
    if reason:
        pytest.skip(f"no PostgreSQL server to test on: {reason}")
    with postgres.temporary(port=free_test_port()) as srv:
        yield srv


def fresh_database(srv: postgres.Server) -> str:
    """A new, empty database on ``srv``; its SQLAlchemy URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(
        host="127.0.0.1",
        port=srv.port,
        user=postgres.ROLE,
        password=srv.password,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return srv.url.rsplit("/", 1)[0] + "/" + name
