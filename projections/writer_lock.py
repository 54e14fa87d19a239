"""One ledger writer at a time across the gateway processes sharing a database.

Each process's writer decides a batch of commands on its in-memory copies of the teams, then saves;
the event store refuses the save if another process appended to one of those teams meanwhile, and
the batch is decided again. With several processes serving one busy team, each writer's copy is
stale almost every time the other one has just committed: most saves were refused, retried with
backoff, and some requests failed after twenty tries (``tollgate bench --workers 2``: 870 req/s,
p99 1.2 s, errors). Taking this lock around "catch up with what the others wrote, decide, save"
makes a refusal the exception (only a writer that does not take it, such as a CLI command, can still
cause one). The event store serialises commits anyway (its PostgreSQL recorder locks the table per
insert, SQLite has one writer), so waiting for the lock costs no parallelism that was there.

PostgreSQL: a session advisory lock on a connection of its own. SQLite: ``flock`` on a file next to
the database (SQLite is one machine's file, so an OS lock covers every process that can write it).
If the lock cannot be taken (the server went away), the writer goes on without it: optimistic
concurrency alone keeps the ledger correct, only slower under contention.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from typing import Any

from projections.database import Database

log = logging.getLogger("tollgate.ledger")

#: The advisory lock's key: any fixed 64-bit number no other user of the database takes.
ADVISORY_KEY = 0x546F6C6C67617465  # "Tollgate"


class WriterLock:
    def __init__(self, database: Database) -> None:
        self._database = database
        self._fd: int | None = None
        self._conn: Any = None

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        """Hold the lock for the block; yields whether it is really held."""
        take, give = (
            (self._flock, self._unflock) if self._database.kind == "sqlite" else (self._lock_pg, self._unlock_pg)
        )
        try:
            take()
        except Exception as exc:  # noqa: BLE001 - the lock is an optimisation: without it the writer still works
            log.warning("could not take the ledger writer lock, writing without it: %s", exc)
            self._drop()
            yield False
            return
        try:
            yield True
        finally:
            try:
                give()
            except Exception as exc:  # noqa: BLE001 - a lost connection releases its session lock with it
                log.warning("could not release the ledger writer lock: %s", exc)
                self._drop()

    def _flock(self) -> None:
        if self._fd is None:
            path = self._database.path
            assert path is not None
            self._fd = os.open(f"{path}.writer-lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def _unflock(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _lock_pg(self) -> None:
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(self._database.conninfo(), autocommit=True, connect_timeout=10)
        self._conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_KEY,))

    def _unlock_pg(self) -> None:
        self._conn.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_KEY,))

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
