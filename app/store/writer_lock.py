"""Ledger writers take turns on a team across the gateway processes sharing a database.

Each process's writer decides a batch of commands on its in-memory copies of the teams, then saves;
the event store refuses the save if another process appended to one of those teams meanwhile, and
the batch is decided again. With several processes serving one busy team, each writer's copy is
stale almost every time the other one has just committed: most saves were refused, retried with
backoff, and some requests failed after twenty tries (``tollgate bench --workers 2``: 870 req/s,
p99 1.2 s, errors). Taking this lock around "catch up with what the others wrote, decide, save"
makes a refusal the exception (only a writer that does not take it, such as a CLI command, can still
cause one).

**PostgreSQL: a lock per team.** A session advisory lock per team, on a connection of its own, so
that writers of different teams never wait for each other (the event store's table lock serialises
only the insert transactions, not deciding). A writer's turn (``turn``) asks for the locks of its
batch's teams in one statement, and gives back all it got in another (``pg_advisory_unlock_all``).
A team another process is writing right now is not waited for (``pg_try_advisory_lock``): the turn
gets the others, and its caller keeps that team's commands for a later turn. The teams the caller
names in ``wait`` are waited for (``pg_advisory_lock``), before the others are tried — so a writer
waits only while holding locks of smaller keys, if any (the caller names one team: none), and no two
writers can wait for each other in a circle. A wait lasts at most ``WAIT_TIMEOUT``: then the turn
only tries (``app/ledger/turns.py`` decides what to wait for, and when to write without the lock).

The statement that takes the locks is followed, in the same round trip (a pipeline), by the
caller's ``then`` on the same connection — the catch-up query, which, being a statement of its own,
sees everything committed before the locks were granted. Two teams whose 32-bit keys collide merely
share a lock.

**SQLite:** one ``flock`` on a file next to the database, waited for (SQLite has one writer at a time
anyway, and it is one machine's file, so an OS lock covers every process that can write it).

If the lock cannot be taken at all — the server went away — the writer goes on without it for a
moment: optimistic concurrency alone keeps the ledger correct, only slower under contention. Any
error on the lock's connection closes it, and with it every lock it held (session locks outlive a
failed statement, never their session).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.store.database import Database

log = logging.getLogger("tollgate.ledger")

#: The first key of every team's advisory lock (PostgreSQL's two-key locks are a key space of their
#: own, apart from the one-key locks such as the schema's): "Toll".
NAMESPACE = 0x546F6C6C
#: The longest wait for a team's lock: then the turn only tries (the caller waits again another time).
WAIT_TIMEOUT = "100ms"
#: After the lock could not be taken, batches go without it this long before the next try (an
#: unreachable server is not asked again, with its connect timeout, for every batch).
RETRY_AFTER = 1.0
#: A lock granted this long after the statement asked for it (beyond those before it) was waited for.
WAITED = 0.0005

# Each row: the key, whether it is held now, and seconds since the statement began. A waited lock is
# always granted (``pg_advisory_lock`` returns void: ``IS NULL IS NOT NULL`` is true once it returns).
_TAKE = (
    "SELECT k, CASE WHEN w THEN (pg_advisory_lock(%s, k) IS NULL) IS NOT NULL "
    "ELSE pg_try_advisory_lock(%s, k) END AS got, "
    "extract(epoch FROM clock_timestamp() - statement_timestamp())::float8 AS at "
    "FROM unnest(%s::int4[], %s::bool[]) WITH ORDINALITY AS t(k, w, i) ORDER BY i"
)
_GIVE_BACK = "SELECT pg_advisory_unlock_all()"


def team_key(team_id: UUID) -> int:
    """A team's lock key: 32 bits of its id (a signed int4, as PostgreSQL takes it)."""
    return int.from_bytes(team_id.bytes[:4], "big", signed=True)


@dataclass(frozen=True, slots=True)
class Turn:
    """What a writer got: the teams it may write now, and what ``then`` found once they were locked."""

    #: The teams asked for that this writer may decide and save now: all of them, except on
    #: PostgreSQL those another process was writing (and that the writer did not wait for).
    teams: frozenset[UUID]
    #: Whether their locks are really held (False: going on without the lock, or there was nothing to lock).
    held: bool = False
    #: The teams whose locks were granted only after a wait: another process was writing them.
    waited: frozenset[UUID] = frozenset()
    #: What ``then`` returned, run on the lock's connection as soon as the locks were granted (None:
    #: it was not run; the caller reads what it needs on its own).
    then: Any = None


