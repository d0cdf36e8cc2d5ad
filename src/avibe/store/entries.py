"""Entries in the SQL store (SPEC C1): appending with dense per-session seqs, delivery keys that make a
repeat return the entry it made, group commit, and reading a session's entries back.

Append-only: entries can be added and read, never changed or removed. `seq` is dense per session and
never reused: every append locks the session row (PostgreSQL `SELECT ... FOR UPDATE`; SQLite
`BEGIN IMMEDIATE`, which takes the database's write lock) and gives out `last_seq + 1`.

Group commit: appends that arrive at once from several threads (concurrent deliveries of `vibe serve`)
share one transaction. The first becomes the leader and commits whatever is queued meanwhile; each caller
returns only after the transaction holding its entries committed. Should that transaction fail, each
append of the group is retried on its own, so one bad append (an unknown session) fails alone.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, cast

from sqlalchemy import and_, bindparam, case, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from avibe.errors import StoreError, StoreUnavailable
from avibe.ports import Clock
from avibe.record.entries import KINDS, CallRecord, Entry, EntryQuery, Kind, NewEntry, Source
from avibe.store.checks import check_new_entry, check_query
from avibe.store.core import AnyRow, SqlCore
from avibe.store.schema import entries, sessions

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
# PostgreSQL: every append tells the hosts listening which session got input (LISTEN/NOTIFY, docs/serve.md);
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


@dataclasses.dataclass(frozen=True, slots=True)
class _Fresh:
    """Which entries of an append are new (a delivery key seen before is a repeat: it gets the entry it
    made), and per session how many new entries it gets and the newest one's time."""

    index: list[int]
    first_of_key: dict[tuple[str, str], int]
    counts: dict[str, int]
    newest: dict[str, datetime]


def _fresh(new: Sequence[NewEntry], seen: dict[tuple[str, str], Entry]) -> _Fresh:
    fresh = _Fresh([], {}, {}, {})
    for i, entry in enumerate(new):
        if entry.delivery_key:
            key = (entry.session, entry.delivery_key)
            if key in seen or key in fresh.first_of_key:
                continue
            fresh.first_of_key[key] = i
        fresh.index.append(i)
        fresh.counts[entry.session] = fresh.counts.get(entry.session, 0) + 1
        at = fresh.newest.get(entry.session)
        fresh.newest[entry.session] = entry.at if at is None or entry.at > at else at
    return fresh


def _numbered(new: Sequence[NewEntry], fresh: _Fresh, next_seq: dict[str, int]) -> list[Entry | None]:
    """The new entries with their seqs (None for each repeat)."""
    made: list[Entry | None] = [None] * len(new)
    for i in fresh.index:
        entry = new[i]
        seq = next_seq[entry.session]
        next_seq[entry.session] = seq + 1
        made[i] = Entry(entry.session, seq, entry.source, entry.text, entry.at, entry.turn_id, entry.calls)
    return made


class Entries(SqlCore):
    """Appending entries (one, many, group-committed) and reading them back."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        super().__init__(engine, clock=clock)
        # Group commit (see the module's docstring): appends waiting for the leader's next transaction.
        self._group_lock = threading.Lock()
        self._group_queue: list[_Append] = []
        self._group_leader = False

    def append(self, entry: NewEntry) -> Entry:
        """Store one entry and give it the session's next seq (atomic across processes)."""
        return self.append_many([entry])[0]

    def append_many(self, new: Sequence[NewEntry]) -> list[Entry]:
        """Store several entries in one transaction, in the given order (imports, benchmarks)."""
        for entry in new:
            check_new_entry(entry)
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
        # first, then this one sees it); SQLite's BEGIN IMMEDIATE holds the write lock already.
        locked = None
        if len(sessions_in) > 1 or (keyed and self._postgres):
            locked = self._lock_sessions(conn, sessions_in)
        seen = self._delivered(conn, new) if keyed else {}
        fresh = _fresh(new, seen)
        made = _numbered(new, fresh, self._advance(conn, sessions_in, fresh, locked))
        if fresh.index:
            self._insert(conn, new, made, fresh.index, quiet)
        stored: list[Entry] = []
        for i, entry in enumerate(new):
            found = made[i]
            if found is None:
                key = (entry.session, entry.delivery_key)
                found = seen[key] if key in seen else made[fresh.first_of_key[key]]
            assert found is not None
            if repeats is not None:
                repeats.append(made[i] is None)
            stored.append(
                found if found.at.tzinfo is UTC else dataclasses.replace(found, at=found.at.astimezone(UTC))
            )
        return stored

    def _lock_sessions(self, conn: Connection, sessions_in: list[str]) -> dict[str, int]:
        """One statement locks every session of the batch, in id order (no two batches deadlock), and reads
        its last seq."""
        rows = conn.execute(_LOCK_SESSIONS, {"sids": sessions_in})
        locked = {row.id: int(row.last_seq) for row in rows}
        for session_id in sessions_in:
            if session_id not in locked:
                raise self._unknown(session_id)
        return locked

    def _advance(
        self, conn: Connection, sessions_in: list[str], fresh: _Fresh, locked: dict[str, int] | None
    ) -> dict[str, int]:
        """Give out the seqs and move last_at on: one statement for every session (a session every entry
        of which is a repeat exists, and gets nothing). Returns each session's first new seq."""
        counts = fresh.counts
        advancing = [session_id for session_id in sessions_in if session_id in counts]
        advance = [{"sid": sid, "count": counts[sid], "newest": fresh.newest[sid]} for sid in advancing]
        if locked is not None:
            if advance:
                conn.execute(_ADVANCE, advance)
            return {session_id: locked[session_id] + 1 for session_id in advancing}
        if not advance:
            return {}
        # One session: its UPDATE locks the row (PostgreSQL) and says where it stands.
        last_seq = conn.execute(_ADVANCE_SESSION, advance[0]).scalar_one_or_none()
        if last_seq is None:
            raise self._unknown(advancing[0])
        return {advancing[0]: int(last_seq) - counts[advancing[0]] + 1}

    def _insert(
        self,
        conn: Connection,
        new: Sequence[NewEntry],
        made: list[Entry | None],
        fresh: list[int],
        quiet: Sequence[bool],
    ) -> None:
        conn.execute(_INSERT_ENTRY, [_entry_values(cast(Entry, made[i]), new[i].delivery_key) for i in fresh])
        if self._postgres:  # wake the session's host wherever it runs (SPEC C1, docs/serve.md)
            waking = sorted({new[i].session for i in fresh if not (quiet and quiet[i])})
            if waking:  # one statement, a parameter set per session
                conn.execute(_NOTIFY, [{"channel": NOTIFY_CHANNEL, "session": sid} for sid in waking])

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
        check_query(query)
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
