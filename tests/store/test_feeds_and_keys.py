"""Inputs from the world in the store (T1, docs/serve.md): delivery keys make a delivery exactly once into
the record (also under concurrent deliveries), feeds are kept with the record, and PostgreSQL tells
listeners which session got input (LISTEN/NOTIFY) only when the append commits."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from avibe.errors import UnknownFeed, UnknownSession
from avibe.ingress import IngressError, deliver
from avibe.record.entries import EntryQuery, NewEntry, Source
from avibe.record.feeds import Feed
from avibe.store import SqlStore, open_store
from avibe.store.entries import NOTIFY_CHANNEL

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
WATCH = Source("watch", "ci", "w-1")


def test_a_repeated_delivery_key_records_nothing_new_and_returns_the_first_entry(store: SqlStore) -> None:
    session = store.create_session().id
    first = deliver(store, session, WATCH, "red", at=AT, key="watch:w-1:1")
    again = deliver(store, session, WATCH, "red again (a retry)", at=AT, key="watch:w-1:1")
    other = deliver(store, session, WATCH, "green", at=AT, key="watch:w-1:2")
    unkeyed = [deliver(store, session, WATCH, "same", at=AT) for _ in range(2)]
    assert again == first and again.text == "red"
    assert [e.seq for e in store.query(EntryQuery(session))] == [1, 2, 3, 4]
    assert other.seq == 2 and [e.seq for e in unkeyed] == [3, 4]  # no key: every delivery counts


def test_a_key_is_per_session(store: SqlStore) -> None:
    a, b = store.create_session().id, store.create_session().id
    deliver(store, a, WATCH, "x", at=AT, key="k")
    assert deliver(store, b, WATCH, "x", at=AT, key="k").seq == 1


def test_a_batch_with_a_repeated_key_stores_it_once(store: SqlStore) -> None:
    session = store.create_session().id
    made = store.append_many([NewEntry(session, WATCH, t, AT, delivery_key="k") for t in ("a", "b")])
    assert [e.seq for e in made] == [1, 1] and made[1].text == "a"
    assert len(store.query(EntryQuery(session))) == 1


def test_concurrent_deliveries_of_one_key_store_one_entry(store_url: str) -> None:
    """Eight threads with their own store deliver the same key at once: one entry."""
    with open_store(store_url) as setup:
        session = setup.create_session().id
    stores = [open_store(store_url) for _ in range(8)]
    seqs: list[int] = []
    barrier = threading.Barrier(len(stores))

    def post(each: SqlStore) -> None:
        barrier.wait()
        seqs.append(deliver(each, session, WATCH, "tick", at=AT, key="timer:t-1:09:00").seq)

    threads = [threading.Thread(target=post, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seqs == [1] * 8
    assert len(stores[0].query(EntryQuery(session))) == 1
    for each in stores:
        each.close()


def test_bad_keys_are_refused_by_ingress(store: SqlStore) -> None:
    session = store.create_session().id
    with pytest.raises(IngressError, match="at most 200"):
        deliver(store, session, WATCH, "x", at=AT, key="k" * 201)
    with pytest.raises(IngressError, match="NUL"):
        deliver(store, session, WATCH, "x", at=AT, key="a\x00b")


def test_feeds_are_kept_listed_and_stopped_never_deleted(store: SqlStore) -> None:
    session = store.create_session().id
    watch = store.add_feed(Feed("w-1", session, "watch", "ci", {"every_s": 60.0, "command": "make"}))
    timer = store.add_feed(
        Feed("t-1", session, "timer", "standup", {"text": "hi", "every_s": 5.0}, wake=False)
    )
    assert watch.created_at is not None and [f.id for f in store.list_feeds(session)] == ["w-1", "t-1"]
    store.save_feed_state("w-1", {"digest": "abc", "changes": 2})
    assert store.get_feed("w-1").state == {"digest": "abc", "changes": 2}
    stopped = store.stop_feed("t-1")
    assert stopped.removed_at is not None and not stopped.active and timer.wake is False
    assert [f.id for f in store.list_feeds(session)] == ["w-1"]
    assert [f.id for f in store.list_feeds(session, include_removed=True)] == ["w-1", "t-1"]
    assert [f.id for f in store.list_feeds()] == ["w-1"]


def test_feed_errors_are_specific(store: SqlStore) -> None:
    session = store.create_session().id
    with pytest.raises(UnknownFeed):
        store.get_feed("w-nosuch")
    with pytest.raises(UnknownFeed):
        store.stop_feed("w-nosuch")
    with pytest.raises(UnknownSession):
        store.add_feed(Feed("w-2", "s-nosuch", "watch", "x", {"every_s": 1.0, "file": "a"}))
    with pytest.raises(ValueError, match="feed kind"):
        store.add_feed(Feed("x-1", session, "alarm", "x", {}))  # type: ignore[arg-type]
    store.add_feed(Feed("w-3", session, "watch", "x", {"every_s": 1.0, "file": "a"}))
    with pytest.raises(Exception, match="exists already"):
        store.add_feed(Feed("w-3", session, "watch", "x", {"every_s": 1.0, "file": "a"}))


@pytest.mark.postgres
def test_postgres_notifies_listeners_of_the_session_on_commit(pg_url: str) -> None:
    with open_store(pg_url) as store:
        session = store.create_session().id
        dsn = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
            deliver(store, session, WATCH, "red", at=AT)
            notes = [n.payload for n in listener.notifies(timeout=2.0, stop_after=1)]
            assert notes == [session]
            deliver(store, session, WATCH, "red", at=AT, key="k")
            deliver(store, session, WATCH, "red", at=AT, key="k")  # a repeat: nothing new, no notice
            notes = [n.payload for n in listener.notifies(timeout=1.0)]
            assert notes == [session]


def _batch(sessions: list[str], *, n: int) -> list[NewEntry]:
    """`n` keyed inputs spread over `sessions` (round robin), each key once."""
    return [
        NewEntry(sessions[i % len(sessions)], WATCH, f"tick {i}", AT, delivery_key=f"k-{i}") for i in range(n)
    ]


def test_a_batch_of_many_sessions_gives_each_dense_seqs_and_records_each_key_once(store: SqlStore) -> None:
    # a batch of several sessions' inputs is locked and read in one statement and moved on in one.
    sessions = [store.create_session().id for _ in range(3)]
    deliver(store, sessions[1], WATCH, "before", at=AT)  # one session is not at seq 0
    batch = _batch(sessions, n=10)
    first = store.append_each(batch)
    assert all(o.error is None and not o.repeat for o in first)
    again = store.append_each([*batch[:4], NewEntry(sessions[2], WATCH, "new", AT, delivery_key="k-new")])
    assert [o.repeat for o in again] == [True, True, True, True, False]
    assert [o.entry for o in again[:4]] == [o.entry for o in first[:4]]
    for session in sessions:
        seqs = [e.seq for e in store.query(EntryQuery(session))]
        assert seqs == list(range(1, len(seqs) + 1))
        assert store.get_session(session).entry_count == len(seqs)
    assert [len(store.query(EntryQuery(s))) for s in sessions] == [4, 4, 4]
    assert [o.entry.seq for o in first if o.entry and o.entry.session == sessions[1]] == [2, 3, 4]


def test_a_batch_naming_an_unknown_session_fails_that_append_alone(store: SqlStore) -> None:
    sessions = [store.create_session().id for _ in range(2)]
    batch = [*_batch(sessions, n=4), NewEntry("s-nosuch", WATCH, "lost", AT, delivery_key="k-x")]
    outcomes = store.append_each(batch)
    assert all(o.entry is not None for o in outcomes[:4])
    assert isinstance(outcomes[4].error, UnknownSession)
    assert [store.get_session(s).entry_count for s in sessions] == [2, 2]


@pytest.mark.postgres
def test_postgres_notifies_each_waking_session_of_a_batch_once(pg_url: str) -> None:
    with open_store(pg_url) as store:
        sessions = [store.create_session().id for _ in range(3)]
        dsn = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
            batch = _batch(sessions, n=9)
            quiet = [entry.session == sessions[0] for entry in batch]  # a queued input wakes no host
            store.append_each(batch, quiet=quiet)
            notes = [n.payload for n in listener.notifies(timeout=1.0)]
            assert sorted(notes) == sorted(sessions[1:])


@pytest.mark.postgres
def test_postgres_a_batch_is_on_disk_before_its_outcomes_are_given(pg_url: str) -> None:
    # a batch commits without waiting for the flush (its session rows are free at once), then
    # one flush covers it before append_each returns: 202 still means the input is on disk.
    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with open_store(pg_url) as store, psycopg.connect(dsn, autocommit=True) as probe:
        assert isinstance(store, SqlStore)
        sessions = [store.create_session().id for _ in range(2)]
        marks: list[str] = []
        flush = store._wait_for_flush

        def marked() -> None:  # the WAL's end once the batch committed, before the flush
            marks.append(str(probe.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]))  # type: ignore[index]
            flush()

        store._wait_for_flush = marked  # type: ignore[method-assign]
        for n in range(5):
            outcomes = store.append_each(_batch(sessions, n=4) if n == 0 else [_batch(sessions, n=4 + n)[-1]])
            assert all(o.entry is not None for o in outcomes)
            flushed = probe.execute(
                "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (marks[-1],)
            ).fetchone()
            assert flushed == (True,)


@pytest.mark.postgres
def test_postgres_a_server_refusing_the_flush_statement_gets_synchronous_commits(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy

    import avibe.store.core as core

    monkeypatch.setattr(core, "_FLUSH", sqlalchemy.text("SELECT avibe_no_such_function()"))
    with open_store(pg_url) as store:
        assert isinstance(store, SqlStore)
        sessions = [store.create_session().id for _ in range(2)]
        first = store.append_each(_batch(sessions, n=4))
        assert all(o.entry is not None for o in first)  # waited out the WAL writer instead
        assert store._early_release is False
        again = store.append_each(_batch(sessions, n=6))
        assert [o.repeat for o in again] == [True] * 4 + [False] * 2
