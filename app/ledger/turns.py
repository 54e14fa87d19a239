"""The ledger writer's turns under the writer lock, when other gateway processes write the same ledger.

A turn decides and saves a batch under the lock of its teams (``projections/writer_lock.py``), each
team's copy first caught up with what other processes wrote: one query for all of them, in the
round trip that takes the locks.

Which teams other processes keep writing decides which locks are waited for instead of tried.
With the writer lock per team (PostgreSQL), a writer first only *tries* the
locks of its batch's teams: a team another process is writing right now is held back for the next
batch, and the rest is written meanwhile — two processes serving many teams write side by side.
But a team both processes write all the time (one hot team) would then be had by whichever asks at
the right moment, and a writer might hold its commands back again and again. So a team whose lock
was missed ``WAIT_AFTER`` times in a row is waited for instead (PostgreSQL queues the waiters: each
process gets its turn), and stays so while waiting for it keeps finding it taken; a few turns in a
row that found it free send it back to being tried. A wait is bounded (``WAIT_TIMEOUT`` in
``writer_lock``), so a process stuck in the middle of a batch delays the others' other teams by
that at most; and a team whose lock has been missed for ``GIVE_UP`` seconds is written without it
(optimistic concurrency still refuses a save over another process's).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence, Set
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from domain.ledger import TeamLedger
from projections.event_store import LedgerStore
from projections.writer_lock import WriterLock

log = logging.getLogger("tollgate.ledger")

#: Missed tries in a row after which a team's lock is waited for.
WAIT_AFTER = 2
#: A team whose lock was waited for, and taken: it stays waited for until this many turns found it free.
STAY = 3
#: Seconds a team's lock may be missed before its commands are written without it.
GIVE_UP = 5.0
#: Teams remembered at most (a long-running process forgets the lot rather than grow without bound).
REMEMBERED = 10_000


class Contention:
    def __init__(self) -> None:
        self._score: dict[UUID, int] = {}
        self._missed_since: dict[UUID, float] = {}

    def waited_for(self, team_ids: Collection[UUID]) -> set[UUID]:
        """Those of ``team_ids`` whose locks are to be waited for, not tried."""
        return {t for t in team_ids if self._score.get(t, 0) >= WAIT_AFTER}

    def overdue(self, team_ids: Collection[UUID], now: float | None = None) -> set[UUID]:
        """Those of ``team_ids`` whose locks have been missed for ``GIVE_UP`` seconds."""
        now = time.monotonic() if now is None else now
        return {t for t in team_ids if now - self._missed_since.get(t, now) >= GIVE_UP}

    def tried(self, asked: Collection[UUID], got: Set[UUID]) -> None:
        """The writer tried these teams' locks and got ``got``."""
        if len(self._score) > REMEMBERED:
            self._score.clear()
            self._missed_since.clear()
        for team in asked:
            if team in got:
                self._score.pop(team, None)
                self._missed_since.pop(team, None)
            else:
                self._score[team] = self._score.get(team, 0) + 1
                self._missed_since.setdefault(team, time.monotonic())

    def waited(self, asked: Collection[UUID], got: Set[UUID], waited: Set[UUID]) -> None:
        """The writer waited for these teams' locks and got ``got``; for ``waited`` another process
        had them first."""
        for team in asked:
            if team not in got:
                self._missed_since.setdefault(team, time.monotonic())
                continue
            self._missed_since.pop(team, None)
            if team in waited:
                self._score[team] = WAIT_AFTER + STAY - 1
            elif (score := self._score.get(team, 0) - 1) >= WAIT_AFTER - 1:
                self._score[team] = score
            else:
                self._score.pop(team, None)

    def written_without_lock(self, team_ids: Collection[UUID]) -> None:
        for team in team_ids:
            self._score.pop(team, None)
            self._missed_since.pop(team, None)


class _Command(Protocol):
    @property
    def team_id(self) -> UUID: ...


C = TypeVar("C", bound=_Command)


class Turns(Generic[C]):
    """Takes the writer's turns: ``commit`` decides and saves commands (``C``, each for its
    ``team_id``), ``catch_up`` applies what others wrote to the writer's copies (``copies``)."""

    def __init__(self, lock: WriterLock, store: LedgerStore, copies: Callable[[Iterable[UUID]], list[TeamLedger]],
                 catch_up: Callable[[Iterable[UUID], Sequence[Any] | None], None],
                 commit: Callable[[list[C]], None]) -> None:
        self.lock = lock
        self._store = store
        self._copies = copies
        self._catch_up = catch_up
        self._commit = commit
        self._contention = Contention()

    def take(self, batch: list[C], behind: Set[UUID]) -> list[C]:
        """Decide and save what of ``batch`` this writer may now; returns the commands held back for
        the next batch (in order): those of teams another process is writing right now, and those
        of teams in ``behind`` (teams with commands held back already, whose order must stay)."""
        teams = {item.team_id for item in batch} - behind
        overdue = self._contention.overdue(teams)
        waiting = self._contention.waited_for(teams) - overdue
        written = set(overdue)
        if overdue:
            log.warning("the ledger writer lock of team(s) %s was missed for %.0f s; writing without it",
                        ", ".join(map(str, overdue)), GIVE_UP)
            self._catch_up(overdue, None)
            self._commit([item for item in batch if item.team_id in overdue])
            self._contention.written_without_lock(overdue)
        for group in (teams - waiting - overdue, waiting):
            if not group:
                continue
            then = functools.partial(self._store.newer_stored_events, self._copies(group))
            with self.lock.turn(group, wait=group if group is waiting else (), then=then) as turn:
                self._catch_up(turn.teams, turn.then)
                if now := [item for item in batch if item.team_id in turn.teams]:
                    self._commit(now)
            if group is waiting:
                self._contention.waited(group, turn.teams, turn.waited)
            else:
                self._contention.tried(group, turn.teams)
            written |= turn.teams
        return [item for item in batch if item.team_id not in written]

    def close(self) -> None:
        self.lock.close()
