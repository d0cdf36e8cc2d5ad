"""The compactors by name: one line each. `vibe run --compaction NAME`, `compaction = "NAME"` in the
config, `/compaction NAME` in the chat and `vibe eval -s NAME` all pick from here, so a new strategy is one
file beside these and one line below."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from avibe.agent.compaction.anchored import Anchored
from avibe.agent.compaction.checkpoint import CheckpointCompaction
from avibe.agent.compaction.full import FullContext
from avibe.agent.compaction.handoff import Handoff
from avibe.agent.compaction.mask import Mask
from avibe.agent.compaction.port import Compactor
from avibe.agent.compaction.rewrite import Rewrite
from avibe.agent.compaction.truncate import Truncate

DEFAULT_COMPACTION: Final = "checkpoint"

COMPACTORS: Final[dict[str, Callable[[], Compactor]]] = {
    "checkpoint": CheckpointCompaction,
    "full": FullContext,
    "truncate": Truncate,
    "mask": Mask,
    "rewrite": Rewrite,
    "handoff": Handoff,
    "anchored": Anchored,
}


def compaction_names() -> tuple[str, ...]:
    return tuple(COMPACTORS)


def make_compactor(name: str) -> Compactor:
    """A fresh compactor by name; ValueError naming the choices for any other name."""
    make = COMPACTORS.get(name)
    if make is None:
        raise ValueError(f"unknown compaction {name!r}; choose from {', '.join(COMPACTORS)}")
    return make()
