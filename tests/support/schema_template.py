"""New ledgers made by copying one made once, instead of migrating each from nothing.

Creating a ledger's schema (the event store, then Alembic's read-model migrations, a few dozen DDL
statements each committed on their own) took about 0.4 s of the unit layer's time per ledger on
SQLite, 0.6 s on PostgreSQL, and the layer makes about 160: more than a third of its run. Here the
first ledger of a test process is made by the application's own ``Database.create_schema``, closed,
and kept as a template. Every later SQLite ledger that does not exist yet is a copy of that file;
on PostgreSQL, every database ``new_database_url`` makes is a copy of a template database
(``CREATE DATABASE ... TEMPLATE``). An existing file (an old ledger a test upgrades) still goes
through ``create_schema`` itself. A copy holds the bytes the real creation wrote but one value: the
ledger's identity (a random id a migration draws, which namespaces its rate limits in Redis) is
drawn anew for each copy. What a test reads is what a ledger made from nothing holds; the creation
itself stays tested by the template's making and by the end-to-end layer (whose gateway and CLI
processes create their schemas themselves, tests/e2e/store).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from app.store.database import Database
from app.store.event_store import open_ledger_store
from tests.support import backend


@contextmanager
def ledgers_from_a_template(directory: Path) -> Iterator[None]:
    """While open, new ledgers in this process are copies of a template: SQLite's always, and on
    PostgreSQL (``TOLLGATE_TEST_BACKEND=postgresql``) the databases ``new_database_url`` makes."""
    with sqlite_ledgers_from_a_template(directory):
        if backend.BACKEND != "postgresql":
            yield
            return
        url = backend.new_postgres_database_url()
        open_ledger_store(url, directory, pool_size=1).close()
        backend.postgres_template = url.rsplit("/", 1)[1]
        try:
            yield
        finally:
            backend.postgres_template = None


@contextmanager
def sqlite_ledgers_from_a_template(directory: Path) -> Iterator[Path]:
    """While open, new SQLite ledgers in this process are copies of a template made in ``directory``
    (yielded), which is made here by the application's own code."""
    template = directory / "template.db"
    open_ledger_store(f"sqlite:///{template}", directory, pool_size=1).close()
    original = Database.create_schema

    def create_schema(self: Database, create_event_store: Callable[[], object]) -> None:
        if self.kind != "sqlite" or self.path is None or self.path.exists():
            original(self, create_event_store)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        copy = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}")
        shutil.copyfile(template, copy)
        with closing(sqlite3.connect(copy)) as db, db:  # the one value a migration draws: its own identity
            db.execute("UPDATE ledger_identity SET id = ?", (uuid.uuid4().hex,))
        assert not Path(f"{copy}-wal").exists(), "the copy's write-ahead log was not folded back into it"
        try:  # a link, not a rename: a ledger another thread created meanwhile is never replaced
            os.link(copy, self.path)
        except FileExistsError:
            original(self, create_event_store)
        finally:
            copy.unlink()

    Database.create_schema = create_schema  # type: ignore[method-assign]
    try:
        yield template
    finally:
        Database.create_schema = original  # type: ignore[method-assign]
