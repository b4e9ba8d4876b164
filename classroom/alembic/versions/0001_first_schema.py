"""The first schema: classes, students and their submissions.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("code", sa.String(16), nullable=False, unique=True),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("topic", sa.String(40), nullable=False),
        sa.Column("seed", sa.Integer, nullable=False),
        sa.Column("n_items", sa.Integer, nullable=False),
        sa.Column("teacher_hash", sa.String(64), nullable=False),
        sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "students",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "class_id",
            sa.Integer,
            sa.ForeignKey("classes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("position", sa.Integer, nullable=False, server_default="0"),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_students_class_id", "students", ["class_id"])
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "class_id",
            sa.Integer,
            sa.ForeignKey("classes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "student_id",
            sa.Integer,
            sa.ForeignKey("students.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("item", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("submission_id", sa.String(100), nullable=False),
        sa.Column("answer", sa.Text, nullable=False),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("feedback_key", sa.String(120), nullable=False),
        sa.Column("feedback_params", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("student_id", "submission_id", name="uq_submission_once"),
        sa.UniqueConstraint("student_id", "item", "attempt", name="uq_submission_attempt"),
    )


def downgrade() -> None:
    op.drop_table("submissions")
    op.drop_index("ix_students_class_id", "students")
    op.drop_table("students")
    op.drop_table("classes")
