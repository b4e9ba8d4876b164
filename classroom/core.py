"""Classes a teacher owns, students who join with a name, and every answer they give, stored.

The teacher's key (192 random bits) is returned once and kept only as its SHA-256; a student's
key (128 bits) likewise. A high-entropy key needs no slow hash: its digest cannot be guessed
back. The teacher's browser holds no key: it holds a session (256 bits, SESSION_LIFE, kept as
a hash too), made from the key (``sign_in``) or from a one-time ticket (``redeem_ticket``);
"new teacher key" ends every session made before it. Keys are compared with
``hmac.compare_digest``. Every failed guess (an unknown class code, a wrong teacher key,
session, ticket or student key) is counted in the database per guesser (the client's address)
and per key tried, never per class, and past a few a failure is answered slowly (every replica
counts); the right key is never slowed.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

import practice
from classroom.models import (
    ClassRow,
    FailureRow,
    RevealRow,
    StudentRow,
    SubmissionRow,
    TeacherSessionRow,
)
from classroom.names import (  # noqa: F401 - MAX_NAME, BadNameError: re-exported
    MAX_NAME,
    BadNameError,
    clean_name,
    same_name,
)
from classroom.store import READ_ONLY, one_writer, ready_engine
from model.runtime.kept import ByteLRU
from practice.core import Exercise, Feedback, Step

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud, typed on a phone
CODE_LEN = 6
MAX_ITEMS = 50
MAX_TITLE = 200
MAX_ANSWER_CHARS = 10_000
MAX_SUBMISSION_ID = 100
SOLUTION_POLICIES = ("after_tries", "on_request", "closed")
FREE_FAILURES = 5  # wrong keys / codes answered at full speed, per subject and window
FAILURE_WINDOW = timedelta(minutes=15)
MAX_DELAY_S = 4.0
WRITE_RETRIES = 8
SESSION_LIFE = timedelta(hours=8)  # a school day: the teacher's browser signs in again tomorrow
TICKET_LIFE = timedelta(minutes=1)  # the page hands it to the browser, which spends it at once
RESULT_COLUMNS = [
    "name",
    "student",
    "index",
    "kind",
    "attempts",
    "correct",
    "first_try_correct",
    "last_answer",
    "solution_shown",
]


class ClassClosedError(RuntimeError):
    """The class is closed: no more answers until the teacher reopens it."""


class SolutionLockedError(PermissionError):
    """The class's solution policy does not show this solution yet."""


class StoreUnavailableError(ConnectionError):
    """The database did not answer; the same call (same submission_id) may be retried."""


@dataclass(frozen=True)
class ClassInfo:
    """What anyone with the code may know about a class (no secrets)."""

    code: str
    title: str
    topic: str
    seed: int
    n_items: int
    closed: bool
    solutions: str
    solution_tries: int
    created_at: datetime


@dataclass(frozen=True)
class StudentInfo:
    name: str
    position: int  # the item to resume at
    klass: ClassInfo


