"""The shared replay loop: feed a scenario's events in order, compact whenever the running context would
exceed the threshold, count the compactions K. The peers' strategies run through this loop; Avibe's
checkpoint is Vibey living the same events through the session host (`avibe.evals.lived`), compacted at the
same threshold, and reported in the same `ReplayResult`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Final, cast

from avibe.checkpoint.trigger import WINDOW_SHARE, TriggerDecision, decide_at
from avibe.evals.scenario import AssistantTurn, BackgroundInput, Event, Scenario
from avibe.evals.strategy import CompactState, Strategy
from avibe.ports import ModelClient, TokenCounter
from avibe.record.entries import Entry, Source
from avibe.record.messages import ChatMessage, ModelFacts, ToolCall
from avibe.record.sources import render_entry_text

SYSTEM_PROMPT: Final = (
    "You are a coding agent working in the user's repository. Use the tools to read, edit and run code. "
    "Follow the user's instructions and constraints exactly."
)
DEFAULT_THRESHOLD: Final = WINDOW_SHARE  # SPEC F1: compact past ~90% of the window (the trigger's share)


def trigger_fraction(facts: ModelFacts, window: int) -> float:
    """Vibey's own trigger (F1) for this model at this window, as a fraction of the window: the smallest
    of 90%, the window less the reply reserve and a safety margin, and a price-tier boundary. Every
    strategy is compacted at this same point, which leaves the checkpoint turn the room it is built for.
    The window is clamped as Vibey clamps a forced window (`clamp_window`: the reply reserve shrinks too)."""
    from avibe.agent.live import clamp_window
    from avibe.checkpoint.trigger import threshold_for

    return threshold_for(clamp_window(replace(facts, window=window), window)) / window


@dataclass(frozen=True, slots=True)
class Step:
    """One event as the record stores it (None for nothing) and as the model sees it."""

    entry: Entry
    messages: tuple[ChatMessage, ...]


def source_of(event: Event) -> Source:
    """How an input event came (T1, T2): the person, or a background source by its kind, name and id."""
    if isinstance(event, BackgroundInput):
        return Source(event.source, event.name, event.ref)
    if isinstance(event, AssistantTurn):
        return Source("assistant")
    return Source("user", event.author)


def to_steps(scenario: Scenario) -> list[Step]:
    """Record entries and chat messages for every event: inputs tagged from their delivery path (T1,
    T2), tool output only in the messages (A3). One simulated minute per event."""
    steps: list[Step] = []
    for seq, event in enumerate(scenario.events, 1):
        source = source_of(event)
        entry = Entry(scenario.id, seq, source, event.text, scenario.start + timedelta(minutes=seq))
        if isinstance(event, AssistantTurn):
            calls = tuple(ToolCall(u.id, u.name, u.arguments) for u in event.tool_uses)
            reply = ChatMessage("assistant", event.text, calls, seq=seq, kind="assistant")
            outputs = tuple(
                ChatMessage(
                    "tool", ("ERROR: " if u.is_error else "") + u.output, tool_call_id=u.id, name=u.name
                )
                for u in event.tool_uses
            )
            steps.append(Step(entry, (reply, *outputs)))
        else:
            steps.append(
                Step(entry, (ChatMessage("user", render_entry_text(entry), seq=seq, kind=source.kind),))
            )
    return steps


@dataclass(frozen=True, slots=True)
class Compaction:
    at_seq: int  # the record seq of the event after which it ran
    tokens_before: int
    tokens_after: int
    tokens_spent: int
    calls: int
    notes: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    changed: bool = True  # False: an attempt that changed nothing (a failed checkpoint that still fits, V5)
    seconds: float = 0.0  # wall time of the compaction (model calls included)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    scenario: str
    strategy: str
    window: int
    context: tuple[ChatMessage, ...]
    compactions: tuple[Compaction, ...]
    record: tuple[Entry, ...]
    peak_tokens: int  # the largest context any request would have carried
    carry: str = ""  # what the last compaction handed on (the checkpoint's memo, for the probes' reminder)

    @property
    def k(self) -> int:
        return sum(c.changed for c in self.compactions)

    @property
    def tokens_spent(self) -> int:
        return sum(c.tokens_spent for c in self.compactions)

    @property
    def calls(self) -> int:
        return sum(c.calls for c in self.compactions)

    @property
    def overflowed(self) -> bool:
        return self.peak_tokens > self.window


class _Context:
    """The running context and its size, recounted whole after every change: a chat template's framing
    is not additive per message, and the context never holds more than about a window."""

    def __init__(self, counter: TokenCounter, messages: Sequence[ChatMessage]) -> None:
        self.counter = counter
        self.reset(messages)

    def extend(self, messages: Sequence[ChatMessage]) -> None:
        self.reset([*self.messages, *messages])

    def reset(self, messages: Sequence[ChatMessage]) -> None:
        self.messages = list(messages)
        self.tokens = self.counter.count_messages(self.messages)


REASON: Final = "the eval's threshold"  # the trigger's reason in a replayed checkpoint's provenance


def replay_trigger(window: int, threshold: float) -> Callable[[int], TriggerDecision]:
    """The trigger a replay compacts by (F1's decision, `decide_at`, at `threshold` x `window`): the
    replay's loop asks it; Vibey, living the transcript, decides at the same one (`RunConfig.threshold`)."""
    limit = int(window * threshold)
    return lambda tokens: decide_at(tokens, limit, REASON)


class _Replay:
    """One scenario through one strategy: the context as it grows, the record, the compactions."""

    def __init__(self, scenario: Scenario, strategy: Strategy, model: ModelClient, counter: TokenCounter,
                 window: int, threshold: float, system_prompt: str) -> None:  # fmt: skip
        self.scenario, self.strategy, self.model, self.window = scenario, strategy, model, window
        self.counter, self.threshold = counter, threshold
        self.trigger = replay_trigger(window, threshold)
        self.context = _Context(counter, [ChatMessage("system", system_prompt)])
        self.record: list[Entry] = []
        self.compactions: list[Compaction] = []
        self.carry, self.peak = "", self.context.tokens

    def state(self) -> CompactState:
        s = self.scenario
        return CompactState(tuple(self.context.messages), tuple(self.record), s.id, s.user, self.carry,
                            len(self.compactions) + 1, self.threshold)  # fmt: skip

    def take(self, step: Step) -> None:
        """The event into the record and the context."""
        self.record.append(step.entry)
        self.context.extend(step.messages)
        self.peak = max(self.peak, self.context.tokens)

    def compact(self, at_seq: int) -> Compaction | None:
        """The strategy's compaction when the trigger fires; None when it did not, or did nothing."""
        if not self.trigger(self.context.tokens).checkpoint:
            return None
        state, before, started = self.state(), self.context.tokens, time.monotonic()
        done = self.strategy.compact(state, self.model, self.counter, self.window)
        seconds = round(time.monotonic() - started, 2)
        changed = done.messages != state.messages
        if not changed and not done.calls:
            return None  # nothing happened (the ceiling while it still fits)
        self.context.reset(done.messages)
        self.carry = done.carry
        compaction = Compaction(at_seq, before, self.context.tokens, done.tokens_spent, done.calls,
                                done.notes, dict(done.meta), changed, seconds)  # fmt: skip
        self.compactions.append(compaction)
        return compaction

    def result(self) -> ReplayResult:
        return ReplayResult(self.scenario.id, self.strategy.name, self.window, tuple(self.context.messages),
                            tuple(self.compactions), tuple(self.record), self.peak, self.carry)  # fmt: skip


def replay(
    scenario: Scenario,
    strategy: Strategy,
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    system_prompt: str = SYSTEM_PROMPT,
    on_compaction: Callable[[Compaction], None] | None = None,
) -> ReplayResult:
    """Run the scenario through the strategy. NotApplicable from the strategy propagates. A strategy that
    lives the transcript (Avibe's checkpoint: Vibey through the session host) runs it whole itself."""
    live = getattr(strategy, "live", None)
    if live is not None:
        return cast(ReplayResult, live(scenario, model, counter, window, threshold=threshold,
                                       system_prompt=system_prompt, on_compaction=on_compaction))  # fmt: skip
    run = _Replay(scenario, strategy, model, counter, window, threshold, system_prompt)
    for step in to_steps(scenario):
        run.take(step)
        compaction = run.compact(step.entry.seq)
        if compaction is not None and on_compaction is not None:
            on_compaction(compaction)
    return run.result()


def conversation_tokens(scenario: Scenario, counter: TokenCounter, system_prompt: str = SYSTEM_PROMPT) -> int:
    """Tokens of the whole conversation, uncompacted."""
    messages = [ChatMessage("system", system_prompt)]
    for step in to_steps(scenario):
        messages.extend(step.messages)
    return counter.count_messages(messages)


def size_for_k(
    make: Callable[[int], Scenario],
    k: int,
    window: int,
    counter: TokenCounter,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    kept_after: float | None = None,
) -> int:
    """The filler size that makes a scenario cross the threshold about `k` times: the first crossing at
    threshold x window, each later one after refilling from `kept_after` x window (default: the recent
    messages, a quarter of the threshold, plus a summary of a tenth of the window). The K each strategy
    actually reaches is measured by the replay and reported next to the target."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    kept = threshold / 4 + 0.1 if kept_after is None else kept_after
    refill = max(threshold - kept, 0.05) * window
    target = threshold * window + (k - 1) * refill + window * 0.05
    base, probe = conversation_tokens(make(0), counter), 16
    per_turn = max(1.0, (conversation_tokens(make(probe), counter) - base) / probe)
    size = max(1, math.ceil((target - base) / per_turn))

    def tokens(n: int) -> int:
        return conversation_tokens(make(n), counter)

    # the filler's turns differ in length: walk from the estimate to the smallest size that reaches it
    while tokens(size) < target:
        size += 1
    while size > 1 and tokens(size - 1) >= target:
        size -= 1
    return size
