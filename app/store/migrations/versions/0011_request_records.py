"""A request can be looked up by its id: each answered request's record (status, timings, the
deployment that answered, attempts) is kept in ``request_records`` for ``request_record_days``,
and the audit history's charges get an index on ``request_id`` so that finding one stays a single
index probe at millions of entries.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_records",
        sa.Column("request_id", sa.String(), primary_key=True),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("endpoint", sa.String(), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("streamed", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("first_byte_ms", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("deployment", sa.Integer(), nullable=True),
        sa.Column("upstream_model", sa.String(), nullable=False, server_default=""),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("upstream_errors", sa.String(), nullable=False, server_default=""),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("charged", sa.BigInteger(), nullable=True),
    )
    op.create_index("request_records_started", "request_records", ["started_at"])
    op.create_index("ledger_entries_request", "ledger_entries", ["request_id"])


def downgrade() -> None:
    op.drop_index("ledger_entries_request", "ledger_entries")
    op.drop_index("request_records_started", "request_records")
    op.drop_table("request_records")
