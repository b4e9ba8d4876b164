"""Faults inside a submit's own transaction, and the page's retry around every store call.

PostgreSQL's backend is terminated (``pg_terminate_backend`` from another connection) while a
submit's transaction is open: after its INSERT, and just before its COMMIT. The press is
either stored exactly once (the same submission id sent again finds it or stores it) or the
student is told it was not saved; never twice, never silently lost. And no store call of the
class page escapes ui.classroom.patient (the bounded, visible retry)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, text

from classroom import Classroom, StoreUnavailableError
from tests import pg_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pg():
    with pg_server.server() as srv:  # skips, saying why, without PostgreSQL's binaries
        yield srv


def terminate_during(room: Classroom, url: str, moment: str) -> dict:
    """Kill the backend of the connection that runs the first submissions INSERT, from
    another connection: right after the INSERT ("insert"), or as COMMIT is about to be sent
    ("commit"). Returns what happened, for the test to read."""
    killer = create_engine(url, isolation_level="AUTOCOMMIT")
    seen = {"killed": 0, "pid": None}

    def kill(pid: int) -> None:
        with killer.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        seen["killed"] += 1

    def after_execute(conn, cursor, statement, params, context, executemany):
        if seen["killed"] or not statement.lstrip().upper().startswith("INSERT INTO SUBMISSIONS"):
            return
        seen["pid"] = conn.connection.dbapi_connection.info.backend_pid
        if moment == "insert":
            kill(seen["pid"])

    def before_commit(conn):
        if moment == "commit" and seen["pid"] and not seen["killed"]:
            kill(seen["pid"])

    event.listen(room.engine, "after_cursor_execute", after_execute)
    event.listen(room.engine, "commit", before_commit)
    seen["stop"] = lambda: (
        event.remove(room.engine, "after_cursor_execute", after_execute),
        event.remove(room.engine, "commit", before_commit),
        killer.dispose(),
    )
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["insert", "commit"])
def test_a_backend_killed_inside_a_submits_transaction_stores_the_press_once(pg, moment):
    url = pg_server.fresh_database(pg)
    room = Classroom(url)
    code, key = room.create_class("Killed", n_items=1)
    student = room.join(code, "Ada")
    answer = room.exercise(student, 0).answer
    fault = terminate_during(room, url, moment)
    try:
        with pytest.raises(StoreUnavailableError):  # the page says "saving … trying again"
            room.submit(student, 0, answer, submission_id="press-1")
        assert fault["killed"] == 1, "the backend died inside the transaction"
        fb = room.submit(student, 0, answer, submission_id="press-1")  # the page's retry
    finally:
        fault["stop"]()
    assert fb.correct
    assert room.submit(student, 0, answer, submission_id="press-1") == fb
    with room.engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM submissions")).scalar()
    assert stored == 1, "stored exactly once"
    assert room.results(code, key).loc[0, "attempts"] == 1


@pytest.mark.slow
def test_a_press_the_store_never_takes_is_said_not_saved(monkeypatch):
    """Through the page's own helper: every retry fails, the student is told, in the page's
    language, that the answer was not saved (no traceback)."""
    from streamlit.testing.v1 import AppTest

    script = """
import streamlit as st
from classroom import StoreUnavailableError
import ui.classroom as uc

uc.time.sleep = lambda s: None  # the retries' pauses, skipped

class Dead:
    def submit(self, *args, **kwargs):
        raise StoreUnavailableError("the class database does not answer")

from ui.i18n import set_language
set_language(st.query_params.get("lang", "en"))
st.write(repr(uc.save_answer(Dead(), "key", 0, [1], "press-1")))
"""
    for lang in ("en", "ko"):
        at = AppTest.from_string(script, default_timeout=60)
        at.query_params["lang"] = lang
        at.run()
        assert not at.exception
        from ui.i18n import translate

        assert [e.value for e in at.error] == [translate("classroom.saving_failed", lang)]
        assert at.markdown[-1].value == "None"


def test_every_store_call_of_the_class_page_goes_through_the_visible_retry():
    """No ``room.method(...)`` call in the page: each is handed to ``patient(room.method, …)``
    (set_position and the dashboard's results and mistakes were called bare)."""
    for path in (ROOT / "pages" / "classroom.py", ROOT / "ui" / "classroom.py"):
        bare = [
            f"{path.name}:{node.lineno} room.{node.func.attr}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "room"
        ]
        assert bare == []
