"""the live state is encoded a message at a time and never re-read from the record by the
process that wrote it - and what the record holds is exactly the state, whatever the order of saves."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from avibe.agent.persist import SessionRecord
from avibe.agent.state import STATE_KEY, LiveState, StateEncoder
from avibe.errors import StoreError
from avibe.record.messages import ChatMessage, ToolCall
from avibe.store import SqlStore, open_store


class Clock:
    def now(self) -> datetime:
        return datetime(2026, 12, 4, tzinfo=UTC)


def _message(n: int) -> ChatMessage:
    if n % 3 == 1:
        call = ToolCall(f"c-{n}", "read_file", {"path": f"f{n}.txt", "odd": 'é\n"q"'})
        return ChatMessage("assistant", "", tool_calls=(call,), seq=n, kind="assistant")
    if n % 3 == 2:
        return ChatMessage("tool", f"output {n} \u2028 ünïcode", tool_call_id=f"c-{n - 1}", name="read_file")
    return ChatMessage("user", f"message {n}", seq=n, kind="user")


def test_the_encoded_document_is_the_state_as_to_dict_makes_it_save_after_save() -> None:
    encoder = StateEncoder()
    messages: tuple[ChatMessage, ...] = ()
    for n in range(12):
        messages = (*messages, _message(n))
        if n == 8:
            messages = messages[5:]  # a checkpoint moved the oldest out
        state = LiveState(messages=messages, last_seq=n, files_read=(f"f{n}.txt",), extra={"x": [1, 2]})
        document = encoder.encode(state)
        assert json.loads(document.text) == state.to_dict() == dict(document)
        assert LiveState.from_dict(json.loads(document.text)) == state


def test_a_document_that_is_not_plain_json_is_refused() -> None:
    with pytest.raises(ValueError):
        StateEncoder().encode(LiveState(extra={"bad": float("nan")}))


class CountingStore(SqlStore):
    loads = 0
    fail_next_save = False

    def load_state(self, session_id: str, key: str) -> dict[str, Any] | None:
        self.loads += 1
        return super().load_state(session_id, key)

    def save_state(self, session_id: str, key: str, value: Any) -> None:
        if self.fail_next_save:
            self.fail_next_save = False
            raise StoreError("the disk is full")
        super().save_state(session_id, key, value)


def test_the_writer_reads_the_live_state_once_and_again_only_after_a_failed_write(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'avibe.db'}") as opened:
        assert isinstance(opened, SqlStore)
        store = CountingStore(opened._engine)
        session = store.create_session().id
        record = SessionRecord(store, session, Clock())
        assert record.load_state() == LiveState() and store.loads == 1
        state = LiveState(messages=(_message(0),), last_seq=1)
        record.save_state(state)
        assert record.load_state() is state and store.loads == 1  # kept, not re-read
        assert LiveState.from_dict(store.load_state(session, STATE_KEY) or {}) == state
        store.loads = 0
        store.fail_next_save = True
        with pytest.raises(StoreError):
            record.save_state(LiveState(messages=(_message(0), _message(1)), last_seq=2))
        assert record.load_state() == state and store.loads == 1  # read back: the record decides
