"""One writer per session: the lease in the record, on SQLite and PostgreSQL.

A live holder's lease refuses every other owner with one clear error and changes nothing; the holder
renews and releases it; a stale lease - its heartbeat expired, or its process gone from this machine -
is taken over and reported. Owners other than this process are real: a dead pid is a process that ran
and was reaped."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from avibe.errors import SessionHosted, UnknownSession
from avibe.ports import Lease, LeaseOwner, RecordStore
from avibe.store import SqlStore, open_store
from avibe.store.leases import lease_owner, lease_stale_reason, pid_running, this_machine


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _owner(pid: int | None = None, *, machine: str | None = None) -> LeaseOwner:
    where = this_machine() if machine is None else machine
    return LeaseOwner("box", pid or os.getpid(), secrets.token_hex(8), where)


class _Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at


def test_the_store_implements_the_lease_port(store: SqlStore) -> None:
    assert isinstance(store, RecordStore)


def test_a_live_lease_refuses_another_owner_and_changes_nothing(store: SqlStore) -> None:
    session = store.create_session("s").id
    first = store.acquire_lease(session, _owner(), ttl_s=60)
    assert first.replaced is None and store.session_lease(session) == first.lease
    with pytest.raises(SessionHosted) as refused:
        store.acquire_lease(session, _owner(), ttl_s=60)
    expected = f"session {session} is hosted by another process (pid {os.getpid()} on box since "
    assert str(refused.value).startswith(expected)
    assert refused.value.pid == os.getpid() and refused.value.host == "box"
    assert store.session_lease(session) == first.lease  # the refused attempt wrote nothing


def test_the_holder_renews_and_releases_then_another_owner_gets_it(store: SqlStore) -> None:
    session = store.create_session("s").id
    lease = store.acquire_lease(session, _owner(), ttl_s=60).lease
    time.sleep(0.01)
    renewed = store.renew_lease(lease, ttl_s=120)
    assert renewed is not None and renewed.expires_at > lease.expires_at
    assert renewed.acquired_at == lease.acquired_at and store.session_lease(session) == renewed
    again = store.acquire_lease(session, lease.owner, ttl_s=60)  # the same owner again: still its own
    assert again.replaced is None and again.lease.acquired_at == lease.acquired_at
    store.release_lease(renewed)
    assert store.session_lease(session) is None
    other = store.acquire_lease(session, _owner(), ttl_s=60)
    assert other.replaced is None and store.session_lease(session) == other.lease
    assert store.renew_lease(renewed, ttl_s=60) is None  # the old holder learns it lost the lease
    store.release_lease(renewed)  # and its release leaves the new holder's lease alone
    assert store.session_lease(session) == other.lease


def test_the_lease_of_a_dead_process_on_this_machine_is_taken_over(store: SqlStore) -> None:
    session = store.create_session("s").id
    dead = _owner(_dead_pid())
    store.acquire_lease(session, dead, ttl_s=3600)
    mine = _owner()
    grant = store.acquire_lease(session, mine, ttl_s=60)
    assert grant.replaced is not None and grant.replaced.owner == dead
    assert f"process {dead.pid} on box is gone" in grant.reason
    assert store.session_lease(session) == grant.lease and grant.lease.owner == mine


def test_a_dead_pid_on_another_machine_holds_until_its_lease_expires(store_url: str) -> None:
    clock = _Clock()
    with open_store(store_url, clock=clock) as store:
        session = store.create_session("s").id
        elsewhere = _owner(_dead_pid(), machine="other-host|pid:[1]")  # its pid means nothing here
        store.acquire_lease(session, elsewhere, ttl_s=60)
        clock.at += timedelta(seconds=59)
        with pytest.raises(SessionHosted):
            store.acquire_lease(session, _owner(), ttl_s=60)
        clock.at += timedelta(seconds=1)
        grant = store.acquire_lease(session, _owner(), ttl_s=60)
        assert grant.replaced is not None and grant.replaced.owner == elsewhere
        assert grant.reason.startswith("its last heartbeat was at 2026-11-30 08:00:00")


def test_a_renewed_lease_stays_live_past_its_first_expiry(store_url: str) -> None:
    clock = _Clock()
    with open_store(store_url, clock=clock) as store:
        session = store.create_session("s").id
        lease = store.acquire_lease(session, _owner(machine="far"), ttl_s=60).lease
        clock.at += timedelta(seconds=50)
        assert store.renew_lease(lease, ttl_s=60) is not None
        clock.at += timedelta(seconds=50)  # 100 s after acquiring, 50 after the heartbeat
        with pytest.raises(SessionHosted):
            store.acquire_lease(session, _owner(), ttl_s=60)


def test_racing_owners_get_exactly_one_lease(store: SqlStore) -> None:
    session = store.create_session("s").id
    owners = [_owner() for _ in range(6)]
    won: list[LeaseOwner] = []
    refused: list[LeaseOwner] = []
    start = threading.Barrier(len(owners))

    def race(owner: LeaseOwner) -> None:
        start.wait()
        try:
            store.acquire_lease(session, owner, ttl_s=60)
            won.append(owner)
        except SessionHosted:
            refused.append(owner)

    threads = [threading.Thread(target=race, args=(owner,)) for owner in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 5
    lease = store.session_lease(session)
    assert lease is not None and lease.owner == won[0]


def test_leases_need_a_session_and_sane_values(store: SqlStore) -> None:
    with pytest.raises(UnknownSession):
        store.acquire_lease("nosuch", _owner(), ttl_s=60)
    with pytest.raises(UnknownSession):
        store.session_lease("nosuch")
    session = store.create_session("s").id
    with pytest.raises(ValueError, match="time to live"):
        store.acquire_lease(session, _owner(), ttl_s=0)
    with pytest.raises(ValueError, match="pid"):
        store.acquire_lease(session, LeaseOwner("box", 0, "t", "m"), ttl_s=60)
    assert store.session_lease(session) is None


def test_this_process_runs_and_a_reaped_one_does_not() -> None:
    assert pid_running(os.getpid())
    assert not pid_running(_dead_pid())
    owner = lease_owner()
    assert owner.pid == os.getpid() and owner.machine == this_machine() and len(owner.token) == 32
    assert lease_owner().token != owner.token


def test_a_zombie_counts_as_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while pid_running(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_running(proc.pid)  # exited, not yet reaped: a zombie
        assert os.path.exists(f"/proc/{proc.pid}")
    finally:
        proc.wait()


def test_stale_reason_is_empty_for_a_live_lease() -> None:
    now = datetime.now(UTC)
    live = Lease("s", _owner(), now, now, now + timedelta(seconds=5))
    assert lease_stale_reason(live, now) == ""
    assert lease_stale_reason(live, now + timedelta(seconds=5)).startswith("its last heartbeat")
