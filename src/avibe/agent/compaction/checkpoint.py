"""checkpoint: Vibey's own way and its default - the checkpoint turn folds the oldest part into mind, memo
and scene (F1-F5, V1-V9), through the whole room policy (`LiveRoom.make_room`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from avibe.agent.compaction.room import LiveRoom, Made
    from avibe.agent.state import LiveState


@dataclass(frozen=True, slots=True)
class CheckpointCompaction:
    """The checkpoint as a compactor: the room policy with checkpoints on. Its state between requests (V8's
    strikes, the last failure a move-out names) is the `LiveRoom`'s, one per run."""

    name: str = "checkpoint"

    def make_room(self, state: LiveState, room: LiveRoom) -> Made:
        return room.make_room(state)
