"""The transparency log: ``log_state`` (the tree's size and root, one row), ``log_tiles`` (its C2SP
tiles), ``log_leaves`` (which event each leaf is), ``log_checkpoints`` (every checkpoint signed) and
``log_cosignatures`` (witnesses' cosignatures of them). A ledger that has events already gets them
all appended here, in the order they were stored, so that the log covers every event from the first.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

#: Events appended per transaction while catching up an existing ledger.
PAGE = 2000


def upgrade() -> None:
    op.create_table(
        "log_state",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.LargeBinary(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "log_tiles",
        sa.Column("level", sa.Integer(), primary_key=True),
        sa.Column("tile_index", sa.BigInteger(), primary_key=True),
        sa.Column("hashes", sa.LargeBinary(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "log_leaves",
        sa.Column("leaf_index", sa.BigInteger(), primary_key=True),
        sa.Column("originator_id", sa.String(), nullable=False),
        sa.Column("originator_version", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "log_leaves_event", "log_leaves", ["originator_id", "originator_version"], unique=True, if_not_exists=True
    )
    op.create_table(
        "log_checkpoints",
        sa.Column("size", sa.BigInteger(), primary_key=True),
        sa.Column("root", sa.LargeBinary(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("signed_at", sa.String(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "log_cosignatures",
        sa.Column("size", sa.BigInteger(), primary_key=True),
        sa.Column("witness", sa.String(), primary_key=True),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("cosigned_at", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )
    _catch_up_existing_events()


def _catch_up_existing_events() -> None:
    """Append the events stored before the log existed (none in a new ledger)."""
    from app.store.log_catch_up import catch_up_log

    bind = op.get_bind()
    catch_up_log(bind.connection.driver_connection, bind.dialect.name, PAGE)


def downgrade() -> None:
    for table in ("log_cosignatures", "log_checkpoints", "log_leaves", "log_tiles", "log_state"):
        op.drop_table(table)
