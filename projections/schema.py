"""The read-model schema, owned by alembic (migrations in ``projections/migrations``).

The eventsourcing library creates and owns its event tables; alembic creates and migrates only the
tables below, so ``alembic revision --autogenerate`` never proposes to drop the event store.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Column, Integer, MetaData, String, Table

metadata = MetaData()

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_hash", String, primary_key=True),
    Column("team_id", String, nullable=False),
    Column("team_name", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("revoked", Integer, nullable=False, server_default="0"),
)

team_balances = Table(
    "team_balances",
    metadata,
    Column("team_id", String, primary_key=True),
    Column("team_name", String, nullable=False, unique=True),
    Column("balance", Integer, nullable=False),
    Column("held", Integer, nullable=False),
    Column("version", Integer, nullable=False),
    CheckConstraint("held >= 0 AND balance >= held", name="team_balances_available_not_negative"),
)

READ_MODEL_TABLES = frozenset(metadata.tables)


def upgrade_read_models(sqlalchemy_url: str) -> None:
    """Bring the read-model tables to the newest migration."""
    from alembic import command
    from alembic.config import Config

    from projections.migrations import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = sqlalchemy_url
    command.upgrade(config, "head")
