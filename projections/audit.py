"""Replaying the ledger: rebuild every team from its events and check every recorded balance.

Balances move by the amounts in the events; ``balance_after`` is recorded beside them. Replaying
the amounts in commit order and comparing with what was recorded (and with the balances read model)
proves that no event was altered, lost or double-applied — and that the invariant
``0 <= held <= balance`` held at every version. As the replay reaches each team snapshot's version,
the snapshot is checked against it (``projections/audit_snapshots.py``); the audit history is read
beside the events, a page at a time (``projections/audit_history.py``). One pass, and what it holds
is bounded by the number of teams, never by the length of the history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import cast
from uuid import UUID

from eventsourcing.persistence import Notification

from app.store.admin_key_directory import directory_problems
from app.store.database import Database
from app.store.event_store import LedgerStore
from domain.admin_keys import AdminKeys
from domain.aggregates import NON_TEAM_IDS
from domain.ledger import TeamLedger
from domain.prices import PRICE_LIST_ID, PriceList
from domain.pricing import Price, price_usage
from domain.usage import TokenUsage
from projections.audit_history import HistoryCheck
from projections.audit_snapshots import SnapshotCheck
from projections.history import HistoryProjection
from projections.log_check import LogCheck

#: The most events the audit history projection may be behind the ledger when ``verify`` begins. A
#: running gateway's projector catches up every two seconds, so under the heaviest load measured
#: (about 1,500 requests a second) it is a few thousand events behind at most; more means that no
#: projector is catching it up (none running, or one failing on every try), which verify fails.
MAX_PROJECTION_LAG = 10_000


@dataclass
class VerifyReport:
    teams: int = 0
    events: int = 0
    charges: int = 0
    snapshots: int = 0  # how many team snapshots were checked against the replay
    outdated_snapshots: int = 0  # of those, taken before the team gained some state (loads pass them over)
    projected: int = 0  # the event the audit history projection had reached (its rows were checked up to it)
    behind: int = 0  # how many events it had not reached yet
    quarantined: int = 0  # events it set aside, unable to project them (each a problem)
    log_leaves: int = 0  # the transparency log's leaves recomputed from the events
    log_checkpoints: int = 0  # its kept checkpoints checked against the recomputed tree
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_ledger(
    store: LedgerStore, database: Database | None = None, progress: Callable[[int], None] | None = None
) -> VerifyReport:
    """Replay every event and check every recorded balance, every team snapshot, the balances read
    model and, given the ``database``, every row of the audit history and usage projections."""
    report = VerifyReport()
    teams: dict[UUID, TeamLedger] = {}
    prices = _Prices()
    history = HistoryCheck(HistoryProjection(store, database)) if database is not None else None
    snapshots = SnapshotCheck(store)
    log = LogCheck(store)
    charged: dict[UUID, list[int]] = defaultdict(lambda: [0, 0])  # team → [charges, micro-credits]
    try:
        if history:
            history.start()
        for notification in store.notifications():
            report.events += 1
            log.expect(notification)
            if progress and report.events % 10_000 == 0:
                progress(report.events)
            replayed = _replay_one(store, notification, teams, prices)
            if replayed is None:  # the price list's or the admin keys'
                continue
            if isinstance(replayed, str):
                report.problems.append(replayed)
                break
            team, event = replayed
            snapshots.reached(team)
            if isinstance(event, TeamLedger.Charged):
                report.charges += 1
                charged[team.id][0] += 1
                charged[team.id][1] += event.charged
            if history:
                history.expect(notification.id, team.name, event, team.balance)
        if progress:
            progress(report.events)
        report.teams = len(teams)
        _check_read_models(report, store, teams, charged, history)
        if history:
            _projection_state(report, history)
        if report.ok:
            report.problems.extend(directory_problems(store.read_models.admin_keys(), prices.admin_keys))
    finally:
        if history:
            history.close()
        report.problems.extend(log.finish())
        report.log_leaves, report.log_checkpoints = log.leaves, log.checkpoints
    report.problems.extend(snapshots.finish(teams))
    report.snapshots, report.outdated_snapshots = snapshots.checked, snapshots.outdated
    return report


def verify_caught_up(
    store: LedgerStore,
    progress: Callable[[int], None] | None = None,
    catching_up: Callable[[int], Callable[[int], None] | None] | None = None,
) -> VerifyReport:
    """What ``ledger verify`` runs (the command, and the admin API's): the audit history caught up
    first, as every reader of it does, then :func:`verify_ledger`. A projection that cannot catch up
    (stuck: the database refuses it, whatever the number of events it is behind) is the first problem.
    ``catching_up(behind)``: a progress callback for the catch-up, if it wants one."""
    history = HistoryProjection(store, store.database)
    stuck = None
    try:
        behind = (store.recorder.max_notification_id() or 0) - history.position()
        history.catch_up(progress=catching_up(behind) if catching_up is not None else None)
    except Exception as exc:  # noqa: BLE001 - whatever stops the projection is the verification's finding
        stuck = (
            f"the audit history projection cannot catch up ({type(exc).__name__}: {str(exc).strip()[:300]}): "
            "it is stuck, and what it says is behind the ledger"
        )
    finally:
        history.close()
    report = verify_ledger(store, store.database, progress)
    if stuck is not None:
        report.problems.insert(0, stuck)
    return report


def _projection_state(report: VerifyReport, history: HistoryCheck) -> None:
    """How far the audit history projection had come, and how many events it set aside; a problem
    if it is further behind than a running projector ever is."""
    report.projected, report.behind, report.quarantined = history.position, history.behind, history.quarantined
    if history.behind > MAX_PROJECTION_LAG:
        report.problems.append(
            f"the audit history projection is {history.behind} events behind the ledger (more than "
            f"{MAX_PROJECTION_LAG}): no projector is catching it up; is a gateway running, and does its log say "
            "why not? (`tollgate ledger rebuild` projects every event now)"
        )


def _check_read_models(
    report: VerifyReport,
    store: LedgerStore,
    teams: dict[UUID, TeamLedger],
    charged: dict[UUID, list[int]],
    history: HistoryCheck | None,
) -> None:
    """After a clean replay: the once-only charge index, the balances and the audit history agree with it."""
    if report.ok:
        report.problems.extend(_check_once_only_charges(store, teams, charged))
    if report.ok:
        report.problems.extend(_check_balances_read_model(store, teams))
    if report.ok and history:
        report.problems.extend(history.finish())


class _Prices:
    """The aggregates that are not a team's, as the replay has reached them: the price list, and the
    admin keys."""

    def __init__(self) -> None:
        self.list: PriceList | None = None
        self.admin_keys: AdminKeys | None = None

    def apply(self, store: LedgerStore, notification: Notification) -> str | None:
        prices = notification.originator_id == PRICE_LIST_ID
        try:
            event = cast(PriceList.Event | AdminKeys.Event, store.mapper.to_domain_event(notification))
            if prices:
                self.list = cast(PriceList, event.mutate(self.list))
            else:
                self.admin_keys = cast(AdminKeys, event.mutate(self.admin_keys))
        except Exception as exc:  # noqa: BLE001 - an event that cannot be applied is the verification's finding
            whose = "the price list" if prices else "the admin keys"
            return f"event #{notification.id} ({whose}): cannot be applied: {exc}"
        return None


def _replay_one(
    store: LedgerStore, notification: Notification, teams: dict[UUID, TeamLedger], price_list: _Prices
) -> tuple[TeamLedger, TeamLedger.Event] | str | None:
    """The event applied to its team (kept in ``teams``), or what is wrong with it; an event of the
    price list is applied to it (None: nothing wrong)."""
    if notification.originator_id in NON_TEAM_IDS:
        return price_list.apply(store, notification)
    prices = price_list.list
    try:
        event = store.ledger_event(notification)
    except Exception as exc:  # noqa: BLE001 - an unreadable event is the verification's finding
        return f"event #{notification.id}: cannot be read: {exc}"
    where = f"event #{notification.id} ({type(event).__qualname__}, version {event.originator_version})"
    try:
        team = event.mutate(teams.get(event.originator_id))
    except Exception as exc:  # noqa: BLE001 - an event that cannot be applied is the verification's finding
        return f"{where}: cannot be applied: {exc}"
    assert isinstance(team, TeamLedger)
    teams[team.id] = team
    problem = _check_event(team, event) or _check_price(team, event, prices) or _check_lots(team, event)
    if problem is None and not 0 <= team.held <= team.balance:
        problem = f"balance {team.balance} and holds {team.held} break 0 <= held <= balance"
    if problem:
        return f"team {team.name!r}, {where}: {problem}"
    return team, event


def _check_lots(team: TeamLedger, event: object) -> str | None:
    """The credit lots add up to the balance, what is owed is never negative, and what an event took
    from the lots is what it moved."""
    lots_total = sum(lot.remaining for lot in team.lots.values())
    if lots_total != team.balance or team.owed < 0:
        return f"the credit lots hold {lots_total} (owed {team.owed}), but the balance is {team.balance}"
    drawn = getattr(event, "drawn", None)
    if drawn:
        moved = (
            event.charged
            if isinstance(event, TeamLedger.Charged)
            else getattr(event, "taken", None) or -getattr(event, "amount", 0)  # a refund's or dispute's: taken
        )
        if sum(drawn.values()) != moved:
            return f"it took {sum(drawn.values())} from its credit lots but moved {moved}"
    return None


def _check_event(team: TeamLedger, event: object) -> str | None:
    recorded = getattr(event, "balance_after", None)
    if recorded is not None and recorded != team.balance:
        return f"recorded balance_after {recorded} but replay gives {team.balance}"
    if isinstance(event, TeamLedger.Charged):
        cost = price_usage(
            TokenUsage.from_record(event.usage),
            Price.from_record(event.price),
            Decimal(event.credits_per_usd),
            Decimal(event.adjustment or 0),
        ).micros
        if cost != event.cost:
            return f"recorded cost {event.cost} but its usage at its price costs {cost}"
        if event.charged + event.uncollected != event.cost or event.charged < 0:
            return f"charged {event.charged} + uncollected {event.uncollected} != cost {event.cost}"
    return None


def _check_price(team: TeamLedger, event: object, prices: PriceList | None) -> str | None:
    """A charge that names a price list entry was priced by the entry in force at its instant, at
    the rates that entry gives its usage, with the team's price adjustment of the time."""
    if not isinstance(event, TeamLedger.Charged) or not event.price_ref:
        return None  # charges recorded before the price list (and tools' charges at a bare price) name none
    entry = prices.entry(event.price_ref) if prices is not None else None
    # the model's own price (its id), or one of its deployments' (``MODEL/NAME``)
    if entry is None or not (entry.model == event.model or entry.model.startswith(event.model + "/")):
        return f"priced by {event.price_ref}, which the price list does not have for model {event.model!r}"
    in_force = prices.in_force(entry.model, event.timestamp) if prices is not None else None
    if in_force is None or in_force.ref != event.price_ref:
        return (
            f"priced by {event.price_ref}, but {in_force.ref if in_force else 'no price'} was in force at "
            f"{event.timestamp.isoformat()}"
        )
    applied, basis = entry.price.applied_to(TokenUsage.from_record(event.usage), batch=bool(event.batch_id))
    if Price.from_record(event.price) != applied or event.basis != basis:
        return (
            f"priced at {event.basis} {event.price}, but {event.price_ref} gives its usage "
            f"{basis} {applied.as_record()}"
        )
    adjustment = team.adjustment_for(event.model)
    if event.adjustment != adjustment:
        return f"adjusted by {event.adjustment or 0} %, but the team's adjustment was {adjustment or 0} %"
    return None


def _check_once_only_charges(
    store: LedgerStore, teams: dict[UUID, TeamLedger], charged: dict[UUID, list[int]]
) -> list[str]:
    """Every charge has its row in ``charged_requests`` (the store's refusal of a second charge of a
    request), and no row lacks its charge: compared per team, by count and amount, up to the
    version the replay reached (charges written since are checked by the next run)."""
    problems = []
    for team in teams.values():
        count, total = store.read_models.charge_totals(team.id, team.version)
        expected = charged.get(team.id, [0, 0])
        if (count, total) != tuple(expected):
            problems.append(
                f"team {team.name!r}: the once-only charge index has {count} charge(s) of {total} "
                f"micro-credits up to version {team.version}; the events have {expected[0]} of "
                f"{expected[1]}"
            )
    return problems


def _check_balances_read_model(store: LedgerStore, teams: dict[UUID, TeamLedger]) -> list[str]:
    """Compare each replayed team with its balances row. Gateways keep writing while this runs, and a
    row is written with its events: a row newer than the replay has newer events, which are checked
    and applied before comparing; a team opened since the replay read the events is replayed whole."""
    problems = []
    rows = {row.team_id: row for row in store.balances()}
    for team_id, row in rows.items():
        if team_id not in teams and (opened := store.find_team(team_id, version=row.version)) is not None:
            teams[team_id] = opened
    for team in teams.values():
        balance = rows.pop(team.id) if team.id in rows else None
        if balance is not None and balance.version > team.version:
            for event in store.newer_events(team):
                event.mutate(team)
                if (problem := _check_event(team, event)) is not None:
                    return [f"team {team.name!r}, version {team.version}: {problem}"]
        if balance is None:
            problems.append(f"team {team.name!r}: missing from the balances read model")
        elif (balance.balance, balance.held, balance.version) != (team.balance, team.held, team.version):
            problems.append(
                f"team {team.name!r}: balances read model says balance {balance.balance}, held {balance.held}, "
                f"version {balance.version}; replay gives {team.balance}, {team.held}, {team.version}"
            )
    for row in rows.values():
        problems.append(f"team {row.team_name!r}: in the balances read model but has no events")
    return problems
