"""The PostgreSQL recorder: events, plus the read models written in the same transaction.

The library's insert transaction runs this hook first, then locks the events table and appends; a
version conflict rolls the read-model rows back with the events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import Cursor
from psycopg.rows import DictRow

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


class PostgresLedgerRecorder(PostgresApplicationRecorder):
    read_models = ReadModelWriter("%s")

    def _insert_events(self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._insert_events(curs, stored_events, **kwargs)
        self.read_models.write(curs, kwargs.get("keys", ()), kwargs.get("balances", ()), kwargs.get("key_changes", ()),
                              kwargs.get("idempotent", ()))

    def find_key(self, key_hash: str) -> KeyRecord | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self.read_models.select_key, (key_hash,))
            row = curs.fetchone()
        return None if row is None else key_record(row)

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SELECT_HOLDING if holding_only else SELECT_BALANCES)
            return [balance_record(r) for r in curs.fetchall()]

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self.read_models.select_idempotent, (team_id.hex, idem_key))
            row = curs.fetchone()
        return None if row is None else idempotent_response(team_id, idem_key, row)
