"""The SQLite recorder: events, plus the read models written in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

from projections.read_models import ReadModelQueries, ReadModelWriter


class SQLiteLedgerRecorder(ReadModelQueries, SQLiteApplicationRecorder):
    """The library creates the events table; the read-model tables are alembic's."""

    read_models = ReadModelWriter("?")

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        self.read_models.write(c, kwargs.get("keys", ()), kwargs.get("balances", ()),
                               kwargs.get("idempotent", ()), kwargs.get("charges", ()))
        return notification_ids

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(sql, rows)

    def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, params)
            return list(c.fetchall())
