"""Open the record: `open_store(url)` builds the engine, sets SQLite up (WAL, busy timeout, BEGIN
IMMEDIATE for writes) and applies the migrations. Connection failures become `StoreUnavailable`, one line
with the password masked."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from avibe.errors import NoRecord, StoreError, StoreUnavailable
from avibe.ports import Clock
from avibe.store import migrate
from avibe.store.sql import SqlStore, first_error_line

BUSY_TIMEOUT_MS: Final = 30_000
PG_CONNECT_TIMEOUT_S: Final = 10


def _masked(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        hint = "use sqlite:///PATH or postgresql+psycopg://..."
        raise StoreUnavailable(f"{url!r} is not a database URL; {hint}") from None
    if parsed.get_backend_name() not in {"sqlite", "postgresql"}:
        raise StoreUnavailable(f"{_masked(parsed)}: only SQLite and PostgreSQL databases are supported")
    if parsed.drivername == "postgresql":  # plain postgresql:// means the driver Avibe ships (psycopg 3)
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_path(url: URL) -> Path | None:
    """The database file, or None for an in-memory database."""
    database = url.database or ""
    if database in {"", ":memory:"} or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (persistent). SQLite may answer "database is locked" at once, without its
    busy handler, while another process is switching or creating the same new file: retry for up to
    the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _on_sqlite_connect(dbapi_connection: sqlite3.Connection, record: ConnectionPoolEntry) -> None:
    # The driver's own transaction handling is switched off so `_on_sqlite_begin` decides how to BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        # WAL + NORMAL: a commit survives a crash of the process; only power loss can undo the last ones.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()
    # Unicode-aware lower() so `--grep` ignores case beyond ASCII, as PostgreSQL does.
    dbapi_connection.create_function("lower", 1, _lower, deterministic=True)


def _on_sqlite_begin(conn: Connection) -> None:
    # Writers take the write lock up front: two appenders never both read the same last_seq.
    immediate = conn.get_execution_options().get(migrate.WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _engine(url: URL) -> Engine:
    kwargs: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000}
        if _sqlite_path(url) is None:
            kwargs["poolclass"] = StaticPool  # one shared in-memory database
            kwargs["connect_args"]["check_same_thread"] = False
    elif "connect_timeout" not in url.query:
        kwargs["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    try:
        engine = create_engine(url, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise StoreUnavailable(f"cannot use {_masked(url)}: {exc}") from exc
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _prepare_schema(engine: Engine, url: URL, create: bool) -> None:
    current = migrate.current_revision(engine)
    if current is None and not create:
        raise NoRecord(f"no record yet: {_masked(url)} holds no Avibe data")
    if current != migrate.head_revision():
        migrate.upgrade(engine)


def open_store(url: str, *, create: bool = True, clock: Clock | None = None) -> SqlStore:
    """Open (and by default create) the record at `url`, migrated to the current schema.

    create=False is for read-only commands: a missing SQLite file or an empty database raises
    NoRecord ("no record yet") instead of being created, so nothing is written.
    """
    parsed = _parse(url)
    path = _sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None
    if path is not None and not path.exists():
        if not create:
            raise NoRecord(f"no record yet: {path} does not exist")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the folder for {path}: {exc.strerror}") from exc
    engine = _engine(parsed)
    try:
        _prepare_schema(engine, parsed, create)
    except DBAPIError as exc:
        engine.dispose()
        reason = first_error_line(exc)
        raise StoreUnavailable(f"cannot open the record at {_masked(parsed)}: {reason}") from exc
    except StoreError:
        engine.dispose()
        raise
    return SqlStore(engine, clock=clock)
