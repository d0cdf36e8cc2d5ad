"""Chat messages as the model sees them: the live context (values only).

The live context holds tool calls and tool output (session state, persisted by the agent) - unlike the
record, which holds only inputs and replies (A3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Role = Literal["system", "user", "assistant", "tool"]
# ChatMessage.kind of the view's reminder after a user's message (avibe.context.reminder.with_reminder): the
# view's own system note, never a record entry
REMINDER_KIND: Final = "reminder"


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of the model's view.

    `seq` links a message to its record entry (None for tool output, system prompt, checkpoint text).
    `kind` carries the record kind of an input (so the view never decides "user" from text, N7).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    seq: int | None = None
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the provider's / llama.cpp's cache


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the harness must know about a model to budget for it (F1)."""

    name: str
    window: int  # context window in tokens
    max_output: int  # reply reserve in tokens
    input_price: float | None = None  # USD per prompt token, when known
    output_price: float | None = None
    price_tier_at: int | None = None  # first context length where the price per token rises


CUT_ANSWER_MARK = " [... cut here: the reply reached its output limit]"
_ANSWER_START = re.compile(r'^\s*\{\s*"answer"\s*:\s*"')


def cut_answer(raw: str) -> str | None:
    """The text of a JSON answer (`{"answer": "...`) that stopped at the output limit mid-string, with a
    mark saying so; None when `raw` is not such a start. The demo's 1.5B answered "Which ticket is next?"
    past the limit and the person got "the model's reply is not valid JSON" instead of what it wrote."""
    start = _ANSWER_START.match(raw)
    if start is None:
        return None
    body = raw[start.end() :]
    for end in range(len(body), max(-1, len(body) - 8), -1):  # drop a half-written escape at the cut
        try:
            text = json.loads(f'"{body[:end]}"', strict=False)
        except ValueError:
            continue
        if text and "\ud800" <= text[-1] <= "\udbff":  # half of a character written as two escapes
            text = text[:-1]
        return text.strip() + CUT_ANSWER_MARK if text.strip() else None
    return None
