"""The record's tables (SPEC C1, A3). Alembic migrations create them; this module is the shared map.

Times are stored as UTC. SQLite has no time zone type, so `UtcDateTime` keeps naive UTC there and gives
back aware UTC datetimes on every backend.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out; a naive datetime is refused (its zone is unknown)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"time {value.isoformat()} has no time zone; pass an aware datetime (UTC)")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def json_type() -> Any:
    """JSON on SQLite, JSONB on PostgreSQL."""
    return JSON().with_variant(JSONB(), "postgresql")


metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("title", Text, nullable=False, default=""),
    Column("created_at", UtcDateTime, nullable=False),
    # Highest seq given out; the next entry gets last_seq + 1. The row is the lock for appends.
    Column("last_seq", Integer, nullable=False, default=0),
    Column("last_at", UtcDateTime, nullable=True),
    Column("checkpoint_count", Integer, nullable=False, default=0),
)

entries = Table(
    "entries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("source_name", Text, nullable=False, default=""),
    Column("source_ref", Text, nullable=False, default=""),
    # A callback's service and event, from its verified headers (migration 0005, T1).
    Column("source_event", Text, nullable=False, default="", server_default=""),
    Column("text", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("turn_id", String(128), nullable=False, default=""),
    Column("calls", json_type(), nullable=True),  # an assistant reply's tool calls (migration 0002)
    # A delivery's idempotency key (a watch tick, a timer fire, a callback's Idempotency-Key): a repeated
    # key records nothing new (migration 0004).
    Column("delivery_key", String(200), nullable=True),
    UniqueConstraint("session", "seq", name="uq_entries_session_seq"),
    # "user messages of S between seq a and b" is one range scan of this index (A3).
    Index("ix_entries_session_kind_seq", "session", "kind", "seq"),
    Index("uq_entries_session_delivery_key", "session", "delivery_key", unique=True),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("mind", Text, nullable=False),
    Column("memo", json_type(), nullable=False),
    Column("scene", Text, nullable=False),
    Column("upto_seq", Integer, nullable=False),
    Column("meta", json_type(), nullable=False),
    UniqueConstraint("session", "number", name="uq_checkpoints_session_number"),
)

session_state = Table(
    "session_state",
    metadata,
    Column("session", String(64), ForeignKey("sessions.id"), primary_key=True),
    Column("key", String(128), primary_key=True),
    Column("value", json_type(), nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

# One writer per session: the process hosting a session holds its lease; another
# process that opens the session is refused until the lease is released or stale (migration 0003).
session_leases = Table(
    "session_leases",
    metadata,
    Column("session", String(64), ForeignKey("sessions.id"), primary_key=True),
    Column("token", String(64), nullable=False),  # random, known only to the holder
    Column("host", String(255), nullable=False),  # the machine's name, for messages
    Column("machine", String(255), nullable=False),  # host + PID namespace: where `pid` is this process
    Column("pid", Integer, nullable=False),
    Column("acquired_at", UtcDateTime, nullable=False),
    Column("renewed_at", UtcDateTime, nullable=False),  # the last heartbeat
    Column("expires_at", UtcDateTime, nullable=False),  # stale from then on, wherever the holder runs
)

# Inputs from the world: the watches, timers and callbacks that post into a session, so they
# survive a restart and any host can run them (migration 0004). `state` is the source's own progress (a
# watch's last digest, a timer's last fire); removing a source stamps `removed_at` (rows stay: the record
# names their ids).
sources = Table(
    "sources",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("session", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("name", Text, nullable=False),
    Column("spec", json_type(), nullable=False),
    Column("wake", Boolean, nullable=False),
    Column("state", json_type(), nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("removed_at", UtcDateTime, nullable=True),
    Index("ix_sources_session", "session"),
)
