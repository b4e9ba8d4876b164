"""Teacher sessions: what a browser holds instead of the teacher's key.

A session (8 hours) or a one-time ticket (a minute, exchanged by the browser for a session
cookie), each kept only as the SHA-256 of its random token; deleting a class deletes them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "teacher_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column(
            "class_id",
            sa.Integer,
            sa.ForeignKey("classes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("made_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_teacher_sessions_class_id", "teacher_sessions", ["class_id"])


def downgrade() -> None:
    op.drop_index("ix_teacher_sessions_class_id", "teacher_sessions")
    op.drop_table("teacher_sessions")
