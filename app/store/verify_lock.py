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

A caller waits for the run under way, never two replays at once. Then, rather than replay again, it
takes the report of the last run if that run began after the caller asked: each run, as it ends,
records itself in ``ledger_verify_runs`` (one row: how many runs have ended on the ledger, the last
event when it began, when it ran, its report), which every process sharing the database reads. A
caller notes that count before it waits; a run numbered two past it began after the run under way
then had ended, so after the caller asked (no clock is compared, so hosts' clocks may differ).
Otherwise (the one it waited for may have begun before it asked) it replays.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.store.database import Database, Sql

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


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """A run as ``ledger_verify_runs`` holds it."""

    run: int  # how many runs had ended on the ledger with this one
    position: int  # the last event in the ledger when it began
    started_at: str
    finished_at: str
    report: dict[str, Any]


def last_run(database: Database) -> RecordedRun | None:
    """The last run that ended on this ledger, if any did."""
    sql = Sql(database)
    try:
        rows = sql.query("SELECT run, position, started_at, finished_at, report FROM ledger_verify_runs WHERE id = 1")
    finally:
        sql.close()
    if not rows:
        return None
    row = rows[0]
    return RecordedRun(row["run"], row["position"], row["started_at"], row["finished_at"], json.loads(row["report"]))


def record_run(database: Database, run: RecordedRun) -> None:
    """Record the run that just ended (its caller holds the verify lock: no other run can end meanwhile)."""
    sql = Sql(database)
    try:
        with sql.transaction() as tx:
            tx.execute("DELETE FROM ledger_verify_runs WHERE id = 1")
            tx.execute(
                "INSERT INTO ledger_verify_runs (id, run, position, started_at, finished_at, report) "
                "VALUES (1, ?, ?, ?, ?, ?)",
                (run.run, run.position, run.started_at, run.finished_at, json.dumps(run.report)),
            )
    finally:
        sql.close()
