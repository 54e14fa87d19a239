"""The SQLite recorder: events, plus the read models written in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

from projections.read_models import (
    SELECT_BALANCES,
    SELECT_HOLDING,
    BalanceRecord,
    IdempotentResponse,
    KeyRecord,
    ReadModelWriter,
    balance_record,
    idempotent_response,
    key_record,
)


class SQLiteLedgerRecorder(SQLiteApplicationRecorder):
    """The library creates the events table; the read-model tables are alembic's."""

    read_models = ReadModelWriter("?")

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        self.read_models.write(c, kwargs.get("keys", ()), kwargs.get("balances", ()), kwargs.get("key_changes", ()),
                              kwargs.get("idempotent", ()))
        return notification_ids

    def find_key(self, key_hash: str) -> KeyRecord | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.read_models.select_key, (key_hash,))
            row = c.fetchone()
        return None if row is None else key_record(row)

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(SELECT_HOLDING if holding_only else SELECT_BALANCES)
            return [balance_record(r) for r in c.fetchall()]

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.read_models.select_idempotent, (team_id.hex, idem_key))
            row = c.fetchone()
        return None if row is None else idempotent_response(team_id, idem_key, row)
