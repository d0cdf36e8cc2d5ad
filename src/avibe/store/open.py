"""Open the record: `open_store(url)` builds the engine, sets SQLite up (WAL, busy timeout, BEGIN
IMMEDIATE for writes) and applies the migrations. Connection failures become `StoreUnavailable`, one line
with the password masked.

`read_only=True` is for the commands that only look (`vibe log`, `sessions`, `checkpoints`): the SQLite
file is opened with `mode=ro` (never switched to WAL, never migrated, never created) and a PostgreSQL
session is `default_transaction_read_only`, so the database is byte-for-byte what it was (docs/serve.md).
An in-memory SQLite database is refused unless `in_memory=True` says it is meant (the eval's scratch
stores, tests): a record that vanishes when the process ends is no record."""

from __future__ import annotations

import re
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from avibe.errors import NoRecord, StoreError, StoreUnavailable
from avibe.ports import Clock
from avibe.store import migrate
from avibe.store.core import first_error_line
from avibe.store.durable import force_synchronous_commit
from avibe.store.sql import SqlStore

BUSY_TIMEOUT_MS: Final = 30_000
# Reads of a large record (a range query over a session of a million entries): a page cache of 64 MiB per
# connection (SQLite's default is 2 MiB) and the file memory-mapped, so pages come without a read() copy.
SQLITE_TUNING: Final = (
    "PRAGMA cache_size = -65536",
    "PRAGMA mmap_size = 268435456",
    "PRAGMA temp_store = MEMORY",
)
PG_CONNECT_TIMEOUT_S: Final = 10
SQLITE_POOL_SIZE: Final = 16


def _masked(url: URL) -> str:
    return url.render_as_string(hide_password=True)


_CREDENTIALS = re.compile(r"(://[^:/@]*:).*@")


