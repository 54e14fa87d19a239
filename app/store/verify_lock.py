"""One ``ledger verify`` replay at a time on a ledger, across every process that shares its database.

A replay reads the whole history: run by two processes at once (``tollgate serve --workers N``, or
several gateway hosts on one PostgreSQL), each costs as much as one alone, and together they take the
cores the request path needs. So the run holds a lock that every process sharing the ledger sees:

- **PostgreSQL:** a session advisory lock with a fixed key, on a connection of its own, waited for
  (``pg_advisory_lock``). It is given back when the connection closes — also when the process holding
  it is killed, or its host vanishes (the server notices the dead session).
- **SQLite:** an exclusive ``flock`` on ``<database>.verify-lock`` beside the database file (one
  machine's file, so an OS lock covers every process that can open it); the OS gives it back when the
  process ends, however it ends.

A caller waits for the run under way and then runs its own: never two replays at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from app.store.database import Database

#: The one-key advisory lock of the verify run ("TollVeri"); the schema's lock is another one-key lock,
#: and the writers' team locks are two-key locks, a key space of their own.
VERIFY_LOCK = 0x546F6C6C56657269


@contextlib.contextmanager
def one_verify_at_a_time(database: Database) -> Iterator[None]:
    """Hold the ledger's verify lock for the block, waiting for it as long as another run holds it."""
    if database.kind == "sqlite":
        assert database.path is not None
        fd = os.open(f"{database.path}.verify-lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # gives the lock back
        return
    import psycopg

    with psycopg.connect(database.conninfo(), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (VERIFY_LOCK,))
        yield  # closing the session gives the lock back, whatever the block raised
