"""Files and batches: ``gateway_files`` (a team's uploads, purpose ``batch``, and its batches' output
files), ``gateway_file_chunks`` (an upload's bytes, a MiB a row) and ``gateway_batches`` (where each
batch runs upstream, who polls it, whether it is settled). A new database and an existing one alike
start with none.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_files",
        sa.Column("file_id", sa.String(), primary_key=True),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("purpose", sa.String(), nullable=False),
        sa.Column("filename", sa.String(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("batch_id", sa.String(), nullable=False, server_default=""),
        sa.Column("upstream_file_id", sa.String(), nullable=False, server_default=""),
        if_not_exists=True,
    )
    op.create_index("gateway_files_team", "gateway_files", ["team_name", "created_at"], if_not_exists=True)
    op.create_table(
        "gateway_file_chunks",
        sa.Column("file_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "gateway_batches",
        sa.Column("batch_id", sa.String(), primary_key=True),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("api", sa.String(), nullable=False),
        sa.Column("endpoint", sa.String(), nullable=False),
        sa.Column("input_file_id", sa.String(), nullable=False),
        sa.Column("deployment", sa.Integer(), nullable=False),
        sa.Column("upstream_batch_id", sa.String(), nullable=False, server_default=""),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("hold", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.BigInteger(), nullable=False),
        sa.Column("attribution", sa.String(), nullable=False),
        sa.Column("metadata", sa.String(), nullable=False),
        sa.Column("upstream", sa.String(), nullable=False, server_default="{}"),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("settled", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("charged", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("poller", sa.String(), nullable=False, server_default=""),
        sa.Column("poll_until", sa.Float(), nullable=False, server_default="0"),
        if_not_exists=True,
    )
    op.create_index("gateway_batches_team", "gateway_batches", ["team_name", "created_at"], if_not_exists=True)
    op.create_index("gateway_batches_open", "gateway_batches", ["settled"], if_not_exists=True)


def downgrade() -> None:
    op.drop_table("gateway_batches")
    op.drop_table("gateway_file_chunks")
    op.drop_table("gateway_files")
