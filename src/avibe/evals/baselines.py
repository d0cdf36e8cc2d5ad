"""The peers' compaction strategies, as the eval names them. They are the product's compactors
(`avibe.agent.compaction`): the same classes `vibe run --compaction NAME` runs.

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

from avibe.agent.compaction.anchored import Anchored
from avibe.agent.compaction.full import FullContext
from avibe.agent.compaction.handoff import HANDOFF_PROMPT, Handoff
from avibe.agent.compaction.mask import MASKED, Mask
from avibe.agent.compaction.rewrite import REWRITE_PROMPT, Rewrite
from avibe.agent.compaction.truncate import Truncate

__all__ = ["HANDOFF_PROMPT", "MASKED", "REWRITE_PROMPT", "Anchored", "FullContext", "Handoff", "Mask",
           "Rewrite", "Truncate"]  # fmt: skip
