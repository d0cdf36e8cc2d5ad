"""Assistant entries keep their tool calls (name and arguments; never the output, A3).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("entries", sa.Column("calls", _json(), nullable=True))


def downgrade() -> None:
    op.drop_column("entries", "calls")
