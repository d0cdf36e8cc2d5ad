"""anchored: OpenCode / Factory style - only the part that leaves is summarised, merged into the previous
summary (carried between compactions); the recent messages stay verbatim."""

from __future__ import annotations

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
    tail_start,
)
from avibe.ports import ModelClient, TokenCounter

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


@dataclass(frozen=True, slots=True)
class Anchored(MessageCompaction):
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
        kept = (messages[0], summary_message(ANCHORED_INTRO.format(summary=text)), *messages[cut:])
        return Compacted(kept, summary.tokens_spent, 1, carry=text, notes=summary.notes)
