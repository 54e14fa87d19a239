"""The event store, and the read models written in the same transaction as the events.

The library owns the events table. Two small read models are kept *strongly* consistent with it by
writing them inside the very transaction that appends the events (the recorder's
``_insert_events`` hook): the key directory (key hash → team), which authentication reads, and the
team balances, which operators and ``ledger verify`` read. Both can be rebuilt from the events.
SQLite and PostgreSQL recorders are in ``sqlite_store`` and ``postgres_store``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import Notification

from domain.ledger import TeamLedger
from projections.database import Database
from projections.read_models import (
    BalanceRecord,
    ChargeRecord,
    IdempotentResponse,
    KeyRecord,
    ReadModelQueries,
    key_records,
)
from projections.store_errors import classify

#: Events that change what a team's keys may do: the team's key rows are rewritten when one is saved.
POLICY_EVENTS = (TeamLedger.KeyIssued, TeamLedger.KeyRevoked, TeamLedger.KeyModelsRestricted,
                 TeamLedger.KeyEndpointsRestricted, TeamLedger.KeyLimitsSet, TeamLedger.TeamLimitsSet,
                 TeamLedger.Suspended, TeamLedger.Reinstated)

class LedgerStore(Application[UUID]):
    """The team ledgers' event store (a thin eventsourcing application)."""

    name = "Ledger"
    database: Database

    def save_teams(self, teams: Iterable[TeamLedger], idempotent: Sequence[IdempotentResponse] = ()) -> None:
        """Append the teams' pending events and update the read models, in one transaction.

        Every charge also gets its row in ``charged_requests``, whose key refuses a second charge
        of the same request. Raises a :class:`~projections.store_errors.StoreRefused` saying why
        the transaction was refused (nothing of it is then written)."""
        teams = [t for t in teams if t.pending_events]
        if not teams:
            return
        keys = [k for t in teams if any(isinstance(e, POLICY_EVENTS) for e in t.pending_events)
                for k in key_records(t)]
        balances = [BalanceRecord(t.id, t.name, t.balance, t.held, t.version) for t in teams]
        charges = [ChargeRecord(e.originator_id, e.request_id, e.originator_version, e.charged, e.balance_after)
                   for t in teams for e in t.pending_events if isinstance(e, TeamLedger.Charged)]
        try:
            self.save(*teams, keys=keys, balances=balances, idempotent=idempotent, charges=charges)
        except Exception as exc:
            raise classify(exc, getattr(self.recorder, "events_table_name", "stored_events")) from exc

    @property
    def read_models(self) -> ReadModelQueries:
        """The read-model lookups: both recorders this store opens (SQLite's, PostgreSQL's) are
        :class:`ReadModelQueries`, which eventsourcing's recorder type does not say."""
        return cast(ReadModelQueries, self.recorder)

    def ledger_event(self, notification: Notification) -> TeamLedger.Event:
        """A stored event as the ledger's event it is (the mapper only promises a domain event)."""
        return cast(TeamLedger.Event, self.mapper.to_domain_event(notification))

    def find_team(self, team_id: UUID, version: int | None = None) -> TeamLedger | None:
        """The team as it is now (or as it was at ``version``), or None if it was never opened."""
        try:
            return cast(TeamLedger, self.repository.get(team_id, version=version))
        except AggregateNotFoundError:
            return None

    def newer_events(self, team: TeamLedger) -> list[TeamLedger.Event]:
        """Events another process appended to ``team`` since this copy was loaded."""
        return cast(list[TeamLedger.Event], list(self.events.get(team.id, gt=team.version)))

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        return self.read_models.find_idempotent(team_id, idem_key)

    def find_charge(self, team_id: UUID, request_id: str) -> ChargeRecord | None:
        """The request's charge, if it was ever charged."""
        return self.read_models.find_charge(team_id, request_id)

    def find_key(self, key_hash: str) -> KeyRecord | None:
        return self.read_models.find_key(key_hash)

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        return self.read_models.balances(holding_only)

    def notifications(self, batch: int = 1000) -> Iterator[Notification]:
        """Every stored event in commit order (the notification log), read in batches."""
        last = 0
        while True:
            page = self.recorder.select_notifications(last, batch, inclusive_of_start=False)
            if not page:
                return
            yield from page
            last = page[-1].id


def open_ledger_store(database_url: str, base_dir: Path, pool_size: int = 10) -> LedgerStore:
    """Open the ledger named by a ``database_url``; create its tables and migrate its read models
    first if they are not current (racing processes do it once)."""
    database = Database.from_url(database_url, base_dir)
    if not database.schema_is_current():
        database.create_schema(lambda: LedgerStore(env=database.eventsourcing_env(1, create_tables=True)).close())
    store = LedgerStore(env=database.eventsourcing_env(pool_size, create_tables=False))
    store.database = database
    return store
