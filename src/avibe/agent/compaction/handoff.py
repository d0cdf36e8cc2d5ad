"""handoff: Codex style - a handoff summary plus the user's recent messages copied newest-first (prompts in
our own words, from its public description)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from avibe.agent.compaction.messages import (
    SUMMARY_KIND,
    Compacted,
    CompactState,
    MessageCompaction,
    recent_budget,
    summarise,
    summary_message,
)
from avibe.ports import ModelClient, TokenCounter
from avibe.record.messages import ChatMessage

HANDOFF_PROMPT: Final = """\
You are handing this task over to another model that will continue it with no access to this \
conversation. Write a handoff summary: the task and the user's goals, what has been done, the current \
state, the decisions and constraints that still apply, anything still being waited for, and what remains \
to be done next. Keep ids, paths, commands and numbers exact. Reply with the summary only."""

HANDOFF_INTRO: Final = (
    "Another model worked on this task before you and left the handoff summary below. Build on its work "
    "instead of starting over.\n\n{summary}"
)


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
class Handoff(MessageCompaction):
    """Codex style: a handoff summary plus the user's recent messages copied newest-first."""

    name: str = "handoff"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        summary = summarise(model, counter, window, state.messages, HANDOFF_PROMPT)
        copied = _copy_user_messages(state.messages[1:], counter, recent_budget(window, state.threshold))
        kept = (state.messages[0], *copied, summary_message(HANDOFF_INTRO.format(summary=summary.text)))
        return Compacted(kept, summary.tokens_spent, 1, notes=summary.notes)
