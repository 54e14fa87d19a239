"""The key directory says whether a key has a budget of its own: the requests of such a key are held
in the ledger one by one (where the budget is checked), never against a gateway process's credit
lease. The rows are rewritten from the events on the team's next policy change (setting a budget is
one), or by ``tollgate ledger rebuild``; until then a row says no budget, which was true before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("budgeted", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("budgeted")
