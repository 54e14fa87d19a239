"""The event store, and the read models written in the same transaction as the events.

The library owns the events table. Two small read models are kept *strongly* consistent with it by
writing them inside the very transaction that appends the events (the recorder's
``_insert_events`` hook): the key directory (key hash → team), which authentication reads, and the
team balances, which operators and ``ledger verify`` read. Both can be rebuilt from the events.
SQLite and PostgreSQL recorders are in ``sqlite_store`` and ``postgres_store``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, cast
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import JSONTranscoder, Notification, StoredEvent

from app.store.admin_key_directory import AdminKeyRecord
from app.store.database import Database
from app.store.log_append import LoggedLeaf
from app.store.read_models import (
    BalanceRecord,
    ChargeRecord,
    IdempotentResponse,
    KeyRecord,
    ReadModelQueries,
    key_records,
)
from app.store.snapshots import Snapshots, micros_since_epoch, register_state_transcodings
from app.store.store_errors import classify
from domain.admin_keys import ADMIN_KEYS_ID, AdminKeys
from domain.aggregates import NON_TEAM_IDS
from domain.ledger import TeamLedger
from domain.prices import PRICE_LIST_ID, PriceList

log = logging.getLogger("tollgate.ledger")
#: How many of a team's events are read at a time when it is loaded or caught up.
EVENT_PAGE = 1000
#: A loader's ``pause`` comes every this many events replayed (about a millisecond of work).
PAUSE_EVERY = 50

#: Events that change what a team's keys may do: the team's key rows are rewritten when one is saved.
POLICY_EVENTS = (
    TeamLedger.KeyIssued,
    TeamLedger.KeyRevoked,
    TeamLedger.KeyModelsRestricted,
    TeamLedger.KeyEndpointsRestricted,
    TeamLedger.KeyLimitsSet,
    TeamLedger.TeamLimitsSet,
    TeamLedger.Suspended,
    TeamLedger.Reinstated,
    TeamLedger.PricesAdjusted,
    TeamLedger.OutputClampSet,
    TeamLedger.BudgetSet,
)

#: Teams caught up by one query (SQLite takes at most 500 terms of a UNION).
CATCH_UP_TEAMS = 100


class NewerEvents(Protocol):
    """What both recorders (``sqlite_store``, ``postgres_store``) add to find other processes' writes."""

    def select_newer_events(
        self, versions: Sequence[tuple[UUID, int]], page: int, connection: Any = None
    ) -> list[StoredEvent]: ...


