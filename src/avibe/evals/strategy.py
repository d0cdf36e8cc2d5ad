"""The compaction strategy interface shared by every strategy of the memory evaluation.

A strategy gets the running context (system prompt first) when it would exceed the threshold and
returns the compacted context plus what compacting cost. It may carry text from one compaction to the
next (`carry`: e.g. the anchored summary); the replay loop passes it back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from avibe.ports import ModelClient, TokenCounter
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

SUMMARY_KIND: Final = "summary"  # ChatMessage.kind of a strategy's summary (not a user message)
REQUEST_KIND: Final = "compaction_request"  # ChatMessage.kind of a compaction request (never the user's)


class NotApplicable(Exception):
    """The strategy cannot run on this scenario at this window (e.g. the full context does not fit)."""


class CompactionFailed(Exception):
    """The strategy could not make the context fit at all; the run is recorded as an error, with why."""


class StrategyUnavailable(Exception):
    """The strategy is not wired in this build (e.g. the checkpoint driver is missing)."""


@dataclass(frozen=True, slots=True)
class CompactState:
    """What a strategy sees at one compaction.

    messages:  the running context, the system prompt first.
    record:    every record entry so far (inputs and replies, no tool output, A3), seq order.
    carry:     what this strategy returned as `carry` last time ("" the first time).
    number:    1 for the first compaction of the replay, 2 for the second ...
    threshold: the fraction of the window that triggers a compaction.
    """

    messages: tuple[ChatMessage, ...]
    record: tuple[Entry, ...]
    session: str
    user: str
    carry: str = ""
    number: int = 1
    threshold: float = 0.9


@dataclass(frozen=True, slots=True)
class Compacted:
    """The compacted context (system prompt first) and what producing it cost.

    meta: for the checkpoint - "first_pass_valid" (bool), "repaired" (bool), "fallback" (str or None).
    """

    messages: tuple[ChatMessage, ...]
    tokens_spent: int
    calls: int
    carry: str = ""
    notes: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)


class Strategy(Protocol):
    """One way to compact. `compact` is called whenever the running context would exceed the threshold."""

    @property
    def name(self) -> str: ...

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted: ...


def recent_budget(window: int, threshold: float) -> int:
    """Tokens of recent messages kept verbatim: 20,000, or a quarter of the threshold on small windows
    (the same budget SPEC F4 gives the checkpoint, so every strategy keeps the same recent tail)."""
    return min(20_000, int(window * threshold / 4))


def summary_budget(window: int) -> int:
    """The most tokens a summary reply may use: a tenth of the window (at least 256)."""
    return max(256, window // 10)


def tail_start(messages: Sequence[ChatMessage], counter: TokenCounter, budget: int) -> int:
    """Index where the most recent messages within `budget` tokens begin, never on a tool output (whose
    call would be cut off) and never on the system prompt at index 0."""
    used, start = 0, len(messages)
    for i in range(len(messages) - 1, 0, -1):
        used += counter.count_messages([messages[i]])
        if used > budget:
            break
        start = i
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    return start


def fit_request(
    messages: Sequence[ChatMessage], request: ChatMessage, counter: TokenCounter, room: int
) -> tuple[list[ChatMessage], int]:
    """The system prompt + as many of the newest messages as fit `room` tokens together with the request.
    Returns the messages and how many were left out (the oldest)."""
    system, rest = messages[0], list(messages[1:])
    dropped = 0
    while rest and counter.count_messages([system, *rest, request]) > room:
        rest.pop(0)
        dropped += 1
        while rest and rest[0].role == "tool":  # never start on an orphaned tool output
            rest.pop(0)
            dropped += 1
    return [system, *rest, request], dropped


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    tokens_spent: int
    notes: tuple[str, ...]


def summarise(
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    messages: Sequence[ChatMessage],
    instruction: str,
) -> Summary:
    """One summarising call over `messages` (system first) + an instruction from the harness. The input
    is cut to fit the window; what was cut, or an empty reply, is noted rather than hidden."""
    request = ChatMessage("user", instruction, kind=REQUEST_KIND)
    limit = summary_budget(window)
    sent, dropped = fit_request(messages, request, counter, window - limit - 64)
    reply = model.complete(sent, max_tokens=limit, temperature=0.0)
    spent = reply.usage.prompt_tokens + reply.usage.completion_tokens
    if spent == 0:  # the model reported no usage (scripted models): count it ourselves
        spent = counter.count_messages(sent) + counter.count(reply.text)
    notes = [f"summary input cut: {dropped} oldest messages left out"] if dropped else []
    if not reply.text.strip():
        notes.append("the model returned an empty summary")
    return Summary(reply.text.strip(), spent, tuple(notes))
