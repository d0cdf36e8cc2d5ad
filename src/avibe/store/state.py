"""Checkpoints and session state in the SQL store (SPEC C1, F2): a checkpoint is the session's next
number, saved with the state document it implies in one transaction (a crash leaves both or neither);
a state document replaces the previous one of its key."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC
from typing import Any, Final

from sqlalchemy import Text, and_, bindparam, insert, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine

from avibe.ports import Clock, StoredCheckpoint
from avibe.record.checkpoint import Carry, MemoItem, Provenance
from avibe.record.state import EncodedDocument
from avibe.store.checks import check_aware, check_json, check_text
from avibe.store.core import AnyRow, SqlCore
from avibe.store.schema import checkpoints, session_state, sessions

# A session state document, bound as the JSON text it was checked as (encoded once, not again by the
# column's type); PostgreSQL reads it into its JSONB column.
_STATE_WHERE: Final = and_(
    session_state.c.session == bindparam("sid"), session_state.c.key == bindparam("skey")
)
_STATE_AT: Final = bindparam("at", type_=session_state.c.updated_at.type)


def _state_statements(postgres: bool) -> tuple[Any, Any]:
    """The UPDATE and the INSERT of a state document (params sid, skey, value: its JSON text, at)."""
    value: Any = bindparam("value", type_=Text)
    if postgres:
        value = sql_cast(value, JSONB)
    changing = update(session_state).where(_STATE_WHERE).values(value=value, updated_at=_STATE_AT)
    adding = insert(session_state).values(session=bindparam("sid"), key=bindparam("skey"), value=value,
                                          updated_at=_STATE_AT)  # fmt: skip
    return changing, adding


def _checkpoint(row: AnyRow) -> StoredCheckpoint:
    return StoredCheckpoint(
        session=row.session,
        number=row.number,
        at=row.at,
        mind=row.mind,
        memo=tuple(MemoItem.from_dict(item) for item in row.memo),
        scene=row.scene,
        upto_seq=row.upto_seq,
        carry=Carry.from_dict(row.meta),
        provenance=Provenance.from_dict(row.meta),
    )


class SessionState(SqlCore):
    """Checkpoints and state documents."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        super().__init__(engine, clock=clock)
        self._update_state, self._insert_state = _state_statements(self._postgres)

    # -- checkpoints -------------------------------------------------------------------------------
    def save_checkpoint(
        self,
        checkpoint: StoredCheckpoint,
        *,
        state_key: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> StoredCheckpoint:
        """Store a checkpoint as the session's next number (the given `number` is ignored) - and, when
        given, the session state it implies, in the same transaction (a crash leaves both or neither)."""
        check_aware("checkpoint time", checkpoint.at)
        for field, value in (("mind", checkpoint.mind), ("scene", checkpoint.scene)):
            check_text(field, value)
        for item in checkpoint.memo:
            check_text(f"memo text of #{item.seq}", item.text)
        memo, meta = checkpoint.memo_dicts(), checkpoint.meta  # JSON only here, in the store adapter
        check_json("checkpoint memo", memo)
        check_json("checkpoint meta", meta)
        document = self._state_document(state_key, state) if state_key is not None else None

        def work(conn: Connection) -> int:
            number = int(self._lock_session(conn, checkpoint.session).checkpoint_count) + 1
            values = {"session": checkpoint.session, "number": number, "at": checkpoint.at,
                      "mind": checkpoint.mind, "memo": memo, "scene": checkpoint.scene,
                      "upto_seq": checkpoint.upto_seq, "meta": meta}  # fmt: skip
            conn.execute(insert(checkpoints).values(**values))
            conn.execute(
                update(sessions).where(sessions.c.id == checkpoint.session).values(checkpoint_count=number)
            )
            if state_key is not None and document is not None:
                self._upsert_state(conn, checkpoint.session, state_key, document)
            return number

        number = self._write(work)
        return dataclasses.replace(checkpoint, number=number, at=checkpoint.at.astimezone(UTC))

    def list_checkpoints(self, session_id: str) -> list[StoredCheckpoint]:
        """The session's checkpoints, oldest (number 1) first."""
        stmt = select(checkpoints).where(checkpoints.c.session == session_id).order_by(checkpoints.c.number)
        with self._reading() as conn:
            self._require_session(conn, session_id)
            rows = conn.execute(stmt).all()
        return [_checkpoint(row) for row in rows]

    # -- session state -----------------------------------------------------------------------------
    def save_state(self, session_id: str, key: str, value: Mapping[str, Any]) -> None:
        """Set one piece of session state (e.g. the live context), replacing the previous value."""
        document = self._state_document(key, value)

        def work(conn: Connection) -> None:
            self._lock_session(conn, session_id)
            self._upsert_state(conn, session_id, key, document)

        self._write(work)

    @staticmethod
    def _state_document(key: str, value: Mapping[str, Any] | None) -> str:
        """The document as JSON text (checked by encoding it: the text is what gets stored)."""
        check_text("state key", key)
        if not 0 < len(key) <= 128:
            raise ValueError(f"state key must be 1-128 characters, got {len(key)}")
        if value is None:
            raise ValueError(f"state {key!r}: a value is needed with its key")
        if isinstance(value, EncodedDocument):
            return value.text  # encoded by json.dumps already, part by part
        try:
            return json.dumps(dict(value), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state {key!r} is not plain JSON: {exc}") from exc

    def _upsert_state(self, conn: Connection, session_id: str, key: str, document: str) -> None:
        params = {"sid": session_id, "skey": key, "value": document, "at": self._now()}
        if conn.execute(self._update_state, params).rowcount == 0:
            conn.execute(self._insert_state, params)

    def load_state(self, session_id: str, key: str) -> dict[str, Any] | None:
        where = and_(session_state.c.session == session_id, session_state.c.key == key)
        with self._reading() as conn:
            self._require_session(conn, session_id)
            value = conn.execute(select(session_state.c.value).where(where)).scalar_one_or_none()
        return None if value is None else dict(value)
