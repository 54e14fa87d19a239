"""A team's balance as it was at an instant: its latest snapshot by then, plus its events up to then.

``tollgate ledger balance --team T --at TIME`` and ``GET /admin/teams/{name}/balance?at=TIME`` both
answer from here. The answer is what replaying the team's events up to that instant gives (every
event recorded at or before it, in the team's order), read from the newest snapshot taken by then
and at most ``snapshot_every`` events after it: as quick for last year as for a minute ago.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from app.store.event_store import LedgerStore
from domain.ledger import TeamLedger, TeamNotFound, team_id
from domain.ledger_errors import TeamNotOpenedYet


@dataclass(frozen=True, slots=True)
class BalanceAt:
    """A team's balance and held credit (micro-credits) right after its last event by ``at``."""

    team: str
    at: datetime | None  # None: now
    balance: int
    held: int
    version: int  # the version of the last event by then
    event: str  # that event's kind, e.g. "Charged"
    occurred_at: datetime  # when it happened
    request_id: str  # the request it was about, if any


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date or time (``2026-11-20``, ``2026-11-20T12:00:00Z``), UTC unless it says
    otherwise; ``ValueError`` for anything else."""
    moment = datetime.fromisoformat(text.strip())
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def balance_at(store: LedgerStore, name: str, at: datetime | None = None) -> BalanceAt:
    """The team's balance at ``at`` (now, if None); ``TeamNotFound`` if there is no such team, or it
    was opened after ``at``."""
    tid = team_id(name)
    team, _ = store.load_team(tid, at=at)
    if team is None:
        if at is not None and store.find_team(tid, version=1) is not None:
            raise TeamNotOpenedYet(name, at.isoformat())
        raise TeamNotFound(name)
    last = next(store.events_after(tid, team.version - 1, upto=team.version))
    return BalanceAt(
        team.name,
        at,
        team.balance,
        team.held,
        team.version,
        _kind(last),
        last.timestamp,
        str(getattr(last, "request_id", "") or getattr(last, "lease", "")),
    )


def _kind(event: TeamLedger.Event) -> str:
    return type(event).__qualname__.rsplit(".", 1)[-1]
