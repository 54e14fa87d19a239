"""Usage by endpoint: ``usage_by_endpoint`` (team × endpoint × day: requests, tokens by kind, credits
charged), which the history projection keeps with every charge (``projections/endpoint_usage.py``),
so that the dashboard's usage by endpoint reads days × endpoints rows instead of every charge.

An existing database's table is filled from the audit history as far as it is projected (its
charges, summed by team, endpoint and the day of ``occurred_at``, UTC as every event's time): exactly
what the projection would have written for them, so ``ledger verify`` agrees without a rebuild,
and the projectors carry on adding to it from their position.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_SUMMED = ("requests", "input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens", "cost")


def upgrade() -> None:
    op.create_table(
        "usage_by_endpoint",
        sa.Column("team_name", sa.String(), primary_key=True),
        sa.Column("endpoint", sa.String(), primary_key=True),
        sa.Column("day", sa.String(), primary_key=True),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in _SUMMED),
        if_not_exists=True,
    )
    day = "substr(occurred_at, 1, 10)"
    op.execute(
        f"INSERT INTO usage_by_endpoint (team_name, endpoint, day, {', '.join(_SUMMED)}) "
        f"SELECT team_name, endpoint, {day}, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
        f"SUM(cache_write_tokens), SUM(cache_hit_tokens), -SUM(amount) FROM ledger_entries "
        f"WHERE kind = 'charge' GROUP BY team_name, endpoint, {day}"
    )


def downgrade() -> None:
    op.drop_table("usage_by_endpoint")
