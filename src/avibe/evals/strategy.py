"""The compaction strategy interface of the memory evaluation. A strategy gets the running context (system
prompt first) when it would exceed the threshold and returns the compacted context plus what compacting
cost; it may carry text from one compaction to the next (`carry`: e.g. the anchored summary). The values and
the message helpers are the product's (`avibe.agent.compaction.messages`): the eval runs the compactors
`vibe run --compaction` runs, not copies of them."""

from __future__ import annotations

from typing import Protocol

from avibe.agent.compaction.messages import (
    REQUEST_KIND,
    SUMMARY_KIND,
    Compacted,
    CompactionFailed,
    CompactState,
    NotApplicable,
    Summary,
    fit_request,
    recent_budget,
    summarise,
    summary_budget,
    tail_start,
)
from avibe.ports import ModelClient, TokenCounter

__all__ = [
    "REQUEST_KIND",
    "SUMMARY_KIND",
    "CompactState",
    "Compacted",
    "CompactionFailed",
    "NotApplicable",
    "Strategy",
    "StrategyUnavailable",
    "Summary",
    "fit_request",
    "recent_budget",
    "summarise",
    "summary_budget",
    "tail_start",
]


class StrategyUnavailable(Exception):
    """The strategy is not wired in this build (e.g. the checkpoint driver is missing)."""


class Strategy(Protocol):
    """One way to compact. `compact` is called whenever the running context would exceed the threshold."""

    @property
    def name(self) -> str: ...

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted: ...
