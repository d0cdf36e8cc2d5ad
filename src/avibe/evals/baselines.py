"""The peers' compaction strategies, written from their public descriptions (prompts are our own words).

| name     | modelled on              | what it does                                                      |
|----------|--------------------------|-------------------------------------------------------------------|
| full     | the ceiling              | never compacts; not applicable when the conversation does not fit |
| truncate | oldest-first truncation  | drops the oldest messages, no model call                          |
| mask     | observation masking      | blanks old tool outputs, then truncates if still too large        |
| rewrite  | Claude Code's compaction | one summary of everything, in sections, retyping user messages    |
| handoff  | Codex's compaction       | handoff summary + the user's recent messages copied newest-first  |
| anchored | OpenCode / Factory       | a persistent summary updated with only the part that leaves       |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from avibe.evals.strategy import (
    SUMMARY_KIND,
    Compacted,
    CompactState,
    NotApplicable,
    recent_budget,
    summarise,
    tail_start,
)
from avibe.ports import ModelClient, TokenCounter
from avibe.record.messages import ChatMessage

REWRITE_PROMPT: Final = """\
The conversation is about to outgrow your context window. Write a summary of everything so far that \
lets you continue the work with nothing else to go on. Use these sections, in this order, each under a \
markdown heading:
1. Primary request and intent - what the user wants, in detail
2. Key technical concepts
3. Files and code - the files read or changed and why they matter
4. Errors and fixes - every error met and how it was resolved
5. Problem solving - what was tried, what worked
6. All user messages - list every message the user wrote (not tool results), one bullet each
7. Pending tasks
8. Current work - exactly what was being done just before this request
9. Next step - the next step, in line with the user's latest request
Keep file paths, ids, commands and numbers exact. Reply with the summary only."""

REWRITE_INTRO: Final = (
    "This session continues an earlier conversation that ran out of context. The summary below covers "
    "the earlier part of that conversation.\n\n{summary}\n\nContinue the work from where it stopped."
)

HANDOFF_PROMPT: Final = """\
You are handing this task over to another model that will continue it with no access to this \
conversation. Write a handoff summary: the task and the user's goals, what has been done, the current \
state, the decisions and constraints that still apply, anything still being waited for, and what remains \
to be done next. Keep ids, paths, commands and numbers exact. Reply with the summary only."""

HANDOFF_INTRO: Final = (
    "Another model worked on this task before you and left the handoff summary below. Build on its work "
    "instead of starting over.\n\n{summary}"
)

ANCHORED_FIRST: Final = """\
The older part of this conversation is about to leave your context. Write a persistent summary of it \
under these headings: ## Session intent, ## Files and changes, ## Decisions, ## Current state, \
## Next steps. Keep ids, paths, commands and numbers exact. Reply with the summary only."""

ANCHORED_UPDATE: Final = """\
The messages above are the next part of the conversation to leave your context. Here is the persistent \
summary written so far:

{previous}

Update it: keep everything that is still true, merge in what these messages add or change, and drop \
only what they show is obsolete. Keep the same headings. Reply with the whole updated summary only."""

ANCHORED_INTRO: Final = "Summary of the earlier part of this session:\n\n{summary}"
MASKED: Final = "[older tool output omitted]"


def _summary_message(text: str) -> ChatMessage:
    return ChatMessage("user", text, kind=SUMMARY_KIND)


def _truncate(messages: list[ChatMessage], counter: TokenCounter, target: int) -> list[ChatMessage]:
    """Drop the oldest messages after the system prompt until the context fits `target` tokens."""
    system, rest = messages[0], messages[1:]
    while len(rest) > 1 and counter.count_messages([system, *rest]) > target:
        rest.pop(0)
        while len(rest) > 1 and rest[0].role == "tool":
            rest.pop(0)
    return [system, *rest]


@dataclass(frozen=True, slots=True)
class FullContext:
    """The ceiling: nothing is ever dropped. Compaction is asked for only when it does not fit."""

    name: str = "full"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        if counter.count_messages(state.messages) <= window:
            return Compacted(state.messages, 0, 0, notes=("over the threshold but still within the window",))
        raise NotApplicable(
            "the conversation does not fit the window; the full-context ceiling needs a larger one"
        )


@dataclass(frozen=True, slots=True)
class Truncate:
    """Oldest-first truncation down to half the window; no model call."""

    name: str = "truncate"
    target: float = 0.5

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        kept = _truncate(list(state.messages), counter, int(window * self.target))
        return Compacted(tuple(kept), 0, 0)


@dataclass(frozen=True, slots=True)
class Mask:
    """Observation masking: tool outputs older than the recent tail are replaced by a placeholder; if the
    context is still too large, the oldest messages are truncated."""

    name: str = "mask"
    target: float = 0.5

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        messages = list(state.messages)
        cut = tail_start(messages, counter, recent_budget(window, state.threshold))
        masked = [
            replace(m, content=MASKED) if m.role == "tool" and i < cut else m for i, m in enumerate(messages)
        ]
        return Compacted(tuple(_truncate(masked, counter, int(window * self.target))), 0, 0)


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Claude Code style: rewrite everything into one sectioned summary; nothing else is kept."""

    name: str = "rewrite"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        summary = summarise(model, counter, window, state.messages, REWRITE_PROMPT)
        kept = (state.messages[0], _summary_message(REWRITE_INTRO.format(summary=summary.text)))
        return Compacted(kept, summary.tokens_spent, 1, notes=summary.notes)


def _copy_user_messages(
    messages: Sequence[ChatMessage], counter: TokenCounter, budget: int
) -> list[ChatMessage]:
    """Every user-role input (not a summary) chosen newest-first within `budget`, returned in time order.
    Inputs are copied as they stand, so a background input keeps its source tag."""
    chosen: list[ChatMessage] = []
    used = 0
    for message in reversed(messages):
        if message.role != "user" or message.kind == SUMMARY_KIND:
            continue
        cost = counter.count_messages([message])
        if used + cost > budget:
            break
        chosen.append(message)
        used += cost
    return chosen[::-1]


@dataclass(frozen=True, slots=True)
class Handoff:
    """Codex style: a handoff summary plus the user's recent messages copied newest-first."""

    name: str = "handoff"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        summary = summarise(model, counter, window, state.messages, HANDOFF_PROMPT)
        copied = _copy_user_messages(state.messages[1:], counter, recent_budget(window, state.threshold))
        kept = (state.messages[0], *copied, _summary_message(HANDOFF_INTRO.format(summary=summary.text)))
        return Compacted(kept, summary.tokens_spent, 1, notes=summary.notes)


@dataclass(frozen=True, slots=True)
class Anchored:
    """OpenCode / Factory style: only the part that leaves is summarised, merged into the previous
    summary (carried between compactions); the recent messages stay verbatim."""

    name: str = "anchored"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        messages = [m for m in state.messages if m.kind != SUMMARY_KIND]
        cut = tail_start(messages, counter, recent_budget(window, state.threshold))
        leaving = [messages[0], *messages[1:cut]]
        prompt = ANCHORED_UPDATE.format(previous=state.carry) if state.carry else ANCHORED_FIRST
        summary = summarise(model, counter, window, leaving, prompt)
        text = summary.text or state.carry  # an empty update keeps the previous summary
        kept = (messages[0], _summary_message(ANCHORED_INTRO.format(summary=text)), *messages[cut:])
        return Compacted(kept, summary.tokens_spent, 1, carry=text, notes=summary.notes)
