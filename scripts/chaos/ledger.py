"""What the ledger recorded: every event of every team, in commit order, and the balances read model.

The verdict reads the events themselves (through the event store, as ``ledger verify`` does) rather
than the audit-history projection, because the projection has rows only for top-ups and charges,
and holds, leases, releases and failed requests are what a crash leaves behind. Each event is kept
as plain data with its team, its position in the log and its time, so that the checks are simple
functions of lists.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    position: int  # the notification id: the order of commits
    team: str
    kind: str  # the event class: Opened, CreditsAdded, HoldPlaced, CreditsLeased, Charged, …
    version: int
    at: float  # Unix time the event was recorded
    fields: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


@dataclass
class Snapshot:
    events: list[LedgerEvent]
    #: team → (balance, held), from the balances read model.
    balances: dict[str, tuple[int, int]]

    def by_team(self) -> dict[str, list[LedgerEvent]]:
        teams: dict[str, list[LedgerEvent]] = defaultdict(list)
        for event in self.events:
            teams[event.team].append(event)
        return teams

    def of_kind(self, *kinds: str) -> list[LedgerEvent]:
        return [e for e in self.events if e.kind in kinds]


def read_snapshot(database_url: str, base_dir: Path) -> Snapshot:
    """Every event in commit order, and the balances read model read after them."""
    from app.store.event_store import open_ledger_store
    from domain.aggregates import NON_TEAM_IDS

    store = open_ledger_store(database_url, base_dir, pool_size=2)
    try:
        names: dict[UUID, str] = {}
        events = []
        for notification in store.notifications():
            if notification.originator_id in NON_TEAM_IDS:  # the price list's and admin keys' events have no team
                continue
            event = store.ledger_event(notification)
            fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
            for name in ("originator_id", "originator_version", "timestamp"):
                fields.pop(name, None)
            if type(event).__name__ == "Opened":
                names[event.originator_id] = fields["name"]
            events.append(
                LedgerEvent(
                    notification.id,
                    names.get(event.originator_id, str(event.originator_id)),
                    type(event).__name__,
                    event.originator_version,
                    event.timestamp.timestamp(),
                    fields,
                )
            )
        balances = {row.team_name: (row.balance, row.held) for row in store.balances()}
        return Snapshot(events, balances)
    finally:
        store.close()


def total_held(database_url: str, base_dir: Path) -> dict[str, int]:
    """The teams holding credit now (the balances read model), e.g. to wait for every lease to go back."""
    from app.store.event_store import open_ledger_store

    store = open_ledger_store(database_url, base_dir, pool_size=1)
    try:
        return {row.team_name: row.held for row in store.balances(holding_only=True)}
    finally:
        store.close()


def wait_until_nothing_held(database_url: str, base_dir: Path, until: float) -> dict[str, int]:
    """Poll until no team holds anything or ``until`` (Unix time) passes; returns what is still held."""
    while True:
        try:
            held = total_held(database_url, base_dir)
        except Exception:  # noqa: BLE001 - the database may be coming back; look again
            held = {"?": -1}
        if not held or time.time() >= until:
            return held
        time.sleep(0.5)
