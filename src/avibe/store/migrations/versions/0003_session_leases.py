"""One writer per session: the lease of the process that hosts it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _time(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "session_leases",
        sa.Column("session", sa.String(64), sa.ForeignKey("sessions.id"), primary_key=True),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("machine", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        _time("acquired_at"),
        _time("renewed_at"),
        _time("expires_at"),
    )


def downgrade() -> None:
    op.drop_table("session_leases")
