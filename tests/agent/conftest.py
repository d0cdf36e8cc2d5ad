"""Vibey end to end: a real SQLite record, real tools over a temp workdir, the strict scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from avibe.agent.events import Event
from avibe.agent.loop import RunConfig, Vibey
from avibe.ports import RecordStore
from avibe.providers.scripted import ModelRequest, ScriptedModel, Step, reply
from avibe.record.messages import ChatMessage, ModelReply, ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

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
) -> ModelReply:
    """A correct answer to whichever structured checkpoint question this is (chosen by its schema)."""
    schema = request.json_schema
    assert schema is not None, "a checkpoint question must carry a JSON schema"
    props = schema["properties"]
    if "keep" in props:
        enum = props["keep"]["items"]["enum"]
        data: dict[str, Any] = {"keep": list(enum) if keep is None else [s for s in keep if s in enum]}
    elif "new" in props:
        data = {"new": list(mission) if "[M1]" not in _last(request) else [], "status": []}
    elif "workstreams" in props:
        data = {"workstreams": [{"id": "new", "status": "active", "text": "ticket queue; next: 003"}]}
    elif "lessons" in props:
        data = {"i_am_here": [], "decisions": [], "lessons": ["Read each ticket before editing."]}
    else:
        data = dict(scene or SCENE_ANSWER)
    return reply(json.dumps(data))


def _last(request: ModelRequest) -> str:
    return request.messages[-1].content


def checkpoint_steps(count: int = 5, **kw: Any) -> list[Step]:
    """The steps of one structured checkpoint turn: `count` questions answered correctly."""
    return [lambda r: answer(r, **kw) for _ in range(count)]


def tool_step(name: str, **arguments: Any) -> ModelReply:
    return reply(tool_calls=[ToolCall(f"c-{name}-{len(arguments)}", name, arguments)])


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


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., Harness]:
    def make(
        steps: Sequence[Step],
        *,
        window: int = 8_000,
        mode: str = "structured",
        session: str | None = None,
        db: Path | None = None,
        max_steps: int = 30,
    ) -> Harness:
        store = open_store(f"sqlite:///{db or tmp_path / 'avibe.db'}")
        info = store.get_session(session) if session else store.create_session(title="e2e")
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        toolbox = ToolBox(default_tools(workdir, store=store, session_id=info.id))
        model = ScriptedModel.of(steps, window=window, max_output=1_000)
        events: list[Event] = []
        vibey = Vibey(
            store=store,
            model=model,
            counter=CharCounter(),
            clock=StepClock(),
            session_id=info.id,
            session_dir=tmp_path / "sessions" / info.id,
            tool_specs=toolbox.specs,
            run_tool=toolbox.dispatch,
            config=RunConfig(checkpoint_mode=mode, max_steps=max_steps),  # type: ignore[arg-type]
            events=events.append,
        )
        return Harness(vibey, model, store, workdir, events)

    return make
