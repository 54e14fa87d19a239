"""Which database the suite runs on, and raw access to it for tests that tamper with history.

``TOLLGATE_TEST_BACKEND=postgresql`` runs every test on PostgreSQL (a fresh database per ledger,
dropped at the end); the default is SQLite. A PostgreSQL run fails, never skips, when the server
cannot be reached.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

from app.store.database import Database
from domain.settings import parse_settings

BACKEND = os.environ.get("TOLLGATE_TEST_BACKEND", "sqlite")
POSTGRES_ADMIN_URL = os.environ.get("TOLLGATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("TOLLGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
_created: list[str] = []


def _admin() -> Any:
    import psycopg

    return psycopg.connect(Database.from_url(POSTGRES_ADMIN_URL, Path()).conninfo(), autocommit=True, connect_timeout=5)


def check_redis() -> str | None:
    """Why Redis (rate limits shared by gateway processes; required by the suite) cannot be used, or None."""
    import redis

    url = REDIS_URL
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001 - whatever stops the ping is the reason the suite cannot start
        return f"Redis at {url} is unreachable ({exc}); start it or set TOLLGATE_TEST_REDIS_URL"
    return None


def check_server() -> str | None:
    """Why the chosen backend cannot be used, or None (Redis is checked only for the end-to-end layer,
    by ``check_redis``: the unit layer needs no service)."""
    if BACKEND == "sqlite":
        return None
    if BACKEND != "postgresql":
        return f"TOLLGATE_TEST_BACKEND must be sqlite or postgresql, not {BACKEND!r}"
    try:
        with _admin():
            pass
    except Exception as exc:  # noqa: BLE001 - whatever stops the connection is the reason the suite cannot start
        return f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable ({exc}); start it or set TOLLGATE_TEST_POSTGRES_URL"
    return None


def new_database_url(name: str = "tollgate.db", *, empty: bool = False) -> str:
    """A fresh ledger database for one configuration. ``empty``: without the schema even while new
    PostgreSQL databases are copies of a migrated template (a test of a database before its schema)."""
    if BACKEND == "sqlite":
        return f"sqlite:///{name}"
    return new_postgres_database_url(empty=empty)


#: A migrated, empty ledger database that new ones are copied from (``CREATE DATABASE ... TEMPLATE``),
#: when tests/support/schema_template.py has made one; else new databases are empty.
postgres_template: str | None = None


def new_postgres_database_url(*, empty: bool = False) -> str:
    """A fresh PostgreSQL database (dropped at the end of the run), whatever the backend: empty, or a
    copy of ``postgres_template`` with an identity of its own."""
    dbname = "tg_test_" + uuid.uuid4().hex[:12]
    template = None if empty else postgres_template
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"' + (f' TEMPLATE "{template}"' if template else ""))
    _created.append(dbname)
    admin = Database.from_url(POSTGRES_ADMIN_URL, Path())
    credentials = admin.user + (f":{admin.password}" if admin.password else "")
    url = f"postgresql://{credentials}@{admin.host}:{admin.port}/{dbname}"
    if template:
        RawDatabase(url, Path()).execute("UPDATE ledger_identity SET id = ?", (uuid.uuid4().hex,))
    return url


#: Connections the databases are dropped on, side by side. Each DROP DATABASE waits for a checkpoint
#: of the whole server (about a second, 250 databases per PostgreSQL half); drops on several
#: connections share checkpoints: 20 databases took 22 s on one connection, 8.6 s on eight.
DROPPING_CONNECTIONS = 6


def drop_created_databases() -> None:
    names, _created[:] = list(_created), []

    def drop(share: list[str]) -> None:
        with _admin() as conn:
            for name in share:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    shares = [names[i::DROPPING_CONNECTIONS] for i in range(min(DROPPING_CONNECTIONS, len(names)))]
    with ThreadPoolExecutor(len(shares) or 1) as pool:
        list(pool.map(drop, shares))


class RawDatabase:
    """Direct SQL on a ledger's database, whichever backend (write SQL with ``?`` markers)."""

    def __init__(self, database_url: str, base_dir: Path) -> None:
        self.db = Database.from_url(database_url, base_dir)

    @classmethod
    def of_config(cls, config: Path) -> RawDatabase:
        settings = parse_settings(config.read_text(), str(config))
        return cls(settings.database_url, config.parent)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("{events}", self.db.events_table)
        if self.db.kind == "sqlite":
            with sqlite3.connect(self.db.path) as conn:  # type: ignore[arg-type]
                return conn.execute(sql, params).fetchall()
        import psycopg

        with psycopg.connect(self.db.conninfo(), autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description else []

    @property
    def _id(self) -> str:
        return "rowid" if self.db.kind == "sqlite" else "notification_id"

    def events(self, topic_suffix: str) -> list[tuple[int, bytes]]:
        rows = self.execute(
            f"SELECT {self._id}, state FROM {{events}} WHERE topic LIKE ? ORDER BY {self._id}", (f"%{topic_suffix}",)
        )
        return [(r[0], bytes(r[1])) for r in rows]

    def set_event_state(self, event_id: int, state: bytes) -> None:
        self.execute(f"UPDATE {{events}} SET state = ? WHERE {self._id} = ?", (state, event_id))

    def relog(self) -> int:
        """Build the transparency log again from the stored events, as migration 0021 builds it for a
        ledger written before the log (a test that rewrites events as an older version stored them);
        returns how many leaves it has."""
        from app.store.log_catch_up import catch_up_log

        for table in ("log_leaves", "log_tiles", "log_state", "log_checkpoints", "log_cosignatures"):
            self.execute(f"DELETE FROM {table}")
        if self.db.kind == "sqlite":
            with closing(sqlite3.connect(self.db.path)) as conn:  # type: ignore[arg-type]
                appended = catch_up_log(conn, "sqlite", 1000)
                conn.commit()
                return appended
        import psycopg

        with psycopg.connect(self.db.conninfo()) as conn:
            return catch_up_log(conn, "postgresql", 1000)

    def delete_event(self, event_id: int) -> None:
        self.execute(f"DELETE FROM {{events}} WHERE {self._id} = ?", (event_id,))

    def delete_events(self, topic_suffix: str) -> None:
        self.execute("DELETE FROM {events} WHERE topic LIKE ?", (f"%{topic_suffix}",))

    def tables(self) -> set[str]:
        if self.db.kind == "sqlite":
            return {r[0] for r in self.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {r[0] for r in self.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}

    def everything_stored(self) -> bytes:
        """Every byte the ledger keeps (to prove a secret is not among them)."""
        out = b""
        for table in self.tables():
            for row in self.execute(f"SELECT * FROM {table}"):
                out += repr(row).encode() + b"".join(bytes(v) for v in row if isinstance(v, bytes | memoryview))
        return out
