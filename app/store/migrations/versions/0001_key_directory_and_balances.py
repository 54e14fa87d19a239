"""The key directory and team balances, written in the same transaction as ledger events.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_hash", sa.String(), primary_key=True),
        sa.Column("team_id", sa.String(), nullable=False),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("revoked", sa.Integer(), nullable=False, server_default="0"),
        if_not_exists=True,
    )
    op.create_table(
        "team_balances",
        sa.Column("team_id", sa.String(), primary_key=True),
        sa.Column("team_name", sa.String(), nullable=False, unique=True),
        sa.Column("balance", sa.BigInteger(), nullable=False),
        sa.Column("held", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("held >= 0 AND balance >= held", name="team_balances_available_not_negative"),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_table("team_balances")
    op.drop_table("api_keys")
