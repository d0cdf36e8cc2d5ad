"""A callback's service and event (SPEC T1): `entries.source_event`, written by the harness from the
verified headers of a GitHub, GitLab, Standard Webhooks, Stripe or Slack request ("github workflow_run"),
so the tag line names them without reading the body. Empty for every other input and every older entry.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.add_column(sa.Column("source_event", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("source_event")