def mask_unparsed(url: str) -> str:
    """A URL that does not parse, with whatever stands where a password would be masked."""
    return _CREDENTIALS.sub(r"\1***@", url)


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: urllib's, e.g. an unclosed IPv6 bracket
        hint = "use sqlite:///PATH or postgresql+psycopg://..."
        raise StoreUnavailable(f"{mask_unparsed(url)!r} is not a database URL; {hint}") from None
    if parsed.get_backend_name() not in {"sqlite", "postgresql"}:
        raise StoreUnavailable(f"{_masked(parsed)}: only SQLite and PostgreSQL databases are supported")
    if parsed.drivername == "postgresql":  # plain postgresql:// means the driver Avibe ships (psycopg 3)
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_in_memory(url: str) -> bool:
    """`sqlite://`, `sqlite:///:memory:` and SQLite URI forms with mode=memory: gone when the process ends."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return False
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    memory_mode = parsed.query.get("mode") == "memory" or "mode=memory" in database
    return database in {"", ":memory:"} or (database.startswith("file:") and memory_mode)


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
        for pragma in SQLITE_TUNING:
            cursor.execute(pragma)
    finally:
        cursor.close()
    # Unicode-aware lower() so `--grep` ignores case beyond ASCII, as PostgreSQL does.
    dbapi_connection.create_function("lower", 1, _lower, deterministic=True)


def _on_sqlite_connect_read_only(dbapi_connection: sqlite3.Connection, record: ConnectionPoolEntry) -> None:
    """A reader changes nothing: no journal-mode switch (the file keeps the mode it has)."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA query_only = ON")
        for pragma in SQLITE_TUNING:
            cursor.execute(pragma)
    finally:
        cursor.close()
    dbapi_connection.create_function("lower", 1, _lower, deterministic=True)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot change the database, nor create files beside it. With no `-wal` file the
    database was closed cleanly and holds everything in its main file: read it as immutable (no locks, no
    `-shm`/`-wal` created; a writer that starts meanwhile writes to its new WAL, not to this file, until
    its first checkpoint). With a `-wal` file a writer is (or was) at work: read through the WAL with
    `mode=ro`, using the `-shm`/`-wal` files that already exist."""
    resolved = path.resolve()
    wal = resolved.with_name(resolved.name + "-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    uri = f"file:{quote(str(resolved))}?{flags}"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)


def _on_sqlite_begin(conn: Connection) -> None:
    # Writers take the write lock up front: two appenders never both read the same last_seq. Sent to the
    # driver directly (the hot path of every append; SQLAlchemy's statement machinery is not needed for a
    # BEGIN), its error wrapped as SQLAlchemy would, so a busy database is retried like any other lock wait.
    immediate = conn.get_execution_options().get(migrate.WRITE_OPTION, False)
    statement = "BEGIN IMMEDIATE" if immediate else "BEGIN"
    driver = cast(sqlite3.Connection, conn.connection.driver_connection)
    try:
        driver.execute(statement)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(statement, (), exc, sqlite3.Error) from exc


def _engine(url: URL, read_only: bool = False) -> Engine:
    kwargs: dict[str, Any] = {}
    path = _sqlite_path(url)
    if url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000}
        if path is None:
            kwargs["poolclass"] = StaticPool  # one shared in-memory database
            kwargs["connect_args"]["check_same_thread"] = False
        else:
            # Keep the connections of a busy host (`vibe serve` reads from many threads at once) open:
            # a connection opened per read would set itself up and warm a cold page cache every time.
            kwargs |= {"pool_size": SQLITE_POOL_SIZE, "max_overflow": SQLITE_POOL_SIZE}
            if read_only:
                kwargs["creator"] = partial(_connect_read_only, path)
    else:
        args: dict[str, Any] = {}
        if "connect_timeout" not in url.query:
            args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
        if read_only:
            args["options"] = "-c default_transaction_read_only=on"
        kwargs["connect_args"] = args
    try:
        engine = create_engine(url, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise StoreUnavailable(f"cannot use {_masked(url)}: {exc}") from exc
    if url.get_backend_name() == "sqlite":
        on_connect = _on_sqlite_connect_read_only if read_only and path is not None else _on_sqlite_connect
        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
    elif not read_only:  # a 202 (any write reported stored) is on disk whatever the server's setting
        event.listen(engine, "connect", force_synchronous_commit)
    return engine


def _prepare_schema(engine: Engine, url: URL, create: bool, read_only: bool) -> None:
    current = migrate.current_revision(engine)
    if current is None and not create:
        raise NoRecord(f"no record yet: {_masked(url)} holds no Avibe data")
    if current != migrate.head_revision():
        if read_only:
            raise StoreUnavailable(
                f"the record at {_masked(url)} has schema {current}, this Avibe reads "
                f"{migrate.head_revision()}; any writing command (e.g. `vibe run`) upgrades it"
            )
        migrate.upgrade(engine)


def open_store(
    url: str,
    *,
    create: bool = True,
    clock: Clock | None = None,
    read_only: bool = False,
    in_memory: bool = False,
) -> SqlStore:
    """Open (and by default create) the record at `url`, migrated to the current schema.

    create=False: a missing SQLite file or an empty database raises NoRecord ("no record yet") instead of
    being created. read_only=True (implies create=False) is for the commands that only look: nothing in
    the database changes, not even its journal mode. in_memory=True allows `sqlite://` (a scratch store);
    without it an in-memory URL is refused.
    """
    create = create and not read_only
    if is_in_memory(url) and not in_memory:
        raise StoreUnavailable(
            f"{url!r} is an in-memory database: the record would vanish when vibe exits; "
            "use sqlite:///PATH (a file) or postgresql+psycopg://..."
        )
    parsed = _parse(url)
    path = _sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None
    if path is not None and not path.exists():
        if not create:
            raise NoRecord(f"no record yet: {path} does not exist")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the folder for {path}: {exc.strerror}") from exc
    if path is not None and path.exists() and not path.is_file():
        raise StoreUnavailable(f"cannot open the record at {path}: it is not a file")
    engine = _engine(parsed, read_only)
    try:
        _prepare_schema(engine, parsed, create, read_only)
    except DBAPIError as exc:
        engine.dispose()
        reason = first_error_line(exc)
        raise StoreUnavailable(f"cannot open the record at {_masked(parsed)}: {reason}") from exc
    except StoreError:
        engine.dispose()
        raise
    return SqlStore(engine, clock=clock)
