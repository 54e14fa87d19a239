"""Alembic migrations of the read-model schema (:mod:`app.store.schema`)."""

from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parent

#: The newest revision. Kept here so that opening an up-to-date database needs neither SQLAlchemy
#: nor alembic (half a second of imports per command); a test checks it against the scripts.
HEAD = "0021"
