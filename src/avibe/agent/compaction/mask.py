"""mask: observation masking - tool outputs older than the recent tail are replaced by a placeholder;
if the context is still too large, the oldest messages are truncated."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from avibe.agent.compaction.messages import (
    Compacted,
    CompactState,
    MessageCompaction,
    recent_budget,
    tail_start,
    truncated,
)
from avibe.ports import ModelClient, TokenCounter

MASKED: Final = "[older tool output omitted]"


@dataclass(frozen=True, slots=True)
class Mask(MessageCompaction):
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
        return Compacted(tuple(truncated(masked, counter, int(window * self.target))), 0, 0)
