"""A tiny driver for the checkpoint-turn generator in tests: performs its effects in memory.

Model calls go to a model object with `complete(...)` (the strict ScriptedModel, or a test's own chaos
model); a ModelError becomes the ModelFailure value the real driver sends. Files read come from a dict.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
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
