"""truncate: oldest-first truncation down to half the window; no model call."""

from __future__ import annotations

from dataclasses import dataclass

from avibe.agent.compaction.messages import Compacted, CompactState, MessageCompaction, truncated
from avibe.ports import ModelClient, TokenCounter


@dataclass(frozen=True, slots=True)
class Truncate(MessageCompaction):
    """Oldest-first truncation down to half the window; no model call."""

    name: str = "truncate"
    target: float = 0.5

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        kept = truncated(list(state.messages), counter, int(window * self.target))
        return Compacted(tuple(kept), 0, 0)
