"""Alembic environment for Tollgate's read models.

The database URL comes from (in order): ``config.attributes["url"]`` (set by ``tollgate``),
``-x config=PATH`` or ``TOLLGATE_CONFIG`` (a Tollgate configuration file).
"""

from __future__ import annotations

import os
from logging.config import fileConfig
from pathlib import Path

from alembic import context
from sqlalchemy import create_engine, pool

from app.store.schema import READ_MODEL_TABLES, metadata

config = context.config
if config.config_file_name and not config.attributes.get("url"):
    fileConfig(config.config_file_name)


def database_url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    from app.store.database import Database
    from domain.settings import parse_settings

    path = context.get_x_argument(as_dictionary=True).get("config") or os.environ.get("TOLLGATE_CONFIG")
    if not path:
        raise SystemExit("alembic: pass -x config=tollgate.toml or set TOLLGATE_CONFIG")
    settings = parse_settings(Path(path).read_text(), path, os.environ)
    return Database.from_url(settings.database_url, Path(path).resolve().parent).sqlalchemy_url()


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Look only at the read-model tables, never at the event store's."""
    return name in READ_MODEL_TABLES if type_ == "table" else True


def run_migrations() -> None:
    engine = create_engine(database_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection, target_metadata=metadata, include_name=include_name, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=database_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations()
