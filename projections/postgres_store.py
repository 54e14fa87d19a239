"""The PostgreSQL recorder: events, plus the read models written in the same transaction.

The library's insert transaction runs this hook first, then locks the events table and appends; a
version conflict rolls the read-model rows back with the events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import Cursor
from psycopg.rows import DictRow

from projections.read_models import ReadModelQueries, ReadModelWriter


class PostgresLedgerRecorder(ReadModelQueries, PostgresApplicationRecorder):
    read_models = ReadModelWriter("%s")

    def _insert_events(self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._insert_events(curs, stored_events, **kwargs)
        self.read_models.write(curs, kwargs.get("keys", ()), kwargs.get("balances", ()),
                               kwargs.get("idempotent", ()))

    def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(sql, params)
            return curs.fetchall()
