"""The ledger writer's turns under the writer lock, when other gateway processes write the same ledger.

A turn decides and saves a batch under the locks of its teams (``app/store/writer_lock.py``),
each team's copy first caught up with what other processes wrote: one query for all of them, in the
round trip that takes the locks.

On PostgreSQL the lock is per team, and a turn *tries* its teams' locks: a team another process is
writing right now is held back for the next turn, and the rest is written meanwhile — two processes
serving many teams write side by side. But a team both processes write all the time (one hot team)
would then go to whichever asks at the right moment, and a writer might hold its commands back again
and again. So once a team's lock has been missed ``WAIT_AFTER`` times in a row, the turn *waits* for
it — for that one team, the one missed longest, before trying the others, so that a writer never
waits while holding a lock (no two writers can wait for each other) — and PostgreSQL's queue of
waiters gives each process its turn. A team whose lock the writer had to wait for stays waited for
while waiting keeps finding it taken; ``STAY`` turns that found it free send it back to being tried.
A wait lasts at most ``WAIT_TIMEOUT`` (``writer_lock``); a team whose lock has been missed for
``GIVE_UP`` seconds (another process stuck in the middle of a batch, alive, its lock held) is written
without it: optimistic concurrency still refuses a save over another process's.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence, Set
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from app.store.event_store import LedgerStore
from app.store.writer_lock import WriterLock
from domain.ledger import TeamLedger

log = logging.getLogger("tollgate.ledger")

#: Missed tries in a row after which a team's lock is waited for.
WAIT_AFTER = 2
#: A team whose lock was waited for, and found taken, is waited for again until this many turns found it free.
STAY = 3
#: Seconds a team's lock may be missed before its commands are written without it.
GIVE_UP = 5.0
#: Teams remembered at most (a long-running process forgets the lot rather than grow without bound).
REMEMBERED = 10_000


class Contention:
    """Which teams' locks this writer keeps missing."""

    def __init__(self) -> None:
        self._score: dict[UUID, int] = {}
        self._missed_since: dict[UUID, float] = {}

    def to_wait_for(self, team_ids: Collection[UUID]) -> UUID | None:
        """The team of ``team_ids`` to wait for, if any: of those missed ``WAIT_AFTER`` times, the
        one missed longest."""
        due = [t for t in team_ids if self._score.get(t, 0) >= WAIT_AFTER]
        return min(due, key=lambda t: self._missed_since.get(t, 0.0)) if due else None

    def overdue(self, team_ids: Collection[UUID], now: float | None = None) -> set[UUID]:
        """Those of ``team_ids`` whose locks have been missed for ``GIVE_UP`` seconds."""
        now = time.monotonic() if now is None else now
        return {t for t in team_ids if now - self._missed_since.get(t, now) >= GIVE_UP}

    def turn(self, asked: Collection[UUID], got: Set[UUID], awaited: UUID | None, waited: Set[UUID]) -> None:
        """A turn asked for these teams' locks and got ``got``; it waited for ``awaited``, and had to
        for the teams in ``waited`` (another process had them)."""
        if len(self._score) > REMEMBERED:
            self._score.clear()
            self._missed_since.clear()
        now = time.monotonic()
        for team in asked:
            if team not in got:
                self._score[team] = self._score.get(team, 0) + 1
                self._missed_since.setdefault(team, now)
                continue
            self._missed_since.pop(team, None)
            if team in waited:
                self._score[team] = WAIT_AFTER + STAY - 1
            elif team == awaited and (score := self._score.get(team, 0) - 1) >= WAIT_AFTER:
                self._score[team] = score
            else:
                self._score.pop(team, None)

    def forget(self, team_ids: Collection[UUID]) -> None:
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

    def __init__(
        self,
        lock: WriterLock,
        store: LedgerStore,
        copies: Callable[[Iterable[UUID]], list[TeamLedger]],
        catch_up: Callable[[Iterable[UUID], Sequence[Any] | None], None],
        commit: Callable[[list[C]], None],
    ) -> None:
        self.lock = lock
        self._store = store
        self._copies = copies
        self._catch_up = catch_up
        self._commit = commit
        self._contention = Contention()

    def take(self, batch: list[C], behind: Set[UUID]) -> list[C]:
        """Decide and save what of ``batch`` this writer may now; returns the commands held back for
        the next turn (in order): those of teams another process is writing right now, and those of
        teams in ``behind`` (teams with commands held back already, whose order must stay)."""
        teams = {item.team_id for item in batch} - behind
        if overdue := self._contention.overdue(teams):
            log.warning(
                "the ledger writer lock of team(s) %s was missed for %.0f s; writing without it",
                ", ".join(map(str, overdue)),
                GIVE_UP,
            )
            self._catch_up(overdue, None)
            self._commit([item for item in batch if item.team_id in overdue])
            self._contention.forget(overdue)
            teams -= overdue
        written = set(overdue)
        if teams:
            # A batch of one team waits for it: there is nothing else to write meanwhile (one hot team).
            awaited = next(iter(teams)) if len(teams) == 1 else self._contention.to_wait_for(teams)
            then = functools.partial(self._store.newer_stored_events, self._copies(teams))
            with self.lock.turn(teams, wait=() if awaited is None else (awaited,), then=then) as turn:
                self._catch_up(turn.teams, turn.then)
                if now := [item for item in batch if item.team_id in turn.teams]:
                    self._commit(now)
            self._contention.turn(teams, turn.teams, awaited, turn.waited)
            written |= turn.teams
        return [item for item in batch if item.team_id not in written]

    def close(self) -> None:
        self.lock.close()
