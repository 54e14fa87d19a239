"""``ledger_verify_runs``: the last ``GET /admin/ledger/verify`` run on the ledger (its number, the event
it verified up to, when it ran, its report), so that callers of every gateway process sharing the
database can take the report of a run begun after they asked instead of replaying again
(``app/store/verify_lock.py``). A new database and an existing one alike start with no run.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ledger_verify_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.String(), nullable=False),
        sa.Column("finished_at", sa.String(), nullable=False),
        sa.Column("report", sa.Text(), nullable=False),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_table("ledger_verify_runs")
