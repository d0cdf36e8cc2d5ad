"""Attaching to a session another process hosts: `vibe run --session S TASK` while a
`vibe serve` (or another `vibe run`) holds S's lease posts the message into the record and follows the
record until the agent has answered it - the same record, the same ingress, the same events printed as
when hosting here. If the host goes away before answering, the session is hosted here instead (its lease
is stale by then), so the message is never left unanswered."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from avibe.errors import StateError
from avibe.host.agent import render_input
from avibe.host.events import EventSink, Idle, InputArrived, Replied, ToolCalled
from avibe.host.session import STOPPED_BY_PERSON
from avibe.ingress import deliver
from avibe.ports import Clock, Lease, RecordStore
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.state import HostActivity

FOLLOW_POLL_S: Final = 0.2
log = logging.getLogger("avibe.cli")


def live_lease(store: RecordStore, session_id: str, now: datetime | None = None) -> Lease | None:
    """The lease of another live host of the session, or None when nobody (live) hosts it."""
    from avibe.store.leases import lease_stale_reason

    lease = store.session_lease(session_id)
    if lease is None or lease_stale_reason(lease, now or datetime.now(UTC)):
        return None
    return lease


def entry_events(entry: Entry) -> list[InputArrived | ToolCalled | Replied]:
    """The events an entry of the record stands for, as the hosting process emitted them."""
    if entry.kind != "assistant":
        tag = "" if entry.is_user else render_input(entry).text.split("\n", 1)[0]
        return [InputArrived(entry.seq, entry.kind, entry.source.name, tag, entry.text)]
    events: list[InputArrived | ToolCalled | Replied] = []
    for number, call in enumerate(entry.calls):
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = {"arguments": call.arguments}
        events.append(
            ToolCalled(f"{entry.seq}.{number}", call.name, arguments if isinstance(arguments, dict) else {})
        )
    if not entry.calls and entry.text.strip():
        events.append(Replied(entry.text))
    return events


@dataclass(frozen=True, slots=True)
class Followed:
    reply: str | None  # the agent's answer; None when its host went away first
    last_seq: int


def follow(
    store: RecordStore,
    session_id: str,
    after_seq: int,
    emit: EventSink,
    *,
    still_hosted: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> Followed:
    """Emit the session's entries after `after_seq` as they are recorded, until an answer (a reply with no
    tool calls) comes after every input - or until the host is gone."""
    seen, reply = after_seq, None
    while True:
        newest = store.query(EntryQuery(session_id, seq_from=seen + 1))
        for entry in newest:
            for event in entry_events(entry):
                emit(event)
            seen = entry.seq
            if entry.kind == "assistant" and not entry.calls and entry.text.strip():
                reply = entry.text
            elif entry.kind != "assistant":
                reply = None  # a newer input: the answer to wait for comes after it
        if reply is not None:
            emit(Idle())
            return Followed(reply, seen)
        if not newest and not still_hosted():
            return Followed(None, seen)
        sleep(FOLLOW_POLL_S)


def send_attached(
    store: RecordStore, session_id: str, user_name: str, text: str, emit: EventSink, clock: Clock
) -> Followed:
    """Post the person's message into a session hosted elsewhere and follow it to the answer."""
    entry = deliver(store, session_id, Source("user", name=user_name), text, clock=clock)
    emit(InputArrived(entry.seq, "user", user_name, "", text))
    return follow(
        store, session_id, entry.seq, emit, still_hosted=lambda: live_lease(store, session_id) is not None
    )


def host_in_turn(store: RecordStore, session_id: str) -> bool:
    """Whether the session's host records that it runs a turn now (avibe.host.turn_watch); a damaged
    document reads as idle (logged)."""
    try:
        return HostActivity.from_stored(store.load_state(session_id, HostActivity.KEY)).turn
    except StateError as exc:
        log.warning("session %s: %s", session_id, exc)
        return False


def ask_host_to_stop(store: RecordStore, session_id: str, clock: Clock) -> Entry:
    """The person's Ctrl-C in a chat attached to the session: the stop note into the record, which its
    host reads while a turn runs and stops the turn for (avibe.host.turn_watch); no host runs the stopped
    turn again (avibe.host.session)."""
    from avibe.tui.driver import CANCEL_NOTE

    return deliver(store, session_id, STOPPED_BY_PERSON, CANCEL_NOTE, clock=clock)
