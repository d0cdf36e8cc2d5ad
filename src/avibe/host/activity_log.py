"""Tool outputs and errors, kept with the record for the person (`record/activity.py`): `ActivityLog`
listens to a session's events as `ContextLog` does, and keeps in the session's state what the inspector's
timeline and `vibe log` show between the entries - each tool call's output and whether it failed, a turn
that stopped (the model failed), a checkpoint that failed. Any process sharing the record reads it back
with `load_activity`.

Writes are bounded: one write per tool call or error, of the newest chunk only (at most CHUNK_ITEMS items
and about CHUNK_CHARS characters of output), plus the header when a chunk starts.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

from avibe.errors import StateError
from avibe.host.events import CheckpointFailed, Event, EventSink, Stopped, ToolCalled, ToolFinished
from avibe.ports import RecordStore
from avibe.record.activity import OUTPUT_KEPT, count_lines
from avibe.record.state import ActivityChunk, ActivityHeader, ActivityItem

log = logging.getLogger("avibe.host")
CHUNK_ITEMS: Final = 50
CHUNK_CHARS: Final = 200_000
# The chat's Ctrl-C ends the turn as a stop with this message (`tui.driver.StepCancelled.MESSAGE`): the
# person stopped it, and the record has their stop already (the chat's note), so it is no error to show.
CANCELLED_BY_PERSON: Final = "cancelled by the user (Ctrl-C)"


@dataclass
class ActivityLog:
    """An event sink that keeps the session's tool outputs and errors, then passes every event on to
    `inner`. A failed write is the store's error: it propagates like any other write of the session. A
    stored document of the wrong shape (written by hand, cut short) is logged and this log stops keeping
    for the rest of the process: the session goes on, and the document stays as it is for a person to fix."""

    store: RecordStore
    session_id: str
    inner: EventSink
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _header: ActivityHeader | None = None
    _items: list[ActivityItem] = field(default_factory=list)  # the newest chunk's
    _chars: int = 0
    _off: bool = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolFinished):
            self._tool(event)
        elif isinstance(event, Stopped) and CANCELLED_BY_PERSON not in event.message:
            self._add(ActivityItem(0, "stopped", "", message=event.message))
        elif isinstance(event, CheckpointFailed):
            self._add(ActivityItem(0, "checkpoint_failed", "", message=event.reason))
        elif isinstance(event, ToolCalled):
            pass  # the call itself is in the reply's entry (its calls); its output comes with ToolFinished
        self.inner(event)

    def _tool(self, event: ToolFinished) -> None:
        output = event.output
        item = ActivityItem(
            0, "tool", "", name=event.name, call_id=event.call_id, error=event.is_error,
            output=output[:OUTPUT_KEPT], chars=max(len(output), event.output_chars),
            lines=count_lines(output), seconds=event.seconds, message=event.error,
        )  # fmt: skip
        self._add(item)

    def _add(self, item: ActivityItem) -> None:
        """`item` placed after the session's newest entry, now; the newest chunk written again."""
        if self._off:
            return
        try:
            header = self._load()
        except StateError as exc:
            log.warning(
                "session %s: tool outputs and errors are not kept from now on: %s", self.session_id, exc
            )
            self._off = True
            return
        after = self.store.get_session(self.session_id).entry_count
        item = replace(item, after=after, at=self.now().isoformat())
        size = len(item.output) + len(item.message)
        if not header.starts or len(self._items) >= CHUNK_ITEMS or self._chars + size > CHUNK_CHARS:
            self._items, self._chars = [], 0
            self._header = header = ActivityHeader((*header.starts, after))
            self.store.save_state(self.session_id, ActivityHeader.KEY, header.to_dict())
        self._items.append(item)
        self._chars += size
        chunk = ActivityChunk(tuple(self._items))
        self.store.save_state(self.session_id, ActivityChunk.key(len(header.starts) - 1), chunk.to_dict())

    def _load(self) -> ActivityHeader:
        """The header and the newest chunk as stored (another process may have hosted the session)."""
        if self._header is None:
            stored = self.store.load_state(self.session_id, ActivityHeader.KEY)
            self._header = ActivityHeader.from_stored(stored)
            if self._header.starts:
                index = len(self._header.starts) - 1
                stored = self.store.load_state(self.session_id, ActivityChunk.key(index))
                self._items = list(ActivityChunk.from_stored(stored, index).items)
                self._chars = sum(len(i.output) + len(i.message) for i in self._items)
        return self._header


def load_activity(
    store: RecordStore, session_id: str, first: int = 0, last: int | None = None
) -> dict[int, list[ActivityItem]]:
    """The items placed after entries `first`..`last` (inclusive; None: to the end), by that entry's seq,
    each list in the order they happened. Only the chunks that can hold them are read. A damaged document
    is logged and left out: the entries are shown without what it held."""
    try:
        starts = ActivityHeader.from_stored(store.load_state(session_id, ActivityHeader.KEY)).starts
    except StateError as exc:
        log.warning("session %s: %s", session_id, exc)
        return {}
    found: dict[int, list[ActivityItem]] = {}
    begin = max(0, bisect_left(starts, first) - 1)  # the last chunk starting before `first` may hold it
    for index in range(begin, len(starts)):
        if last is not None and starts[index] > last:
            break
        try:
            chunk = ActivityChunk.from_stored(store.load_state(session_id, ActivityChunk.key(index)), index)
        except StateError as exc:
            log.warning("session %s: %s", session_id, exc)
            continue
        for item in chunk.items:
            if item.after >= first and (last is None or item.after <= last):
                found.setdefault(item.after, []).append(item)
    return found
