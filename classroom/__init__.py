"""A class, kept: teacher-owned classes, students who join by name, every answer stored.

Plain Python on top of ``practice/`` and SQLAlchemy (no Streamlit), so a script can run a
class too::

    from classroom import Classroom
    room = Classroom()                       # $ATTENTION_LAB_DATABASE_URL or the SQLite file
    code, teacher_key = room.create_class("Week 3", topic="mixed", seed=2026, n_items=10)
    student_key = room.join(code, "민수")
    ex = room.exercise(student_key, 0)       # a practice.Exercise, the same for the class
    fb = room.submit(student_key, 0, ex.answer, submission_id="a1")
    room.results(code, teacher_key)          # DataFrame, one row per (student, item)

A wrong teacher key raises PermissionError, an unknown code or student key LookupError.
"""

from __future__ import annotations

from classroom.store import default_url, redacted

# The rest comes from classroom.core on first use (PEP 562): core imports practice and with it
# torch, and `make serve` migrating the store before its replicas start (classroom.store) need
# not pay torch's import for that.
_CORE = (
    "RESULT_COLUMNS",
    "SOLUTION_POLICIES",
    "BadNameError",
    "ClassClosedError",
    "ClassInfo",
    "Classroom",
    "ItemState",
    "SolutionLockedError",
    "StoreUnavailableError",
    "StudentInfo",
    "answer_text",
    "as_stored",
)

__all__ = [*_CORE, "default_url", "redacted"]


def __getattr__(name: str):
    if name in _CORE:
        from classroom import core

        return getattr(core, name)
    raise AttributeError(f"module 'classroom' has no attribute {name!r}")
