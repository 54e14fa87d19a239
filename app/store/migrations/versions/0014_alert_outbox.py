"""The alert outbox: ``alerts`` (one row per ``AlertRaised`` event, written by the history
projection) and ``alert_deliveries`` (per alert and receiver: attempts, when to try next, when it
was taken). A new database has none; an existing one gets its alerts when the projection next reads
past them (there are none before this revision: the events did not exist).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("alert_id", sa.String(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False, server_default=""),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("threshold", sa.String(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("budget_limit", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("period", sa.String(), nullable=False, server_default=""),
        sa.Column("request_id", sa.String(), nullable=False, server_default=""),
        sa.Column("occurred_at", sa.String(), nullable=False),
        if_not_exists=True,
    )
    op.create_index("alerts_team", "alerts", ["team_name", "notification_id"], if_not_exists=True)
    op.create_index("alerts_order", "alerts", ["notification_id"], if_not_exists=True)
    op.create_table(
        "alert_deliveries",
        sa.Column("alert_id", sa.String(), primary_key=True),
        sa.Column("url", sa.String(), primary_key=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.Float(), nullable=False, server_default="0"),
        sa.Column("delivered_at", sa.String(), nullable=True),
        sa.Column("last_error", sa.String(), nullable=False, server_default=""),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_table("alert_deliveries")
    op.drop_table("alerts")
