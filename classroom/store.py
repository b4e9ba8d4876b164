"""Where the class lives: an SQLAlchemy engine for the URL, migrated to the newest schema.

No URL: ``$ATTENTION_LAB_DATABASE_URL``, else a SQLite file ``classes.sqlite`` in
``$ATTENTION_LAB_DATA`` (default: the repository's git-ignored ``.data/``), made on first use.
SQLite runs in WAL mode with ``BEGIN IMMEDIATE`` writes and deferred reads, so the replicas of one machine share
the file without "database is locked"; PostgreSQL (``postgresql+psycopg://…``) is the store
for replicas on several machines.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
ENV_URL = "ATTENTION_LAB_DATABASE_URL"
ENV_DATA = "ATTENTION_LAB_DATA"
SQLITE_NAME = "classes.sqlite"
MIGRATIONS = Path(__file__).with_name("alembic")
HEAD = "0003"
BUSY_TIMEOUT_MS = 30_000
# An execution option: the transaction only reads (SQLite begins it deferred, not IMMEDIATE).
READ_ONLY = "lab_read_only"
_MIGRATION_LOCK = 724_2024  # the PostgreSQL advisory lock id held while migrating

_engines: dict[str, Engine] = {}
_writers: dict[int, threading.Lock] = {}  # id(engine) -> its one writer at a time (SQLite)
_migrated: set[str] = set()
_lock = threading.Lock()


def data_dir() -> Path:
    return Path(os.environ.get(ENV_DATA) or ROOT / ".data")


def default_url() -> str:
    """The URL used when none is given: the environment's, else the SQLite file."""
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return url
    return f"sqlite:///{data_dir() / SQLITE_NAME}"


def redacted(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that cannot be parsed is shown as such
        return "<unreadable database URL>"


def engine_for(url: str | None = None) -> Engine:
    """One engine per URL and process (engines pool connections; make one, share it)."""
    url = url or default_url()
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _make_engine(url)
            _engines[url] = engine
    return engine


def _make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # the driver stays out; "begin" below says BEGIN
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            # A write takes the write lock up front (IMMEDIATE): two processes never both read
            # and then fail to upgrade to writing (SQLite's busy handler cannot resolve that
            # case). A read (the READ_ONLY option) begins deferred: in WAL mode readers never
            # wait for the writer, nor the writer for them. Every read once took the write
            # lock too, so 40 students' page loads queued behind each other's answers.
            read = conn.get_execution_options().get(READ_ONLY, False)
            conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

        _writers[id(engine)] = threading.Lock()
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


@contextlib.contextmanager
def one_writer(engine: Engine) -> Iterator[None]:
    """Around a write transaction: on SQLite, one thread of this process at a time.

    SQLite has one write lock per file, and a writer that finds it taken sleeps in SQLite's
    busy handler, polling at up to 100 ms: with 20 students' threads per replica all polling,
    a waiting write was overtaken again and again (a submit's tail reached seconds). Queued
    here on a lock that hands over at once, only one thread per process polls the file; on
    PostgreSQL (row locks, a server of its own) nothing waits here."""
    lock = _writers.get(id(engine))
    if lock is None:
        yield
        return
    with lock:
        yield


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (Alembic), one process at a time."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    """The schema's Alembic revision, None for an empty database. Read with one query, not
    through Alembic: importing it costs a class page's first visit about 0.4 s, and an
    up-to-date database (every visit but the very first) never needs it."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    with engine.connect() as conn:
        try:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except (OperationalError, ProgrammingError) as err:
            if not _no_such_table(err):
                raise
            return None


def _no_such_table(err: Exception) -> bool:
    said = str(getattr(err, "orig", err)).lower()
    return "no such table" in said or "does not exist" in said


def ready_engine(url: str | None = None) -> Engine:
    """The engine for ``url``, its schema at the newest revision (checked once per process)."""
    url = url or default_url()
    engine = engine_for(url)
    if url not in _migrated:
        if current_revision(engine) != HEAD:
            migrate(engine)
        _migrated.add(url)
    return engine
