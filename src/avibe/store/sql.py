"""`SqlStore`: the record on SQLAlchemy 2 - a SQLite file by default, PostgreSQL by URL (SPEC C1, A3).

Append-only: entries and checkpoints can be added and read, never changed or removed. `seq` is dense per
session and never reused: every append locks the session row (PostgreSQL `SELECT ... FOR UPDATE`; SQLite
`BEGIN IMMEDIATE`, which takes the database's write lock) and gives out `last_seq + 1`. Lock waits that
run out (SQLite busy, PostgreSQL deadlock/serialisation failure) are retried a few times.

Group commit: appends that arrive at once from several threads (concurrent deliveries of `vibe serve`)
share one transaction. The first becomes the leader and commits whatever is queued meanwhile; each caller
returns only after the transaction holding its entries committed. Should that transaction fail, each
append of the group is retried on its own, so one bad append (an unknown session) fails alone.
`append_each` is the same commit for a caller that holds many independent appends at once (`vibe
serve`'s ingest writer): one transaction for all of them, an outcome for each.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from sqlalchemy import (
    Row,
    Text,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.sql.elements import ColumnElement

from avibe.errors import SessionHosted, StoreError, StoreUnavailable, UnknownFeed, UnknownSession
from avibe.ports import Clock, Lease, LeaseGrant, LeaseOwner, StoredCheckpoint
from avibe.record.checkpoint import Carry, MemoItem, Provenance
from avibe.record.entries import KINDS, CallRecord, Entry, EntryQuery, Kind, NewEntry, SessionInfo, Source
from avibe.record.feeds import FEED_KINDS, Feed
from avibe.record.state import EncodedDocument
from avibe.store.durable import RAISE_IN_TRANSACTION
from avibe.store.migrate import WRITE_OPTION
from avibe.store.schema import checkpoints, entries, session_leases, session_state, sessions, sources

T = TypeVar("T")
AnyRow = Row[*tuple[Any, ...]]
_ATTEMPTS: Final = 8
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01", "55P03"})  # serialisation, deadlock, lock n/a
_ENTRY_COLUMNS: Final = (
    entries.c.session,
    entries.c.seq,
    entries.c.kind,
    entries.c.source_name,
    entries.c.source_ref,
    entries.c.text,
    entries.c.at,
    entries.c.turn_id,
    entries.c.calls,
    entries.c.source_event,
)


# Statements built once: appends are the hot path (see benchmarks/record_append.py).
_LOCK_SESSION: Final = (
    select(sessions.c.last_seq, sessions.c.last_at, sessions.c.checkpoint_count)
    .where(sessions.c.id == bindparam("sid"))
    .with_for_update()
)
_SESSION_EXISTS: Final = select(sessions.c.id).where(sessions.c.id == bindparam("sid"))
_DELIVERED: Final = select(*_ENTRY_COLUMNS, entries.c.delivery_key).where(
    entries.c.session == bindparam("sid"), entries.c.delivery_key.in_(bindparam("keys", expanding=True))
)
# The usual case, one key (a callback, a tick): a plain statement, cached whole (no IN list to render).
_DELIVERED_ONE: Final = select(*_ENTRY_COLUMNS, entries.c.delivery_key).where(
    entries.c.session == bindparam("sid"), entries.c.delivery_key == bindparam("key")
)
# Many sessions' keys at once (the pairs are picked out of what it finds).
_DELIVERED_ANY: Final = select(*_ENTRY_COLUMNS, entries.c.delivery_key).where(
    entries.c.session.in_(bindparam("sids", expanding=True)),
    entries.c.delivery_key.in_(bindparam("keys", expanding=True)),
)
# Locks the rows of several sessions, in id order, and reads where each stands (its last seq).
_LOCK_SESSIONS: Final = (
    select(sessions.c.id, sessions.c.last_seq)
    .where(sessions.c.id.in_(bindparam("sids", expanding=True)))
    .order_by(sessions.c.id)
    .with_for_update()
)
# A session's entries from a seq on, in order (with and without a limit).
_ENTRIES_FROM: Final = (
    select(*_ENTRY_COLUMNS)
    .where(entries.c.session == bindparam("sid"), entries.c.seq >= bindparam("seq_from"))
    .order_by(entries.c.seq)
)
_ENTRIES_FROM_LIMITED: Final = _ENTRIES_FROM.limit(bindparam("limit"))
# A group commit takes at most this many appends (and stops adding once it holds _GROUP_ENTRIES entries).
_GROUP_APPENDS: Final = 512
_GROUP_ENTRIES: Final = 5_000
_INSERT_ENTRY: Final = insert(entries)
_FEEDS_NAMED: Final = select(sources).where(sources.c.id.in_(bindparam("ids", expanding=True)))
# PostgreSQL: every append tells the hosts listening which session got input (LISTEN/NOTIFY, issue 12);
# the notification goes out when the transaction commits, never for one rolled back.
NOTIFY_CHANNEL: Final = "avibe_entries"
_NOTIFY: Final = text("SELECT pg_notify(:channel, :session)")
# Gives out `count` seqs of a session and moves its last_at on to `newest` if later. For sessions already
# locked and read (_LOCK_SESSIONS) it runs as one statement with a parameter set per session (a batch of
# many sessions' inputs: one round trip, not one per session).
_NEWEST: Final = bindparam("newest", type_=sessions.c.last_at.type)
_ADVANCE: Final = (
    update(sessions)
    .where(sessions.c.id == bindparam("sid"))
    .values(
        last_seq=sessions.c.last_seq + bindparam("count"),
        last_at=case(
            (or_(sessions.c.last_at.is_(None), sessions.c.last_at < _NEWEST), _NEWEST),
            else_=sessions.c.last_at,
        ),
    )
)
# One session, not yet locked: returns its new last_seq (no row: no such session); on PostgreSQL it locks
# the session row until the transaction ends.
_ADVANCE_SESSION: Final = _ADVANCE.returning(sessions.c.last_seq)


# A session state document, bound as the JSON text it was checked as (encoded once, not again by the
# column's type); PostgreSQL reads it into its JSONB column.
_STATE_WHERE: Final = and_(
    session_state.c.session == bindparam("sid"), session_state.c.key == bindparam("skey")
)
_STATE_AT: Final = bindparam("at", type_=session_state.c.updated_at.type)


def _state_statements(postgres: bool) -> tuple[Any, Any]:
    """The UPDATE and the INSERT of a state document (params sid, skey, value: its JSON text, at)."""
    value: Any = bindparam("value", type_=Text)
    if postgres:
        value = sql_cast(value, JSONB)
    changing = update(session_state).where(_STATE_WHERE).values(value=value, updated_at=_STATE_AT)
    adding = insert(session_state).values(session=bindparam("sid"), key=bindparam("skey"), value=value,
                                          updated_at=_STATE_AT)  # fmt: skip
    return changing, adding


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


def _utc_now() -> datetime:
    return datetime.now(UTC)


def check_text(field: str, value: str) -> None:
    """Refuse what no backend can store faithfully: NUL bytes and lone surrogates."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    nul = value.find("\x00")
    if nul >= 0:
        raise ValueError(f"{field} contains a NUL byte (\\x00) at position {nul}; NUL cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field} is not valid Unicode (lone surrogate at position {exc.start})") from exc