class WriterLock:
    def __init__(self, database: Database) -> None:
        self._database = database
        self._fd: int | None = None
        self._conn: Any = None
        self._retry_at = 0.0

    @contextlib.contextmanager
    def turn(
        self, team_ids: Collection[UUID], *, wait: Collection[UUID] = (), then: Callable[[Any], Any] | None = None
    ) -> Iterator[Turn]:
        """Lock what can be locked of these teams for the block (see the module's docstring); the
        teams in ``wait`` are waited for. ``then(connection)`` runs on the lock's PostgreSQL
        connection right after the locks are granted, in the same round trip."""
        everything = Turn(frozenset(team_ids))
        if not team_ids or time.monotonic() < self._retry_at:
            yield everything
            return
        try:
            got = self._flock(everything) if self._database.kind == "sqlite" else self._lock_pg(team_ids, wait, then)
        except Exception as exc:  # noqa: BLE001 - the lock is an optimisation: without it the writer still works
            log.warning("could not take the ledger writer lock, writing without it: %s", exc)
            self._drop()
            self._retry_at = time.monotonic() + RETRY_AFTER
            yield everything
            return
        try:
            yield got
        finally:
            if got.held:
                try:
                    self._give_back()
                except Exception as exc:  # noqa: BLE001 - a lost connection releases its session locks with it
                    log.warning("could not release the ledger writer lock: %s", exc)
                    self._drop()

    @contextlib.contextmanager
    def held(self, team_ids: Collection[UUID]) -> Iterator[bool]:
        """Hold every one of these teams' locks (SQLite: the ledger's) for the block, waiting for
        them; yields whether they are really held."""
        with self.turn(team_ids, wait=team_ids) as got:
            yield got.held

    def _flock(self, everything: Turn) -> Turn:
        if self._fd is None:
            path = self._database.path
            assert path is not None
            self._fd = os.open(f"{path}.writer-lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return Turn(everything.teams, held=True)

    def _lock_pg(self, team_ids: Collection[UUID], wait: Collection[UUID], then: Callable[[Any], Any] | None) -> Turn:
        from psycopg.errors import LockNotAvailable

        if self._conn is None or self._conn.closed:
            import psycopg

            # Keepalives: a server that vanished while we wait for a lock is noticed within seconds.
            self._conn = psycopg.connect(
                self._database.conninfo(),
                autocommit=True,
                connect_timeout=5,
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
            )
            self._conn.execute(f"SET lock_timeout = '{WAIT_TIMEOUT}'")
        teams_of: dict[int, list[UUID]] = {}
        for team_id in team_ids:
            teams_of.setdefault(team_key(team_id), []).append(team_id)
        waited_for = {team_key(t) for t in wait if t in team_ids}
        try:
            return self._take(teams_of, waited_for, then)
        except LockNotAvailable:  # waited WAIT_TIMEOUT: give back what it took, and only try this time
            self._give_back()
            return self._take(teams_of, set(), then)

    def _take(self, teams_of: dict[int, list[UUID]], waited_for: set[int], then: Callable[[Any], Any] | None) -> Turn:
        keys = sorted(waited_for) + sorted(set(teams_of) - waited_for)
        found = None
        with self._conn.pipeline():
            cursor = self._conn.execute(_TAKE, (NAMESPACE, NAMESPACE, keys, [k in waited_for for k in keys]))
            if then is not None:
                found = then(self._conn)
            rows = cursor.fetchall()
        mine: set[UUID] = set()
        waited: set[UUID] = set()
        before = 0.0
        for key, got, at in rows:
            if got:
                mine.update(teams_of[key])
                if key in waited_for and at - before > WAITED:
                    waited.update(teams_of[key])
            before = at
        return Turn(frozenset(mine), held=bool(mine), waited=frozenset(waited), then=found)

    def _give_back(self) -> None:
        if self._database.kind == "sqlite":
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        else:
            self._conn.execute(_GIVE_BACK)

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._drop()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
