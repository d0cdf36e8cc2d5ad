"""rewrite: Claude Code style - everything rewritten into one sectioned summary; nothing else is kept
(prompts in our own words, from its public description)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from avibe.agent.compaction.messages import (
    Compacted,
    CompactState,
    MessageCompaction,
    summarise,
    summary_message,
)
from avibe.ports import ModelClient, TokenCounter

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


@dataclass(frozen=True, slots=True)
class Rewrite(MessageCompaction):
    """Claude Code style: rewrite everything into one sectioned summary; nothing else is kept."""

    name: str = "rewrite"

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        summary = summarise(model, counter, window, state.messages, REWRITE_PROMPT)
        kept = (state.messages[0], summary_message(REWRITE_INTRO.format(summary=summary.text)))
        return Compacted(kept, summary.tokens_spent, 1, notes=summary.notes)
