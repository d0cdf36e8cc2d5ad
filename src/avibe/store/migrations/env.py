"""Alembic environment: runs on the connection `avibe.store.migrate` hands over (already in a
transaction that holds the migration lock), so no URL or ini file is read here."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from avibe.store.schema import metadata

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("avibe migrations run only through avibe.store.migrate (no connection given)")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
