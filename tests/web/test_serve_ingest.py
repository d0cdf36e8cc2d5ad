"""The ingest path of `vibe serve`: requests' inputs are committed a batch per transaction by
one writer; each request is answered only after its commit, exactly once by its key, and a callback is
checked against its feed as the commit finds it (a feed stopped after it was read records nothing)."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from avibe.errors import UnknownSession
from avibe.record.entries import EntryQuery, NewEntry, Source
from avibe.record.feeds import Feed
from avibe.store import SqlStore
from avibe.store.ingest import FeedChanged
from avibe.web.callbacks import RateLimit
from avibe.web.fleet import Fleet, SessionHandle
from avibe.web.server import Api, build_tcp_app

SECRET = "ingest-secret-ingest-secret"
BEARER = {"Authorization": f"Bearer {SECRET}"}


class Clock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class Notified(Fleet):
    def __init__(self, store: SqlStore) -> None:
        super().__init__(store, self._never)
        self.notes: list[str] = []

    @staticmethod
    def _never(session_id: str) -> AbstractContextManager[SessionHandle]:
        raise AssertionError("the API never hosts a session itself")

    def notify(self, session_id: str) -> None:
        self.notes.append(session_id)


def _feed(store: SqlStore, feed_id: str, *, wake: bool = True) -> Feed:
    session = store.create_session().id
    spec = {"secret": SECRET, "max_bytes": 1000, "per_minute": 10_000}
    return store.add_feed(Feed(feed_id, session, "callback", "ci", spec, wake=wake))


async def _post_all(api: Api, posts: list[tuple[str, str, str]]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=build_tcp_app(api, Path("/nowhere.sock")))  # callbacks come over TCP
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await asyncio.gather(
            *(
                client.post(f"/callbacks/{feed}", content=body, headers={**BEARER, "Idempotency-Key": key})
                for feed, key, body in posts
            )
        )


def test_concurrent_callbacks_each_committed_once_by_key_and_answered_after_the_commit(
    sqlite_store: SqlStore,
) -> None:
    feeds = [_feed(sqlite_store, f"cb-{n}") for n in range(3)]
    fleet = Notified(sqlite_store)
    api = Api(sqlite_store, fleet, Clock(), "kofi", token="tok", limits=RateLimit())
    # 30 keys over 3 feeds, each posted twice at once: a retry racing its first try.
    posts = [(feeds[n % 3].id, f"k-{n}", f"event {n}") for n in range(30)] * 2
    answers = asyncio.run(_post_all(api, posts))
    assert [a.status_code for a in answers] == [202] * 60
    for feed in feeds:
        texts = [e.text for e in sqlite_store.query(EntryQuery(feed.session))]
        assert sorted(texts) == sorted(f"event {n}" for n in range(30) if feeds[n % 3] is feed)
        for answer in answers:  # each 202 names an entry that is in the record (committed)
            found = answer.json()
            if found["session"] == feed.session:
                assert sqlite_store.query(EntryQuery(feed.session, seq_from=found["seq"], limit=1))
    by_key: dict[tuple[str, int], list[bool]] = {}
    for answer in answers:
        found = answer.json()
        by_key.setdefault((found["session"], found["seq"]), []).append(found["duplicate"])
    assert len(by_key) == 30 and all(sorted(flags) == [False, True] for flags in by_key.values())
    assert set(fleet.notes) == {feed.session for feed in feeds}  # woken; once per batch, not per request


def test_a_queued_callback_wakes_no_host(sqlite_store: SqlStore) -> None:
    feed = _feed(sqlite_store, "cb-q", wake=False)
    fleet = Notified(sqlite_store)
    api = Api(sqlite_store, fleet, Clock(), "kofi", token="tok", limits=RateLimit())
    answers = asyncio.run(_post_all(api, [(feed.id, "k-1", "queued")]))
    assert answers[0].status_code == 202
    assert [e.text for e in sqlite_store.query(EntryQuery(feed.session))] == ["queued"]
    assert fleet.notes == []


def test_a_callback_stopped_after_the_host_read_it_records_nothing(sqlite_store: SqlStore) -> None:
    feed = _feed(sqlite_store, "cb-s")
    api = Api(sqlite_store, Notified(sqlite_store), Clock(), "kofi", token="tok", limits=RateLimit())
    first = asyncio.run(_post_all(api, [(feed.id, "k-1", "before")]))
    assert first[0].status_code == 202  # the host now holds the feed as it read it
    sqlite_store.stop_feed(feed.id)
    after = asyncio.run(_post_all(api, [(feed.id, "k-2", "after")]))
    assert after[0].status_code == 404
    assert [e.text for e in sqlite_store.query(EntryQuery(feed.session))] == ["before"]


def test_append_each_checks_feeds_in_its_transaction_and_fails_one_bad_append_alone(store: SqlStore) -> None:
    live = _feed(store, "cb-live")
    gone = _feed(store, "cb-gone")
    store.stop_feed(gone.id)
    at = datetime.now(UTC)
    new = [
        NewEntry(live.session, Source("callback", "ci", live.id), "ok", at, delivery_key="a"),
        NewEntry(gone.session, Source("callback", "ci", gone.id), "stopped", at, delivery_key="b"),
        NewEntry("s-nobody", Source("callback", "ci", "x"), "nowhere", at, delivery_key="c"),
        NewEntry(live.session, Source("callback", "ci", live.id), "ok again", at, delivery_key="a"),
    ]
    outcomes = store.append_each(new, feeds={live.id: live, gone.id: gone})
    assert outcomes[0].entry is not None and not outcomes[0].repeat
    assert isinstance(outcomes[1].error, FeedChanged)
    assert isinstance(outcomes[2].error, UnknownSession)
    assert outcomes[3].entry == outcomes[0].entry and outcomes[3].repeat
    assert [e.text for e in store.query(EntryQuery(live.session))] == ["ok"]
    assert store.query(EntryQuery(gone.session)) == []
    again = store.append_each(new[:1], feeds={live.id: live})
    assert again[0].repeat and again[0].entry == outcomes[0].entry


@pytest.mark.parametrize("wake", [True, False])
def test_a_feed_changed_since_it_was_read_is_refused(store: SqlStore, wake: bool) -> None:
    feed = _feed(store, "cb-w", wake=wake)
    stale = Feed(feed.id, feed.session, "callback", "ci", {**feed.spec, "secret": "old"}, wake=wake)
    entry = NewEntry(feed.session, Source("callback", "ci", feed.id), "x", datetime.now(UTC))
    assert isinstance(store.append_each([entry], feeds={feed.id: stale})[0].error, FeedChanged)
    assert store.append_each([entry], feeds={feed.id: feed})[0].entry is not None


def test_the_listening_socket_gives_connections_that_send_at_once() -> None:
    """Nagle off on every accepted connection: asyncio switches it off only on a socket that names TCP;
    without it a response (head, then body) waited ~40 ms for the client's delayed ACK - the ingest
    benchmark's p50 at any load."""
    import socket

    from avibe.web.guard import listen_socket

    server = listen_socket("127.0.0.1", 0)
    try:
        client = socket.create_connection(server.getsockname()[:2])
        accepted, _ = server.accept()
        with client, accepted:
            assert accepted.proto == socket.IPPROTO_TCP
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.close()
