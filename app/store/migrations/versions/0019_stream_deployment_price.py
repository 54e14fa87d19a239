"""The price key of the deployment serving each stream in flight (``inflight_streams.price_key``:
``MODEL/NAME`` for a deployment with a price of its own, "" for the model's), so that a stream whose
gateway process died is charged by another process at the price of the deployment that served it,
as its own process would have charged it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inflight_streams") as batch:
        batch.add_column(sa.Column("price_key", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("inflight_streams") as batch:
        batch.drop_column("price_key")