def _check_aware(field: str, at: datetime) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{field} {at.isoformat()} has no time zone; pass an aware datetime (UTC)")


def _check_new_entry(entry: NewEntry) -> None:
    if entry.kind not in KINDS:
        raise ValueError(f"unknown entry kind {entry.kind!r}; expected one of {', '.join(KINDS)}")
    for field, value in (
        ("text", entry.text),
        ("source name", entry.source.name),
        ("source ref", entry.source.ref),
        ("source event", entry.source.event),
        ("turn id", entry.turn_id),
        ("delivery key", entry.delivery_key),
    ):
        check_text(field, value)
    if len(entry.delivery_key) > 200:
        raise ValueError(f"delivery key is {len(entry.delivery_key)} characters; at most 200 fit")
    for call in entry.calls:
        check_text("tool call name", call.name)
        check_text("tool call arguments", call.arguments)
    if len(entry.turn_id) > 128:
        raise ValueError(f"turn id is {len(entry.turn_id)} characters; at most 128 fit")
    _check_aware("entry time", entry.at)


def _check_json(field: str, value: object) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} is not plain JSON: {exc}") from exc


def _is_retryable(exc: DBAPIError) -> bool:
    if getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    message = str(exc.orig).lower()
    return "database is locked" in message or "database is busy" in message