class LedgerStore(Application[UUID]):
    """The team ledgers' event store (a thin eventsourcing application)."""

    name = "Ledger"
    database: Database

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        """The library's, and the team state's records, which its snapshots hold."""
        super().register_transcodings(transcoder)
        register_state_transcodings(transcoder)

    def save_teams(
        self, teams: Iterable[TeamLedger], idempotent: Sequence[IdempotentResponse] = ()
    ) -> list[LoggedLeaf]:
        """Append the teams' pending events and update the read models, in one transaction; returns
        each event's leaf in the transparency log, appended in the same transaction.

        Every charge also gets its row in ``charged_requests``, whose key refuses a second charge
        of the same request. Raises a :class:`~app.store.store_errors.StoreRefused` saying why
        the transaction was refused (nothing of it is then written)."""
        teams = [t for t in teams if t.pending_events]
        if not teams:
            return []
        keys = [k for t in teams if any(isinstance(e, POLICY_EVENTS) for e in t.pending_events) for k in key_records(t)]
        balances = [BalanceRecord(t.id, t.name, t.balance, t.held, t.version) for t in teams]
        charges = [
            ChargeRecord(e.originator_id, e.request_id, e.originator_version, e.charged, e.balance_after)
            for t in teams
            for e in t.pending_events
            if isinstance(e, TeamLedger.Charged)
        ]
        logged: list[LoggedLeaf] = []
        try:
            self.save(*teams, keys=keys, balances=balances, idempotent=idempotent, charges=charges, logged=logged)
        except Exception as exc:
            raise classify(exc, getattr(self.recorder, "events_table_name", "stored_events")) from exc
        return logged

    def load_prices(self) -> PriceList | None:
        """The price list, replayed (None: no price was ever recorded). It changes a few times a
        year, so its whole history is read."""
        prices: PriceList | None = None
        for event in cast(Iterator[PriceList.Event], self.events.get(PRICE_LIST_ID)):
            prices = cast(PriceList, event.mutate(prices))
        return prices

    def save_prices(self, prices: PriceList) -> None:
        """Append the price list's new events (refused, with the store's reason, if another process
        recorded a price since this copy was read)."""
        try:
            self.save(prices)
        except Exception as exc:
            raise classify(exc, getattr(self.recorder, "events_table_name", "stored_events")) from exc

    def load_admin_keys(self) -> AdminKeys | None:
        """The admin keys, replayed (None: none was ever issued). They are few: every event is read."""
        keys: AdminKeys | None = None
        for event in cast(Iterator[AdminKeys.Event], self.events.get(ADMIN_KEYS_ID)):
            keys = cast(AdminKeys, event.mutate(keys))
        return keys

    def save_admin_keys(self, keys: AdminKeys) -> None:
        """Append the admin keys' new events and rewrite the directory rows of the keys they touch, in
        one transaction (refused, with the store's reason, if another process changed them since)."""
        touched = {getattr(event, "key_id", None) for event in keys.pending_events}
        rows = [AdminKeyRecord.of(key) for key_id, key in keys.keys.items() if key_id in touched]
        try:
            self.save(keys, admin_keys=rows)
        except Exception as exc:
            raise classify(exc, getattr(self.recorder, "events_table_name", "stored_events")) from exc

    def find_admin_key(self, key_hash: str) -> AdminKeyRecord | None:
        return self.read_models.find_admin_key(key_hash)

    @property
    def read_models(self) -> ReadModelQueries:
        """The read-model lookups: both recorders this store opens (SQLite's, PostgreSQL's) are
        :class:`ReadModelQueries`, which eventsourcing's recorder type does not say."""
        return cast(ReadModelQueries, self.recorder)

    def ledger_event(self, notification: Notification) -> TeamLedger.Event:
        """A stored event as the ledger's event it is (the mapper only promises a domain event)."""
        return cast(TeamLedger.Event, self.mapper.to_domain_event(notification))

    @cached_property
    def team_snapshots(self) -> Snapshots:
        return Snapshots(self.mapper, self.read_models)

    def find_team(self, team_id: UUID, version: int | None = None) -> TeamLedger | None:
        """The team as it is now (or as it was at ``version``), or None if it was never opened."""
        return self.load_team(team_id, version)[0]

    def load_team(
        self,
        team_id: UUID,
        version: int | None = None,
        *,
        at: datetime | None = None,
        pause: Callable[[], None] | None = None,
    ) -> tuple[TeamLedger | None, int]:
        """The team as it is now, as it was at ``version``, or as it was at the instant ``at`` (after
        every event that happened by then); and the version of the snapshot it was loaded from (0:
        none). From the latest usable snapshot, then the events after it, a page at a time: the cost
        is bounded by the snapshot interval, not the team's history. ``pause`` is called every
        ``PAUSE_EVERY`` events replayed (a loader beside the request path lets it have the GIL). A
        current team that disagrees with the balances read model (written with its events) is
        replayed whole instead: its snapshot was wrong."""
        start = self._snapshot(team_id, version, micros_since_epoch(at) if at is not None else None)
        used = start.version if start is not None else 0
        team = self._replay(team_id, start, version, at, pause)
        if used and team is not None and version is None and at is None and not self._agrees(team):
            log.warning(
                "team %s loaded from its snapshot at version %d disagrees with the balances read model; "
                "replaying its events instead",
                team.name,
                used,
            )
            return self._replay(team_id, None, None, None, pause), 0
        return team, used

    def _snapshot(self, team_id: UUID, version: int | None, upto_us: int | None) -> TeamLedger | None:
        """The team from its newest readable snapshot by ``version`` or ``upto_us`` (a corrupt one is
        passed over for the one before, a few times), or None."""
        for _ in range(3):
            row = self.team_snapshots.latest(team_id, upto_version=version, upto_us=upto_us)
            if row is None:
                return None
            if (team := self.team_snapshots.restore(row)) is not None:
                return team
            version = row.version - 1
        return None

    def _replay(
        self,
        team_id: UUID,
        team: TeamLedger | None,
        version: int | None,
        at: datetime | None,
        pause: Callable[[], None] | None = None,
    ) -> TeamLedger | None:
        """``team`` (None: nothing yet) with its newer events applied, up to ``version`` or ``at``."""
        for event in self.events_after(team_id, team.version if team is not None else 0, upto=version):
            if at is not None and event.timestamp > at:
                break
            team = cast(TeamLedger, event.mutate(team))
            if pause is not None and team.version % PAUSE_EVERY == 0:
                pause()
        return team

    def _agrees(self, team: TeamLedger) -> bool:
        rows = self.read_models.read_rows(
            "SELECT balance, held, version FROM team_balances WHERE team_id = {p}", (team.id.hex,)
        )
        if not rows or int(rows[0]["version"]) < team.version:
            return False  # the row is written with the events: a snapshot beyond it has versions never recorded
        if int(rows[0]["version"]) > team.version:
            return True  # newer events were written since we read them: nothing to compare
        return (int(rows[0]["balance"]), int(rows[0]["held"])) == (team.balance, team.held)

    def events_after(
        self, team_id: UUID, version: int, *, upto: int | None = None, page: int = EVENT_PAGE
    ) -> Iterator[TeamLedger.Event]:
        """The team's events after ``version`` (up to ``upto``), read ``page`` at a time."""
        while True:
            events = cast(list[TeamLedger.Event], list(self.events.get(team_id, gt=version, lte=upto, limit=page)))
            yield from events
            if len(events) < page:
                return
            version = events[-1].originator_version

    def newer_events(self, team: TeamLedger) -> Iterator[TeamLedger.Event]:
        """Events another process appended to ``team`` since this copy was loaded, a page at a time."""
        return self.events_after(team.id, team.version)

    def newer_stored_events(
        self, teams: Iterable[TeamLedger], connection: Any = None, page: int = EVENT_PAGE
    ) -> list[StoredEvent]:
        """The events other processes appended to any of ``teams`` since these copies, up to ``page``
        a team, as stored, in one query (nothing found, the common case, costs just that query);
        ``connection``: the writer lock's, on PostgreSQL (``app/store/writer_lock.py``)."""
        versions = [(team.id, team.version) for team in teams]
        recorder = cast(NewerEvents, self.recorder)
        return [
            stored
            for at in range(0, len(versions), CATCH_UP_TEAMS)
            for stored in recorder.select_newer_events(versions[at : at + CATCH_UP_TEAMS], page, connection)
        ]

    def newer_events_of(
        self, teams: Iterable[TeamLedger], found: Sequence[StoredEvent] | None = None, page: int = EVENT_PAGE
    ) -> Iterator[TeamLedger.Event]:
        """The events other processes appended to any of ``teams`` since these copies, each team's in
        order: ``found`` (what ``newer_stored_events`` read), or read now; a team with more than
        ``page`` of them is read on from there a page at a time."""
        teams = list(teams)
        if found is None:
            found = self.newer_stored_events(teams, page=page)
        wanted = {team.id for team in teams}
        count: dict[UUID, int] = {}
        last: dict[UUID, int] = {}
        for stored in found:
            if stored.originator_id not in wanted:  # read for a team the caller did not get: not decoded
                continue
            event = self.ledger_event_of(stored)
            count[event.originator_id] = count.get(event.originator_id, 0) + 1
            last[event.originator_id] = event.originator_version
            yield event
        for team_id, n in count.items():
            if n >= page:
                yield from self.events_after(team_id, last[team_id], page=page)

    def ledger_event_of(self, stored: StoredEvent) -> TeamLedger.Event:
        return cast(TeamLedger.Event, self.mapper.to_domain_event(stored))

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        return self.read_models.find_idempotent(team_id, idem_key)

    def find_charge(self, team_id: UUID, request_id: str) -> ChargeRecord | None:
        """The request's charge, if it was ever charged."""
        return self.read_models.find_charge(team_id, request_id)

    def find_key(self, key_hash: str) -> KeyRecord | None:
        return self.read_models.find_key(key_hash)

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        return self.read_models.balances(holding_only)

    def recent_teams(self, events: int = 2000) -> list[UUID]:
        """The teams that recorded the last ``events`` events, most recent first."""
        top = self.recorder.max_notification_id() or 0
        page = self.recorder.select_notifications(max(0, top - events), events, inclusive_of_start=False)
        return list(
            dict.fromkeys(
                n.originator_id  # type: ignore[misc]
                for n in reversed(page)
                if n.originator_id not in NON_TEAM_IDS
            )
        )

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
