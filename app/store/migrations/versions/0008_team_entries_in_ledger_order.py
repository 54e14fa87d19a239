"""A team's ledger entries in ledger order: the index an export reads them through, a keyset page
(notification_id after the last one read) at a time, at the same cost per page however far in.
Without it a page of a team's entries sorted all of the team's entries first.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ledger_entries_team_order", "ledger_entries", ["team_name", "notification_id"])


def downgrade() -> None:
    op.drop_index("ledger_entries_team_order", "ledger_entries")
