"""The teacher's solution policy, recorded reveals, slow-down counts and dashboard indexes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Classes made before this revision keep the old behaviour: solutions after two tries.
    with op.batch_alter_table("classes") as batch:
        batch.add_column(
            sa.Column("solutions", sa.String(20), nullable=False, server_default="after_tries")
        )
        batch.add_column(
            sa.Column("solution_tries", sa.Integer, nullable=False, server_default="2")
        )
    op.create_table(
        "reveals",
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
        sa.Column("reason", sa.String(20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("student_id", "item", name="uq_reveal_once"),
    )
    op.create_index("ix_reveals_class", "reveals", ["class_id"])
    op.create_table(
        "failures",
        sa.Column("subject", sa.String(200), primary_key=True),
        sa.Column("count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
    )
    # The dashboard reads a class's submissions item by item.
    op.create_index("ix_submissions_class_item", "submissions", ["class_id", "item"])


def downgrade() -> None:
    op.drop_index("ix_submissions_class_item", "submissions")
    op.drop_table("failures")
    op.drop_index("ix_reveals_class", "reveals")
    op.drop_table("reveals")
    with op.batch_alter_table("classes") as batch:
        batch.drop_column("solution_tries")
        batch.drop_column("solutions")
