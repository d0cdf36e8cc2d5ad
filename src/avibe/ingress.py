"""Ingress: the one way any input enters a session (SPEC T1-T3, N7; DESIGN data flow).

Whoever delivers an input - the person at the terminal, a watch, a timer, a callback, another agent
session, the harness itself - calls `deliver` with the `Source` that describes the delivery path. The
source is stored next to the text, and the tag line a model sees is later rendered from those stored
fields only (`avibe.record.sources`), never from the text. Replies of the assistant go through
`record_reply`. Orchestration layer: the store is passed in; no concrete adapter is imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from avibe.errors import AvibeError
from avibe.ports import Clock, RecordStore
from avibe.record.entries import KINDS, CallRecord, Entry, Kind, NewEntry, Source

INPUT_KINDS: Final[frozenset[Kind]] = frozenset(KINDS) - {"assistant"}
MAX_TURN_ID: Final = 128


class IngressError(AvibeError, ValueError):
    """An input that cannot enter the record as given; the message says which field and why."""


def _check_text(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise IngressError(f"{field} must be text, got {type(value).__name__}")
    position = value.find("\x00")
    if position >= 0:
        raise IngressError(f"{field} contains a NUL byte (\\x00) at position {position}; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise IngressError(f"{field} is not valid Unicode (lone surrogate at position {exc.start})") from exc
    return value


def _check_source(source: Source) -> None:
    if source.kind not in INPUT_KINDS:
        expected = ", ".join(sorted(INPUT_KINDS))
        message = f"{source.kind!r} is not an input kind (expected one of {expected})"
        hint = "; use record_reply for the assistant's replies" if source.kind == "assistant" else ""
        raise IngressError(message + hint)
    _check_text("source name", source.name)
    _check_text("source ref", source.ref)
    _check_text("source event", source.event)
    if source.event and source.kind != "callback":
        raise IngressError(f"only a callback names its service's event, not a {source.kind} input")
    if source.kind == "user" and not source.name.strip():
        raise IngressError("a user message needs the user's name (Source('user', name=...))")


def _moment(at: datetime | None, clock: Clock | None) -> datetime:
    moment = at if at is not None else (clock.now() if clock is not None else datetime.now(UTC))
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise IngressError(f"time {moment.isoformat()} has no time zone; pass an aware datetime (UTC)")
    return moment.astimezone(UTC)


def _check_turn(turn_id: str) -> str:
    _check_text("turn id", turn_id)
    if len(turn_id) > MAX_TURN_ID:
        raise IngressError(f"turn id is {len(turn_id)} characters; at most {MAX_TURN_ID} fit")
    return turn_id


def deliver(
    store: RecordStore,
    session_id: str,
    source: Source,
    text: str,
    *,
    at: datetime | None = None,
    turn_id: str = "",
    clock: Clock | None = None,
    key: str = "",
) -> Entry:
    """Append one input to the session's record and return it with its `seq` (T1, N7).

    `source` is how the input arrived; it alone decides whether the input is the user's words. `key`
    makes the delivery idempotent (exactly once into the record): a key the session has seen gives back
    the entry it made and records nothing new (a watch tick, a timer fire, a callback's Idempotency-Key).
    Raises IngressError for a bad input, UnknownSession for a session the store does not have.
    """
    return store.append(new_input(session_id, source, text, at=at, turn_id=turn_id, clock=clock, key=key))


def new_input(
    session_id: str,
    source: Source,
    text: str,
    *,
    at: datetime | None = None,
    turn_id: str = "",
    clock: Clock | None = None,
    key: str = "",
) -> NewEntry:
    """The input `deliver` appends, checked (IngressError), for a caller that appends it itself - `vibe
    serve`'s ingest writer, which commits many requests' inputs in one transaction."""
    _check_source(source)
    moment, turn = _moment(at, clock), _check_turn(turn_id)
    return NewEntry(session_id, source, _check_text("text", text), moment, turn, delivery_key=_check_key(key))


MAX_KEY: Final = 200


def _check_key(key: str) -> str:
    _check_text("delivery key", key)
    if len(key) > MAX_KEY:
        raise IngressError(f"delivery key is {len(key)} characters; at most {MAX_KEY} fit")
    return key


def record_reply(
    store: RecordStore,
    session_id: str,
    text: str,
    *,
    agent: str = "vibey",
    at: datetime | None = None,
    turn_id: str = "",
    clock: Clock | None = None,
    calls: Sequence[CallRecord] = (),
) -> Entry:
    """Append one reply of the assistant (`agent` names which one) to the session's record (C1), with the
    tool calls it made (what the agent did; their output stays out of the record, A3)."""
    source = Source("assistant", name=_check_text("agent name", agent))
    text = _check_text("text", text)
    entry = NewEntry(session_id, source, text, _moment(at, clock), _check_turn(turn_id), tuple(calls))
    return store.append(entry)
