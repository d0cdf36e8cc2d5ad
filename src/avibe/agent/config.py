"""How one Vibey run is set up: the window, the step limit, the prompt's parts, the compaction."""

from __future__ import annotations

from dataclasses import dataclass

from avibe.checkpoint.turn import Mode
from avibe.context.assemble import DEFAULT_RENDERING, Rendering
from avibe.prompts.vibey import IDENTITY, RULES


@dataclass(frozen=True, slots=True)
class RunConfig:
    window: int | None = None  # override the model's window (forces checkpoints on a smaller window)
    max_steps: int = 30  # model calls per turn
    reply_max_tokens: int = 512
    checkpoint_mode: Mode = "tools"
    identity: str = IDENTITY
    rules: str = RULES
    agents_md: str = ""
    agents_md_heading: str = ""  # set when the agent left AGENTS.md as it is
    skill_catalogue: str = ""
    user_name: str = "user"
    record_where: str = "Avibe's record database"
    recollection: Rendering = DEFAULT_RENDERING  # how the checkpoint is shown
    compaction: str = "checkpoint"  # how room is made: a name in `avibe.agent.compaction.registry`
    threshold: int | None = None  # make room above this many tokens (the eval's `--threshold`); None: F1's
