"""The SQLite recorder: events, plus the read models written in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

from projections.many_rows import insert_rows
from projections.read_models import ReadModelQueries, ReadModelWriter


class SQLiteLedgerRecorder(ReadModelQueries, SQLiteApplicationRecorder):
    """The library creates the events table; the read-model tables are alembic's."""

    read_models = ReadModelWriter("?")

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """All the batch's events in one statement (the library runs one per event, to learn each
        one's row id: nothing here reads notification ids back), then the read models."""
        insert_rows(c, f"INSERT INTO {self.events_table_name}", [_row(s) for s in stored_events])
        self.read_models.write(c, kwargs.get("keys", ()), kwargs.get("balances", ()),
                               kwargs.get("idempotent", ()), kwargs.get("charges", ()))
        return None

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(sql, rows)

    def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, params)
            return list(c.fetchall())


def _row(s: StoredEvent) -> tuple[Any, ...]:
    originator = s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id
    return originator, s.originator_version, s.topic, s.state
