"""Once-only charges enforced by the store, idempotency keys that expire, and what each gateway
process's streams had delivered at its last heartbeat.

``charged_requests`` is filled from the ``Charged`` events already recorded, so a ledger upgraded
in place refuses a second charge of any request it ever charged, not only of those charged from
now on. Existing idempotency keys expire a day after the upgrade (the default time to live).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

import json
import time

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The event store's table on each backend (app/store/database.py's ``EVENTS_TABLE``).
_EVENTS = {"sqlite": "stored_events", "postgresql": "ledger_events"}


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.add_column(sa.Column("expires_at", sa.Float(), nullable=False, server_default="0"))
    op.execute(sa.text("UPDATE idempotency_keys SET expires_at = :t").bindparams(t=time.time() + 86_400))
    op.create_index("idempotency_keys_expiry", "idempotency_keys", ["expires_at"])
    charged = op.create_table(
        "charged_requests",
        sa.Column("team_id", sa.String(), primary_key=True),
        sa.Column("request_id", sa.String(), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("charged", sa.BigInteger(), nullable=False),
        sa.Column("balance_after", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "inflight_streams",
        sa.Column("instance_id", sa.String(), primary_key=True),
        sa.Column("request_id", sa.String(), primary_key=True),
        sa.Column("team_id", sa.String(), nullable=False),
        sa.Column("team_name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("endpoint", sa.String(), nullable=False),
        sa.Column("lease", sa.String(), nullable=False, server_default=""),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_hit_tokens", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.bulk_insert(charged, _recorded_charges())


def _recorded_charges() -> list[dict[str, object]]:
    """One row per request id the events charged (the first charge, if history holds two)."""
    bind = op.get_bind()
    table = _EVENTS.get(bind.dialect.name)
    rows: dict[tuple[str, str], dict[str, object]] = {}
    if table is None or not sa.inspect(bind).has_table(table):
        return []
    result = bind.execute(
        sa.text(
            f"SELECT originator_id, originator_version, state FROM {table} "
            "WHERE topic LIKE '%TeamLedger.Charged' ORDER BY originator_version"
        )
    )
    for originator_id, version, state in result:
        event = json.loads(bytes(state))
        team = str(originator_id).replace("-", "")
        rows.setdefault(
            (team, event["request_id"]),
            {
                "team_id": team,
                "request_id": event["request_id"],
                "version": version,
                "charged": event["charged"],
                "balance_after": event["balance_after"],
            },
        )
    return list(rows.values())


def downgrade() -> None:
    op.drop_table("inflight_streams")
    op.drop_table("charged_requests")
    op.drop_index("idempotency_keys_expiry", "idempotency_keys")
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("expires_at")
