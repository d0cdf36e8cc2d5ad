"""Many hosts, one record: three `vibe serve` processes on loopback share the tests'
throwaway PostgreSQL. Callbacks are posted to all three, round robin; one host is killed with SIGKILL
half way; a post that fails is retried on the next host with the same Idempotency-Key. Every accepted
callback is in the record exactly once, none is lost, and every session goes on - its turns run on a
host that is still alive (the dead host's leases are taken over)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from avibe.record.entries import EntryQuery
from avibe.record.feeds import Feed
from avibe.store import open_store
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, hosting, start_serve, stop, vibe_env, wait_for

SECRET = "shared-secret-for-the-test"
CALLBACKS = 45
KILL_AFTER = 15


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


def _post(ports: list[int], start: int, feed: str, key: str, body: str) -> bool:
    """Post to the hosts from `start` on until one accepts; False when none does."""
    for attempt in range(len(ports)):
        port = ports[(start + attempt) % len(ports)]
        try:
            response = httpx.post(
                f"http://127.0.0.1:{port}/callbacks/{feed}",
                content=body,
                headers={"Authorization": f"Bearer {SECRET}", "Idempotency-Key": key},
                timeout=10,
            )
        except httpx.HTTPError:
            continue  # that host is gone: the next one, same key
        if response.status_code == 202:
            return True
    return False


def _first_hosting(ports: list[int], home: Path) -> tuple[int, list[str]] | None:
    """The first host (by index) that hosts a session now, with the sessions it hosts."""
    for n, port in enumerate(ports):
        found = hosting(port, home)
        if found:
            return n, found
    return None


@pytest.mark.postgres
@pytest.mark.slow
def test_three_hosts_one_killed_every_accepted_callback_once_and_sessions_go_on(
    tmp_path: Path, pg_url: str, chat: ChatServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with open_store(pg_url) as store:
        sessions = [store.create_session(title=f"queue {i}").id for i in range(3)]
        for i, session in enumerate(sessions):
            spec = {"secret": SECRET, "max_bytes": 4096, "per_minute": 10_000}
            store.add_feed(Feed(f"cb-{i}", session, "callback", f"ci-{i}", spec))
    home = tmp_path / "home"
    env = vibe_env(home, chat, pg_url)
    ports = [free_port() for _ in range(3)]
    hosts = [start_serve(env, work, port, tmp_path / f"serve-{n}.log") for n, port in enumerate(ports)]
    accepted: list[tuple[int, str]] = []
    orphaned: list[str] = []
    victim = hosts[0]
    killed_at = datetime.now(UTC)
    try:
        for i in range(CALLBACKS):
            if i == KILL_AFTER:
                # Kill a host while it runs a session, so that one has to be taken over. Which host won
                # the sessions' leases is a race (one host may hold all three), so the victim is
                # whichever hosts one now - waiting for a chosen host could wait for ever.
                n, orphaned = wait_for(
                    lambda: _first_hosting(ports, home), timeout=60, what="a host to host a session"
                )
                victim = hosts[n]
                os.kill(victim.pid, signal.SIGKILL)
                killed_at = datetime.now(UTC)
            feed = i % 3
            if _post(ports, i % 3, f"cb-{feed}", f"event-{i}", f"build {i} finished"):
                accepted.append((feed, f"build {i} finished"))
        assert len(accepted) == CALLBACKS  # two hosts were always there to take a retry
        assert set(orphaned) <= set(sessions)

        with open_store(pg_url) as store:

            def all_answered() -> bool:
                for session in sessions:
                    entries = store.query(EntryQuery(session))
                    inputs = [e.seq for e in entries if e.kind == "callback"]
                    if not inputs or not any(e.kind == "assistant" and e.seq > max(inputs) for e in entries):
                        return False
                return True

            wait_for(all_answered, timeout=120, what="every session's turn after its last callback")
            for feed, session in enumerate(sessions):
                texts = [e.text for e in store.query(EntryQuery(session, kinds=frozenset({"callback"})))]
                wanted = [body for f, body in accepted if f == feed]
                assert sorted(texts) == sorted(wanted)  # each exactly once: no loss, no duplicate
                assert len(set(texts)) == len(texts)
                lease = store.session_lease(session)
                assert lease is None or lease.owner.pid != victim.pid
            for session in orphaned:  # the dead host's sessions: answered after the kill, by another host
                replies = store.query(EntryQuery(session, kinds=frozenset({"assistant"})))
                assert replies and replies[-1].at > killed_at
    finally:
        for host in hosts:
            stop(host)
