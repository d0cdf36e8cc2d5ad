"""full: the ceiling - nothing is ever dropped; compaction is asked for only when it does not fit (in a
session that is past the window, so the model-free move-out makes room instead, V7)."""

from __future__ import annotations

from dataclasses import dataclass

from avibe.agent.compaction.messages import Compacted, CompactState, MessageCompaction, NotApplicable
from avibe.ports import ModelClient, TokenCounter


@dataclass(frozen=True, slots=True)
class FullContext(MessageCompaction):
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
