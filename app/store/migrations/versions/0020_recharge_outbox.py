"""The auto-recharge outbox: ``recharge_attempts``, one row per ``RechargeStarted`` event (written by
the history projection), with what became of its payment. A new database has none; an existing one
gets its attempts when the projection next reads past them (there are none before this revision:
nothing began them).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recharge_attempts",
        sa.Column("attempt", sa.String(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("occurred_at", sa.String(), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_try_at", sa.Float(), nullable=False, server_default="0"),
        sa.Column("settled_at", sa.String(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False, server_default=""),
        sa.Column("payment_intent", sa.String(), nullable=False, server_default=""),
        sa.Column("last_error", sa.String(), nullable=False, server_default=""),
        if_not_exists=True,
    )
    op.create_index("recharge_attempts_team", "recharge_attempts", ["team_name", "notification_id"], if_not_exists=True)
    op.create_index("recharge_attempts_order", "recharge_attempts", ["notification_id"], if_not_exists=True)


def downgrade() -> None:
    op.drop_table("recharge_attempts")
