"""The SQLite recorder: events, plus the read models written in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

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

    def select_newer_events(self, versions: Sequence[tuple[UUID, int]], page: int,
                            connection: Any = None) -> list[StoredEvent]:
        """The events of each ``(team id, version)`` after that version, at most ``page`` a team, in
        one query: a union of one primary-key range per team (``connection``: PostgreSQL's only)."""
        if not versions:
            return []
        one = (f"SELECT * FROM (SELECT originator_id, originator_version, topic, state FROM {self.events_table_name} "
               "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version LIMIT ?)")
        params = [value for tid, version in versions for value in (tid.hex, version, page)]
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT * FROM ({' UNION ALL '.join([one] * len(versions))}) "
                      "ORDER BY originator_id, originator_version", params)
            return [StoredEvent(originator_id=self.convert_originator_id(row["originator_id"]),
                                originator_version=row["originator_version"], topic=row["topic"], state=row["state"])
                    for row in c.fetchall()]
