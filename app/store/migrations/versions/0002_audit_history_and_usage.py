"""The audit history (one row per ledger entry), usage by team × key × model × day, and the
projections' tracking position.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def ledger_entries(name: str) -> None:
    op.create_table(
        name,
        sa.Column("notification_id", sa.BigInteger(), primary_key=True),
        sa.Column("team_id", sa.String(), nullable=False),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("occurred_at", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False, server_default=""),
        sa.Column("request_id", sa.String(), nullable=False, server_default=""),
        sa.Column("endpoint", sa.String(), nullable=False, server_default=""),
        sa.Column("model", sa.String(), nullable=False, server_default=""),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cache_hit_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("price", sa.String(), nullable=False, server_default=""),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.String(), nullable=False, server_default="0"),
        sa.Column("balance_after", sa.BigInteger(), nullable=False),
        sa.Column("reference", sa.String(), nullable=False, server_default=""),
        if_not_exists=True,
    )
    op.create_index(f"{name}_team_time", name, ["team_name", "occurred_at"], if_not_exists=True)


def usage_daily(name: str) -> None:
    op.create_table(
        name,
        sa.Column("team_name", sa.String(), primary_key=True),
        sa.Column("key_id", sa.String(), primary_key=True),
        sa.Column("model", sa.String(), primary_key=True),
        sa.Column("day", sa.String(), primary_key=True),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_hit_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )


def upgrade() -> None:
    ledger_entries("ledger_entries")
    usage_daily("usage_daily")
    op.create_table(
        "projection_tracking",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )
    op.execute("INSERT INTO projection_tracking (name, notification_id) VALUES ('history', 0)")


def downgrade() -> None:
    op.drop_table("projection_tracking")
    op.drop_table("usage_daily")
    op.drop_table("ledger_entries")
