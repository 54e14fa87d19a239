"""The SQLite recorder: events, plus the read models written in the same transaction; and the
connections it writes them on."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, StoredEvent
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteFactory,
)

from app.store.log_append import LogWriter
from app.store.many_rows import insert_rows
from app.store.read_models import ReadModelQueries, ReadModelWriter


class SQLiteLedgerRecorder(ReadModelQueries, SQLiteApplicationRecorder):
    """The library creates the events table; the read-model tables are alembic's."""

    read_models = ReadModelWriter("?")
    log = LogWriter("?", lock_rows=False)  # SQLite lets one writer in at a time

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's insert, the events' leaf hashes computed first, outside the write lock."""
        return super().insert_events(stored_events, leaf_hashes=self.log.leaf_hashes(stored_events), **kwargs)

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """All the batch's events in one statement (the library runs one per event, to learn each
        one's row id: nothing here reads notification ids back), then the read models."""
        insert_rows(c, f"INSERT INTO {self.events_table_name}", [_row(s) for s in stored_events])
        self.read_models.write(
            c,
            kwargs.get("keys", ()),
            kwargs.get("balances", ()),
            kwargs.get("idempotent", ()),
            kwargs.get("charges", ()),
            kwargs.get("admin_keys", ()),
        )
        logged = self.log.append(c, stored_events, kwargs.get("leaf_hashes"))
        if (sink := kwargs.get("logged")) is not None:
            sink.extend(logged)
        return None

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(sql, rows)

    def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, params)
            return list(c.fetchall())

    def select_newer_events(
        self, versions: Sequence[tuple[UUID, int]], page: int, connection: Any = None
    ) -> list[StoredEvent]:
        """The events of each ``(team id, version)`` after that version, at most ``page`` a team, in
        one query: a union of one primary-key range per team (``connection``: PostgreSQL's only)."""
        if not versions:
            return []
        one = (
            f"SELECT * FROM (SELECT originator_id, originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version LIMIT ?)"
        )
        params = [value for tid, version in versions for value in (tid.hex, version, page)]
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT * FROM ({' UNION ALL '.join([one] * len(versions))}) "
                "ORDER BY originator_id, originator_version",
                params,
            )
            return [
                StoredEvent(
                    originator_id=self.convert_originator_id(row["originator_id"]),
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=row["state"],
                )
                for row in c.fetchall()
            ]


def _row(s: StoredEvent) -> tuple[Any, ...]:
    originator = s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id
    return originator, s.originator_version, s.topic, s.state


#: Prepared statements each connection keeps (the library asks for ``True``, which sqlite3 takes
#: for 1: every statement but the last was parsed again, about 30 µs a transaction).
CACHED_STATEMENTS = 256
#: WAL pages after which a commit of the ledger's connections copies the log back into the database
#: (SQLite's default is 1,000). The projector's connection keeps the default and commits every
#: slice, so it is the one that checkpoints, off the writer's path; this is the backstop when no
#: projector runs (a command-line tool writing alone).
LEDGER_AUTOCHECKPOINT = 20_000


def _switch_to_wal(c: sqlite3.Connection, *, deadline: float) -> None:
    """Turn a new database file to WAL, waiting out another connection's write transaction.

    The switch needs the file to itself. When another connection holds a write lock (say the
    request records' writer beginning a transaction on a database whose tables are not made yet),
    SQLite refuses at once with "database is locked" rather than call the busy handler, because
    waiting could deadlock; so the wait is done here, until the connection's lock timeout."""
    while True:
        try:
            c.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


class LedgerConnectionPool(SQLiteConnectionPool):
    """The library's connections, with a statement cache and the checkpoint left to the projector."""

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=CACHED_STATEMENTS,
                timeout=self.lock_timeout or 5,
            )
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                _switch_to_wal(c, deadline=time.monotonic() + (self.lock_timeout or 5))
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        c.execute(f"PRAGMA wal_autocheckpoint={LEDGER_AUTOCHECKPOINT}")
        c.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=c, max_age=self.max_age)


class LedgerSQLiteFactory(SQLiteFactory):
    """The library's SQLite persistence (``PERSISTENCE_MODULE`` names this class), on those connections."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        old = self.datastore.pool
        self.datastore.pool = LedgerConnectionPool(db_name=old.db_name, lock_timeout=old.lock_timeout)
        old.close()
