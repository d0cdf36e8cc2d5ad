"""A host that runs a session for people elsewhere (`vibe serve`): what it does is in the record, and its
turn stops when asked (docs/serve.md).

- It records whether it is in a turn, and the tool call it waits on (`HostActivity`): a chat attached
  from another terminal shows the host's real state, not "idle" while the host runs `sleep 60`.
- Its turn stops when the person stops it from an attached chat: that chat appends the stop note
  (`STOPPED_BY_PERSON`) to the record; the watch polls the record while a turn runs, and a stop note
  newer than the turn's start stops it - the command running is killed through the session's stop
  switch, and the step ends at its next clean point (before the model call, while the reply streams).
  The note stays in the record: no host runs the stopped turn again (avibe.host.session).
- Its own process stops a turn the same way when it exits (`ask`): `vibe serve`'s Ctrl-C.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Final

from avibe.errors import ModelError, StoreError
from avibe.host.events import (
    Event,
    EventSink,
    ModelCalled,
    ModelStarted,
    ReplyDelta,
    Stopped,
    ToolCalled,
    TurnEnded,
    TurnStarted,
)
from avibe.host.session import STOPPED_BY_PERSON
from avibe.ports import RecordStore
from avibe.record.entries import EntryQuery
from avibe.record.state import HostActivity

log = logging.getLogger("avibe.host")
POLL_S: Final = 0.2  # how often the record is read for a stop note while a turn runs
DOING_CHARS: Final = 120  # of a tool call's arguments in the activity an attached chat shows


class TurnStopAsked(ModelError):
    """Raised into the loop at a clean stopping point; the loop ends the turn as a stop."""


class TurnWatch:
    """The event sink in front of `emit` for one hosted session: records the host's activity, and
    raises TurnStopAsked at the next clean point once a stop was asked (`ask`, or a stop note in the
    record). `switch` is the session's stop switch (`HostedSession.stop`), bound once it is hosted."""

    def __init__(self, store: RecordStore, session_id: str, emit: EventSink) -> None:
        self.store, self.session_id, self.sink = store, session_id, emit
        self.switch = threading.Event()
        self.in_turn = False
        self.stopped = False  # the last turn was stopped by a stop asked
        self._asked = ""  # why a stop was asked ("" none)
        self._latched = False  # asked by this process's exit: every later turn stops too
        self._turn_from = 0  # the newest seq when the turn started: stop notes after it count
        self._closed = threading.Event()
        self._poller: threading.Thread | None = None

    # ---- asking ------------------------------------------------------------------------------------

    def ask(self, why: str, *, for_good: bool = False) -> None:
        """Stop the running turn (and with `for_good`, every later one): kill what runs now."""
        self._asked, self._latched = why, self._latched or for_good
        if self.in_turn:
            self.switch.set()

    @property
    def for_good(self) -> bool:
        """A stop was asked by this process's exit (every later turn stops too)."""
        return self._latched

    def poll(self) -> None:
        """A stop note appended since the turn started asks for a stop (an attached chat's Ctrl-C)."""
        if not self.in_turn or self._asked:
            return
        entries = self.store.query(EntryQuery(self.session_id, seq_from=self._turn_from + 1))
        if any(entry.source == STOPPED_BY_PERSON for entry in entries):
            log.info("session %s: stopped by the person from an attached chat", self.session_id)
            self.ask("stopped by the user")

    def start_polling(self) -> None:
        def loop() -> None:
            while not self._closed.wait(POLL_S):
                try:
                    self.poll()
                except StoreError as exc:  # the record away for a moment: the next look tries again
                    log.warning("session %s: could not look for a stop: %s", self.session_id, exc)

        self._poller = threading.Thread(target=loop, name=f"stop-{self.session_id}", daemon=True)
        self._poller.start()

    def close(self) -> None:
        self._closed.set()
        if self._poller is not None:
            self._poller.join(timeout=1.0)

    # ---- the events --------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self._turn_from = self.store.get_session(self.session_id).entry_count
            self.in_turn, self.stopped = True, False
            if self._asked and not self._latched:
                self._asked = ""  # a stop asked between turns was for the turn before
            self._activity(HostActivity(turn=True))
        elif isinstance(event, ModelStarted | ReplyDelta | ModelCalled) and self._asked:
            self.stopped = True
            raise TurnStopAsked(self._asked)
        elif isinstance(event, ToolCalled):
            self._activity(HostActivity(turn=True, doing=_doing(event)))
        elif isinstance(event, Stopped) and self.stopped:
            event = Stopped(self._asked)  # said as what it was, not as a model failure
        elif isinstance(event, TurnEnded):
            event = replace(event, reply=self._asked) if self.stopped and event.stopped else event
            self.turn_over()
        self.sink(event)

    def turn_over(self) -> None:
        """The turn ended (or raised): idle in the record; the stop it was asked is used up."""
        if not self.in_turn:
            return
        self.in_turn = False
        self.switch.clear()
        self._asked = self._asked if self._latched else ""
        self._activity(HostActivity())

    def _activity(self, activity: HostActivity) -> None:
        try:
            self.store.save_state(self.session_id, HostActivity.KEY, activity.to_dict())
        except StoreError as exc:  # what an attached chat shows is a courtesy; the turn goes on
            log.warning("session %s: activity not recorded: %s", self.session_id, exc)


def _doing(event: ToolCalled) -> str:
    shown = " ".join(str(value) for value in event.arguments.values())
    shown = shown if len(shown) <= DOING_CHARS else shown[: DOING_CHARS - 1] + "…"
    return f"{event.name} {shown}".strip()
