"""Sessions in the SQL store (SPEC C1): create one (a given id or a fresh `s-YYYYMMDD-xxxxxx`), read one,
the latest, all of them."""

from __future__ import annotations

import secrets
from datetime import UTC

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from avibe.errors import StoreError
from avibe.record.entries import SessionInfo
from avibe.store.checks import ID_FORM, ID_RULE, check_aware, check_text
from avibe.store.core import AnyRow, SqlCore
from avibe.store.schema import sessions


class _SessionExists(StoreError):
    """A session id is taken (internal: create_session retries generated ids, reports given ones)."""


def _session_info(row: AnyRow) -> SessionInfo:
    return SessionInfo(
        id=row.id, created_at=row.created_at, title=row.title, entry_count=row.last_seq, last_at=row.last_at
    )


class Sessions(SqlCore):
    """Creating and reading sessions."""

    def create_session(self, title: str = "", session_id: str | None = None) -> SessionInfo:
        check_text("session title", title)
        if session_id is not None:
            if not ID_FORM.fullmatch(session_id):
                raise ValueError(f"session id {session_id!r} is not valid: {ID_RULE}")
            return self._insert_session(session_id, title)
        for _ in range(5):  # 16.7 million ids per day; a clash is rare, retrying makes it harmless
            try:
                return self._insert_session(self._new_session_id(), title)
            except _SessionExists:
                continue
        raise StoreError("could not find a free session id after 5 tries")

    def _new_session_id(self) -> str:
        return f"s-{self._now().astimezone(UTC):%Y%m%d}-{secrets.token_hex(3)}"

    def _insert_session(self, session_id: str, title: str) -> SessionInfo:
        created = self._now()
        check_aware("clock time", created)

        def work(conn: Connection) -> None:
            if conn.execute(select(sessions.c.id).where(sessions.c.id == session_id)).first():
                raise _SessionExists(f"session {session_id!r} already exists")
            values = {"id": session_id, "title": title, "created_at": created}
            conn.execute(insert(sessions).values(**values, last_seq=0, checkpoint_count=0))

        try:
            self._write(work)
        except StoreError as exc:  # a concurrent creator won the race for the same id
            if isinstance(exc.__cause__, IntegrityError):
                raise _SessionExists(f"session {session_id!r} already exists") from exc
            raise
        return SessionInfo(id=session_id, created_at=created.astimezone(UTC), title=title)

    def get_session(self, session_id: str) -> SessionInfo:
        with self._reading() as conn:
            row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None:
            raise self._unknown(session_id)
        return _session_info(row)

    def latest_session(self) -> SessionInfo | None:
        """The session with the most recent activity (last entry, else creation)."""
        activity = func.coalesce(sessions.c.last_at, sessions.c.created_at)
        stmt = select(sessions).order_by(activity.desc(), sessions.c.created_at.desc(), sessions.c.id.desc())
        with self._reading() as conn:
            row = conn.execute(stmt.limit(1)).first()
        return None if row is None else _session_info(row)

    def list_sessions(self) -> list[SessionInfo]:
        """All sessions, oldest first."""
        with self._reading() as conn:
            rows = conn.execute(select(sessions).order_by(sessions.c.created_at, sessions.c.id)).all()
        return [_session_info(row) for row in rows]
