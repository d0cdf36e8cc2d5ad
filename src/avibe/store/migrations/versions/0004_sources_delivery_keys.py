"""Inputs from the world: persisted sources (watches, timers, callbacks) and delivery keys.

`entries.delivery_key` makes a delivery idempotent: a watch tick, a timer fire or a callback's
`Idempotency-Key` header is stored with the entry it produced, unique per session, so a repeated key
records nothing new (exactly once into the record, also across hosts sharing PostgreSQL).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _json() -> Any:
    return sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.add_column(sa.Column("delivery_key", sa.String(200), nullable=True))
    op.create_index("uq_entries_session_delivery_key", "entries", ["session", "delivery_key"], unique=True)
    op.create_table(
        "sources",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session", sa.String(64), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("spec", _json(), nullable=False),
        sa.Column("wake", sa.Boolean, nullable=False),
        sa.Column("state", _json(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_sources_session", "sources", ["session"])


def downgrade() -> None:
    op.drop_index("ix_sources_session", "sources")
    op.drop_table("sources")
    op.drop_index("uq_entries_session_delivery_key", "entries")
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("delivery_key")
