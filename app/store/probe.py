"""Can the ledger be written right now? A quick answer, for readiness and for refusing unbilled work.

The writer learns that the database is gone only when a commit fails, which can be long after the
database stopped if the gateway was idle — and a request held against a credit lease in memory
would then be served before its charge failed. So a probe asks the database itself, every second,
with a short timeout: on SQLite, whether the write lock can be taken (another process holding it
for longer than the writer would wait means no commit will get through); on PostgreSQL, whether
the server answers and accepts writes (it is not a standby, nor read-only).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from app.store.database import Database


class LedgerProbe:
    def __init__(self, database: Database, timeout: float = 2.0) -> None:
        self._database = database
        self._timeout = timeout
        self._conn: Any = None

    def problem(self) -> str | None:
        """None when the ledger can be written, else what is wrong, in a few words."""
        try:
            if self._database.kind == "sqlite":
                self._check_sqlite()
            else:
                self._check_postgres()
        except Exception as exc:  # noqa: BLE001 - any failure to answer is the answer
            self.close()
            return f"{type(exc).__name__}: {str(exc).strip() or 'no answer'}"
        return None

    def _check_sqlite(self) -> None:
        if self._conn is None:
            assert self._database.path is not None
            self._conn = sqlite3.connect(
                self._database.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.execute("ROLLBACK")

    def _check_postgres(self) -> None:
        import psycopg

        if self._conn is None:
            self._conn = psycopg.connect(
                self._database.conninfo(), autocommit=True, connect_timeout=max(1, int(self._timeout))
            )
            self._conn.execute(f"SET statement_timeout = {int(self._timeout * 1000)}")
        standby, read_only = self._conn.execute(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'"
        ).fetchone()
        if standby or read_only:
            raise RuntimeError("the database is read-only" + (" (a standby)" if standby else ""))

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
