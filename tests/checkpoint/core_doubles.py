"""Test doubles for the checkpoint core's plan, carry and turn tests (a module with its own name: importing
from `conftest` breaks when several test folders run together, each with a conftest of that name).

- CharCounter: a deterministic TokenCounter (about four characters per token, monotone in length).
- make_entry: a record entry of any kind.
- drive: performs a checkpoint turn's effects in memory. Model calls go to an object with `complete(...)`
  (the strict ScriptedModel, or a test's own chaos model); a ModelError becomes the ModelFailure value the
  real driver sends. Files read come from a dict.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

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
from avibe.record.entries import Entry, Kind, Source
from avibe.record.messages import ChatMessage

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
    def complete(
        self, messages: Any, tools: Any = (), *, json_schema: Any = None, max_tokens: Any = None
    ) -> Any: ...


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
            effect.messages, effect.tools, json_schema=effect.json_schema, max_tokens=effect.max_tokens
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
