"""Alembic's environment for the class store: always run from classroom.store with an open
connection (``config.attributes["connection"]``), never from a URL in an ini file."""

from __future__ import annotations

from alembic import context

from classroom.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
)
with context.begin_transaction():
    context.run_migrations()
