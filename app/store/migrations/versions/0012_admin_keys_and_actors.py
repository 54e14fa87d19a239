"""Named admin keys, and who caused each operator's entry of the audit history.

``admin_keys`` is the directory the admin API looks a presented admin key up in (by its hash),
written in the transaction of its ``AdminKeyIssued`` / ``AdminKeyRevoked`` event and rebuilt by
``tollgate ledger rebuild``. ``ledger_entries`` gains who caused an entry (``actor``) and why
(``reason``), and has a row for every operator's action that moves no money (a key issued or
revoked, a restriction, a limit, a suspension, a price adjustment...). So that the history of the
events recorded before this revision has those rows too, it is projected again from the events: its
rows are deleted (with the usage it sums: by key and model, by attribution) and its position set back
to the start, and the gateways' projectors (or the first
reader, or ``tollgate ledger rebuild``) write it again. The events themselves are untouched.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "admin_keys",
        sa.Column("key_hash", sa.String(), primary_key=True),
        sa.Column("key_id", sa.String(), nullable=False, unique=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("revoked", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("issued_at", sa.String(), nullable=False),
        sa.Column("issued_by", sa.String(), nullable=False, server_default=""),
        sa.Column("version", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("actor", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("reason", sa.String(), nullable=False, server_default=""))
    op.execute("DELETE FROM ledger_entries")
    op.execute("DELETE FROM usage_daily")
    op.execute("DELETE FROM usage_by_attribution")  # projected again with the rest, from the start
    op.execute("UPDATE projection_tracking SET notification_id = 0 WHERE name = 'history'")


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("reason")
        batch.drop_column("actor")
    op.drop_table("admin_keys")