@dataclass(frozen=True)
class ItemState:
    """One student's work on one item, as their page draws it."""

    index: int
    attempts: int
    correct: bool
    last_answer: Any
    feedback: Feedback | None
    solution_shown: bool
    solution_available: bool


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def _plain(value: Any) -> Any:
    """An answer or feedback parameter as JSON-able data (tuples become lists)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _plain(value.item())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    raise ValueError(f"an answer is numbers, text or lists of them, not {type(value).__name__}")


def _dumps(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False, separators=(", ", ": "))


def as_stored(answer: Any) -> Any:
    """``answer`` as the store gives it back (tuples become lists): to compare with
    ItemState.last_answer."""
    return json.loads(_dumps(answer))


def answer_text(answer_json: str) -> str:
    """A stored answer as one line of text (what the dashboard and the CSV show)."""
    value = json.loads(answer_json)
    if isinstance(value, str):
        return value
    return _dumps(value)


def _feedback(row: SubmissionRow) -> Feedback:
    return Feedback(row.correct, row.feedback_key, json.loads(row.feedback_params))


# The exercises students are on, made once (a class asks for the same few all lesson long):
# the lab's one byte-bounded cache, as every computed thing (docs/ARCHITECTURE.md).
_EXERCISES = ByteLRU(budget=16 * 2**20)


def _exercise(kind: str, seed: int) -> Exercise:
    return _EXERCISES.get_or_compute((kind, seed), lambda: practice.make(kind, seed))


def _check_text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters long; at most {limit}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{what} must not hold control characters (tabs, line breaks, NUL)")
    return value


def _store_errors(fn: Callable) -> Callable:
    """A lost or refused database connection becomes StoreUnavailableError (retry-able)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except IntegrityError:
            raise
        except DBAPIError as err:
            if isinstance(err.orig, Exception) and _is_connection_error(err):
                raise StoreUnavailableError(
                    "the class database does not answer; try again in a moment"
                ) from err
            raise

    return wrapper


def _is_connection_error(err: DBAPIError) -> bool:
    if err.connection_invalidated:
        return True
    name = type(err.orig).__name__
    text = str(err.orig).lower()
    return name in ("OperationalError", "InterfaceError", "AdminShutdown") or "locked" in text


