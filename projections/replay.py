"""Every team as its events make it: the full replay that rebuilding and auditing both start from.

Kept apart from both (``projections/history.py`` rebuilds the read models, ``projections/audit.py``
verifies them) so that neither has to import the other.
"""

from __future__ import annotations

from typing import cast
from uuid import UUID

from domain.ledger import TeamLedger
from projections.event_store import LedgerStore


def replay_teams(store: LedgerStore, upto: int | None = None) -> list[TeamLedger]:
    """Every team as its events up to notification ``upto`` (all, if None) make it."""
    teams: dict[UUID, TeamLedger] = {}
    for notification in store.notifications():
        if upto is not None and notification.id > upto:
            break
        event = store.ledger_event(notification)
        teams[event.originator_id] = cast(TeamLedger, event.mutate(teams.get(event.originator_id)))
    return list(teams.values())
