"""Checking every team snapshot against the full replay, as ``ledger verify`` replays the events.

A snapshot is a cache of a team's state at one version (``app/store/snapshots.py``). As the replay
brings each team to a version that has a snapshot, the snapshot is read, its digest checked, and the
team it restores compared with the replayed team: a corrupt snapshot, or one that disagrees with the
events, is a problem. The versions that have snapshots are read lazily, a few per team at a time
(:meth:`Snapshots.versions`), never all at once. Snapshots taken while verify runs, beyond the
version the replay reaches, are skipped. A snapshot of a version the team never reached, or of a
team that has no events, is a problem too: it could only have been written behind the ledger's back,
and a team loads from its latest snapshot. A snapshot taken before the team gained some state (an
older version of the aggregate) is passed over by loads; it is checked on the state it has, and
counted apart.
"""

from __future__ import annotations

import sys
from typing import Any
from uuid import UUID

from app.store.event_store import LedgerStore
from app.store.snapshots import SnapshotRow, same_state
from domain.ledger import TeamLedger

#: How many of a team's snapshot versions are read at a time.
VERSIONS_PAGE = 50
#: How many snapshot problems a report lists (the rest are counted).
PROBLEMS_SHOWN = 10
_NONE_LEFT = sys.maxsize


class SnapshotCheck:
    def __init__(self, store: LedgerStore) -> None:
        self._store = store
        self._snapshots = store.team_snapshots
        self._next: dict[UUID, int] = {}  # each team's next snapshot version to check (_NONE_LEFT: none known)
        self._queued: dict[UUID, list[int]] = {}  # the versions read after it, newest last
        self._more: set[UUID] = set()  # teams that may have more versions than were read
        self.checked = 0
        self.outdated = 0  # checked on the state they have: taken before the team gained more
        self.failed = 0
        self._problems: list[str] = []

    def reached(self, team: TeamLedger) -> None:
        """The replay has brought ``team`` to its version: check the snapshot of that version, if any."""
        upcoming = self._next.get(team.id)
        if upcoming is None:
            upcoming = self._advance(team.id, team.version - 1)
        if team.version == upcoming:
            self._check(team)
            self._advance(team.id, team.version)

    def _advance(self, team_id: UUID, after: int) -> int:
        queued = self._queued.get(team_id)
        if not queued and (team_id in self._more or team_id not in self._next):
            queued = self._queued[team_id] = self._snapshots.versions(team_id, after, VERSIONS_PAGE)[::-1]
            if len(queued) == VERSIONS_PAGE:
                self._more.add(team_id)
            else:
                self._more.discard(team_id)
        while queued and queued[-1] <= after:
            queued.pop()
        upcoming = self._next[team_id] = queued.pop() if queued else _NONE_LEFT
        return upcoming

    def _check(self, team: TeamLedger) -> None:
        row = self._snapshots.at_version(team.id, team.version)
        if row is None:
            return  # dropped since its version was read (a rebuild runs): nothing to check
        self.checked += 1
        where = f"snapshot of team {team.name!r} at version {team.version}"
        if not row.intact:
            self._problem(f"{where} fails its digest: it was altered or damaged")
        elif (restored := self._snapshots.restore(row)) is not None:
            if not same_state(restored, team):
                self._problem(f"{where} differs from the replay: {_differences(restored, team)}")
        elif (older := self._taken_before(row, team)) is None:
            self._problem(f"{where} cannot be read as the team's state")
        elif differences := _differences(older, team, only_its_own=True):
            self._problem(f"{where} differs from the replay: {differences}")
        else:
            self.outdated += 1

    def _taken_before(self, row: SnapshotRow, team: TeamLedger) -> TeamLedger | None:
        """The team a snapshot that ``restore`` passes over holds, if it was only taken before the
        team gained some state (a load replays the events instead, which know it): it is still
        checked, on the state it has. None if it cannot be read at all."""
        try:
            older = self._snapshots.decode(row)
        except Exception:  # noqa: BLE001 - a snapshot that cannot be read is the finding
            return None
        if older is None or (older.id, older.version) != (team.id, team.version):
            return None
        return older if vars(team).keys() - vars(older).keys() else None

    def _problem(self, problem: str) -> None:
        self.failed += 1
        if len(self._problems) < PROBLEMS_SHOWN:
            self._problems.append(problem)

    def finish(self, teams: dict[UUID, TeamLedger]) -> list[str]:
        """The problems found, and snapshots of versions or teams that have no events (``teams``: every
        team replayed)."""
        for team_id, team in teams.items():
            upcoming = self._next.get(team_id, _NONE_LEFT)
            if upcoming == _NONE_LEFT and team_id not in self._more:
                continue  # every snapshot it had when they were read was checked
            beyond = self._snapshots.versions(team_id, team.version, 1)
            # A snapshot is stored after its events: if the event of its version is not there now, it never was.
            if beyond and not list(self._store.events.get(team_id, gt=beyond[0] - 1, lte=beyond[0])):
                self._problem(
                    f"snapshot of team {team.name!r} at version {beyond[0]} is beyond the team's last "
                    f"event (version {team.version})"
                )
        for team_id in self._snapshots.each_team():
            if team_id not in teams and not list(self._store.events.get(team_id, limit=1)):
                self._problem(f"snapshots of team {team_id} have no events behind them")
        problems = list(self._problems)
        if self.failed > len(problems):
            problems.append(f"… and {self.failed - len(problems)} more snapshot problem(s)")
        return problems


def _differences(snapshot: TeamLedger, replayed: TeamLedger, *, only_its_own: bool = False) -> str:
    """Which parts of the team's state differ (the first few), with both values when they are short
    (``only_its_own``: of the state the snapshot has)."""
    mine, theirs = _state(snapshot), _state(replayed)
    said = []
    for name in sorted(mine.keys() if only_its_own else mine.keys() | theirs.keys()):
        one, other = mine.get(name), theirs.get(name)
        if one != other:
            short = len(repr(one)) + len(repr(other)) <= 80
            said.append(f"{name.lstrip('_')} {one!r} (replay: {other!r})" if short else name.lstrip("_"))
    return ", ".join(said[:3]) + (", …" if len(said) > 3 else "")


def _state(team: TeamLedger) -> dict[str, Any]:
    return {name: value for name, value in vars(team).items() if name != "_pending_events"}