class Classroom:
    """Teacher-owned classes and their students' stored answers (see the module docstring).

    ``url``: an SQLAlchemy URL; None takes ``$ATTENTION_LAB_DATABASE_URL``, else the SQLite
    file in ``$ATTENTION_LAB_DATA``. ``sleep`` is how the slow-down waits (tests record it).
    """

    def __init__(self, url: str | None = None, *, sleep: Callable[[float], None] = time.sleep):
        self.engine = ready_engine(url)
        self._reader = self.engine.execution_options(**{READ_ONLY: True})
        self._sleep = sleep

    # ---- plumbing ----

    @contextmanager
    def _session(self, *, read: bool = False) -> Iterator[Session]:
        """A transaction; ``read``: it only reads (on SQLite it then takes no write lock and
        waits for no writer); a write waits its turn in this process first (one_writer)."""
        if read:
            with Session(self._reader, expire_on_commit=False) as s, s.begin():
                yield s
            return
        writer = one_writer(self.engine)
        with writer, Session(self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A short write transaction in plain SQL, for the writes a class makes all lesson
        long (every answer, every move to the next item). On SQLite the file has one writer
        at a time, so how long a write holds the lock is what 40 students queue for: an ORM
        session's unit of work, identity map and reloaded rows cost several times the
        Python that these few statements do, and on a busy machine each of those
        milliseconds stretches to ten."""
        with one_writer(self.engine), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _counted(self, client: str, key: object = None) -> Iterator[None]:
        """Around a call that takes a code, a key or a token: a LookupError (unknown) or a
        PermissionError (wrong) is counted and slowed (_slow_failure) once its transaction
        has ended, so no wait ever holds a lock."""
        try:
            yield
        except (LookupError, PermissionError):
            self._slow_failure(client, key)
            raise

    def _class(self, s: Session, code: object) -> ClassRow:
        row = None
        if isinstance(code, str) and 0 < len(code) <= 16:
            row = s.scalar(select(ClassRow).where(ClassRow.code == code.strip().upper()))
        if row is None:
            raise LookupError("no class has this code")
        return row

    def _student(self, s: Session, key: object) -> tuple[StudentRow, ClassRow]:
        row = None
        if isinstance(key, str) and 0 < len(key) <= 100:
            row = s.scalar(select(StudentRow).where(StudentRow.key_hash == _hash(key)))
        if row is None:
            raise LookupError("no student has this key")
        return row, s.get(ClassRow, row.class_id)

    def _slow_failure(self, client: str, key: object = None) -> None:
        """A wrong key or unknown code: count it for the guesser (the client's address) and
        for the key tried, then wait before answering, doubling past a few (capped).

        Only failures wait, and they are counted per guesser and per key, never per class:
        the teacher with the right key, and every student with the right code, are answered
        at full speed however many guesses others made."""
        subjects = [f"guess:{client or 'local'}"]
        if isinstance(key, str) and key:
            subjects.append(f"key:{_hash(key)[:32]}")
        for subject in subjects:
            self._fail(subject)
        extra = max(self.failures(subject) for subject in subjects) - FREE_FAILURES - 1
        if extra >= 0:
            self._sleep(min(MAX_DELAY_S, 0.25 * 2**extra))

    def _fail(self, subject: str) -> None:
        for _ in range(WRITE_RETRIES):
            try:
                with self._session() as s:
                    row = s.get(FailureRow, subject, with_for_update=True)
                    now = _now()
                    if row is None:
                        s.add(FailureRow(subject=subject, count=1, last_at=now))
                    else:
                        fresh = now - _aware(row.last_at) > FAILURE_WINDOW
                        row.count = 1 if fresh else row.count + 1
                        row.last_at = now
                return
            except IntegrityError:
                continue

    def failures(self, subject: str) -> int:
        """Recent failures counted for ``subject`` ("guess:CLIENT" or "key:DIGEST")."""
        with self._session(read=True) as s:
            row = s.get(FailureRow, subject)
            if row is None or _now() - _aware(row.last_at) > FAILURE_WINDOW:
                return 0
            return row.count

    def _teacher(self, s: Session, code: object, teacher_key: object, client: str) -> ClassRow:
        """The class, if ``teacher_key`` is its teacher's key or one of its live sessions."""
        row = self._class(s, code)
        given = teacher_key if isinstance(teacher_key, str) and len(teacher_key) <= 100 else ""
        if hmac.compare_digest(_hash(given), row.teacher_hash):
            return row
        if given and self._live_session(s, row.id, given) is not None:
            return row
        raise PermissionError("this teacher key does not belong to this class")

    def _live_session(self, s: Session, class_id: int, token: str, kind: str = "session"):
        found = s.get(TeacherSessionRow, _hash(token))
        if found is None or found.class_id != class_id or found.kind != kind:
            return None
        return found if _aware(found.expires_at) > _now() else None

    def _as_teacher(self, code: object, teacher_key: object, client: str = "") -> ClassInfo:
        with self._counted(client, teacher_key), self._session(read=True) as s:
            return _info(self._teacher(s, code, teacher_key, client))

    # ---- the teacher ----

    @_store_errors
    def create_class(
        self,
        title: str,
        topic: str = practice.MIXED,
        seed: int | None = None,
        n_items: int = 10,
        *,
        solutions: str = "after_tries",
        solution_tries: int = 2,
    ) -> tuple[str, str]:
        """A new class; returns (class code, teacher key). The key is shown this once."""
        title = _check_text(title, "the title", MAX_TITLE)
        practice.kinds_for(topic)  # ValueError for an unknown topic
        if seed is None:
            seed = secrets.randbelow(1_000_000)
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2**31 - 1:
            raise ValueError(f"seed must be a whole number from 0 to {2**31 - 1}")
        if not isinstance(n_items, int) or not 1 <= n_items <= MAX_ITEMS:
            raise ValueError(f"a class has from 1 to {MAX_ITEMS} items")
        if solutions not in SOLUTION_POLICIES:
            raise ValueError(f"solutions must be one of {SOLUTION_POLICIES}")
        if not isinstance(solution_tries, int) or not 1 <= solution_tries <= 10:
            raise ValueError("solution_tries must be from 1 to 10")
        teacher_key = secrets.token_urlsafe(24)  # 192 bits
        for _ in range(WRITE_RETRIES):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LEN))
            try:
                with self._session() as s:
                    s.add(
                        ClassRow(
                            code=code,
                            title=title,
                            topic=topic,
                            seed=seed,
                            n_items=n_items,
                            teacher_hash=_hash(teacher_key),
                            closed=False,
                            created_at=_now(),
                            solutions=solutions,
                            solution_tries=solution_tries,
                        )
                    )
                return code, teacher_key
            except IntegrityError:  # the code was taken: draw another
                continue
        raise RuntimeError("could not find a free class code")

    @_store_errors
    def teacher_class(self, code: str, teacher_key: str, *, client: str = "") -> ClassInfo:
        """The class, if ``teacher_key`` is its teacher's (PermissionError / LookupError)."""
        return self._as_teacher(code, teacher_key, client)

    # ---- the teacher's browser: sessions instead of the key ----

    @_store_errors
    def sign_in(self, code: str, teacher_key: str, *, client: str = "") -> str:
        """A session token for the teacher's browser (SESSION_LIFE), in exchange for the
        teacher's key or a live session of the class; PermissionError / LookupError (counted
        and slowed) otherwise. Any teacher call takes the token where it takes the key."""
        return self._new_token(code, teacher_key, "session", SESSION_LIFE, client)

    @_store_errors
    def ticket(self, code: str, teacher_key: str, *, client: str = "") -> str:
        """A one-time ticket (TICKET_LIFE) the page gives the browser, which spends it on the
        cookie route (classroom.web) for a session cookie: the page's scripts never see the
        session token, nor the key."""
        return self._new_token(code, teacher_key, "ticket", TICKET_LIFE, client)

    def _new_token(self, code, teacher_key, kind: str, life: timedelta, client: str) -> str:
        token = secrets.token_urlsafe(32)  # 256 bits
        with self._counted(client, teacher_key), self._session() as s:
            row = self._teacher(s, code, teacher_key, client)
            now = _now()
            s.execute(delete(TeacherSessionRow).where(TeacherSessionRow.expires_at < now))
            s.add(
                TeacherSessionRow(
                    token_hash=_hash(token),
                    class_id=row.id,
                    kind=kind,
                    made_at=now,
                    expires_at=now + life,
                )
            )
        return token

    @_store_errors
    def redeem_ticket(self, ticket: str, *, client: str = "") -> tuple[str, str]:
        """Spend a ticket (once, within its minute): (class code, a new session token).
        LookupError, counted and slowed, for an unknown, spent or stale ticket."""
        token = secrets.token_urlsafe(32)
        with self._counted(client, ticket), self._session() as s:
            found = None
            if isinstance(ticket, str) and 0 < len(ticket) <= 100:
                found = s.get(TeacherSessionRow, _hash(ticket))
            if found is None or found.kind != "ticket":
                raise LookupError("no such ticket")
            s.delete(found)
            if _aware(found.expires_at) <= _now():
                raise LookupError("this ticket is spent")
            now = _now()
            s.add(
                TeacherSessionRow(
                    token_hash=_hash(token),
                    class_id=found.class_id,
                    kind="session",
                    made_at=now,
                    expires_at=now + SESSION_LIFE,
                )
            )
            code = s.get(ClassRow, found.class_id).code
        return code, token

    @_store_errors
    def sign_out(self, session_token: str) -> None:
        """This session ends (nothing happens for a token that is not one)."""
        if isinstance(session_token, str) and 0 < len(session_token) <= 100:
            with self._session() as s:
                s.execute(
                    delete(TeacherSessionRow).where(
                        TeacherSessionRow.token_hash == _hash(session_token),
                        TeacherSessionRow.kind == "session",
                    )
                )

    @_store_errors
    def new_teacher_key(self, code: str, teacher_key: str, *, client: str = "") -> str:
        """A new teacher key for the class (shown once); the old key, and every session and
        ticket made from anything before, stop working at once, on every browser."""
        new_key = secrets.token_urlsafe(24)
        self._as_teacher(code, teacher_key, client)
        with self._session() as s:
            row = self._teacher(s, code, teacher_key, client)
            row.teacher_hash = _hash(new_key)
            s.execute(delete(TeacherSessionRow).where(TeacherSessionRow.class_id == row.id))
        return new_key

    @_store_errors
    def students(self, code: str, teacher_key: str, *, client: str = "") -> list[str]:
        """The class's students' names, in the order they joined (student n is item n-1,
        as ``results`` numbers them)."""
        self._as_teacher(code, teacher_key, client)
        students, _, _ = self._class_rows(code)
        return [st.name for st in students]

    @_store_errors
    def new_student_link(
        self, code: str, teacher_key: str, student: int, *, client: str = ""
    ) -> str:
        """A new personal key for student number ``student`` (from 1, as ``results``
        numbers them): their work stays, their old link stops working."""
        self._as_teacher(code, teacher_key, client)
        new_key = secrets.token_urlsafe(16)
        with self._session() as s:
            row = self._teacher(s, code, teacher_key, client)
            ids = list(
                s.scalars(
                    select(StudentRow.id)
                    .where(StudentRow.class_id == row.id)
                    .order_by(StudentRow.id)
                )
            )
            if not isinstance(student, int) or isinstance(student, bool):
                raise ValueError("student must be a number")
            if not 1 <= student <= len(ids):
                raise ValueError(f"student must be from 1 to {len(ids)}")
            s.get(StudentRow, ids[student - 1]).key_hash = _hash(new_key)
        return new_key

    @_store_errors
    def close(self, code: str, teacher_key: str, *, client: str = "") -> None:
        self._set_closed(code, teacher_key, True, client)

    @_store_errors
    def reopen(self, code: str, teacher_key: str, *, client: str = "") -> None:
        self._set_closed(code, teacher_key, False, client)

    def _set_closed(self, code: str, teacher_key: str, closed: bool, client: str) -> None:
        self._as_teacher(code, teacher_key, client)
        with self._session() as s:
            self._teacher(s, code, teacher_key, client).closed = closed

    @_store_errors
    def delete(self, code: str, teacher_key: str, *, client: str = "") -> None:
        """The class and everything in it: students, answers, reveals."""
        self._as_teacher(code, teacher_key, client)
        with self._session() as s:
            row = self._teacher(s, code, teacher_key, client)
            for table in (RevealRow, SubmissionRow, TeacherSessionRow):
                s.execute(delete(table).where(table.class_id == row.id))
            s.execute(delete(StudentRow).where(StudentRow.class_id == row.id))
            s.delete(row)

    @_store_errors
    def answer_key(self, code: str, teacher_key: str, *, client: str = "") -> list[Exercise]:
        info = self._as_teacher(code, teacher_key, client)
        return [_exercise(*practice.item(info.seed, info.topic, i)) for i in range(info.n_items)]

    @_store_errors
    def results(self, code: str, teacher_key: str, *, client: str = "") -> pd.DataFrame:
        """One row per (student, item), every item of every student, tried or not.

        ``correct``: some attempt was right; ``first_try_correct``: the first one was;
        ``last_answer``: the latest answer as text ("" if none); ``student``: a number
        that tells apart two students of the same name.
        """
        info = self._as_teacher(code, teacher_key, client)
        students, subs, reveals = self._class_rows(code)
        kinds = [practice.item(info.seed, info.topic, i)[0] for i in range(info.n_items)]
        by_cell: dict[tuple[int, int], list[SubmissionRow]] = defaultdict(list)
        for sub in subs:
            by_cell[sub.student_id, sub.item].append(sub)
        shown = {(r.student_id, r.item) for r in reveals}
        rows = []
        for number, st in enumerate(students, start=1):
            for i in range(info.n_items):
                tries = sorted(by_cell.get((st.id, i), []), key=lambda r: r.attempt)
                rows.append(
                    {
                        "name": st.name,
                        "student": number,
                        "index": i,
                        "kind": kinds[i],
                        "attempts": len(tries),
                        "correct": any(r.correct for r in tries),
                        "first_try_correct": bool(tries) and tries[0].correct,
                        "last_answer": answer_text(tries[-1].answer) if tries else "",
                        "solution_shown": (st.id, i) in shown,
                    }
                )
        return pd.DataFrame(rows, columns=RESULT_COLUMNS)

    def _class_rows(self, code: str):
        with self._session(read=True) as s:
            row = self._class(s, code)
            students = list(
                s.scalars(
                    select(StudentRow).where(StudentRow.class_id == row.id).order_by(StudentRow.id)
                )
            )
            subs = list(
                s.scalars(
                    select(SubmissionRow)
                    .where(SubmissionRow.class_id == row.id)
                    .order_by(SubmissionRow.item, SubmissionRow.id)
                )
            )
            reveals = list(s.scalars(select(RevealRow).where(RevealRow.class_id == row.id)))
        return students, subs, reveals

    @_store_errors
    def item_summary(self, code: str, teacher_key: str, *, client: str = "") -> pd.DataFrame:
        """Per item: students who tried, first-try correct, correct at last, solutions shown."""
        return summarize(self.results(code, teacher_key, client=client))

    @_store_errors
    def mistakes(self, code: str, teacher_key: str, *, client: str = "") -> pd.DataFrame:
        """Wrong answers grouped by item and the mistake the checker named.

        Columns: index, mistake (the feedback's catalog key), params (one example's, to say
        it), students (distinct), answers (wrong submissions), examples (the commonest
        answers, as text, with counts); most students first within each item.
        """
        self._as_teacher(code, teacher_key, client)
        _, subs, _ = self._class_rows(code)
        groups: dict[tuple[int, str], list[SubmissionRow]] = defaultdict(list)
        for sub in subs:
            if not sub.correct:
                groups[sub.item, sub.feedback_key].append(sub)
        rows = []
        for (item, key), members in groups.items():
            answers = Counter(answer_text(m.answer) for m in members)
            rows.append(
                {
                    "index": item,
                    "mistake": key,
                    "params": json.loads(members[0].feedback_params),
                    "students": len({m.student_id for m in members}),
                    "answers": len(members),
                    "examples": answers.most_common(3),
                }
            )
        columns = ["index", "mistake", "params", "students", "answers", "examples"]
        df = pd.DataFrame(rows, columns=columns)
        if len(df):
            df = df.sort_values(["index", "students", "answers"], ascending=[True, False, False])
        return df.reset_index(drop=True)

    # ---- the student ----

    @_store_errors
    def class_info(self, code: str, *, client: str = "") -> ClassInfo:
        """A class's public facts, for the join page (LookupError for an unknown code)."""
        with self._counted(client, code), self._session(read=True) as s:
            return _info(self._class(s, code))

    @_store_errors
    def join(self, code: str, name: str, *, client: str = "") -> str:
        """A new student of class ``code`` called ``name`` (trimmed, NFC: clean_name);
        returns their personal key, the only way back to their work."""
        name = clean_name(name)
        key = secrets.token_urlsafe(16)  # 128 bits
        with self._counted(client, code), self._session() as s:
            row = self._class(s, code)
            if row.closed:
                raise ClassClosedError("this class is closed")
            s.add(
                StudentRow(
                    class_id=row.id,
                    key_hash=_hash(key),
                    name=name,
                    position=0,
                    joined_at=_now(),
                )
            )
        return key

    @_store_errors
    def name_taken(self, code: str, name: str, *, client: str = "") -> bool:
        """A student of this name (clean_name, same_name) has joined the class already: the
        page asks "is this you?" before making a second one. An unknown code is a guess like
        any other (counted and slowed): the join form asks this first."""
        name = clean_name(name)
        with self._counted(client, code), self._session(read=True) as s:
            row = self._class(s, code)
            names = s.scalars(select(StudentRow.name).where(StudentRow.class_id == row.id))
            return any(same_name(name, other) for other in names)

    @_store_errors
    def student(self, student_key: str, *, client: str = "") -> StudentInfo:
        """Who holds this personal key (LookupError, counted and slowed, for a wrong one)."""
        with self._counted(client, student_key), self._session(read=True) as s:
            st, cls = self._student(s, student_key)
            return StudentInfo(st.name, st.position, _info(cls))

    @_store_errors
    def set_position(self, student_key: str, index: int, *, client: str = "") -> None:
        """Remember the item the student is on, so a reload or another device resumes there."""
        with self._counted(client, student_key), self._session(read=True) as s:
            st, cls = self._student(s, student_key)
            index = _index(index, cls.n_items)
            if st.position == index:
                return  # a reload that lands where it was writes nothing
            student_id = st.id
        with self._writing() as conn:
            conn.execute(
                update(StudentRow.__table__)
                .where(StudentRow.id == student_id)
                .values(position=index)
            )

    @_store_errors
    def exercise(self, student_key: str, index: int, *, client: str = "") -> Exercise:
        """Item ``index`` of the student's class: the same exercise for the whole class."""
        with self._counted(client, student_key), self._session(read=True) as s:
            _, cls = self._student(s, student_key)
            seed, topic, n = cls.seed, cls.topic, cls.n_items
        return _exercise(*practice.item(seed, topic, _index(index, n)))

    @_store_errors
    def submit(
        self,
        student_key: str,
        index: int,
        answer: Any,
        submission_id: str | None = None,
        *,
        client: str = "",
    ) -> Feedback:
        """Check ``answer``, store it (committed) and return the feedback.

        The same ``submission_id`` again returns the stored feedback and stores nothing new:
        a browser that lost the connection can send the same answer again safely.
        """
        if submission_id is None:
            submission_id = uuid.uuid4().hex
        if not isinstance(submission_id, str) or not 0 < len(submission_id) <= MAX_SUBMISSION_ID:
            raise ValueError(f"submission_id must be text of 1 to {MAX_SUBMISSION_ID} characters")
        answer_json = _dumps(answer)
        if len(answer_json) > MAX_ANSWER_CHARS:
            raise ValueError(f"the answer is longer than {MAX_ANSWER_CHARS} characters")
        fb = params_json = None
        for _ in range(WRITE_RETRIES):
            # a read, which waits for no writer: a retry's stored feedback, or the item
            with self._counted(client, student_key), self._session(read=True) as s:
                st, cls = self._student(s, student_key)
                stored = s.scalar(_by_submission(st.id, submission_id))
                if stored is not None:
                    return _feedback(stored)
                index = _index(index, cls.n_items)
                kind, sub_seed = practice.item(cls.seed, cls.topic, index)
                student_id, class_id = st.id, cls.id
            if fb is None:  # checked outside any transaction
                fb = _exercise(kind, sub_seed).check(answer)
                params_json = json.dumps(_plain(fb.params), ensure_ascii=False)
            # the write: two statements under the lock. The same submission stored meanwhile
            # (a resend that raced this one) or the same attempt number breaks a unique
            # constraint, and the read above, once more, finds what was stored.
            try:
                with self._writing() as conn:
                    last = (
                        select(func.max(SubmissionRow.attempt))
                        .where(SubmissionRow.student_id == student_id, SubmissionRow.item == index)
                        .scalar_subquery()
                    )
                    found = conn.execute(
                        select(ClassRow.closed, last).where(ClassRow.id == class_id)
                    ).one_or_none()
                    if found is None:
                        raise LookupError("no student has this key")  # the class was deleted
                    if found[0]:
                        raise ClassClosedError("this class is closed; answers are not taken")
                    conn.execute(
                        insert(SubmissionRow.__table__).values(
                            class_id=class_id,
                            student_id=student_id,
                            item=index,
                            attempt=(found[1] or 0) + 1,
                            submission_id=submission_id,
                            answer=answer_json,
                            correct=bool(fb.correct),
                            feedback_key=fb.key,
                            feedback_params=params_json,
                            created_at=_now(),
                        )
                    )
                return Feedback(bool(fb.correct), fb.key, json.loads(params_json))  # committed
            except IntegrityError:
                continue
        raise StoreUnavailableError("the answer could not be stored; try again")

    @_store_errors
    def progress(self, student_key: str, *, client: str = "") -> list[ItemState]:
        """The student's state on every item of the class, in order."""
        with self._counted(client, student_key), self._session(read=True) as s:
            st, cls = self._student(s, student_key)
            subs = list(
                s.scalars(
                    select(SubmissionRow)
                    .where(SubmissionRow.student_id == st.id)
                    .order_by(SubmissionRow.item, SubmissionRow.attempt)
                )
            )
            shown = set(s.scalars(select(RevealRow.item).where(RevealRow.student_id == st.id)))
        by_item: dict[int, list[SubmissionRow]] = defaultdict(list)
        for sub in subs:
            by_item[sub.item].append(sub)
        return [_state(i, by_item.get(i, []), i in shown, cls) for i in range(cls.n_items)]

    @_store_errors
    def reveal(
        self, student_key: str, index: int, reason: str = "request", *, client: str = ""
    ) -> list[Step]:
        """The item's worked solution, recorded as shown (once per student and item);
        SolutionLockedError while the class's policy keeps it hidden."""
        states = self.progress(student_key, client=client)
        state = states[_index(index, len(states))]
        if not state.solution_available:
            raise SolutionLockedError("the teacher's policy does not show this solution yet")
        if not state.solution_shown:
            try:
                with self._session() as s:
                    st, cls = self._student(s, student_key)
                    s.add(
                        RevealRow(
                            class_id=cls.id,
                            student_id=st.id,
                            item=state.index,
                            reason=str(reason)[:20],
                            created_at=_now(),
                        )
                    )
            except IntegrityError:
                pass  # shown already, from another tab or replica
        return self.exercise(student_key, index).solution


