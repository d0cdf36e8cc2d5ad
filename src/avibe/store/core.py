"""`SqlCore`: what every part of the SQL store stands on (SPEC C1, A3) - the engine, the clock, read and
write transactions (a write retried when a lock wait ran out: SQLite busy, PostgreSQL deadlock or
serialisation failure), PostgreSQL's early lock release with one flush after, and the session row lock
every append takes. The jobs (sessions, entries, state, leases, feeds) are mixins over it (store/sql.py)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from sqlalchemy import Row, bindparam, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError

from avibe.errors import StoreError, StoreUnavailable, UnknownSession
from avibe.ports import Clock
from avibe.store.durable import RAISE_IN_TRANSACTION
from avibe.store.migrate import WRITE_OPTION
from avibe.store.schema import sessions

T = TypeVar("T")
AnyRow = Row[*tuple[Any, ...]]
_ATTEMPTS: Final = 8
_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01", "55P03"})  # serialisation, deadlock, lock n/a
_LOCK_SESSION: Final = (
    select(sessions.c.last_seq, sessions.c.last_at, sessions.c.checkpoint_count)
    .where(sessions.c.id == bindparam("sid"))
    .with_for_update()
)
_SESSION_EXISTS: Final = select(sessions.c.id).where(sessions.c.id == bindparam("sid"))

# PostgreSQL: a transaction whose commit returns before its WAL is flushed (its locks go at once), and one
# whose synchronous commit waits for the flush of the WAL up to it - so of every commit made before it. A
# commit flushes only when its transaction wrote WAL and holds an xid: a transactional logical message
# (no table, nothing any reader sees) does both.
_COMMIT_WITHOUT_FLUSH: Final = text("SET LOCAL synchronous_commit TO OFF")
# Its commit waits for the flush even where the session's synchronous_commit is off (store/durable.py).
_FLUSH: Final = text(
    f"SELECT pg_current_xact_id(), pg_logical_emit_message(true, 'avibe.flush', ''), {RAISE_IN_TRANSACTION}"
)
# Where the server refuses that: an asynchronous commit is on disk within three WAL writer delays.
_WAL_WRITER_DELAY_MS: Final = text("SELECT setting::int FROM pg_settings WHERE name = 'wal_writer_delay'")


def utc_now() -> datetime:
    return datetime.now(UTC)


def _is_retryable(exc: DBAPIError) -> bool:
    if getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    message = str(exc.orig).lower()
    return "database is locked" in message or "database is busy" in message


def first_error_line(exc: BaseException) -> str:
    """The driver's own words, first line only (psycopg adds hints on later lines)."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class SqlCore:
    """The engine and its transactions; `SqlStore` (store/sql.py) adds each job's methods."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        self._engine = engine
        self._now: Callable[[], datetime] = clock.now if clock is not None else utc_now
        self._postgres = engine.dialect.name == "postgresql"
        self._writer_lock = _sqlite_writer_lock(engine) if engine.dialect.name == "sqlite" else None
        self._early_release = self._postgres  # ingest commits release their locks before the flush

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The database URL, password included (pass it to another process to open the same record)."""
        return self._engine.url.render_as_string(hide_password=False)

    @property
    def display_url(self) -> str:
        """The database URL with any password masked, for messages."""
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------------
    def _unavailable(self, exc: DBAPIError) -> StoreError:
        reason = first_error_line(exc)
        if isinstance(exc, OperationalError | InterfaceError):
            return StoreUnavailable(f"the record database {self.display_url} is unavailable: {reason}")
        return StoreError(f"the record database {self.display_url} refused the operation: {reason}")

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as exc:
            raise self._unavailable(exc) from exc

    def _write(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one write transaction; retry when a lock wait ran out."""
        if self._writer_lock is None:
            return self._write_now(work)
        # SQLite: one writer at a time anyway; the threads of this process (all its stores of the file)
        # queue here, woken the moment the lock is free, instead of polling the database's write lock with
        # SQLite's busy sleeps (1 ms ... 100 ms each). Other processes still meet at the database's lock.
        with self._writer_lock:
            return self._write_now(work)

    def _write_now(self, work: Callable[[Connection], T]) -> T:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self._engine.connect() as conn:
                    conn.execution_options(**{WRITE_OPTION: True})
                    with conn.begin():
                        return work(conn)
            except DBAPIError as exc:
                if isinstance(exc, IntegrityError) or not _is_retryable(exc) or attempt == _ATTEMPTS:
                    raise self._unavailable(exc) from exc
                time.sleep(random.uniform(0.01, 0.05) * attempt)  # jitter keeps retries from colliding
        raise AssertionError("unreachable: the loop returns or raises")

    def _wait_for_flush(self) -> None:
        """PostgreSQL: return once every commit made so far is on disk - one statement, its own
        transaction (autocommit), that writes WAL and holds an xid, so its commit flushes the WAL up to
        it. A server that refuses the statement (a role not allowed the function) gets synchronous
        commits from then on, and this waits out the WAL writer's worst case once."""
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").execute(_FLUSH)
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from exc
        except DBAPIError:
            self._early_release = False
            try:
                with self._engine.connect() as conn:
                    delay_ms = int(conn.execute(_WAL_WRITER_DELAY_MS).scalar_one())
            except DBAPIError as exc:
                raise self._unavailable(exc) from exc
            time.sleep(3 * delay_ms / 1000 + 0.05)

    def _lock_session(self, conn: Connection, session_id: str) -> AnyRow:
        """The session row, locked until the transaction ends (a no-op clause on SQLite, where
        BEGIN IMMEDIATE already holds the database's write lock)."""
        row = conn.execute(_LOCK_SESSION, {"sid": session_id}).first()
        if row is None:
            raise self._unknown(session_id)
        return row

    def _require_session(self, conn: Connection, session_id: str) -> None:
        if conn.execute(_SESSION_EXISTS, {"sid": session_id}).first() is None:
            raise self._unknown(session_id)

    @staticmethod
    def _unknown(session_id: str) -> UnknownSession:
        return UnknownSession(f"no session {session_id!r} in the record (`vibe sessions` lists them)")


_WRITER_LOCKS: dict[str, threading.RLock] = {}
_WRITER_LOCKS_GUARD = threading.Lock()


def _sqlite_writer_lock(engine: Engine) -> threading.RLock:
    """One lock per SQLite file in this process, shared by every store open on it (a `vibe serve` host
    opens one per hosted session); an in-memory database has its own."""
    database = engine.url.database or ""
    if database in {"", ":memory:"} or database.startswith("file:"):
        return threading.RLock()
    key = str(Path(database).expanduser().resolve())
    with _WRITER_LOCKS_GUARD:
        return _WRITER_LOCKS.setdefault(key, threading.RLock())
