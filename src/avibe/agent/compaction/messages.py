"""Message strategies: compactors that rewrite the running context themselves - the peers' ways
(`avibe.agent.compaction.handoff`, `rewrite`, `anchored`, `mask`, `truncate`, `full`), written from their
public descriptions. Each one is a `compact(CompactState, model, counter, window) -> Compacted` over the
messages (system prompt first); `MessageCompaction` runs it inside a live session, so the eval's replay and
`vibe run --compaction NAME` call the same method of the same class.

In a session: when the trigger fires (F1) the view (system prompt, the latest checkpoint's recollection if
the session has one, the live context) is compacted; what the strategy keeps after its system prompt
becomes the live context, and what it hands on (`carry`: e.g. the anchored summary) is kept in the live
state, persisted with it and with the strategy's name (`EXTRA_KEY`). A request that still does not fit goes
through the room policy with checkpoints off: a model-free move-out (V7) or the U3 stop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from avibe.checkpoint.trigger import WINDOW_SHARE
from avibe.errors import ModelError
from avibe.host.events import Compacted as CompactedEvent
from avibe.ports import CompletionRequest, ModelClient, TokenCounter
from avibe.record.entries import Entry
from avibe.record.messages import REMINDER_KIND, ChatMessage

if TYPE_CHECKING:
    from avibe.agent.compaction.room import LiveRoom, Made
    from avibe.agent.state import LiveState

log = logging.getLogger("avibe.compaction")
EXTRA_KEY: Final = "compaction"  # LiveState.extra: {"name", "carry", "number"} of the session's compactor

SUMMARY_KIND: Final = "summary"  # ChatMessage.kind of a strategy's summary (not a user message)
REQUEST_KIND: Final = "compaction_request"  # ChatMessage.kind of a compaction request (never the user's)


class NotApplicable(Exception):
    """The strategy cannot run on this scenario at this window (e.g. the full context does not fit)."""


class CompactionFailed(Exception):
    """The strategy could not make the context fit at all; the run is recorded as an error, with why."""


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
    threshold: float = WINDOW_SHARE  # F1: the trigger's share of the window (a session passes its own)


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
    reply = model.complete(CompletionRequest(sent, max_tokens=limit, temperature=0.0))
    spent = reply.usage.prompt_tokens + reply.usage.completion_tokens
    if spent == 0:  # the model reported no usage (scripted models): count it ourselves
        spent = counter.count_messages(sent) + counter.count(reply.text)
    notes = [f"summary input cut: {dropped} oldest messages left out"] if dropped else []
    if not reply.text.strip():
        notes.append("the model returned an empty summary")
    return Summary(reply.text.strip(), spent, tuple(notes))


def summary_message(text: str) -> ChatMessage:
    """A strategy's summary in the context: a user-role message of its own kind (never the user's words)."""
    return ChatMessage("user", text, kind=SUMMARY_KIND)


def truncated(messages: list[ChatMessage], counter: TokenCounter, target: int) -> list[ChatMessage]:
    """Drop the oldest messages after the system prompt until the context fits `target` tokens (never
    leaving a tool output whose call was dropped at the front)."""
    system, rest = messages[0], messages[1:]
    while len(rest) > 1 and counter.count_messages([system, *rest]) > target:
        rest.pop(0)
        while len(rest) > 1 and rest[0].role == "tool":
            rest.pop(0)
    return [system, *rest]


class MessageCompaction:
    """The live side of a message strategy: the subclass's `compact` when the trigger fires, then the room
    policy with checkpoints off (V5, V7, U3). Subclasses are frozen dataclasses with a `name`."""

    __slots__ = ()
    name: str

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        raise NotImplementedError

    def make_room(self, state: LiveState, room: LiveRoom) -> Made:
        state = room.cut_latest_tool_output(state)
        tokens = room.tokens(state)
        decision = room.trigger(tokens)
        if decision.checkpoint and room.model is not None:
            state = self._compact_live(state, room, tokens)
        return room.make_room(state, checkpoints=False)

    def _compact_live(self, state: LiveState, room: LiveRoom, tokens: int) -> LiveState:
        """One compaction of the live view. A strategy that cannot (the model failed, the full context
        does not fit) changes nothing: the fallback after it makes room without the model (V7)."""
        held = state.extra.get(EXTRA_KEY)
        held = held if isinstance(held, dict) and held.get("name") == self.name else {}
        view = tuple(m for m in room.viewer.view(state, room.port.latest()) if m.kind != REMINDER_KIND)
        window = room.facts.window
        asked = CompactState(view, (), room.viewer.session_id, "user", str(held.get("carry", "")),
                             int(held.get("number", 0)) + 1, room.limits.threshold / window)  # fmt: skip
        started = time.monotonic()
        try:
            assert room.model is not None
            done = self.compact(asked, room.model, room.viewer.counter, window)
        except (NotApplicable, CompactionFailed, ModelError) as exc:
            log.warning(
                "compaction %s made no room: %s; moving out without the model instead", self.name, exc
            )
            return state
        kept = tuple(m for m in done.messages if m.role != "system")
        extra = {**state.extra, EXTRA_KEY: {"name": self.name, "carry": done.carry, "number": asked.number}}
        state = replace(state, messages=kept, extra=extra)
        room.port.begin(state)  # persisted at once: a restart resumes from the compacted context
        after = room.tokens(state)
        seconds = round(time.monotonic() - started, 3)
        room.events(CompactedEvent(self.name, tokens, after, done.calls, seconds))
        return state
