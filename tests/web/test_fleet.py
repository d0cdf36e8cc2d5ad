"""The fleet of one `vibe serve`: which sessions it hosts (input waiting, watches or timers),
that it leaves a session another host holds, backs off from one whose host fails, and lets a session go
when it has nothing left to run or wait for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from avibe.errors import SessionHosted
from avibe.host.session import STOPPED_BY_PERSON
from avibe.ingress import deliver, record_reply
from avibe.record.entries import Source
from avibe.record.feeds import Feed
from avibe.store import SqlStore
from avibe.web import fleet as fleet_module
from avibe.web.fleet import Fleet, SessionHandle

AT = datetime(2026, 12, 1, 9, tzinfo=UTC)


class Opener:
    def __init__(self, *, fail: set[str] | None = None, elsewhere: set[str] | None = None) -> None:
        self.opened: list[str] = []
        self.ran: list[str] = []
        self.fail, self.elsewhere = fail or set(), elsewhere or set()
        self.busy: dict[str, bool] = {}

    @contextmanager
    def __call__(self, session_id: str) -> Iterator[SessionHandle]:
        self.opened.append(session_id)
        if session_id in self.elsewhere:
            raise SessionHosted(session_id, 1, "other-host", "2026-12-01 09:00:00 UTC")
        if session_id in self.fail:
            raise RuntimeError("the workdir is gone")
        yield SessionHandle(lambda: self.ran.append(session_id), lambda: self.busy.get(session_id, False))


def _wait(check: Callable[[], bool], *, seconds: float) -> None:
    """Poll `check` until it holds or `seconds` pass (the assertion after it says what was wanted)."""
    pause, deadline = threading.Event(), time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        pause.wait(0.02)


def test_sessions_with_input_waiting_are_hosted_until_idle_and_answered_ones_are_not(
    sqlite_store: SqlStore,
) -> None:
    waiting, answered, empty = (sqlite_store.create_session().id for _ in range(3))
    deliver(sqlite_store, waiting, Source("user", "kofi"), "go", at=AT)
    deliver(sqlite_store, answered, Source("user", "kofi"), "go", at=AT)
    record_reply(sqlite_store, answered, "done", at=AT)
    opener = Opener()
    fleet = Fleet(sqlite_store, opener, exit_when_idle=True)
    fleet.run()  # returns once nothing is hosted
    assert opener.opened == [waiting] and opener.ran == [waiting] and fleet.hosted() == []
    assert empty not in opener.opened


def test_a_session_the_person_stopped_is_not_hosted_until_a_new_input(sqlite_store: SqlStore) -> None:
    """`vibe serve` started after the chat's Ctrl-C (and quit) leaves the stopped turn stopped."""
    stopped = sqlite_store.create_session().id
    deliver(sqlite_store, stopped, Source("user", "kofi"), "run sleep 60", at=AT)
    deliver(sqlite_store, stopped, STOPPED_BY_PERSON, "The user pressed Ctrl-C and stopped the step.", at=AT)
    opener = Opener()
    Fleet(sqlite_store, opener, exit_when_idle=True).run()
    assert opener.opened == []
    deliver(sqlite_store, stopped, Source("user", "kofi"), "now something else", at=AT)
    Fleet(sqlite_store, opener, exit_when_idle=True).run()
    assert opener.opened == [stopped]


def test_a_session_with_a_watch_or_timer_is_hosted_while_busy(sqlite_store: SqlStore) -> None:
    session = sqlite_store.create_session().id
    sqlite_store.add_feed(Feed("t-1", session, "timer", "tick", {"text": "x", "every_s": 60.0}))
    opener = Opener()
    opener.busy[session] = True
    fleet = Fleet(sqlite_store, opener)
    runner = threading.Thread(target=fleet.run, daemon=True)
    runner.start()
    try:
        _wait(lambda: opener.ran.count(session) >= 3, seconds=10)
        assert fleet.hosted() == [session] and opener.ran.count(session) >= 3  # polled again and again
    finally:
        fleet.stop()
        runner.join(10)
    assert fleet.hosted() == []


def test_a_session_hosted_elsewhere_is_left_alone_and_a_failing_one_is_retried_later(
    sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere, failing = sqlite_store.create_session().id, sqlite_store.create_session().id
    for session in (elsewhere, failing):
        deliver(sqlite_store, session, Source("user", "kofi"), "go", at=AT)
    opener = Opener(fail={failing}, elsewhere={elsewhere})
    fleet = Fleet(sqlite_store, opener)
    monkeypatch.setattr(fleet_module, "TICK_S", 0.05)
    runner = threading.Thread(target=fleet.run, daemon=True)
    runner.start()
    try:
        threading.Event().wait(1.0)  # twenty ticks
    finally:
        fleet.stop()
        runner.join(10)
    assert opener.opened.count(failing) == 1  # backed off, not retried every tick
    assert fleet.failures == {failing: "RuntimeError: the workdir is gone"}
    assert elsewhere not in fleet.failures and 1 <= opener.opened.count(elsewhere) <= 2  # every 2 s


def test_a_queued_callback_input_does_not_make_a_session_need_a_host(sqlite_store: SqlStore) -> None:
    queued, woken = sqlite_store.create_session().id, sqlite_store.create_session().id
    spec = {"secret": "s" * 20, "max_bytes": 100, "per_minute": 5}
    sqlite_store.add_feed(Feed("cb-q", queued, "callback", "digest", spec, wake=False))
    sqlite_store.add_feed(Feed("cb-w", woken, "callback", "deploy", spec))
    deliver(sqlite_store, queued, Source("callback", "digest", "cb-q"), "nightly digest", at=AT)
    deliver(sqlite_store, woken, Source("callback", "deploy", "cb-w"), "deployed", at=AT)
    opener = Opener()
    Fleet(sqlite_store, opener, exit_when_idle=True).run()
    assert opener.opened == [woken]


def test_an_input_left_unanswered_is_not_re_hosted_every_tick_but_one_held_elsewhere_is_looked_at_again(
    sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosting that ran and left the input unanswered (a stopped turn) ends there: only an entry appended
    afterwards brings the session back. A session another host held is tried again after the pause."""
    unanswered, elsewhere = sqlite_store.create_session().id, sqlite_store.create_session().id
    for session in (unanswered, elsewhere):
        deliver(sqlite_store, session, Source("user", "kofi"), "go", at=AT)
    opener = Opener(elsewhere={elsewhere})
    fleet = Fleet(sqlite_store, opener)
    monkeypatch.setattr(fleet_module, "TICK_S", 0.02)
    monkeypatch.setattr(fleet_module, "LINGER_S", 0.0)
    monkeypatch.setattr(fleet_module, "ELSEWHERE_RETRY_S", 0.05)
    runner = threading.Thread(target=fleet.run, daemon=True)
    runner.start()
    try:
        _wait(lambda: opener.opened.count(elsewhere) >= 3 and unanswered in opener.opened, seconds=10)
        assert opener.opened.count(elsewhere) >= 3  # the takeover path keeps looking
        assert opener.opened.count(unanswered) == 1  # not every tick
        deliver(sqlite_store, unanswered, Source("user", "kofi"), "again", at=AT)
        _wait(lambda: opener.opened.count(unanswered) == 2, seconds=10)
        assert opener.opened.count(unanswered) == 2  # the new input brought it back
    finally:
        fleet.stop()
        runner.join(10)
