"""The session host: it owns one live session - the inbox every input comes through (ingress), the agent
working in it, the sources that post into it (background jobs today; watches, timers, callbacks and
other sessions next), and the events it emits. It runs the agent when input is waiting and idles
otherwise; a background job outlives the turn that started it, and its completion - a tagged callback
input - wakes the agent again (S3, T1)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from avibe.host.agent import Agent, Input, TurnResult, render_input
from avibe.host.events import EventSink, Idle, InputArrived, ignore_events
from avibe.ingress import deliver
from avibe.ports import Clock, RecordStore
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.sources import render_entry_text

log = logging.getLogger("avibe.host")
POLL_S: Final = 0.2
# The note recorded when the person stopped a turn (Ctrl-C in the chat): the turn was stopped by the
# person, and that stop answers every input before the note. No host - the chat, `vibe serve`, `vibe run
# --session` - runs a turn for them again; the next input after the note does, and the agent then takes
# the stopped inputs and the note in with it (docs/chat.md).
STOPPED_BY_PERSON: Final = Source("harness", name="chat")


def after_last_stop(entries: Sequence[Entry]) -> Sequence[Entry]:
    """`entries` after the last note saying the person stopped a turn (all of them when there is none)."""
    stops = [i for i, entry in enumerate(entries) if entry.source == STOPPED_BY_PERSON]
    return entries[stops[-1] + 1 :] if stops else entries


class InputSource(Protocol):
    """Something that posts into the session on its own time (through the delivery port it was given)."""

    def poll(self) -> None: ...  # deliver whatever is due now
    def waiting_for(self) -> tuple[str, ...]: ...  # ids of work still running that will post later
    def close(self) -> None: ...


def _tag(entry: Entry) -> str:
    """The source tag line the agent sees first (T1); empty for the person's own words."""
    return "" if entry.is_user else render_entry_text(entry).split("\n", 1)[0]


@dataclass
class SessionHost:
    store: RecordStore
    session_id: str
    agent: Agent
    clock: Clock
    emit: EventSink = ignore_events
    sources: list[InputSource] = field(default_factory=list)
    # Inputs that wait for the next turn instead of starting one (a feed in "queue" mode).
    queued: Callable[[Entry], bool] = lambda entry: False
    _quiet_upto: int = field(default=0, repr=False)  # entries up to here wake nobody

    # ---- inputs ----------------------------------------------------------------------------------------

    def post(self, source: Source, text: str, key: str = "") -> Entry:
        """The delivery port: any input enters the record through ingress, tagged by how it came (T1).
        `key` makes it idempotent: a key the session has seen records nothing new."""
        last = self.store.get_session(self.session_id).entry_count if key else None
        entry = deliver(self.store, self.session_id, source, text, clock=self.clock, key=key)
        if last is None or entry.seq > last:  # a repeated key is no new input
            self.emit(InputArrived(entry.seq, entry.kind, entry.source.name, _tag(entry), entry.text))
        return entry

    def add_source(self, source: InputSource) -> None:
        self.sources.append(source)

    def poll_sources(self) -> None:
        """Let every source deliver what is due now (a timer's fire, a watch's change, a finished job)."""
        for source in self.sources:
            source.poll()

    def after(self, seq: int) -> list[Input]:
        """The agent's inbox (`host.agent.Inbox`): sources deliver what is due, then every entry after
        `seq`, rendered by the one function every backend uses (T3)."""
        self.poll_sources()
        return [render_input(e) for e in self.store.query(EntryQuery(self.session_id, seq_from=seq + 1))]

    def waiting_input(self) -> bool:
        """An input the agent has not taken in yet (its own replies, queued inputs, and inputs the person
        stopped the turn for - `STOPPED_BY_PERSON` - do not wake it).
        Entries already found quiet are not read again (a queue of thousands is read once)."""
        start = max(self.agent.cursor(), self._quiet_upto) + 1
        entries = self.store.query(EntryQuery(self.session_id, seq_from=start))
        if any(e.kind != "assistant" and not self.queued(e) for e in after_last_stop(entries)):
            return True
        if entries:
            self._quiet_upto = entries[-1].seq
        return False

    def waiting_for(self) -> tuple[str, ...]:
        return tuple(job for source in self.sources for job in source.waiting_for())

    # ---- running ---------------------------------------------------------------------------------------

    def send(self, text: str, user_name: str) -> TurnResult:
        """The person's message, then the turn it starts."""
        self.post(Source("user", name=user_name), text)
        return self.agent.run_turn(self, self.emit)

    def run_until_idle(
        self,
        *,
        wait_for_jobs: bool = True,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[TurnResult]:
        """Run a turn whenever input is waiting; return when none is and (with `wait_for_jobs`) no job
        the agent waits for is running. `timeout_s` bounds the wait for jobs, not a running turn."""
        results: list[TurnResult] = []
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self.poll_sources()
            if self.waiting_input():
                results.append(self.agent.run_turn(self, self.emit))
                continue
            waiting = self.waiting_for()
            past = deadline is not None and time.monotonic() > deadline
            if not waiting or not wait_for_jobs or past:
                self.emit(Idle(waiting))
                return results
            sleep(POLL_S)

    def close(self) -> None:
        """Stop the sources (background jobs die with the host that ran them)."""
        for source in self.sources:
            try:
                source.close()
            except Exception:  # one source failing to stop must not keep the others running
                log.exception("session %s: a source did not close cleanly", self.session_id)
