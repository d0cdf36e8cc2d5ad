"""Vibey's port onto the record for one session: the live state saved after every step, the latest
checkpoint, and a checkpoint committed in one transaction with the live state it implies (`RoomPort`).
This process is the session's one writer (its lease), so what it wrote last is kept, not re-read."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from avibe.agent.state import STATE_KEY, LiveState
from avibe.ports import RecordStore, StoredCheckpoint

log = logging.getLogger("avibe.agent")


@dataclass
class SessionRecord:
    store: RecordStore
    session_id: str
    _latest: list[StoredCheckpoint | None] = field(default_factory=list, repr=False)  # [] = not loaded
    _cursor: int | None = field(default=None, repr=False)

    def load_state(self) -> LiveState:
        data = self.store.load_state(self.session_id, STATE_KEY)
        state = LiveState.from_dict(data) if data else LiveState()
        if state.checkpointing:  # the process died during a checkpoint: the record is intact; go on
            log.warning("session %s: the last checkpoint was interrupted; resuming", self.session_id)
            state = replace(state, checkpointing=False)
        return state

    def save_state(self, state: LiveState) -> None:
        self.store.save_state(self.session_id, STATE_KEY, state.to_dict())
        self._cursor = state.last_seq

    begin = save_state  # a checkpoint starts: saved with `checkpointing` set, so a crash now is visible

    def latest(self) -> StoredCheckpoint | None:
        """Read once; a checkpoint this process commits replaces it."""
        if not self._latest:
            stored = self.store.list_checkpoints(self.session_id)
            self._latest.append(stored[-1] if stored else None)
        return self._latest[0]

    def commit(self, checkpoint: StoredCheckpoint, state: LiveState) -> StoredCheckpoint:
        saved = self.store.save_checkpoint(checkpoint, state_key=STATE_KEY, state=state.to_dict())
        self._cursor = state.last_seq
        self._latest[:] = [saved]
        return saved

    def cursor(self) -> int:
        """The newest record seq taken in (the host runs a turn when an input is newer), kept from the last
        state loaded or saved so the host's polling never reloads the whole live context."""
        if self._cursor is None:
            self._cursor = self.load_state().last_seq
        return self._cursor