def _by_submission(student_id: int, submission_id: str):
    return select(SubmissionRow).where(
        SubmissionRow.student_id == student_id, SubmissionRow.submission_id == submission_id
    )


def _index(index: object, n_items: int) -> int:
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n_items:
        raise ValueError(f"item index must be from 0 to {n_items - 1}")
    return index


def _aware(when: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored in UTC."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _info(row: ClassRow) -> ClassInfo:
    return ClassInfo(
        code=row.code,
        title=row.title,
        topic=row.topic,
        seed=row.seed,
        n_items=row.n_items,
        closed=bool(row.closed),
        solutions=row.solutions,
        solution_tries=row.solution_tries,
        created_at=_aware(row.created_at),
    )


def _state(index: int, tries: list[SubmissionRow], shown: bool, cls: ClassRow) -> ItemState:
    correct = any(r.correct for r in tries)
    wrong = sum(not r.correct for r in tries)
    if cls.solutions == "on_request":
        available = True
    elif cls.solutions == "closed":
        available = bool(cls.closed)
    else:
        available = correct or wrong >= cls.solution_tries or bool(cls.closed)
    last = tries[-1] if tries else None
    return ItemState(
        index=index,
        attempts=len(tries),
        correct=correct,
        last_answer=None if last is None else json.loads(last.answer),
        feedback=None if last is None else _feedback(last),
        solution_shown=shown,
        solution_available=available,
    )


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per item of a ``results`` frame: students, tried, first_try_correct, correct,
    solution_shown (counts of students)."""
    rows = []
    for (index, kind), part in results.groupby(["index", "kind"], sort=True):
        rows.append(
            {
                "index": int(index),
                "kind": kind,
                "students": len(part),
                "tried": int((part["attempts"] > 0).sum()),
                "first_try_correct": int(part["first_try_correct"].sum()),
                "correct": int(part["correct"].sum()),
                "solution_shown": int(part["solution_shown"].sum()),
            }
        )
    columns = ["index", "kind", "students", "tried", "first_try_correct", "correct"]
    return pd.DataFrame(rows, columns=[*columns, "solution_shown"])
