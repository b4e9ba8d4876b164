"""The class's tables: classes, students, submissions, solution reveals, failed-guess counts
and teacher sessions.

These mirror the newest Alembic revision (classroom/alembic/versions); the migrations, not
``create_all``, make the schema, so a database made by an older lab is upgraded in place.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class ClassRow(Base):
    __tablename__ = "classes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(16), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    topic: Mapped[str] = mapped_column(String(40))
    seed: Mapped[int] = mapped_column(Integer)
    n_items: Mapped[int] = mapped_column(Integer)
    teacher_hash: Mapped[str] = mapped_column(String(64))
    closed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # revision 0002
    solutions: Mapped[str] = mapped_column(String(20), default="after_tries")
    solution_tries: Mapped[int] = mapped_column(Integer, default=2)


class StudentRow(Base):
    __tablename__ = "students"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer, default=0)
    joined_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SubmissionRow(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("student_id", "submission_id", name="uq_submission_once"),
        UniqueConstraint("student_id", "item", "attempt", name="uq_submission_attempt"),
        Index("ix_submissions_class_item", "class_id", "item"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    student_id: Mapped[int] = mapped_column(ForeignKey("students.id", ondelete="CASCADE"))
    item: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    submission_id: Mapped[str] = mapped_column(String(100))
    answer: Mapped[str] = mapped_column(Text)
    correct: Mapped[bool] = mapped_column(Boolean)
    feedback_key: Mapped[str] = mapped_column(String(120))
    feedback_params: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RevealRow(Base):
    """A worked solution shown to a student: once per (student, item), with why and when."""

    __tablename__ = "reveals"
    __table_args__ = (
        UniqueConstraint("student_id", "item", name="uq_reveal_once"),
        Index("ix_reveals_class", "class_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    student_id: Mapped[int] = mapped_column(ForeignKey("students.id", ondelete="CASCADE"))
    item: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class FailureRow(Base):
    """Wrong teacher keys or join codes lately, per subject: what the slow-down counts."""

    __tablename__ = "failures"

    subject: Mapped[str] = mapped_column(String(200), primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TeacherSessionRow(Base):
    """A teacher's browser session ("session", hours) or a one-time ticket that the browser
    exchanges for one ("ticket", a minute); only the token's SHA-256 is kept (revision 0003)."""

    __tablename__ = "teacher_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    made_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
