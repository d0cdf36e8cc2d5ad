"""Schema migrations, applied programmatically when a store opens (Alembic API; no alembic.ini).

Concurrent openers are serialised: SQLite by the write lock of `BEGIN IMMEDIATE`, PostgreSQL by a
transaction-scoped advisory lock, so two processes opening a fresh database never both create tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

MIGRATIONS_DIR: Final = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_KEY: Final = 0x61766962  # "avib": one advisory lock id for all avibe migrations
WRITE_OPTION: Final = "avibe_write"  # execution option: SQLite begins with BEGIN IMMEDIATE


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision of the database, or None when it has no avibe schema yet (read only)."""
    with engine.connect() as conn, conn.begin():
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Bring the schema to head under the migration lock; a no-op when another process got there first."""
    with engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            if MigrationContext.configure(conn).get_current_revision() != head_revision():
                command.upgrade(_config(conn), "head")
