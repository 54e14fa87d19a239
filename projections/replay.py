"""Every team as its events make it: the full replay that rebuilding and auditing both start from.

Kept apart from both (``projections/history.py`` rebuilds the read models, ``projections/audit.py``
verifies them) so that neither has to import the other. Memory is bounded by the number of teams
(a team's state is bounded whatever its history), never by the number of events.
"""

from __future__ import annotations

from typing import cast
from uuid import UUID

from app.store.event_store import LedgerStore
from app.store.snapshots import SnapshotRow
from domain.ledger import TeamLedger


class Replay:
    """The teams, one event at a time; with ``snapshot_every``, the snapshot of each team at every
    multiple of it, taken as the replay passes that version and stored by :meth:`store_snapshots`."""

    def __init__(self, store: LedgerStore, snapshot_every: int | None = None) -> None:
        self.teams: dict[UUID, TeamLedger] = {}
        self._store = store
        self._every = snapshot_every
        self._due: list[SnapshotRow] = []
        self.snapshots = 0  # how many were stored

    def apply(self, event: TeamLedger.Event) -> TeamLedger:
        """The event's team with the event applied."""
        team = cast(TeamLedger, event.mutate(self.teams.get(event.originator_id)))
        self.teams[event.originator_id] = team
        if self._every and team.version % self._every == 0:
            self._due.append(self._store.team_snapshots.take(team))  # encoded now: later events do not change it
        return team

    def store_snapshots(self) -> None:
        """Store the snapshots taken since the last call, replacing any at the same versions."""
        if self._due:
            self._store.team_snapshots.replace(self._due)
            self.snapshots += len(self._due)
            self._due.clear()
