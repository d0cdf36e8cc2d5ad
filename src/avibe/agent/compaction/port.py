"""The Compactor port: what Vibey calls when its view outgrows its room (F1), beside the host's `Agent` and
`InputSource`. One compactor per session, picked by name (`avibe.agent.compaction.registry`); the eval
replays transcripts through the same classes (`avibe.evals.strategies`), so `vibe eval -s handoff` measures
what `vibe run --compaction handoff` runs.

A compactor makes room through `LiveRoom` (the live state's room ops: the view, the trigger, the record
port, the model) and returns what `LiveRoom.make_room` returns. Whatever the strategy, a request that still
does not fit afterwards falls back to the model-free move-out (V7) and the U3 stop, never to an overflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from avibe.agent.compaction.room import LiveRoom, Made
    from avibe.agent.state import LiveState


@runtime_checkable
class Compactor(Protocol):
    """One way of making room, over a live session."""

    @property
    def name(self) -> str: ...

    def make_room(self, state: LiveState, room: LiveRoom) -> Made: ...
