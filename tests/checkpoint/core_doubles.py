"""Test doubles for the checkpoint core's plan, carry and turn tests (a module with its own name: importing
from `conftest` breaks when several test folders run together, each with a conftest of that name).

- CharCounter: a deterministic TokenCounter (about four characters per token, monotone in length).
- make_entry: a record entry of any kind.
- drive: performs a checkpoint turn's effects in memory. Model calls go to an object with `complete(...)`
  (the strict ScriptedModel, or a test's own chaos model); a ModelError becomes the ModelFailure value the
  real driver sends. Files read come from a dict.
- TICKET_MIND, TICKET_SCENE: a valid mind and scene of a ticket-queue session.
- structured_answers(keep): a scripted model's step that answers every structured question validly, the
  memo question with `keep(enum of candidate labels)` - a test's way to tick well or badly on purpose.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.turn import (
    CallModel,
    Effect,
    EffectResult,
    ModelFailure,
    ReadFailed,
    ReadFile,
    TurnOutcome,
    WriteWorkFiles,
)
from avibe.errors import ModelError
from avibe.ports import CompletionRequest
from avibe.providers.scripted import ModelRequest, reply
from avibe.record.entries import Entry, Kind, Source
from avibe.record.messages import ChatMessage, ModelReply

TICKET_MIND = (
    "## I am here\n\n## Goals\n### Mission\n- [M1] (active) Work through the ticket queue.\n"
    "### Workstreams\n\n## Key decisions\n\n## Lessons\n"
)
TICKET_SCENE = (
    "<checkpoint>\nCurrent step: ticket 003 of the queue in workstream W1, the ticket queue\n"
    "Progress: done: 001, 002; in progress: 003\nWaiting for: none\n"
    'Next step: ticket 004, as the user asked: "oldest first"\nPitfalls: none\n'
    "Exact references: tickets/, CHANGELOG.md\n</checkpoint>\n"
)
_SCENE_ANSWER = {
    "current_step": "ticket 003 of the queue in workstream W1, the ticket queue",
    "progress": "done: 001, 002; in progress: 003",
    "waiting_for": "none",
    "next_step": 'ticket 004 next, as the user asked: "oldest first"',
    "pitfalls": "none",
    "exact_references": "tickets/, CHANGELOG.md",
}


def structured_answers(keep: Callable[[list[Any]], list[Any]]) -> Callable[[ModelRequest], ModelReply]:
    """Valid answers to the structured questions; the memo question's ticks are `keep(enum)`."""

    def answer(request: ModelRequest) -> ModelReply:
        props = request.json_schema["properties"] if request.json_schema else {}
        if "keep" in props:
            return reply(json.dumps({"keep": keep(props["keep"]["items"]["enum"])}))
        if "new" in props:
            return reply(json.dumps({"user_changed_mission": False, "new": [], "status": []}))
        if "workstreams" in props:
            return reply(json.dumps({"workstreams": []}))
        if "lessons" in props:
            return reply(json.dumps({"i_am_here": [], "decisions": [], "lessons": []}))
        return reply(json.dumps(_SCENE_ANSWER))

    return answer


AT = datetime(2026, 1, 1, tzinfo=UTC)


class CharCounter:
    """About four characters per token, rounded up: deterministic and monotone in the text's length."""

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count(m.content) + 4 for m in messages)


def make_entry(seq: int, text: str, kind: Kind = "user", session: str = "s1") -> Entry:
    return Entry(session=session, seq=seq, source=Source(kind=kind, name=kind), text=text, at=AT)


class Model(Protocol):
    def complete(self, request: CompletionRequest) -> Any: ...


@dataclass
class Run:
    outcome: TurnOutcome | None = None
    writes: list[WriteWorkFiles] = field(default_factory=list)
    calls: list[CallModel] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)


def _perform(effect: Effect, model: Model, files: Mapping[str, str], run: Run) -> EffectResult:
    if isinstance(effect, WriteWorkFiles):
        run.writes.append(effect)
        return None
    if isinstance(effect, ReadFile):
        run.reads.append(effect.path)
        return files[effect.path] if effect.path in files else ReadFailed(f"no such file: {effect.path}")
    run.calls.append(effect)
    try:
        reply = model.complete(
            CompletionRequest(
                effect.messages, effect.tools, json_schema=effect.json_schema, max_tokens=effect.max_tokens
            )
        )
    except ModelError as exc:
        return ModelFailure(str(exc))
    return reply  # type: ignore[no-any-return]


def drive(
    gen: Generator[Effect, EffectResult, TurnOutcome], model: Model, files: Mapping[str, str] | None = None
) -> Run:
    run = Run()
    effect = next(gen)
    while True:
        try:
            effect = gen.send(_perform(effect, model, files or {}, run))
        except StopIteration as stop:
            run.outcome = stop.value
            return run


def structured_turn_outcome(
    entries: Sequence[Entry],
    keep: Callable[[list[Any]], list[Any]],
    mind: str,
    budgets: Budgets,
) -> TurnOutcome | None:
    """A structured checkpoint turn moving `entries` out, from `mind` and TICKET_SCENE, answered validly by
    a strict scripted model whose memo ticks are `keep(enum)`."""
    from avibe.checkpoint.model import Checkpoint
    from avibe.checkpoint.turn import TurnInputs, checkpoint_turn
    from avibe.providers.scripted import ScriptedModel

    inputs = TurnInputs(
        mode="structured",
        live_messages=(ChatMessage("system", "You are Vibey."), ChatMessage("user", "go on", kind="user")),
        previous=Checkpoint(mind=mind, memo=(), scene=TICKET_SCENE),
        moved_entries=tuple(entries),
        budgets=budgets,
        counter=CharCounter(),
        at=AT,
        upto_seq=max(e.seq for e in entries) + 1,
    )
    # as many calls as the turn makes: five questions at most here, fewer when one is not due
    return drive(checkpoint_turn(inputs), ScriptedModel([structured_answers(keep)] * 6)).outcome
