"""Vibey's port onto the record for one session: its replies and notes, the live state saved after every
step, the latest checkpoint, and a checkpoint committed in one transaction with the live state it implies
(`RoomPort`).
This process is the session's one writer (its lease), so what it wrote last is kept, not re-read: the live
state is read from the record once, when the session opens (or after a write that failed), and a turn
starts from the state the last one saved (a step once re-read and re-parsed the whole live context)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace

from avibe.agent.interrupted import NOTE_SOURCE, Interrupted, note_text
from avibe.agent.state import STATE_KEY, LiveState, StateEncoder
from avibe.errors import StoreError
from avibe.ingress import deliver, record_reply
from avibe.ports import Clock, RecordStore, StoredCheckpoint
from avibe.record.entries import CallRecord, Entry
from avibe.record.messages import ModelReply

log = logging.getLogger("avibe.agent")


@dataclass
class SessionRecord:
    store: RecordStore
    session_id: str
    clock: Clock
    _latest: list[StoredCheckpoint | None] = field(default_factory=list, repr=False)  # [] = not loaded
    _cursor: int | None = field(default=None, repr=False)
    _saved: LiveState | None = field(default=None, repr=False)  # as the record holds it (None: read it)
    _encoder: StateEncoder = field(default_factory=StateEncoder, repr=False)

    def load_state(self) -> LiveState:
        state = self._saved
        if state is None:
            data = self.store.load_state(self.session_id, STATE_KEY)
            state = LiveState.from_dict(data) if data else LiveState()
            self._saved = state
        if state.checkpointing:  # the process died during a checkpoint: the record is intact; go on
            log.warning("session %s: the last checkpoint was interrupted; resuming", self.session_id)
            state = replace(state, checkpointing=False)
        return state

    def save_state(self, state: LiveState) -> None:
        if state is self._saved:
            return  # the record holds it already (a turn that ends right after a saved step)
        self._saved = None  # a write that fails may or may not have committed: read it back next time
        self.store.save_state(self.session_id, STATE_KEY, self._encoder.encode(state))
        self._saved, self._cursor = state, state.last_seq

    begin = save_state  # a checkpoint starts: saved with `checkpointing` set, so a crash now is visible

    def latest(self) -> StoredCheckpoint | None:
        """Read once; a checkpoint this process commits replaces it."""
        if not self._latest:
            stored = self.store.list_checkpoints(self.session_id)
            self._latest.append(stored[-1] if stored else None)
        return self._latest[0]

    def commit(self, checkpoint: StoredCheckpoint, state: LiveState) -> StoredCheckpoint:
        self._saved = None
        document = self._encoder.encode(state)
        saved = self.store.save_checkpoint(checkpoint, state_key=STATE_KEY, state=document)
        self._saved, self._cursor = state, state.last_seq
        self._latest[:] = [saved]
        return saved

    def cursor(self) -> int:
        """The newest record seq taken in (the host runs a turn when an input is newer), kept from the last
        state loaded or saved so the host's polling never reloads the whole live context."""
        if self._cursor is None:
            self._cursor = self.load_state().last_seq
        return self._cursor

    def save_at_turn_end(self, state: LiveState) -> None:
        """When the record cannot take it (the turn stopped for that reason), the session resumes from the
        last state saved and the record - nothing is lost."""
        try:
            self.save_state(state)
        except StoreError as exc:
            log.error("session %s: the live state was not saved at the turn's end: %s", self.session_id, exc)

    def reply(self, reply: ModelReply) -> int | None:
        """The reply's text and its tool calls as a record entry (none for an empty reply): its seq."""
        if not (reply.text.strip() or reply.tool_calls):
            return None
        calls = [CallRecord(c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in reply.tool_calls]
        return record_reply(self.store, self.session_id, reply.text, clock=self.clock, calls=calls).seq

    def note_interrupted(self, step: Interrupted) -> Entry:
        """Record, once per step, that its calls did not report back (a second resume gives back the same
        entry, by its key); the model reads it as the harness's, never the user's."""
        log.warning("session %s: tool calls of #%d were interrupted; noted", self.session_id, step.seq)
        source = replace(NOTE_SOURCE, ref=str(step.seq))
        return deliver(self.store, self.session_id, source, note_text(step), clock=self.clock, key=step.key)
