"""Feeds in the SQL store (SPEC T1, docs/serve.md): the watches, timers and callbacks of a session - added,
listed, stopped (the row stays, stamped removed) and their own progress saved."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC
from typing import Any, Final

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection

from avibe.errors import StoreError, UnknownFeed
from avibe.record.feeds import FEED_KINDS, Feed
from avibe.store.checks import ID_FORM, ID_RULE, check_json, check_text
from avibe.store.core import AnyRow, SqlCore
from avibe.store.schema import sources

FEEDS_NAMED: Final = select(sources).where(sources.c.id.in_(bindparam("ids", expanding=True)))


def check_feed(feed: Feed) -> None:
    if feed.kind not in FEED_KINDS:
        raise ValueError(f"unknown feed kind {feed.kind!r}; expected one of {', '.join(FEED_KINDS)}")
    if not ID_FORM.fullmatch(feed.id):
        raise ValueError(f"feed id {feed.id!r} is not valid: {ID_RULE}")
    check_text("feed name", feed.name)
    if not feed.name.strip():
        raise ValueError("a feed needs a name")
    check_json(f"feed {feed.id!r} spec", feed.spec)
    check_json(f"feed {feed.id!r} state", feed.state)


def feed_of(row: AnyRow) -> Feed:
    return Feed(
        id=row.id, session=row.session, kind=row.kind, name=row.name, spec=dict(row.spec), wake=row.wake,
        state=dict(row.state or {}), created_at=row.created_at, removed_at=row.removed_at,
    )  # fmt: skip


class Feeds(SqlCore):
    """A session's feeds: what wakes it besides the user."""

    def add_feed(self, feed: Feed) -> Feed:
        """Store a new feed of an existing session; its id must be new."""
        check_feed(feed)
        now = self._now()

        def work(conn: Connection) -> None:
            self._require_session(conn, feed.session)
            if conn.execute(select(sources.c.id).where(sources.c.id == feed.id)).first() is not None:
                raise StoreError(f"a feed {feed.id!r} exists already")
            conn.execute(insert(sources).values(
                id=feed.id, session=feed.session, kind=feed.kind, name=feed.name, spec=dict(feed.spec),
                wake=feed.wake, state=dict(feed.state), created_at=now, updated_at=now, removed_at=None,
            ))  # fmt: skip

        self._write(work)
        return dataclasses.replace(feed, created_at=now.astimezone(UTC), removed_at=None)

    def list_feeds(self, session_id: str | None = None, *, include_removed: bool = False) -> list[Feed]:
        """The feeds of one session (or of every session), oldest first."""
        stmt = select(sources).order_by(sources.c.created_at, sources.c.id)
        if session_id is not None:
            stmt = stmt.where(sources.c.session == session_id)
        if not include_removed:
            stmt = stmt.where(sources.c.removed_at.is_(None))
        with self._reading() as conn:
            if session_id is not None:
                self._require_session(conn, session_id)
            return [feed_of(row) for row in conn.execute(stmt)]

    def get_feed(self, feed_id: str) -> Feed:
        """One feed, removed or not; UnknownFeed when there is none with that id."""
        with self._reading() as conn:
            row = conn.execute(select(sources).where(sources.c.id == feed_id)).first()
        if row is None:
            raise UnknownFeed(f"no feed {feed_id!r} (`vibe feeds` lists them)")
        return feed_of(row)

    def stop_feed(self, feed_id: str) -> Feed:
        """Stop a feed (its row stays, stamped removed: the record still names its id)."""
        now = self._now()

        def work(conn: Connection) -> None:
            changed = conn.execute(
                update(sources).where(sources.c.id == feed_id, sources.c.removed_at.is_(None))
                .values(removed_at=now, updated_at=now)
            )  # fmt: skip
            if changed.rowcount == 0:
                self.get_feed(feed_id)  # unknown: raises; else it was removed already (a no-op)

        self._write(work)
        return self.get_feed(feed_id)

    def save_feed_state(self, feed_id: str, state: Mapping[str, Any]) -> None:
        """Replace a feed's own progress (a watch's digest, a timer's last fire)."""
        document = dict(state)
        check_json(f"feed {feed_id!r} state", document)
        now = self._now()

        def work(conn: Connection) -> None:
            changed = conn.execute(
                update(sources).where(sources.c.id == feed_id).values(state=document, updated_at=now)
            )
            if changed.rowcount == 0:
                raise UnknownFeed(f"no feed {feed_id!r} (`vibe feeds` lists them)")

        self._write(work)
