"""The projections' quarantine: ``projection_quarantine`` holds each event a projection could not
project (which projection, the event, why), written in the transaction that moves the projection's
position past it (``projections/quarantine.py``). And an index of ``usage_by_attribution`` by team
and day, which the attribution bounds read (``projections/attribution.py``). A new database has no
quarantined event; an existing one has none either (its projection stopped at such an event instead,
and goes on from there once upgraded). A history whose rows differ from what this version makes of
the events is projected again (by the gateways' projectors, or ``tollgate ledger rebuild`` at once):
an SQLite history that stored NUL characters as they came (``app/store/storable.py``), or one
with more usage-by-attribution rows in a team's day than the new bounds allow
(``domain/attribution_bounds.py``).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: The audit history's text columns an event's text reaches.
_TEXT_COLUMNS = (
    "key_id",
    "request_id",
    "endpoint",
    "model",
    "price",
    "reference",
    "tags",
    "end_user",
    "actor",
    "reason",
)


def upgrade() -> None:
    op.create_table(
        "projection_quarantine",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), primary_key=True),
        sa.Column("topic", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=False),
        sa.Column("quarantined_at", sa.String(), nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "usage_by_attribution_day", "usage_by_attribution", ["team_name", "day", "dimension"], if_not_exists=True
    )
    if _holds_nul() or _over_the_attribution_bounds():
        _project_again()


def _project_again() -> None:
    """Project the audit history again from the events (the gateways' projectors do it in the
    background, or ``tollgate ledger rebuild`` at once), as 0012 did."""
    op.execute("DELETE FROM ledger_entries")
    op.execute("DELETE FROM usage_daily")
    op.execute("DELETE FROM usage_by_attribution")
    op.execute("UPDATE projection_tracking SET notification_id = 0 WHERE name = 'history'")


def _holds_nul() -> bool:
    """Whether an SQLite history holds a NUL character in its text, stored as it came before the rows
    were made storable (PostgreSQL's never could): such rows are projected again, U+FFFD in its place."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return False
    found = " OR ".join(f"instr(CAST({column} AS BLOB), x'00') > 0" for column in _TEXT_COLUMNS)
    return bind.execute(sa.text(f"SELECT 1 FROM ledger_entries WHERE {found} LIMIT 1")).first() is not None


def _over_the_attribution_bounds() -> bool:
    """Whether a team's day holds more usage-by-attribution rows than the bounds now allow (they came
    with this revision: ``domain/attribution_bounds.py``, whose numbers are written out here as they
    were then). Only then do the rows differ from what the bounds make of the events: that history
    is projected again, so that ``ledger verify`` agrees with it."""
    tag_names, values, team_values = 20, 1000, 2000
    by_day = (
        f"SELECT 1 FROM usage_by_attribution GROUP BY team_name, day HAVING COUNT(DISTINCT dimension) > "
        f"{tag_names + 1} OR SUM(CASE WHEN value = '' THEN 0 ELSE 1 END) > {team_values}"
    )
    by_dimension = (
        f"SELECT 1 FROM usage_by_attribution WHERE value <> '' GROUP BY team_name, day, dimension "
        f"HAVING COUNT(*) > {values}"
    )
    checks = (by_day, by_dimension)
    bind = op.get_bind()
    return any(bind.execute(sa.text(f"{check} LIMIT 1")).first() is not None for check in checks)


def downgrade() -> None:
    op.drop_index("usage_by_attribution_day", "usage_by_attribution")
    op.drop_table("projection_quarantine")
