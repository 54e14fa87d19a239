"""Snapshots of the team aggregates: a cache of a team's state every few hundred events, so that
loading a team costs its latest snapshot plus the events after it, not its whole history.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "team_snapshots",
        sa.Column("team_id", sa.String(), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("occurred_at_us", sa.BigInteger(), nullable=False),
        sa.Column("topic", sa.String(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
    )
    op.create_index("team_snapshots_team_time", "team_snapshots", ["team_id", "occurred_at_us"])


def downgrade() -> None:
    op.drop_index("team_snapshots_team_time", "team_snapshots")
    op.drop_table("team_snapshots")
