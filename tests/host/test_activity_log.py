"""The activity log (`host/activity_log.py`) on real stores: every tool output and error a session's events
carry is kept after the entry that was newest when it happened, read back by entry range from the chunks
that can hold it, continued by a later process, bounded in what it keeps - and never an entry (A3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.host.activity_log import CANCELLED_BY_PERSON, CHUNK_ITEMS, ActivityLog, load_activity
from avibe.host.events import CheckpointFailed, Event, Replied, Stopped, ToolCalled, ToolFinished
from avibe.ingress import deliver, record_reply
from avibe.record.activity import OUTPUT_KEPT, collapsed, headline, more_note
from avibe.record.entries import EntryQuery, Source
from avibe.record.state import ActivityHeader
from avibe.store import SqlStore, open_store
from avibe.tui.driver import StepCancelled

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def _finished(n: int, output: str, *, error: bool = False, reason: str = "") -> ToolFinished:
    return ToolFinished(f"c{n}", "shell", error, len(output), 0.25, error=reason, output=output)


def test_tool_outputs_and_errors_sit_after_the_entry_they_followed_and_pass_every_event_on(
    store: SqlStore,
) -> None:
    session = store.create_session("w").id
    passed: list[Event] = []
    log = ActivityLog(store, session, passed.append)
    deliver(store, session, Source("user", "kofi"), "list the files", at=T0)
    record_reply(store, session, "", at=T0 + timedelta(seconds=1))
    events: list[Event] = [
        ToolCalled("c1", "shell", {"command": "ls"}),
        _finished(1, "a.txt\nb.txt\n"),
        _finished(2, "", error=True, reason="exit 2"),
        CheckpointFailed("the scene block was missing"),
        Stopped("the model failed: 502 Bad Gateway"),
        Stopped(f"the model failed: {CANCELLED_BY_PERSON}"),  # the person's own stop: no error to show
        Replied("done"),
    ]
    for event in events:
        log(event)
    assert passed == events
    kept = load_activity(store, session)
    assert list(kept) == [2]  # after the reply that made the calls
    items = kept[2]
    assert [(i.kind, i.error) for i in items] == [
        ("tool", False), ("tool", True), ("checkpoint_failed", False), ("stopped", False)
    ]  # fmt: skip
    assert items[0].output == "a.txt\nb.txt\n" and items[0].lines == 2 and items[0].chars == 12
    assert headline(items[0]) == "shell · 2 lines · 0.2 s"
    assert headline(items[1]) == "shell failed: exit 2 · no output · 0.2 s"
    assert headline(items[2]) == "a checkpoint failed: the scene block was missing"
    assert headline(items[3]) == "the turn stopped: the model failed: 502 Bad Gateway"
    # A3: the record the agent queries holds the input and the reply only
    assert [e.kind for e in store.query(EntryQuery(session))] == ["user", "assistant"]


def test_the_chats_cancel_message_is_the_one_the_log_leaves_out() -> None:
    assert StepCancelled.MESSAGE == CANCELLED_BY_PERSON


def test_an_output_is_kept_up_to_its_cap_and_counted_whole(store: SqlStore) -> None:
    session = store.create_session("w").id
    deliver(store, session, Source("user", "kofi"), "cat it", at=T0)
    big = "".join(f"line {i:05d} {'x' * 40}\n" for i in range(2_000))
    ActivityLog(store, session, lambda e: None)(_finished(1, big))
    [item] = load_activity(store, session)[1]
    assert item.output == big[:OUTPUT_KEPT] and item.chars == len(big) and item.lines == 2_000
    folded = collapsed(item)
    assert folded.head.splitlines() == big.splitlines()[:5] and folded.more_lines == 1_995
    assert (
        more_note(folded.more_lines, item.cut)
        == f"1,995 more lines ({len(big) - OUTPUT_KEPT:,} characters not kept)"
    )


def test_a_later_process_goes_on_in_the_same_chunk_and_chunks_stay_bounded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'avibe.db'}"
    with open_store(url) as store:
        session = store.create_session("w").id
        deliver(store, session, Source("user", "kofi"), "go", at=T0)
        first = ActivityLog(store, session, lambda e: None)
        for n in range(3):
            first(_finished(n, f"out {n}"))
    with open_store(url) as store:  # another host takes the session over
        second = ActivityLog(store, session, lambda e: None)
        for n in range(3, CHUNK_ITEMS + 5):
            second(_finished(n, f"out {n}"))
        header = ActivityHeader.from_stored(store.load_state(session, ActivityHeader.KEY))
        assert header.starts == (1, 1)  # one full chunk, then a new one - both after entry #1
        kept = load_activity(store, session, 1, 1)[1]
        assert [i.output for i in kept] == [f"out {n}" for n in range(CHUNK_ITEMS + 5)]


# A session's life: each step appends entries (an input or a reply) or a tool output; every item must be
# read back under exactly the entry that was newest when it happened, whatever range a page asks for.
_STEPS = st.lists(st.one_of(st.just("entry"), st.integers(min_value=0, max_value=3_000)), max_size=160)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS, bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_every_item_is_read_back_under_its_entry_for_any_range(
    tmp_path_factory: object, steps: list[str | int], bounds: tuple[int, int]
) -> None:
    folder = tmp_path_factory.mktemp("activity")  # type: ignore[attr-defined]
    with open_store(f"sqlite:///{folder / 'avibe.db'}") as store:
        session = store.create_session("w").id
        log = ActivityLog(store, session, lambda e: None)
        expected: dict[int, list[str]] = {}
        seq = 0
        for n, step in enumerate(steps):
            if step == "entry":
                seq = deliver(
                    store, session, Source("user", "kofi"), f"m{n}", at=T0 + timedelta(seconds=n)
                ).seq
            else:
                output = f"{n}:" + "y" * int(step) * 30  # sizes up to ~90,000: the character bound counts
                log(_finished(n, output))
                expected.setdefault(seq, []).append(output[:OUTPUT_KEPT])
        first, last = min(bounds), max(bounds)
        found = load_activity(store, session, first, last)
        wanted = {k: v for k, v in expected.items() if first <= k <= last}
        assert {k: [i.output for i in v] for k, v in found.items()} == wanted


def test_a_damaged_document_is_logged_and_neither_stops_the_session_nor_hides_the_rest(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    session = store.create_session("w").id
    deliver(store, session, Source("user", "kofi"), "go", at=T0)
    ActivityLog(store, session, lambda e: None)(_finished(1, "first"))
    store.save_state(session, "activity/0", {"items": [{"after": "one"}]})  # edited by hand, wrongly
    assert load_activity(store, session) == {}  # the entries still show, without what it held
    passed: list[Event] = []
    later = ActivityLog(store, session, passed.append)
    later(_finished(2, "second"))  # the host's sink: the session goes on
    later(Replied("done"))
    assert [type(e) for e in passed] == [ToolFinished, Replied]
    assert store.load_state(session, "activity/0") == {"items": [{"after": "one"}]}  # left for a person
    assert "activity/0" in caplog.text and "not kept from now on" in caplog.text
    store.save_state(session, ActivityHeader.KEY, {"starts": "0"})
    assert load_activity(store, session) == {}
