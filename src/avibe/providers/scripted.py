"""A strict scripted model for tests and demos (like openai-agents' testing model).

Each call consumes the next step of the script: a ModelReply (returned), a callable (called with the
request, returns the reply - it may also assert on the request), or an exception (raised). A call beyond
the script, or a script left unconsumed at `assert_consumed()` / the end of a `with` block, raises
ScriptError. It is never a fallback for a missing real model. Given `on_text` (and no json_schema), it
streams the reply's text in a few pieces before returning the reply, and a "" heartbeat per tool call, as a
real provider would (ports.Model).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from avibe.errors import ScriptError
from avibe.ports import CompletionRequest
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolSpec


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call as the scripted model received it."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    json_schema: Mapping[str, Any] | None
    max_tokens: int | None
    temperature: float
    streamed: bool = False  # on_text was given (and the call was not a json_schema one)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)


@dataclass(frozen=True, slots=True)
class Expect:
    """A reply plus expectations on the request that produces it (checked before replying)."""

    reply: ModelReply
    tools_include: tuple[str, ...] = ()
    last_message_contains: str | None = None
    json_schema: bool | None = None  # True: a json_schema must be given; False: must not


Step = ModelReply | Expect | BaseException | Callable[[ModelRequest], ModelReply]


@dataclass
class ScriptedModel:
    steps: list[Step]
    facts_value: ModelFacts = field(
        default_factory=lambda: ModelFacts(name="scripted", window=32_768, max_output=2_048)
    )
    requests: list[ModelRequest] = field(default_factory=list)
    _next: int = 0

    @classmethod
    def of(cls, steps: Iterable[Step], **facts: Any) -> ScriptedModel:
        """`ScriptedModel.of([...], window=8000)`: facts given as keywords of ModelFacts."""
        return cls(
            list(steps), ModelFacts(**{"name": "scripted", "window": 32_768, "max_output": 2_048, **facts})
        )

    @property
    def facts(self) -> ModelFacts:
        return self.facts_value

    @property
    def remaining(self) -> int:
        return len(self.steps) - self._next

    def complete(self, request: CompletionRequest) -> ModelReply:
        stream = request.stream  # structured calls never stream
        r = request
        seen = ModelRequest(
            tuple(r.messages), tuple(r.tools), r.json_schema, r.max_tokens, r.temperature, stream is not None
        )
        self.requests.append(seen)
        if self._next >= len(self.steps):
            last = request.messages[-1].content[:200] if request.messages else ""
            raise ScriptError(
                f"scripted model: unexpected call #{len(self.requests)} beyond the {len(self.steps)}-step "
                f"script (last message: {last!r}); add a step for it"
            )
        step = self.steps[self._next]
        self._next += 1
        played = self._play(step, seen)
        if stream is not None:
            for piece in pieces(played.text):
                stream(piece)
            for _ in played.tool_calls:  # a tool call shows nothing; it beats, as a real provider's does
                stream("")
        return played

    def _play(self, step: Step, request: ModelRequest) -> ModelReply:
        if isinstance(step, ModelReply):
            return step
        if isinstance(step, Expect):
            _check(step, request, self._next)
            return step.reply
        if isinstance(step, BaseException):
            raise step
        return step(request)

    def assert_consumed(self) -> None:
        if self.remaining:
            raise ScriptError(
                f"scripted model: {self.remaining} of {len(self.steps)} steps were never called "
                f"(next: {self.steps[self._next]!r:.200})"
            )

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:  # an error inside the block is the real failure; do not mask it
            self.assert_consumed()


def pieces(text: str, parts: int = 3) -> list[str]:
    """`text` cut into up to `parts` non-empty pieces at word starts; their concatenation is `text`."""
    if not text:
        return []
    starts = [0, *(i for i in range(1, len(text)) if text[i - 1] == " " and text[i] != " ")]
    if len(starts) > parts:
        starts = [starts[round(k * len(starts) / parts)] for k in range(parts)]
    cuts = [*starts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def _check(expect: Expect, request: ModelRequest, number: int) -> None:
    problems = [
        f"tool {name!r} not offered" for name in expect.tools_include if name not in request.tool_names
    ]
    if expect.last_message_contains is not None:
        last = request.messages[-1].content if request.messages else ""
        if expect.last_message_contains not in last:
            problems.append(f"last message does not contain {expect.last_message_contains!r}")
    if expect.json_schema is not None and (request.json_schema is not None) != expect.json_schema:
        problems.append("a json_schema was expected" if expect.json_schema else "no json_schema was expected")
    if problems:
        raise ScriptError(f"scripted model, step {number}: " + "; ".join(problems))


def reply(text: str = "", *, tool_calls: Sequence[Any] = (), **usage: int) -> ModelReply:
    """Shorthand for a scripted reply: `reply("done")`, `reply(tool_calls=[ToolCall(...)])`."""
    from avibe.record.messages import Usage

    return ModelReply(text=text, tool_calls=tuple(tool_calls), usage=Usage(**usage), model="scripted")
