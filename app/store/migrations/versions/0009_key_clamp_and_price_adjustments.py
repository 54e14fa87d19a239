"""The key directory learns two more policies of a key's team: whether a request its balance cannot
cover has its output limit lowered instead of being refused (the key's own choice, else its team's),
and the team's price adjustments (a markup or discount in percent, by model), which a request's
worst case is held at. The rows are rewritten from the events on the team's next policy change, or
by ``tollgate ledger rebuild``; until then a row says neither (the events' defaults).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("clamp_output", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("price_adjustments", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("price_adjustments")
        batch.drop_column("clamp_output")