def first_error_line(exc: BaseException) -> str:
    """The driver's own words, first line only (psycopg adds hints on later lines)."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


_KIND_SET: Final = frozenset(KINDS)


def _entry(row: AnyRow, sources_seen: dict[tuple[str, str, str, str], Source] | None = None) -> Entry:
    """An entry from a row of _ENTRY_COLUMNS. `sources_seen` shares equal Sources between the rows of one
    read (a range query makes thousands of entries from a handful of sources)."""
    session, seq, kind, name, ref, text_, at, turn_id, calls, event = row[:10]
    if kind not in _KIND_SET:
        raise StoreError(f"entry {session}#{seq} has unknown kind {kind!r}; the record is damaged")
    if sources_seen is None:
        source = Source(cast(Kind, kind), name, ref, event)
    else:
        source_key = (kind, name, ref, event)
        found = sources_seen.get(source_key)
        if found is None:
            found = sources_seen[source_key] = Source(cast(Kind, kind), name, ref, event)
        source = found
    made = tuple(CallRecord(c["name"], c["arguments"]) for c in calls) if calls else ()
    return Entry(session, seq, source, text_, at, turn_id, made)


def _session_info(row: AnyRow) -> SessionInfo:
    return SessionInfo(
        id=row.id, created_at=row.created_at, title=row.title, entry_count=row.last_seq, last_at=row.last_at
    )


def _checkpoint(row: AnyRow) -> StoredCheckpoint:
    return StoredCheckpoint(
        session=row.session,
        number=row.number,
        at=row.at,
        mind=row.mind,
        memo=tuple(MemoItem.from_dict(item) for item in row.memo),
        scene=row.scene,
        upto_seq=row.upto_seq,
        carry=Carry.from_dict(row.meta),
        provenance=Provenance.from_dict(row.meta),
    )


def _query_filters(query: EntryQuery) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [entries.c.session == query.session]
    if query.kinds is not None:
        conditions.append(entries.c.kind.in_(sorted(query.kinds)))
    if query.seq_from is not None:
        conditions.append(entries.c.seq >= query.seq_from)
    if query.seq_to is not None:
        conditions.append(entries.c.seq <= query.seq_to)
    if query.since is not None:
        conditions.append(entries.c.at >= query.since)
    if query.until is not None:
        conditions.append(entries.c.at <= query.until)
    if query.text:
        conditions.append(func.lower(entries.c.text).contains(query.text.lower(), autoescape=True))
    return conditions


def _check_query(query: EntryQuery) -> None:
    if query.seq_from is not None and query.seq_to is not None and query.seq_from > query.seq_to:
        raise ValueError(f"seq range is empty: from {query.seq_from} is after to {query.seq_to}")
    for field, at in (("since", query.since), ("until", query.until)):
        if at is not None:
            _check_aware(field, at)
    if query.since is not None and query.until is not None and query.since > query.until:
        raise ValueError(f"time range is empty: since {query.since} is after until {query.until}")
    if query.limit is not None and query.limit < 0:
        raise ValueError(f"limit must be 0 or more, got {query.limit}")
    if query.text is not None:
        check_text("search text", query.text)


class SqlStore:
    """The `RecordStore` on a SQL database. Open it with `avibe.store.open_store(url)`."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        self._engine = engine
        self._now: Callable[[], datetime] = clock.now if clock is not None else _utc_now
        self._postgres = engine.dialect.name == "postgresql"
        self._writer_lock = _sqlite_writer_lock(engine) if engine.dialect.name == "sqlite" else None
        self._update_state, self._insert_state = _state_statements(self._postgres)
        self._early_release = self._postgres  # ingest commits release their locks before the flush
        # Group commit (see the module's docstring): appends waiting for the leader's next transaction.
        self._group_lock = threading.Lock()
        self._group_queue: list[_Append] = []
        self._group_leader = False

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

    def __enter__(self) -> SqlStore:
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

    # -- sessions ----------------------------------------------------------------------------------
    def create_session(self, title: str = "", session_id: str | None = None) -> SessionInfo:
        check_text("session title", title)
        if session_id is not None:
            if not _SESSION_ID.fullmatch(session_id):
                raise ValueError(
                    f"session id {session_id!r} is not valid: use 1-64 letters, digits, '.', '_', ':', '-'"
                )
            return self._insert_session(session_id, title)
        for _ in range(5):  # 16.7 million ids per day; a clash is rare, retrying makes it harmless
            try:
                return self._insert_session(self._new_session_id(), title)
            except _SessionExists:
                continue
        raise StoreError("could not find a free session id after 5 tries")

    def _new_session_id(self) -> str:
        return f"s-{self._now().astimezone(UTC):%Y%m%d}-{secrets.token_hex(3)}"

    def _insert_session(self, session_id: str, title: str) -> SessionInfo:
        created = self._now()
        _check_aware("clock time", created)

        def work(conn: Connection) -> None:
            if conn.execute(select(sessions.c.id).where(sessions.c.id == session_id)).first():
                raise _SessionExists(f"session {session_id!r} already exists")
            values = {"id": session_id, "title": title, "created_at": created}
            conn.execute(insert(sessions).values(**values, last_seq=0, checkpoint_count=0))

        try:
            self._write(work)
        except StoreError as exc:  # a concurrent creator won the race for the same id
            if isinstance(exc.__cause__, IntegrityError):
                raise _SessionExists(f"session {session_id!r} already exists") from exc
            raise
        return SessionInfo(id=session_id, created_at=created.astimezone(UTC), title=title)

    def get_session(self, session_id: str) -> SessionInfo:
        with self._reading() as conn:
            row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None:
            raise self._unknown(session_id)
        return _session_info(row)

    def latest_session(self) -> SessionInfo | None:
        """The session with the most recent activity (last entry, else creation)."""
        activity = func.coalesce(sessions.c.last_at, sessions.c.created_at)
        stmt = select(sessions).order_by(activity.desc(), sessions.c.created_at.desc(), sessions.c.id.desc())
        with self._reading() as conn:
            row = conn.execute(stmt.limit(1)).first()
        return None if row is None else _session_info(row)

    def list_sessions(self) -> list[SessionInfo]:
        """All sessions, oldest first."""
        with self._reading() as conn:
            rows = conn.execute(select(sessions).order_by(sessions.c.created_at, sessions.c.id)).all()
        return [_session_info(row) for row in rows]

    # -- entries -----------------------------------------------------------------------------------
    def append(self, entry: NewEntry) -> Entry:
        """Store one entry and give it the session's next seq (atomic across processes)."""
        return self.append_many([entry])[0]

    def append_many(self, new: Sequence[NewEntry]) -> list[Entry]:
        """Store several entries in one transaction, in the given order (imports, benchmarks)."""
        for entry in new:
            _check_new_entry(entry)
        if not new:
            return []
        return self._group_append(_Append(tuple(new)))

    def _group_append(self, mine: _Append) -> list[Entry]:
        """Queue `mine`; the first append that finds no leader commits the queue in one transaction,
        then hands the lead to the next waiting append (if any). Returns once `mine` is committed."""
        with self._group_lock:
            self._group_queue.append(mine)
            lead = not self._group_leader
            self._group_leader = True
        if not lead:
            try:
                mine.wake.wait()
            except BaseException:  # interrupted while waiting (Ctrl-C): never leave the group leaderless
                with self._group_lock:
                    if mine.lead:  # promoted, still first in the queue: drop it, promote the next
                        mine.lead = False
                        self._group_queue.remove(mine)
                        self._pass_lead()
                raise
            if not mine.lead:
                return mine.outcome()
        # The leader: commit a group (it holds `mine`: the queue is served in order), then pass the lead.
        group: list[_Append] = []
        try:
            with self._group_lock:
                count = 0
                for queued in self._group_queue:
                    full = len(group) == _GROUP_APPENDS or count + len(queued.entries) > _GROUP_ENTRIES
                    if group and full:
                        break
                    group.append(queued)
                    count += len(queued.entries)
                del self._group_queue[: len(group)]
            self._commit_group(group)
        finally:
            with self._group_lock:
                for queued in group:
                    if not queued.finished:  # the leader was interrupted (KeyboardInterrupt)
                        queued.finish(error=StoreError("the append was interrupted before it committed"))
                self._pass_lead()
        return mine.outcome()

    def _pass_lead(self) -> None:
        """(Holding the group lock.) The next queued append leads, or there is no leader."""
        if self._group_queue:
            self._group_queue[0].lead = True
            self._group_queue[0].wake.set()
        else:
            self._group_leader = False

    def _commit_group(self, group: list[_Append]) -> None:
        """One transaction for the whole group; if it fails, each append on its own."""
        if len(group) > 1:
            everything = [entry for append in group for entry in append.entries]
            try:
                stored = self._write(partial(self._append_in, new=everything))
            except StoreUnavailable as exc:  # the database is away (and a commit may have been cut off:
                for append in group:  # retrying could record unkeyed entries twice): each gets the error
                    append.finish(error=exc)
                return
            except Exception:  # refused before commit (an unknown session): each append alone, own outcome
                pass
            else:
                at = 0
                for append in group:
                    append.finish(result=stored[at : at + len(append.entries)])
                    at += len(append.entries)
                return
        for append in group:
            try:
                append.finish(result=self._write(partial(self._append_in, new=append.entries)))
            except Exception as exc:  # handed to the caller that made this append
                append.finish(error=exc)

    def _append_in(
        self,
        conn: Connection,
        new: Sequence[NewEntry],
        repeats: list[bool] | None = None,
        quiet: Sequence[bool] = (),
    ) -> list[Entry]:
        """Store `new` (in this transaction). `repeats`, when given, gets for each entry whether its
        delivery key was recorded before (its entry is the earlier one). `quiet[i]`: entry i wakes no host
        (a queued input): a session all of whose new entries are quiet is not NOTIFYed."""
        sessions_in = sorted({entry.session for entry in new})  # a fixed order: no two batches deadlock
        keyed = any(entry.delivery_key for entry in new)
        # Where each session stands, read under its lock (None: one session, locked by its UPDATE below).
        # The keys must be looked up under the session lock (a concurrent delivery of the same key commits
        # first, then this one sees it); SQLite's BEGIN IMMEDIATE holds the write lock already. One statement
        # locks every session of the batch, in id order (no two batches deadlock), and reads its last seq.
        locked: dict[str, int] | None = None
        if len(sessions_in) > 1 or (keyed and self._postgres):
            rows = conn.execute(_LOCK_SESSIONS, {"sids": sessions_in})
            locked = {row.id: int(row.last_seq) for row in rows}
            for session_id in sessions_in:
                if session_id not in locked:
                    raise self._unknown(session_id)
        # A delivery key seen before is a repeat: it gets the entry it made (`made[i]` is None for those).
        seen = self._delivered(conn, new) if keyed else {}
        first_of_key: dict[tuple[str, str], int] = {}
        fresh_index: list[int] = []
        counts: dict[str, int] = {}
        newest: dict[str, datetime] = {}
        for i, entry in enumerate(new):
            if entry.delivery_key:
                key = (entry.session, entry.delivery_key)
                if key in seen or key in first_of_key:
                    continue
                first_of_key[key] = i
            fresh_index.append(i)
            counts[entry.session] = counts.get(entry.session, 0) + 1
            at = newest.get(entry.session)
            newest[entry.session] = entry.at if at is None or entry.at > at else at
        # Give out the seqs and move last_at on: one statement for every session (a session every entry of
        # which is a repeat exists, and gets nothing).
        advancing = [session_id for session_id in sessions_in if session_id in counts]
        advance = [{"sid": sid, "count": counts[sid], "newest": newest[sid]} for sid in advancing]
        next_seq: dict[str, int] = {}
        if locked is not None:
            if advance:
                conn.execute(_ADVANCE, advance)
            next_seq = {session_id: locked[session_id] + 1 for session_id in advancing}
        elif advance:  # one session: its UPDATE locks the row (PostgreSQL) and says where it stands
            last_seq = conn.execute(_ADVANCE_SESSION, advance[0]).scalar_one_or_none()
            if last_seq is None:
                raise self._unknown(advancing[0])
            next_seq[advancing[0]] = int(last_seq) - counts[advancing[0]] + 1
        made: list[Entry | None] = [None] * len(new)
        for i in fresh_index:
            entry = new[i]
            seq = next_seq[entry.session]
            next_seq[entry.session] = seq + 1
            made[i] = Entry(
                entry.session, seq, entry.source, entry.text, entry.at, entry.turn_id, entry.calls
            )
        if fresh_index:
            conn.execute(
                _INSERT_ENTRY, [_entry_values(cast(Entry, made[i]), new[i].delivery_key) for i in fresh_index]
            )
            if self._postgres:  # wake the session's host wherever it runs (issue 12)
                waking = sorted({new[i].session for i in fresh_index if not (quiet and quiet[i])})
                if waking:  # one statement, a parameter set per session
                    conn.execute(_NOTIFY, [{"channel": NOTIFY_CHANNEL, "session": sid} for sid in waking])
        stored: list[Entry] = []
        for i, entry in enumerate(new):
            found = made[i]
            if found is None:
                key = (entry.session, entry.delivery_key)
                found = seen[key] if key in seen else made[first_of_key[key]]
            assert found is not None
            if repeats is not None:
                repeats.append(made[i] is None)
            stored.append(
                found if found.at.tzinfo is UTC else dataclasses.replace(found, at=found.at.astimezone(UTC))
            )
        return stored

    def append_each(
        self,
        new: Sequence[NewEntry],
        *,
        feeds: Mapping[str, Feed] | None = None,
        quiet: Sequence[bool] = (),
    ) -> list[Appended]:
        """Append each entry on its own account - in one transaction while none fails - and give each its
        outcome: its entry (the earlier one, `repeat`, when its delivery key was recorded before) or the
        error that refused it alone (an unknown session). `feeds`: feed id -> the feed an entry's request
        was checked against (its secret, limits, wake); an entry whose source names one is stored only
        while that feed is, in this transaction, still live and unchanged, else it gets FeedChanged.
        `quiet[i]`: entry i wakes no host (no NOTIFY for it)."""
        outcomes: list[Appended | None] = [None] * len(new)
        valid: list[int] = []
        for i, entry in enumerate(new):
            try:
                _check_new_entry(entry)
            except (TypeError, ValueError) as exc:
                outcomes[i] = Appended(error=exc)
            else:
                valid.append(i)
        checked = feeds or {}
        # PostgreSQL: each transaction commits without waiting for its WAL flush, so the session rows it
        # locked are free for the next batch (another host's) at once, instead of after a disk flush
        # (issue 30: three hosts' batches queued on the same rows, a flush each); one flush then covers
        # them all before any outcome is given (202 still means the input is in the record on disk).
        early = self._early_release
        if len(valid) > 1:
            try:
                together = self._write(partial(self._append_each_in, new=new, only=valid, feeds=checked,
                                               quiet=quiet, early=early))  # fmt: skip
            except StoreUnavailable as exc:  # away (a commit may have been cut off): each gets the error
                for i in valid:
                    outcomes[i] = Appended(error=exc)
                valid = []
            except Exception:  # refused before commit (an unknown session): each alone, its own outcome
                pass
            else:
                for i, outcome in together.items():
                    outcomes[i] = outcome
                valid = []
        for i in valid:
            try:
                alone = self._write(partial(self._append_each_in, new=new, only=[i], feeds=checked,
                                            quiet=quiet, early=early))  # fmt: skip
                outcomes[i] = alone[i]
            except Exception as exc:  # handed to the caller that made this append
                outcomes[i] = Appended(error=exc)
        stored = [i for i, outcome in enumerate(outcomes) if outcome is not None and outcome.entry]
        if early and stored:
            try:
                self._wait_for_flush()
            except StoreError as exc:  # committed, perhaps not on disk: nobody is told it was recorded
                for i in stored:
                    outcomes[i] = Appended(error=exc)
        return [
            outcome if outcome is not None else Appended(error=StoreError("not appended"))
            for outcome in outcomes
        ]

    def _append_each_in(
        self,
        conn: Connection,
        new: Sequence[NewEntry],
        only: Sequence[int],
        feeds: Mapping[str, Feed],
        quiet: Sequence[bool],
        early: bool = False,
    ) -> dict[int, Appended]:
        if early:  # PostgreSQL: this transaction's commit does not wait for the disk (see append_each)
            conn.execute(_COMMIT_WITHOUT_FLUSH)
        outcomes: dict[int, Appended] = {}
        named = sorted({new[i].source.ref for i in only if new[i].source.ref in feeds})
        if named:
            current = {row.id: _feed(row) for row in conn.execute(_FEEDS_NAMED, {"ids": named})}
            for i in only:
                ref = new[i].source.ref
                if ref in feeds and not _same_feed(current.get(ref), feeds[ref]):
                    outcomes[i] = Appended(error=FeedChanged(f"the feed {ref!r} changed since it was read"))
        keep = [i for i in only if i not in outcomes]
        if keep:
            repeats: list[bool] = []
            stored = self._append_in(
                conn, [new[i] for i in keep], repeats, [bool(quiet and quiet[i]) for i in keep]
            )
            for i, entry, repeat in zip(keep, stored, repeats, strict=True):
                outcomes[i] = Appended(entry=entry, repeat=repeat)
        return outcomes

    @staticmethod
    def _delivered(conn: Connection, new: Sequence[NewEntry]) -> dict[tuple[str, str], Entry]:
        """The entries already recorded under the delivery keys of `new`."""
        keyed = {(e.session, e.delivery_key) for e in new if e.delivery_key}
        found: dict[tuple[str, str], Entry] = {}
        sessions_keyed = sorted({session for session, _ in keyed})
        if len(sessions_keyed) > 1:  # one statement for all (a batch of many sessions' inputs)
            params = {"sids": sessions_keyed, "keys": sorted({key for _, key in keyed})}
            for row in conn.execute(_DELIVERED_ANY, params):
                if (row.session, row.delivery_key) in keyed:
                    found[(row.session, row.delivery_key)] = _entry(row)
            return found
        for session_id in sessions_keyed:
            keys = sorted(key for session, key in keyed if session == session_id)
            rows = (
                conn.execute(_DELIVERED_ONE, {"sid": session_id, "key": keys[0]})
                if len(keys) == 1
                else conn.execute(_DELIVERED, {"sid": session_id, "keys": keys})
            )
            for row in rows:
                found[(session_id, row.delivery_key)] = _entry(row)
        return found

    def query(self, query: EntryQuery) -> list[Entry]:
        """Entries of one session matching every filter, in seq (= time) order."""
        _check_query(query)
        plain = query == EntryQuery(query.session, seq_from=query.seq_from, limit=query.limit)
        if plain:  # "what came after seq N" (an agent's inbox, every step): a statement built once
            stmt: Any = _ENTRIES_FROM if query.limit is None else _ENTRIES_FROM_LIMITED
            params = {"sid": query.session, "seq_from": query.seq_from or 0, "limit": query.limit}
        else:
            stmt = select(*_ENTRY_COLUMNS).where(and_(*_query_filters(query))).order_by(entries.c.seq)
            if query.limit is not None:
                stmt = stmt.limit(query.limit)
            params = {}
        with self._reading() as conn:
            rows = conn.execute(stmt, params).all()
            if not rows:  # rows found prove the session exists; none may mean there is no such session
                self._require_session(conn, query.session)
        seen: dict[tuple[str, str, str, str], Source] = {}
        return [_entry(row, seen) for row in rows]

    # -- checkpoints -------------------------------------------------------------------------------
    def save_checkpoint(
        self,
        checkpoint: StoredCheckpoint,
        *,
        state_key: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> StoredCheckpoint:
        """Store a checkpoint as the session's next number (the given `number` is ignored) - and, when
        given, the session state it implies, in the same transaction (a crash leaves both or neither)."""
        _check_aware("checkpoint time", checkpoint.at)
        for field, value in (("mind", checkpoint.mind), ("scene", checkpoint.scene)):
            check_text(field, value)
        for item in checkpoint.memo:
            check_text(f"memo text of #{item.seq}", item.text)
        memo, meta = checkpoint.memo_dicts(), checkpoint.meta  # JSON only here, in the store adapter
        _check_json("checkpoint memo", memo)
        _check_json("checkpoint meta", meta)
        document = self._state_document(state_key, state) if state_key is not None else None

        def work(conn: Connection) -> int:
            number = int(self._lock_session(conn, checkpoint.session).checkpoint_count) + 1
            values = {"session": checkpoint.session, "number": number, "at": checkpoint.at,
                      "mind": checkpoint.mind, "memo": memo, "scene": checkpoint.scene,
                      "upto_seq": checkpoint.upto_seq, "meta": meta}  # fmt: skip
            conn.execute(insert(checkpoints).values(**values))
            conn.execute(
                update(sessions).where(sessions.c.id == checkpoint.session).values(checkpoint_count=number)
            )
            if state_key is not None and document is not None:
                self._upsert_state(conn, checkpoint.session, state_key, document)
            return number

        number = self._write(work)
        return dataclasses.replace(checkpoint, number=number, at=checkpoint.at.astimezone(UTC))

    def list_checkpoints(self, session_id: str) -> list[StoredCheckpoint]:
        """The session's checkpoints, oldest (number 1) first."""
        stmt = select(checkpoints).where(checkpoints.c.session == session_id).order_by(checkpoints.c.number)
        with self._reading() as conn:
            self._require_session(conn, session_id)
            rows = conn.execute(stmt).all()
        return [_checkpoint(row) for row in rows]

    # -- session state -----------------------------------------------------------------------------
    def save_state(self, session_id: str, key: str, value: Mapping[str, Any]) -> None:
        """Set one piece of session state (e.g. the live context), replacing the previous value."""
        document = self._state_document(key, value)

        def work(conn: Connection) -> None:
            self._lock_session(conn, session_id)
            self._upsert_state(conn, session_id, key, document)

        self._write(work)

    @staticmethod
    def _state_document(key: str, value: Mapping[str, Any] | None) -> str:
        """The document as JSON text (checked by encoding it: the text is what gets stored)."""
        check_text("state key", key)
        if not 0 < len(key) <= 128:
            raise ValueError(f"state key must be 1-128 characters, got {len(key)}")
        if value is None:
            raise ValueError(f"state {key!r}: a value is needed with its key")
        if isinstance(value, EncodedDocument):
            return value.text  # encoded by json.dumps already, part by part
        try:
            return json.dumps(dict(value), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state {key!r} is not plain JSON: {exc}") from exc

    def _upsert_state(self, conn: Connection, session_id: str, key: str, document: str) -> None:
        params = {"sid": session_id, "skey": key, "value": document, "at": self._now()}
        if conn.execute(self._update_state, params).rowcount == 0:
            conn.execute(self._insert_state, params)

    def load_state(self, session_id: str, key: str) -> dict[str, Any] | None:
        where = and_(session_state.c.session == session_id, session_state.c.key == key)
        with self._reading() as conn:
            self._require_session(conn, session_id)
            value = conn.execute(select(session_state.c.value).where(where)).scalar_one_or_none()
        return None if value is None else dict(value)

    # -- leases: one writer per session (issue 11 item 2) -----------------------------------------------
    def acquire_lease(self, session_id: str, owner: LeaseOwner, *, ttl_s: float) -> LeaseGrant:
        """Make `owner` the session's one writer for `ttl_s` seconds (renew it before then). A lease of
        another owner that is live raises SessionHosted and changes nothing; a stale one (expired, or
        its process gone on this machine) is taken over and returned as `replaced`. Atomic across
        processes: the session row is locked as for an append."""
        _check_owner(owner)
        _check_ttl(ttl_s)

        def work(conn: Connection) -> LeaseGrant:
            self._lock_session(conn, session_id)
            now = self._now()
            _check_aware("clock time", now)
            row = conn.execute(select(session_leases).where(session_leases.c.session == session_id)).first()
            held = None if row is None else _lease(row)
            replaced, reason = None, ""
            if held is not None and held.owner.token != owner.token:
                reason = lease_stale_reason(held, now)
                if not reason:
                    since = held.acquired_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                    raise SessionHosted(session_id, held.owner.pid, held.owner.host, since)
                replaced = held
            acquired = now if held is None or replaced is not None else held.acquired_at
            lease = Lease(session_id, owner, acquired, now, now + timedelta(seconds=ttl_s))
            values = _lease_values(lease)
            if row is None:
                conn.execute(insert(session_leases).values(session=session_id, **values))
            else:
                conn.execute(
                    update(session_leases).where(session_leases.c.session == session_id).values(**values)
                )
            return LeaseGrant(_utc_lease(lease), replaced, reason)

        return self._write(work)

    def renew_lease(self, lease: Lease, *, ttl_s: float) -> Lease | None:
        """The heartbeat: extend a lease this owner still holds; None when it is held no longer (released,
        or taken over after it went stale)."""
        _check_ttl(ttl_s)

        def work(conn: Connection) -> Lease | None:
            self._lock_session(conn, lease.session)
            now = self._now()
            renewed = dataclasses.replace(lease, renewed_at=now, expires_at=now + timedelta(seconds=ttl_s))
            changed = conn.execute(
                update(session_leases)
                .where(_held_by(lease))
                .values(renewed_at=renewed.renewed_at, expires_at=renewed.expires_at)
            )
            return _utc_lease(renewed) if changed.rowcount else None

        return self._write(work)

    def release_lease(self, lease: Lease) -> None:
        """Give the session up (on close); a lease no longer held is left to its new owner."""
        self._write(lambda conn: conn.execute(delete(session_leases).where(_held_by(lease))))

    def session_lease(self, session_id: str) -> Lease | None:
        """The session's lease as stored (live or stale), or None when nobody holds it."""
        with self._reading() as conn:
            self._require_session(conn, session_id)
            row = conn.execute(select(session_leases).where(session_leases.c.session == session_id)).first()
        return None if row is None else _lease(row)

    # -- feeds: watches, timers, callbacks (issue 12) ------------------------------------------------
    def add_feed(self, feed: Feed) -> Feed:
        """Store a new feed of an existing session; its id must be new."""
        _check_feed(feed)
        now = self._now()

        def work(conn: Connection) -> None:
            self._require_session(conn, feed.session)
            if conn.execute(select(sources.c.id).where(sources.c.id == feed.id)).first() is not None:
                raise StoreError(f"a feed {feed.id!r} exists already")
            conn.execute(insert(sources).values(
                id=feed.id, session=feed.session, kind=feed.kind, name=feed.name, spec=dict(feed.spec),
                wake=feed.wake, state=dict(feed.state), created_at=now, updated_at=now, removed_at=None,
            ))  # fmt: skip

        self._write(work)
        return dataclasses.replace(feed, created_at=now.astimezone(UTC), removed_at=None)

    def list_feeds(self, session_id: str | None = None, *, include_removed: bool = False) -> list[Feed]:
        """The feeds of one session (or of every session), oldest first."""
        stmt = select(sources).order_by(sources.c.created_at, sources.c.id)
        if session_id is not None:
            stmt = stmt.where(sources.c.session == session_id)
        if not include_removed:
            stmt = stmt.where(sources.c.removed_at.is_(None))
        with self._reading() as conn:
            if session_id is not None:
                self._require_session(conn, session_id)
            return [_feed(row) for row in conn.execute(stmt)]

    def get_feed(self, feed_id: str) -> Feed:
        """One feed, removed or not; UnknownFeed when there is none with that id."""
        with self._reading() as conn:
            row = conn.execute(select(sources).where(sources.c.id == feed_id)).first()
        if row is None:
            raise UnknownFeed(f"no feed {feed_id!r} (`vibe feeds` lists them)")
        return _feed(row)

    def stop_feed(self, feed_id: str) -> Feed:
        """Stop a feed (its row stays, stamped removed: the record still names its id)."""
        now = self._now()

        def work(conn: Connection) -> None:
            changed = conn.execute(
                update(sources).where(sources.c.id == feed_id, sources.c.removed_at.is_(None))
                .values(removed_at=now, updated_at=now)
            )  # fmt: skip
            if changed.rowcount == 0:
                self.get_feed(feed_id)  # unknown: raises; else it was removed already (a no-op)

        self._write(work)
        return self.get_feed(feed_id)

    def save_feed_state(self, feed_id: str, state: Mapping[str, Any]) -> None:
        """Replace a feed's own progress (a watch's digest, a timer's last fire)."""
        document = dict(state)
        _check_json(f"feed {feed_id!r} state", document)
        now = self._now()

        def work(conn: Connection) -> None:
            changed = conn.execute(
                update(sources).where(sources.c.id == feed_id).values(state=document, updated_at=now)
            )
            if changed.rowcount == 0:
                raise UnknownFeed(f"no feed {feed_id!r} (`vibe feeds` lists them)")

        self._write(work)


def _check_feed(feed: Feed) -> None:
    if feed.kind not in FEED_KINDS:
        raise ValueError(f"unknown feed kind {feed.kind!r}; expected one of {', '.join(FEED_KINDS)}")
    if not _SESSION_ID.fullmatch(feed.id):
        raise ValueError(f"feed id {feed.id!r} is not valid: use 1-64 letters, digits, '.', '_', ':', '-'")
    check_text("feed name", feed.name)
    if not feed.name.strip():
        raise ValueError("a feed needs a name")
    _check_json(f"feed {feed.id!r} spec", feed.spec)
    _check_json(f"feed {feed.id!r} state", feed.state)


def _feed(row: AnyRow) -> Feed:
    return Feed(
        id=row.id, session=row.session, kind=row.kind, name=row.name, spec=dict(row.spec), wake=row.wake,
        state=dict(row.state or {}), created_at=row.created_at, removed_at=row.removed_at,
    )  # fmt: skip


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


def this_machine() -> str:
    """This machine's name plus its PID namespace: two processes with the same value see the same pids."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}|{namespace}"[:255]


def lease_owner() -> LeaseOwner:
    """This process as a lease owner, with a fresh random token."""
    return LeaseOwner(socket.gethostname()[:255], os.getpid(), secrets.token_hex(16), this_machine())


def pid_running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def lease_stale_reason(lease: Lease, now: datetime) -> str:
    """Why the lease no longer protects its session ("" while it does): its heartbeat expired, or its
    process is gone from this machine (known only where its pid means that process)."""
    if lease.expires_at <= now:
        return f"its last heartbeat was at {lease.renewed_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    if lease.owner.machine == this_machine() and not pid_running(lease.owner.pid):
        return f"its process {lease.owner.pid} on {lease.owner.host} is gone"
    return ""


def _check_owner(owner: LeaseOwner) -> None:
    for field, value in (
        ("lease host", owner.host),
        ("lease token", owner.token),
        ("lease machine", owner.machine),
    ):
        check_text(field, value)
    if not 0 < len(owner.token) <= 64:
        raise ValueError(f"lease token must be 1-64 characters, got {len(owner.token)}")
    if len(owner.host) > 255 or len(owner.machine) > 255:
        raise ValueError("lease host and machine must be at most 255 characters")
    if owner.pid <= 0:
        raise ValueError(f"lease pid must be positive, got {owner.pid}")


def _check_ttl(ttl_s: float) -> None:
    if not 0 < ttl_s <= 86_400:
        raise ValueError(f"lease time to live must be 0-86,400 seconds, got {ttl_s}")


def _held_by(lease: Lease) -> ColumnElement[bool]:
    return and_(session_leases.c.session == lease.session, session_leases.c.token == lease.owner.token)


def _lease(row: AnyRow) -> Lease:
    owner = LeaseOwner(row.host, row.pid, row.token, row.machine)
    return Lease(row.session, owner, row.acquired_at, row.renewed_at, row.expires_at)


def _utc_lease(lease: Lease) -> Lease:
    return dataclasses.replace(
        lease,
        acquired_at=lease.acquired_at.astimezone(UTC),
        renewed_at=lease.renewed_at.astimezone(UTC),
        expires_at=lease.expires_at.astimezone(UTC),
    )


def _lease_values(lease: Lease) -> dict[str, object]:
    owner = lease.owner
    return {"token": owner.token, "host": owner.host, "machine": owner.machine, "pid": owner.pid,
            "acquired_at": lease.acquired_at, "renewed_at": lease.renewed_at,
            "expires_at": lease.expires_at}  # fmt: skip


class _Append:
    """One `append_many` call in the group commit: its entries, then its result or error. `wake` is set
    when it is finished, or when it is to lead the next group (`lead`)."""

    __slots__ = ("entries", "error", "finished", "lead", "result", "wake")

    def __init__(self, entries: tuple[NewEntry, ...]) -> None:
        self.entries = entries
        self.wake = threading.Event()
        self.lead = False
        self.finished = False
        self.result: list[Entry] = []
        self.error: BaseException | None = None

    def finish(self, *, result: list[Entry] | None = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.finished = result or [], error, True
        self.lead = False
        self.wake.set()

    def outcome(self) -> list[Entry]:
        if self.error is not None:
            raise self.error
        return self.result


class FeedChanged(StoreError):
    """A feed was stopped or changed after a request was checked against it (`append_each`): check the
    request again against the feed as it is now."""


@dataclasses.dataclass(frozen=True, slots=True)
class Appended:
    """One append's outcome in `append_each`: its entry (`repeat`: recorded before under its delivery
    key), or the error that refused it."""

    entry: Entry | None = None
    repeat: bool = False
    error: BaseException | None = None


def _same_feed(now: Feed | None, checked: Feed) -> bool:
    """Whether the feed as stored now is the one a request was checked against (live, same spec and wake)."""
    return (
        now is not None
        and now.removed_at is None
        and now.kind == checked.kind
        and now.session == checked.session
        and now.spec == checked.spec
        and now.wake == checked.wake
    )


class _SessionExists(StoreError):
    """A session id is taken (internal: create_session retries generated ids, reports given ones)."""


def _entry_values(entry: Entry, delivery_key: str = "") -> dict[str, object]:
    return {
        "delivery_key": delivery_key or None,
        "session": entry.session,
        "seq": entry.seq,
        "kind": entry.kind,
        "source_name": entry.source.name,
        "source_ref": entry.source.ref,
        "source_event": entry.source.event,
        "text": entry.text,
        "at": entry.at,
        "turn_id": entry.turn_id,
        "calls": [{"name": c.name, "arguments": c.arguments} for c in entry.calls] or None,
    }
