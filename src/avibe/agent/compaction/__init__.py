"""Compaction: how Vibey makes room when its view outgrows the window (the `Compactor` port), by name.

port.py        the `Compactor` protocol                 registry.py  the compactors by name
room.py        the room policy's loop and `LiveRoom`    checkpoint.py  Vibey's checkpoint (the default)
messages.py    message strategies' shared parts         handoff, rewrite, anchored, mask, truncate, full
"""

from __future__ import annotations

from avibe.agent.compaction.port import Compactor
from avibe.agent.compaction.registry import COMPACTORS, DEFAULT_COMPACTION, compaction_names, make_compactor
from avibe.agent.compaction.room import LiveRoom, Made, RoomPort

__all__ = [
    "COMPACTORS",
    "DEFAULT_COMPACTION",
    "Compactor",
    "LiveRoom",
    "Made",
    "RoomPort",
    "compaction_names",
    "make_compactor",
]
