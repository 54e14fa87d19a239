"""The audit history and usage projections, fed by the event notification log.

Each batch of events becomes rows in ``ledger_entries`` (one per top-up, adjustment or charge, and one
per operator's action that moves no money: ``projections/operator_rows.py``) and increments in
``usage_daily`` (team × key × model × day), ``usage_by_attribution`` (team × tag or end user × day,
``projections/attribution.py``) and ``usage_by_endpoint`` (team × endpoint × day,
``projections/endpoint_usage.py``), written in ONE transaction together with the position
reached in ``projection_tracking``. The position is advanced with an optimistic check, so two
projectors racing (two gateway processes, or a gateway and the CLI) never apply an event twice:
exactly once, whatever the delivery.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Notification

from app.store.admin_key_directory import ADMIN_KEY_COLUMNS, records_of
from app.store.database import Database, Sql, Transaction
from app.store.event_store import LedgerStore
from app.store.read_models import KEY_COLUMNS, key_records
from app.store.snapshots import SNAPSHOT_EVERY
from app.store.usage_rows import KEY_WIDTH, SUMMED, USAGE_COLUMNS, AttributionRow, UsageRow, add_into, summed
from domain.aggregates import NON_TEAM_IDS
from domain.attribution_bounds import Admission
from domain.ledger import TeamLedger
from projections import attribution, endpoint_usage, quarantine
from projections.alerts import AlertOutbox, write_alerts
from projections.history_rows import ENTRY_COLUMNS, EntryRow, Slice
from projections.operator_rows import OPERATOR_KINDS
from projections.recharges import RechargeOutbox, write_recharges
from projections.replay import Replay

log = logging.getLogger("tollgate.projector")

NAME = "history"
#: How many ledger entries a page of a whole-history read holds (export, verify).
ENTRY_PAGE = 1000
#: The read models a rebuild makes again, each in a staging table swapped in at its end.
_REBUILT = ("ledger_entries", "usage_daily", attribution.TABLE, endpoint_usage.TABLE, "team_balances", "api_keys")
_INSERT_ENTRIES = f"INSERT INTO ledger_entries ({', '.join(ENTRY_COLUMNS)})"
_ADD_USAGE = f"INSERT INTO usage_daily ({', '.join(USAGE_COLUMNS)})"
_ON_USAGE_CONFLICT = f"ON CONFLICT ({', '.join(USAGE_COLUMNS[:KEY_WIDTH])}) DO UPDATE SET " + ", ".join(
    f"{c} = usage_daily.{c} + excluded.{c}" for c in SUMMED
)


class HistoryProjection:
    def __init__(self, store: LedgerStore, database: Database) -> None:
        self._store = store
        self._sql = Sql(database, rebuildable=True)
        self._names: dict[UUID, str] = {}

    def close(self) -> None:
        self._sql.close()

    def consistent(self) -> AbstractContextManager[Sql]:
        """Every read in the block sees one state of the database (projectors may be writing meanwhile)."""
        return self._sql.snapshot()

    def position(self) -> int:
        rows = self._sql.query("SELECT notification_id FROM projection_tracking WHERE name = ?", (NAME,))
        return int(rows[0]["notification_id"]) if rows else 0

    def newest_event(self) -> int:
        """The newest event's notification id (0: none), as this connection sees the store."""
        table, column = (
            ("stored_events", "rowid") if self._sql.kind == "sqlite" else ("ledger_events", "notification_id")
        )
        return int(self._sql.query(f"SELECT MAX({column}) AS n FROM {table}")[0]["n"] or 0)

    def quarantined(self, limit: int = 10) -> list[dict[str, Any]]:
        """The first ``limit`` events this projection set aside (``projections/quarantine.py``)."""
        return quarantine.listed(self._sql, NAME, limit)

    def quarantined_ids(self) -> set[int]:
        return quarantine.ids(self._sql, NAME)

    def quarantined_count(self) -> int:
        return quarantine.count(self._sql, NAME)

    def _team_name(self, event: DomainEventProtocol[UUID]) -> str:
        if isinstance(event, TeamLedger.Opened):
            self._names[event.originator_id] = event.name
        name = self._names.get(event.originator_id)
        if name is None:
            rows = self._sql.query("SELECT team_name FROM team_balances WHERE team_id = ?", (event.originator_id.hex,))
            name = self._names[event.originator_id] = rows[0]["team_name"] if rows else event.originator_id.hex
        return name

    def _balance_before(self, team_name: str, start: int) -> int:
        """The team's balance after its last entry up to notification ``start`` (0: none yet). Every
        event that moves a balance has its row, and the rows up to the position are all written."""
        rows = self._sql.query(
            "SELECT balance_after FROM ledger_entries WHERE team_name = ? AND notification_id <= ? "
            "ORDER BY notification_id DESC LIMIT 1",
            (team_name, start),
        )
        return int(rows[0]["balance_after"]) if rows else 0

    def _rows(self, notifications: Iterable[Notification], start: int) -> Slice:
        """The rows of events after notification ``start``; an event whose rows cannot be made (it
        cannot be read, or they cannot be stored) is quarantined instead. A failure of the database
        itself (reading a team's name or balance) is raised: it is no event's fault."""
        rows = Slice()
        balances: dict[str, int] = {}  # each team's balance as this batch reached it (read when first needed)
        for n in notifications:
            if n.originator_id in NON_TEAM_IDS:  # the price list's and admin keys' events have no team
                continue
            try:
                event = self._store.mapper.to_domain_event(n)
            except Exception as exc:  # noqa: BLE001 - an event that cannot be read is quarantined, not a stop
                rows.quarantine(n, exc)
                continue
            name = self._team_name(event)
            if type(event) in OPERATOR_KINDS and name not in balances:  # a row repeating the balance
                balances[name] = 0 if isinstance(event, TeamLedger.Opened) else self._balance_before(name, start)
            try:
                entry = rows.add(n.id, name, event, balances.get(name, 0))
            except Exception as exc:  # noqa: BLE001 - rows that cannot be made or stored: quarantined, not a stop
                rows.quarantine(n, exc)
                continue
            if entry is not None:
                balances[name] = entry.balance_after
        rows.attributed = attribution.admitted(self._sql, rows.attributed)  # within each team's bounds for the day
        return rows

    def catch_up(
        self, batch: int = 500, progress: Callable[[int], None] | None = None, pages: int | None = None
    ) -> int:
        """Apply every event not yet projected (at most ``pages`` pages of ``batch``: a caller that
        shares the process with the request path catches up in slices); returns how many were read.
        No event stops it: one it cannot project is quarantined (``projections/quarantine.py``)."""
        done = 0
        for _ in range(pages) if pages is not None else itertools.count():
            start = self.position()
            page = self._store.recorder.select_notifications(start, batch, inclusive_of_start=False)
            if not page:
                return done
            if not self._apply(page, start):
                continue  # another projector got there first: its rows stand, ours are dropped
            done += len(page)
            if progress:
                progress(done)
        return done

    def _apply(self, page: Sequence[Notification], start: int) -> bool:
        """Project ``page`` (the events after ``start``) in one transaction; if the database refuses
        what one of them holds, one event at a time, quarantining the one it refuses. False if
        another projector moved the position first."""
        try:
            return self._commit(self._rows(page, start), start, page[-1].id)
        except Exception as exc:
            if not quarantine.refused_for_its_data(exc):
                raise
        for i, n in enumerate(page):
            before = page[i - 1].id if i else start
            try:
                moved = self._commit(self._rows([n], before), before, n.id)
            except Exception as exc:
                if not quarantine.refused_for_its_data(exc):
                    raise
                refused = Slice()
                refused.quarantine(n, exc)
                moved = self._commit(refused, before, n.id)
            if not moved:
                return False
        return True

    def _commit(self, rows: Slice, start: int, last: int) -> bool:
        """Write a slice's rows and move the position from ``start`` to ``last``, in one transaction
        (False, nothing written: another projector moved it first)."""
        with self._sql.transaction() as tx:
            moved = tx.execute(
                "UPDATE projection_tracking SET notification_id = ? WHERE name = ? AND notification_id = ?",
                (last, NAME, start),
            )
            if moved != 1:
                return False
            _write(tx, rows.entries, rows.usage)
            write_alerts(tx, rows.alerts)
            write_recharges(tx, rows.recharges)
            attribution.write(tx, rows.attributed)
            endpoint_usage.write(tx, rows.by_endpoint)
            quarantine.add(tx, NAME, rows.quarantined)
        for nid, topic, error in rows.quarantined:
            log.error(
                "event #%d (%s) cannot be projected into the audit history (%s): quarantined, and the "
                "events after it projected; `tollgate ledger verify` reports it",
                nid,
                topic,
                error,
            )
        return True

    # -- rebuild ---------------------------------------------------------------------------------

    def rebuild(
        self, progress: Callable[[int], None] | None = None, snapshot_every: int | None = SNAPSHOT_EVERY
    ) -> int:
        """Rebuild every read model from the events into fresh staging tables, then swap them in; and
        the team snapshots: all dropped first, then one of each team at every multiple of
        ``snapshot_every`` (None: none) taken from the same replay. One pass over the events, a page
        at a time; what is kept meanwhile is bounded by the number of teams (their state and usage
        by team × key × model × day, and by endpoint × day), not by the history. Returns how many events were read."""
        with self._sql.transaction() as tx:
            for table in _REBUILT:
                tx.execute(f"DROP TABLE IF EXISTS {table}_rebuild")
                tx.execute(f"CREATE TABLE {table}_rebuild AS SELECT * FROM {table} WHERE 1 = 0")
        self._store.team_snapshots.drop_all()
        replay = Replay(self._store, snapshot_every)
        admission = Admission()  # the bounds on usage by attribution, counted as the events come
        done, last = 0, 0
        usage: dict[tuple[str, ...], UsageRow] = {}  # bounded by team × key × model × day
        attributed: dict[tuple[str, ...], AttributionRow] = {}
        by_endpoint: dict[tuple[Any, ...], list[int]] = {}
        quarantined: list[tuple[int, str, str]] = []
        while page := self._store.recorder.select_notifications(last, 1000, inclusive_of_start=False):
            rows = Slice()
            for n in page:
                if n.originator_id in NON_TEAM_IDS:  # the price list's and admin keys' events have no team
                    continue
                event = self._store.ledger_event(n)  # one the replay cannot apply stops it: no balance could be rebuilt
                team = replay.apply(event)
                try:
                    rows.add(n.id, team.name, event, team.balance)
                except Exception as exc:  # noqa: BLE001 - rows that cannot be made or stored: quarantined again
                    rows.quarantine(n, exc)
            with self._sql.transaction() as tx:
                tx.insert_rows("ledger_entries_rebuild", ENTRY_COLUMNS, [e.values() for e in rows.entries])
                write_alerts(tx, rows.alerts)  # completed, never replaced: what was delivered stays delivered
                write_recharges(tx, rows.recharges)  # likewise: no attempt is paid again
            add_into(usage, rows.usage)
            add_into(attributed, admission.admit(rows.attributed))
            endpoint_usage.add_rows(by_endpoint, rows.by_endpoint)
            quarantined += rows.quarantined
            replay.store_snapshots()
            done, last = done + len(page), page[-1].id
            if progress:
                progress(done)
        teams = list(replay.teams.values())
        with self._sql.transaction() as tx:
            tx.executemany(
                f"INSERT INTO usage_daily_rebuild ({', '.join(USAGE_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(USAGE_COLUMNS))})",
                [row.values() for row in usage.values()],
            )
            tx.insert_rows(
                f"{attribution.TABLE}_rebuild", attribution.COLUMNS, [row.values() for row in attributed.values()]
            )
            tx.insert_rows(
                f"{endpoint_usage.TABLE}_rebuild", endpoint_usage.COLUMNS, [(*k, *v) for k, v in by_endpoint.items()]
            )
            tx.executemany(
                "INSERT INTO team_balances_rebuild (team_id, team_name, balance, held, version) VALUES (?, ?, ?, ?, ?)",
                [(t.id.hex, t.name, t.balance, t.held, t.version) for t in teams],
            )
            tx.executemany(
                f"INSERT INTO api_keys_rebuild ({', '.join(KEY_COLUMNS)}) VALUES ({', '.join('?' * len(KEY_COLUMNS))})",
                [k.as_row() for t in teams for k in key_records(t)],
            )
            # The once-only charge index is never replaced, only completed: a row it lost comes back
            # (every charge has its audit history row, with the figures the index keeps).
            tx.execute(
                "INSERT INTO charged_requests (team_id, request_id, version, charged, balance_after) "
                "SELECT team_id, request_id, version, -amount, balance_after FROM ledger_entries_rebuild "
                "WHERE kind = 'charge' ON CONFLICT DO NOTHING"
            )
            self._swap(tx, last)
            quarantine.forget(tx, NAME, last)  # projected again: only what still cannot be stays set aside
            quarantine.add(tx, NAME, quarantined)
            self._rebuild_admin_keys(tx)
        return done

    def _rebuild_admin_keys(self, tx: Transaction) -> None:
        """The admin key directory, from the admin keys' events: a row changed since they were read
        (a key issued or revoked meanwhile, with its row) stays; every other row is replaced."""
        keys = self._store.load_admin_keys()
        tx.execute("DELETE FROM admin_keys WHERE version <= ?", (keys.version if keys is not None else 0,))
        columns = ", ".join(ADMIN_KEY_COLUMNS)
        tx.executemany(
            f"INSERT INTO admin_keys ({columns}) VALUES ({', '.join('?' * len(ADMIN_KEY_COLUMNS))}) "
            "ON CONFLICT (key_hash) DO NOTHING",
            [r.as_row() for r in records_of(keys)],
        )

    @staticmethod
    def _swap(tx: Transaction, last: int) -> None:
        # The history is replaced whole, at the position the rebuild reached; projectors carry on from there.
        for table in ("ledger_entries", "usage_daily", attribution.TABLE, endpoint_usage.TABLE):
            tx.execute(f"DELETE FROM {table}")
            tx.execute(f"INSERT INTO {table} SELECT * FROM {table}_rebuild")
        tx.execute("UPDATE projection_tracking SET notification_id = ? WHERE name = ?", (last, NAME))
        # Balances and keys are written with every event, possibly since the rebuild read them: a row
        # newer than the rebuild's stays, any other row is replaced by the rebuilt one.
        tx.execute(
            "INSERT INTO team_balances SELECT * FROM team_balances_rebuild WHERE true "
            "ON CONFLICT (team_id) DO UPDATE SET team_name = excluded.team_name, balance = excluded.balance, "
            "held = excluded.held, version = excluded.version WHERE team_balances.version <= excluded.version"
        )
        columns = ", ".join(KEY_COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in KEY_COLUMNS[1:])
        tx.execute(
            f"INSERT INTO api_keys ({columns}) SELECT {columns} FROM api_keys_rebuild WHERE true "
            f"ON CONFLICT (key_hash) DO UPDATE SET {updates} WHERE api_keys.version <= excluded.version"
        )
        for table in _REBUILT:
            tx.execute(f"DROP TABLE {table}_rebuild")

    # -- reading ---------------------------------------------------------------------------------

    def entries(
        self,
        team: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        kind: str | None = None,
        newest_first: bool = False,
    ) -> list[dict[str, Any]]:
        """Ledger entries in ledger order (``newest_first``: the reverse); ``kind``: ``top_up`` or ``charge`` only."""
        where, params = _filters(team, since, kind)
        page = f" LIMIT {int(limit)} OFFSET {int(offset)}" if limit is not None else ""
        order = " DESC" if newest_first else ""
        return self._sql.query(f"SELECT * FROM ledger_entries{where} ORDER BY notification_id{order}{page}", params)

    def entry_page(self, after: int, limit: int = ENTRY_PAGE) -> list[tuple[Any, ...]]:
        """Every team's ledger entries after notification ``after`` (a keyset page: :func:`entry_page_sql`),
        as tuples of the ``ENTRY_COLUMNS``."""
        return self._sql.tuples(*entry_page_sql(after, limit=limit, columns=", ".join(ENTRY_COLUMNS)))

    def count(self, team: str | None = None, since: str | None = None) -> int:
        where, params = _filters(team, since)
        return int(self._sql.query(f"SELECT COUNT(*) AS n FROM ledger_entries{where}", params)[0]["n"])

    def outbox(self) -> AlertOutbox:
        """The alert outbox this projection fills."""
        return AlertOutbox(self._sql)

    def recharges(self) -> RechargeOutbox:
        """The auto-recharge outbox this projection fills."""
        return RechargeOutbox(self._sql)

    def key_usage(self, team: str, key_id: str) -> list[dict[str, Any]]:
        """A key's spend per day (all models), oldest first."""
        return self._sql.query(
            "SELECT day, SUM(cost) AS cost FROM usage_daily WHERE team_name = ? AND key_id = ? "
            "GROUP BY day ORDER BY day",
            [team, key_id],
        )

    def attribution_usage(
        self, team: str, dimension: str, since: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> attribution.Breakdown:
        """A page of the team's usage by the values of ``dimension`` (``user`` or ``tag:<name>``)."""
        return attribution.breakdown(self._sql, team, dimension, since, limit=limit, offset=offset)

    def attribution_dimensions(self, team: str) -> list[str]:
        """The dimensions the team's usage can be reported by (``user``, and each tag name it used)."""
        return attribution.dimensions_of(self._sql, team)

    def attribution_rows(self) -> list[AttributionRow]:
        """Every ``usage_by_attribution`` row."""
        return attribution.everything(self._sql)

    def endpoint_usage(self, team: str) -> list[dict[str, Any]]:
        """The team's charges summed by endpoint, the largest cost first: read from ``usage_by_endpoint``
        (days × endpoints rows, however many charges the team has)."""
        return endpoint_usage.by_endpoint(self._sql, team)

    def endpoint_rows(self) -> list[tuple[Any, ...]]:
        """Every ``usage_by_endpoint`` row, its ``COLUMNS`` in order."""
        return endpoint_usage.everything(self._sql)

    def usage(self, team: str | None = None) -> list[UsageRow]:
        """Usage by team × key × model × day (one team's, or every team's), by team, day, model and key."""
        where, params = (" WHERE team_name = ?", [team]) if team else ("", [])
        rows = self._sql.query(
            f"SELECT {', '.join(USAGE_COLUMNS)} FROM usage_daily{where} ORDER BY team_name, day, model, key_id", params
        )
        return [UsageRow.read(row) for row in rows]


def _write(tx: Transaction, entries: Sequence[EntryRow], usage: Sequence[UsageRow]) -> None:
    """A slice's rows, each table in one statement (``app/store/many_rows.py``: why); its usage
    summed per team, key, model and day first (a statement may not upsert a row twice)."""
    tx.insert_many(_INSERT_ENTRIES, [e.values() for e in entries])
    tx.insert_many(_ADD_USAGE, [row.values() for row in summed(usage)], _ON_USAGE_CONFLICT)


def entry_page_sql(  # noqa: PLR0913 - the page, its filters, and what it selects from where
    after: int,
    upto: int | None = None,
    team: str | None = None,
    since: str | None = None,
    limit: int = ENTRY_PAGE,
    columns: str = "*",
    source: str = "ledger_entries",
) -> tuple[str, list[Any]]:
    """The query (``?`` markers) of a keyset page of ledger entries: those after notification
    ``after`` and up to ``upto``, in ledger order, at most ``limit``. Each page starts where the last
    one ended, through the index on (``team_name``,) ``notification_id``, so reading a whole history
    page by page costs the same per page at its end as at its start (``OFFSET`` would not).
    ``source``: the entries, or a join of them (the filters name the entries' columns alone)."""
    where, params = _filters(team, since, after=after, upto=upto)
    return f"SELECT {columns} FROM {source}{where} ORDER BY notification_id LIMIT {int(limit)}", params


def _filters(
    team: str | None, since: str | None, kind: str | None = None, *, after: int | None = None, upto: int | None = None
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if after is not None:
        clauses.append("notification_id > ?")
        params.append(after)
    if upto is not None:
        clauses.append("notification_id <= ?")
        params.append(upto)
    if kind:
        clauses.append("kind = ?")
        params.append(kind)
    if team:
        clauses.append("team_name = ?")
        params.append(team)
    if since:
        clauses.append("occurred_at >= ?")
        params.append(since)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
