"""A gateway's database made really unreachable, and waiting for the gateway to notice."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.backend import RawDatabase, _admin
from tests.support.gateway import Gateway


@contextmanager
def database_stopped(gateway: Gateway) -> Iterator[None]:
    """The gateway's database out of reach until the block ends."""
    db = RawDatabase.of_config(gateway.config).db
    if db.kind == "sqlite":
        holder = sqlite3.connect(db.path, isolation_level=None)  # type: ignore[arg-type]
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held: no commit gets through
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    with _admin() as admin:
        admin.execute(f'ALTER DATABASE "{db.dbname}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (db.dbname,))
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{db.dbname}" ALLOW_CONNECTIONS true')


def wait_for(condition: Callable[[], bool], within: float = 15.0) -> None:
    """Poll a gateway process from outside until ``condition`` holds (a subprocess cannot signal us)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s"
        time.sleep(0.1)
