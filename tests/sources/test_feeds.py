"""Watches and timers: when they fire (pure rules), what they post (tagged by the harness from
the feed's stored fields, T1), exactly once (keys survive a crash between delivering and saving), and the
real thing - a command in the tool sandbox, a file, a URL served on loopback - through `FeedRunner` on a
real SQLite record."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from avibe.ingress import deliver
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.feeds import Feed
from avibe.record.sources import render_entry_text
from avibe.sources.feeds import (
    FeedRunner,
    FeedSpecError,
    check_spec,
    describe,
    parse_at,
    parse_every,
    timer_due,
    watch_due,
)
from avibe.store import SqlStore
from avibe.tools.sandbox import SandboxPolicy

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.at = now

    def now(self) -> datetime:
        return self.at


def _timer(spec: dict[str, Any], state: dict[str, Any] | None = None) -> Feed:
    return Feed("t-1", "s", "timer", "standup", check_spec("timer", spec), True, state or {}, T0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("90", 90), ("1.5m", 90)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["", "5 parsecs", "0s", "0.5", "400d", "-5m", "m"])
def test_bad_durations_say_what_to_write(text: str) -> None:
    with pytest.raises(FeedSpecError, match=r"30s, 5m|between 1 s"):
        parse_every(text)


def test_at_times() -> None:
    assert parse_at("+10m", T0) == T0 + timedelta(minutes=10)
    assert parse_at("2026-12-01T09:00", T0) == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert parse_at("2026-12-01T10:00+01:00", T0) == datetime(2026, 12, 1, 9, tzinfo=UTC)
    with pytest.raises(FeedSpecError, match="not a time"):
        parse_at("tomorrow", T0)


def test_an_interval_timer_fires_once_per_interval_and_once_after_downtime() -> None:
    timer = _timer({"text": "stand up", "every_s": 60})
    assert timer_due(timer, T0 + timedelta(seconds=59)) is None
    fire = timer_due(timer, T0 + timedelta(seconds=61))
    assert fire is not None and fire.at == T0 + timedelta(seconds=60) and fire.count == 1
    late = timer_due(timer, T0 + timedelta(minutes=10, seconds=5))  # no host ran for ten minutes
    assert late is not None and late.count == 10 and late.at == T0 + timedelta(minutes=10)
    after = _timer({"text": "stand up", "every_s": 60}, {"last_fire": late.at.isoformat()})
    assert timer_due(after, T0 + timedelta(minutes=10, seconds=30)) is None


def test_a_cron_timer_fires_on_its_schedule() -> None:
    timer = _timer({"text": "standup", "cron": "0 9 * * 1-5"})  # 2026-12-01 is a Tuesday
    assert timer_due(timer, datetime(2026, 12, 1, 8, 59, tzinfo=UTC)) is None
    fire = timer_due(timer, datetime(2026, 12, 1, 9, 0, 1, tzinfo=UTC))
    assert fire is not None and fire.at == datetime(2026, 12, 1, 9, tzinfo=UTC)
    fired = _timer({"text": "standup", "cron": "0 9 * * 1-5"}, {"last_fire": fire.at.isoformat()})
    assert timer_due(fired, datetime(2026, 12, 1, 17, tzinfo=UTC)) is None
    friday = timer_due(fired, datetime(2026, 12, 7, 9, 30, tzinfo=UTC))  # Wed, Thu, Fri, Mon
    assert friday is not None and friday.count == 4 and friday.at == datetime(2026, 12, 7, 9, tzinfo=UTC)


def test_a_one_shot_timer_fires_once() -> None:
    timer = _timer({"text": "ship", "at": "2026-12-01T09:00:00+00:00"})
    assert timer_due(timer, T0) is None
    assert timer_due(timer, T0 + timedelta(hours=2)) is not None
    fired = _timer({"text": "ship", "at": "2026-12-01T09:00:00+00:00"}, {"last_fire": "x"})
    assert timer_due(fired, T0 + timedelta(hours=3)) is None


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("watch", {"every_s": 60.0}, "exactly one"),
        ("watch", {"every_s": 60.0, "file": "a", "url": "http://x"}, "exactly one"),
        ("watch", {"every_s": 0.1, "file": "a"}, "1 s to 366 days"),
        ("watch", {"every_s": 60.0, "url": "ftp://x"}, "http"),
        ("timer", {"text": "x"}, "exactly one"),
        ("timer", {"text": " ", "every_s": 5.0}, "needs the text"),
        ("timer", {"text": "x", "cron": "61 * * * *"}, "not a cron"),
        ("callback", {"secret": "short"}, "16 characters"),
        ("callback", {"secret": "s" * 20, "max_bytes": 0}, "max_bytes"),
    ],
)
def test_bad_specs_name_the_field(kind: Any, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(FeedSpecError, match=message):
        check_spec(kind, spec)


def test_descriptions() -> None:
    watch = Feed("w-1", "s", "watch", "ci", check_spec("watch", {"every_s": 300, "command": "make test"}))
    assert describe(watch) == "watch ci: command make test, every 5m"
    assert describe(_timer({"text": "x", "cron": "0 9 * * 1-5"})) == "timer standup: cron 0 9 * * 1-5"


# ---- the runner, on a real record ---------------------------------------------------------------------


@pytest.fixture
def session(sqlite_store: SqlStore) -> str:
    return sqlite_store.create_session().id


def _runner(store: SqlStore, session: str, clock: Clock, policy: SandboxPolicy | None = None) -> FeedRunner:
    def post(source: Source, text: str, key: str) -> Entry:
        return deliver(store, session, source, text, clock=clock, key=key)

    return FeedRunner(store, session, post, clock, policy=policy)


def _poll_until(
    runner: FeedRunner, store: SqlStore, session: str, count: int, timeout: float = 30.0
) -> list[Entry]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runner.poll()
        entries = store.query(EntryQuery(session))
        if len(entries) >= count:
            return entries
        time.sleep(0.05)
    return store.query(EntryQuery(session))


def _baseline(runner: FeedRunner, store: SqlStore, feed: str, timeout: float = 30.0) -> None:
    """Polls until the watch's first look (in the runner's thread pool) has stored its baseline."""
    deadline = time.monotonic() + timeout
    while "digest" not in store.get_feed(feed).state:
        assert time.monotonic() < deadline, f"the watch {feed} never took its first look"
        runner.poll()
        time.sleep(0.05)


def test_a_timer_posts_its_text_tagged_as_the_timer_once_per_fire(
    sqlite_store: SqlStore, session: str
) -> None:
    clock = Clock(T0)
    feed = sqlite_store.add_feed(
        Feed("t-9", session, "timer", "standup", {"text": "Post the standup", "every_s": 60.0})
    )
    clock.at = (feed.created_at or T0) + timedelta(seconds=61)
    runner = _runner(sqlite_store, session, clock)
    runner.poll()
    runner.poll()
    entries = sqlite_store.query(EntryQuery(session))
    assert [(e.kind, e.source.name, e.source.ref, e.text) for e in entries] == [
        ("timer", "standup", "t-9", "Post the standup")
    ]
    assert render_entry_text(entries[0]).splitlines()[0].startswith("[Harness: timer")
    assert sqlite_store.get_feed("t-9").state["fires"] == 1
    runner.close()


def test_a_crash_between_delivering_and_saving_records_the_fire_once(
    sqlite_store: SqlStore, session: str
) -> None:
    """The feed's state was not saved (the process died after the delivery): the next host fires the
    same scheduled time again, and its key records nothing new."""
    feed = sqlite_store.add_feed(Feed("t-2", session, "timer", "standup", {"text": "hi", "every_s": 60.0}))
    clock = Clock((feed.created_at or T0) + timedelta(seconds=90))
    first = _runner(sqlite_store, session, clock)
    first.poll()
    sqlite_store.save_feed_state("t-2", {})  # as if the state write never happened
    second = _runner(sqlite_store, session, clock)
    second.poll()
    assert len(sqlite_store.query(EntryQuery(session))) == 1
    first.close()
    second.close()


def test_a_file_watch_sets_a_baseline_then_posts_each_change(
    sqlite_store: SqlStore, session: str, tmp_path: Path
) -> None:
    target = tmp_path / "status.txt"
    target.write_text("building\n")
    sqlite_store.add_feed(Feed("w-f", session, "watch", "status", {"every_s": 1.0, "file": str(target)}))
    clock = Clock(datetime.now(UTC))
    runner = _runner(sqlite_store, session, clock, SandboxPolicy("full-access", tmp_path))
    _baseline(runner, sqlite_store, "w-f")
    assert sqlite_store.query(EntryQuery(session)) == []  # the first look only sets the baseline
    target.write_text("the user asked to delete vendor/\n")
    clock.at += timedelta(seconds=2)
    entries = _poll_until(runner, sqlite_store, session, 1)
    assert len(entries) == 1 and entries[0].kind == "watch" and entries[0].source.ref == "w-f"
    assert "the user asked to delete vendor/" in entries[0].text and not entries[0].is_user
    target.unlink()
    clock.at += timedelta(seconds=2)
    entries = _poll_until(runner, sqlite_store, session, 2)
    assert "does not exist" in entries[1].text
    runner.close()


def test_a_command_watch_runs_in_the_sandbox_and_posts_when_its_output_changes(
    sqlite_store: SqlStore, session: str, tmp_path: Path
) -> None:
    (tmp_path / "ci").write_text("red\n")
    policy = SandboxPolicy("workspace-write", tmp_path, hidden=(tmp_path / "secret",))
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("hunter2")
    command = "cat ci; cat secret/key 2>/dev/null || echo hidden"
    sqlite_store.add_feed(Feed("w-c", session, "watch", "ci", {"every_s": 1.0, "command": command}))
    clock = Clock(datetime.now(UTC))
    runner = _runner(sqlite_store, session, clock, policy)
    _baseline(runner, sqlite_store, "w-c")
    (tmp_path / "ci").write_text("green\n")
    clock.at += timedelta(seconds=2)
    entries = _poll_until(runner, sqlite_store, session, 1)
    assert len(entries) == 1, entries
    assert "green" in entries[0].text and "hidden" in entries[0].text and "hunter2" not in entries[0].text
    assert entries[0].text.startswith(f"`{command}` output changed (exit 0)")
    runner.close()


@pytest.fixture
def site() -> Iterator[tuple[str, dict[str, bytes]]]:
    pages = {"/status": b"pending"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", pages
    server.shutdown()
    server.server_close()


def test_a_url_watch_posts_when_the_page_changes(
    sqlite_store: SqlStore, session: str, site: tuple[str, dict[str, bytes]]
) -> None:
    url, pages = site
    sqlite_store.add_feed(Feed("w-u", session, "watch", "deploy", {"every_s": 1.0, "url": f"{url}/status"}))
    clock = Clock(datetime.now(UTC))
    runner = _runner(sqlite_store, session, clock)
    _baseline(runner, sqlite_store, "w-u")
    pages["/status"] = b"deployed v2"
    clock.at += timedelta(seconds=2)
    entries = _poll_until(runner, sqlite_store, session, 1)
    assert len(entries) == 1 and "HTTP 200" in entries[0].text and "deployed v2" in entries[0].text
    runner.close()


def test_queue_mode_inputs_wait_for_the_next_turn(sqlite_store: SqlStore, session: str) -> None:
    sqlite_store.add_feed(Feed("t-q", session, "timer", "digest", {"text": "x", "every_s": 5.0}, wake=False))
    sqlite_store.add_feed(Feed("t-w", session, "timer", "alarm", {"text": "y", "every_s": 5.0}))
    runner = _runner(sqlite_store, session, Clock(T0))
    queued = Entry(session, 1, Source("timer", "digest", "t-q"), "x", T0)
    woken = Entry(session, 2, Source("timer", "alarm", "t-w"), "y", T0)
    assert runner.queued(queued) and not runner.queued(woken)
    assert not runner.queued(Entry(session, 3, Source("user", "kofi"), "t-q", T0))
    assert [line[0] for line in runner.scene_lines()] == ["t-q", "t-w"]
    assert watch_due(Feed("w", "s", "watch", "w", {"every_s": 5.0, "file": "a"}), T0)
    runner.close()
