"""A real PostgreSQL for the class-store tests: started by a fixture, skipped with the reason
when the server binaries (Debian's `postgresql` package) are missing."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Iterator

import pytest

from deploy import postgres

PORTS = range(5433, 5441)  # the test servers' ports; a busy one is skipped


def free_test_port() -> int:
    for port in PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip(f"no free port for a PostgreSQL test server in {PORTS.start}-{PORTS.stop - 1}")


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
