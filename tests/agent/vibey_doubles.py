"""Support for Vibey's end-to-end tests: a real SQLite record, real tools over a temp workdir, the strict
scripted model. (A module of its own: `from vibey_doubles import` is ambiguous across test folders.)"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from avibe.agent.loop import TurnResult, Vibey
from avibe.host.events import Event
from avibe.host.session import SessionHost
from avibe.ports import RecordStore
from avibe.providers.scripted import ModelRequest, ScriptedModel, Step, reply
from avibe.record.entries import Entry, Source
from avibe.record.messages import ChatMessage, ModelReply, ToolCall

SCENE_ANSWER = {
    "current_step": "handling ticket 003 in workstream W1, the ticket queue (oldest first)",
    "progress": "done: 001, 002; in progress: 003; pending: 004, 005, 006",
    "waiting_for": "nothing: no background commands or questions open",
    "next_step": 'finish 003, then 004, as the user asked: "strictly oldest first"',
    "pitfalls": 'reading tickets/007.md failed with "no such file" - the queue ends at 006',
    "exact_references": "tickets/, CHANGELOG.md, docs/guide.md",
}


class CharCounter:
    """A deterministic TokenCounter double (about four characters a token) for scripted runs."""

    additive = True  # a request's count is the sum of its messages' (the loop may cache them)

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count(m.content) + 4 for m in messages)


class StepClock:
    """A clock that moves one second per reading, so entries keep a strict time order."""

    def __init__(self) -> None:
        self.at = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

    def now(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


def answer(
    request: ModelRequest,
    *,
    keep: Sequence[int] | None = None,
    scene: dict[str, str] | None = None,
    mission: Sequence[str] = ("Work through the ticket queue oldest first",),
    workstream: tuple[str, str] = ("new", "ticket queue; next: 003"),
    lesson: str = "Read each ticket before editing.",
) -> ModelReply:
    """A correct answer to whichever structured checkpoint question this is (chosen by its schema)."""
    schema = request.json_schema
    assert schema is not None, "a checkpoint question must carry a JSON schema"
    props = schema["properties"]
    if "keep" in props:
        enum = props["keep"]["items"]["enum"]
        data: dict[str, Any] = {"keep": list(enum) if keep is None else [s for s in keep if s in enum]}
    elif "new" in props:
        data = {"new": [] if "user_changed_mission" in props else list(mission)}
        data.update({k: False for k in ("user_changed_mission",) if k in props})
        data.update({"status": []} if "status" in props else {})
    elif "workstreams" in props:
        data = {"workstreams": [{"id": workstream[0], "status": "active", "text": workstream[1]}]}
    elif "lessons" in props:
        data = {"i_am_here": [], "decisions": [], "lessons": [lesson]}
    else:
        data = dict(scene or SCENE_ANSWER)
    return reply(json.dumps(data))


def _last(request: ModelRequest) -> str:
    return request.messages[-1].content


def checkpoint_steps(count: int = 5, **kw: Any) -> list[Step]:
    """The steps of one structured checkpoint turn: `count` questions answered correctly."""
    return [lambda r: answer(r, **kw) for _ in range(count)]


_CALL_IDS = itertools.count(1)


def tool_step(name: str, **arguments: Any) -> ModelReply:
    """A reply that calls one tool; call ids are unique, as a real model's are."""
    return reply(tool_calls=[ToolCall(f"call-{next(_CALL_IDS)}", name, arguments)])


BEFORE_STEPS: list[Step] = [
    tool_step("read_file", path="a.txt"),
    reply("a read"),
    tool_step("read_file", path="b.txt"),
    reply("b read"),
]


def write_lines(workdir: Path, name: str, lines: int) -> None:
    """A file of `lines` lines of 40 characters: about 11 tokens a line through read_file."""
    workdir.mkdir(exist_ok=True)
    (workdir / name).write_text(
        "".join(f"{name} line {i:04d}: lorem ipsum dolor sit\n" for i in range(lines))
    )


@dataclass
class Harness:
    vibey: Vibey
    model: ScriptedModel
    store: RecordStore
    workdir: Path
    events: list[Event]

    def checkpoints(self) -> list[Any]:
        return self.store.list_checkpoints(self.vibey.session_id)

    def send(self, text: str) -> TurnResult:
        return send(self.vibey, text)


def host_of(vibey: Vibey) -> SessionHost:
    """The one inbox: the session host over the record (its own events go nowhere; Vibey's to the test)."""
    return SessionHost(vibey.store, vibey.session_id, vibey, vibey.clock)


def post(vibey: Vibey, source: Source, text: str) -> Entry:
    return host_of(vibey).post(source, text)


def send(vibey: Vibey, text: str) -> TurnResult:
    """The person's message through the host, then the turn it starts, with Vibey's own event sink."""
    host = host_of(vibey)
    host.post(Source("user", name=vibey.config.user_name), text)
    return vibey.run_turn(host, vibey.events)


def go_on(vibey: Vibey) -> TurnResult:
    """A turn on what the record already holds (a resumed session)."""
    return vibey.run_turn(host_of(vibey), vibey.events)
