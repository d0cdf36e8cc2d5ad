"""Group commit: appends arriving at once from several threads share transactions, and each
still gets exactly what a lone append gets - its own seq, its own error, a repeated key recording
nothing new. No timing is asserted here (benchmarks/record_append.py measures)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from avibe.errors import UnknownSession
from avibe.record.entries import Entry, EntryQuery, NewEntry, Source
from avibe.store import SqlStore

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
SOURCE = Source("callback", "build", "b-1")


def _at_once(threads: int, work: Callable[[int], None]) -> None:
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        start.wait()
        try:
            work(index)
        except BaseException as exc:  # collected, re-raised in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]


def test_concurrent_keyed_appends_land_exactly_once_with_dense_seqs(store: SqlStore) -> None:
    session = store.create_session("load").id
    made: list[Entry] = []
    lock = threading.Lock()

    def work(index: int) -> None:
        for n in range(25):
            # Every key is posted by two threads: one of them records it, the other gets that entry.
            key = f"k{(index // 2) * 25 + n}"
            entry = store.append(NewEntry(session, SOURCE, f"input {key}", T0, delivery_key=key))
            with lock:
                made.append(entry)

    _at_once(8, work)
    stored = store.query(EntryQuery(session))
    assert [e.seq for e in stored] == list(range(1, 101))
    assert sorted(e.text for e in stored) == sorted({f"input k{n}" for n in range(100)})
    by_text = {e.text: e for e in stored}
    assert all(by_text[e.text] == e for e in made)  # both posters of a key got the one stored entry
    assert store.get_session(session).entry_count == 100


def test_one_bad_append_in_a_group_fails_alone(store: SqlStore) -> None:
    session = store.create_session("good").id
    outcomes: dict[int, str] = {}

    def work(index: int) -> None:
        target = "no-such-session" if index == 3 else session
        try:
            entry = store.append(NewEntry(target, SOURCE, f"from {index}", T0))
            outcomes[index] = f"seq {entry.seq}"
        except UnknownSession:
            outcomes[index] = "unknown"

    for _ in range(5):  # several rounds: some of them are grouped
        outcomes.clear()
        _at_once(6, work)
        assert outcomes[3] == "unknown"
        assert all(outcomes[i].startswith("seq ") for i in (0, 1, 2, 4, 5))
    assert [e.seq for e in store.query(EntryQuery(session))] == list(range(1, 26))


def test_last_activity_never_moves_back(store: SqlStore) -> None:
    session = store.create_session("times").id
    store.append(NewEntry(session, SOURCE, "late", T0 + timedelta(hours=2)))
    store.append_many([NewEntry(session, SOURCE, "early", T0), NewEntry(session, SOURCE, "mid", T0)])
    assert store.get_session(session).last_at == T0 + timedelta(hours=2)
    store.append(NewEntry(session, SOURCE, "later", T0 + timedelta(hours=3)))
    assert store.get_session(session).last_at == T0 + timedelta(hours=3)


def test_a_repeated_key_within_one_batch_records_once(store: SqlStore) -> None:
    session = store.create_session("batch").id
    first, again, other = store.append_many([
        NewEntry(session, SOURCE, "one", T0, delivery_key="same"),
        NewEntry(session, SOURCE, "one again", T0, delivery_key="same"),
        NewEntry(session, SOURCE, "two", T0),
    ])  # fmt: skip
    assert first == again and (first.seq, other.seq) == (1, 2)
    assert store.append(NewEntry(session, SOURCE, "once more", T0, delivery_key="same")) == first
    assert store.get_session(session).entry_count == 2


@pytest.mark.parametrize("threads", [2, 6])
def test_appends_to_several_sessions_at_once_keep_each_session_dense(store: SqlStore, threads: int) -> None:
    ids = [store.create_session(f"s{n}").id for n in range(3)]

    def work(index: int) -> None:
        for n in range(20):
            store.append(NewEntry(ids[(index + n) % 3], SOURCE, f"{index}-{n}", T0))

    _at_once(threads, work)
    total = 0
    for session in ids:
        seqs = [e.seq for e in store.query(EntryQuery(session))]
        assert seqs == list(range(1, len(seqs) + 1))
        total += len(seqs)
    assert total == threads * 20
