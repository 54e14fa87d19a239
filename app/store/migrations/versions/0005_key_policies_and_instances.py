"""Key policies (endpoints, rate limits, the team's suspension and limits) in the key directory,
with the team version each row reflects; the registry of running gateway processes; and the
ledger's identity (a random id), which names its rate-limit buckets in a Redis other ledgers may share.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("endpoints", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("key_rpm", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("key_tpm", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("team_rpm", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("team_tpm", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("suspended", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_table(
        "gateway_instances",
        sa.Column("instance_id", sa.String(), primary_key=True),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.BigInteger(), nullable=False),
        sa.Column("shared_limits", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
    )
    identity = op.create_table("ledger_identity", sa.Column("id", sa.String(), primary_key=True))
    op.bulk_insert(identity, [{"id": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("ledger_identity")
    op.drop_table("gateway_instances")
    with op.batch_alter_table("api_keys") as batch:
        for column in ("version", "suspended", "team_tpm", "team_rpm", "key_tpm", "key_rpm", "endpoints"):
            batch.drop_column(column)
