"""The record: sessions, entries, checkpoints, session state (SPEC C1, A3).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(JSONB(), "postgresql")


def _time(nullable: bool = False, name: str = "at") -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        _time(name="created_at"),
        sa.Column("last_seq", sa.Integer, nullable=False),
        _time(nullable=True, name="last_at"),
        sa.Column("checkpoint_count", sa.Integer, nullable=False),
    )
    op.create_table(
        "entries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session", sa.String(64), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source_name", sa.Text, nullable=False),
        sa.Column("source_ref", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        _time(),
        sa.Column("turn_id", sa.String(128), nullable=False),
        sa.UniqueConstraint("session", "seq", name="uq_entries_session_seq"),
    )
    op.create_index("ix_entries_session_kind_seq", "entries", ["session", "kind", "seq"])
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session", sa.String(64), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        _time(),
        sa.Column("mind", sa.Text, nullable=False),
        sa.Column("memo", _json(), nullable=False),
        sa.Column("scene", sa.Text, nullable=False),
        sa.Column("upto_seq", sa.Integer, nullable=False),
        sa.Column("meta", _json(), nullable=False),
        sa.UniqueConstraint("session", "number", name="uq_checkpoints_session_number"),
    )
    op.create_table(
        "session_state",
        sa.Column("session", sa.String(64), sa.ForeignKey("sessions.id"), primary_key=True),
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("value", _json(), nullable=False),
        _time(name="updated_at"),
    )


def downgrade() -> None:
    op.drop_table("session_state")
    op.drop_table("checkpoints")
    op.drop_index("ix_entries_session_kind_seq", table_name="entries")
    op.drop_table("entries")
    op.drop_table("sessions")
