"""Attribution: each charge's tags and end user in the audit history (``ledger_entries.tags``, canonical
``name=value,...`` text, and ``ledger_entries.end_user``), usage by team × dimension × value × day
(``usage_by_attribution``: the dimension is ``user`` or ``tag:<name>``), and the attribution of each
stream in flight, so that a stream charged by another process keeps it.

No charge recorded before this revision has an attribution, so its usage is the team's under the end
user ``""``: the new table is filled with that from ``usage_daily``, and ``ledger verify`` agrees with
it without a rebuild.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_SUMMED = ("requests", "input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens", "cost")


def upgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("tags", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("end_user", sa.String(), nullable=False, server_default=""))
    with op.batch_alter_table("inflight_streams") as batch:
        batch.add_column(sa.Column("tags", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("end_user", sa.String(), nullable=False, server_default=""))
    op.create_table(
        "usage_by_attribution",
        sa.Column("team_name", sa.String(), primary_key=True),
        sa.Column("dimension", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), primary_key=True),
        sa.Column("day", sa.String(), primary_key=True),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in _SUMMED),
        if_not_exists=True,
    )
    sums = ", ".join(f"SUM({name})" for name in _SUMMED)
    op.execute(
        f"INSERT INTO usage_by_attribution (team_name, dimension, value, day, {', '.join(_SUMMED)}) "
        f"SELECT team_name, 'user', '', day, {sums} FROM usage_daily GROUP BY team_name, day"
    )


def downgrade() -> None:
    op.drop_table("usage_by_attribution")
    with op.batch_alter_table("inflight_streams") as batch:
        batch.drop_column("end_user")
        batch.drop_column("tags")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("end_user")
        batch.drop_column("tags")
