"""Events the loop emits. UIs render them; they carry no logic ("messages up", STYLE.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # turn, model, tool, checkpoint, checkpoint_failed, fallback, reply, stop
    text: str
    data: dict[str, Any] = field(default_factory=dict)


EventSink = Callable[[Event], None]


def ignore_events(_: Event) -> None:
    """The sink for callers that do not show progress."""
