"""The watch in front of a hosted session's events (avibe.host.turn_watch, docs/serve.md): the host's
activity is in the record; a stop - asked by the host's own process, or a stop note appended to the
record during the turn - ends the step at its next clean point and kills what runs, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.compose import SystemClock
from avibe.host.events import Event, ModelStarted, Stopped, ToolCalled, TurnEnded, TurnStarted
from avibe.host.session import STOPPED_BY_PERSON
from avibe.host.turn_watch import TurnStopAsked, TurnWatch
from avibe.ingress import deliver
from avibe.ports import RecordStore
from avibe.record.entries import Source
from avibe.record.state import HostActivity
from avibe.store import open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RecordStore]:
    with open_store(f"sqlite:///{tmp_path / 'avibe.db'}") as opened:
        yield opened


def _activity(store: RecordStore, session: str) -> HostActivity:
    return HostActivity.from_stored(store.load_state(session, HostActivity.KEY))


def test_the_hosts_activity_is_in_the_record_and_a_stop_asked_ends_the_step_at_a_clean_point(
    store: RecordStore,
) -> None:
    session = store.create_session(title="t").id
    seen: list[Event] = []
    watch = TurnWatch(store, session, seen.append)
    watch(TurnStarted(session, "vibey"))
    watch(ToolCalled("c1", "shell", {"command": "sleep 60"}))
    assert _activity(store, session) == HostActivity(turn=True, doing="shell sleep 60")
    watch.ask("the process hosting this session (vibe serve) stopped", for_good=True)
    assert watch.switch.is_set()  # what runs now is killed
    with pytest.raises(TurnStopAsked):
        watch(ModelStarted(2, 100))
    watch(Stopped("the model failed: ..."))
    watch(TurnEnded("the model failed: ...", True, 2, 0))
    assert seen[-2:] == [
        Stopped("the process hosting this session (vibe serve) stopped"),
        TurnEnded("the process hosting this session (vibe serve) stopped", True, 2, 0),
    ]
    assert _activity(store, session) == HostActivity() and not watch.switch.is_set()
    watch(TurnStarted(session, "vibey"))  # stopped for good: a later turn stops too
    with pytest.raises(TurnStopAsked):
        watch(ModelStarted(1, 100))


def test_a_stop_note_appended_during_the_turn_stops_it_and_an_older_one_does_not(store: RecordStore) -> None:
    session = store.create_session(title="t").id
    clock = SystemClock()
    deliver(store, session, STOPPED_BY_PERSON, "an older stop", clock=clock)
    deliver(store, session, Source("user", name="kofi"), "Run the long job.", clock=clock)
    watch = TurnWatch(store, session, lambda event: None)
    watch.poll()  # no turn: nothing to stop
    watch(TurnStarted(session, "vibey"))
    watch.poll()
    watch(ModelStarted(1, 100))  # the older note stopped a turn before this one
    deliver(store, session, STOPPED_BY_PERSON, "stopped from an attached chat", clock=clock)
    watch.poll()
    assert watch.switch.is_set()
    with pytest.raises(TurnStopAsked, match="stopped by the user"):
        watch(ModelStarted(2, 100))
    watch(TurnEnded("", True, 2, 0))
    watch(TurnStarted(session, "vibey"))  # the person's stop was for that turn only
    watch(ModelStarted(1, 100))


def test_the_hosts_activity_leaves_the_sessions_tool_outputs_readable(store: RecordStore) -> None:
    """vibe serve runs both sinks on one session: the watch's own document must not take the key of the
    activity log's header, or the tool outputs kept for the person vanish from its timeline."""
    from avibe.host.activity_log import ActivityLog, load_activity
    from avibe.host.events import ToolFinished

    session = store.create_session(title="t").id
    watch = TurnWatch(store, session, ActivityLog(store, session, lambda event: None))
    watch(TurnStarted(session, "vibey"))
    watch(ToolCalled("c1", "shell", {"command": "ls"}))
    watch(ToolFinished("c1", "shell", False, 6, 0.1, output="a.txt\n"))
    watch(TurnEnded("done", False, 1, 0))
    kept = load_activity(store, session)
    assert [item.output for items in kept.values() for item in items] == ["a.txt\n"]
    assert _activity(store, session) == HostActivity()
