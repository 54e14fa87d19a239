"""Which database the suite runs on, and raw access to it for tests that tamper with history.

``TOLLGATE_TEST_BACKEND=postgresql`` runs every test on PostgreSQL (a fresh database per ledger,
dropped at the end); the default is SQLite. A PostgreSQL run fails, never skips, when the server
cannot be reached.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from app.store.database import Database
from domain.settings import parse_settings

BACKEND = os.environ.get("TOLLGATE_TEST_BACKEND", "sqlite")
POSTGRES_ADMIN_URL = os.environ.get("TOLLGATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
_created: list[str] = []


def _admin() -> Any:
    import psycopg

    return psycopg.connect(Database.from_url(POSTGRES_ADMIN_URL, Path()).conninfo(), autocommit=True, connect_timeout=5)


def check_redis() -> str | None:
    """Why Redis (rate limits shared by gateway processes; required by the suite) cannot be used, or None."""
    import redis

    url = os.environ.get("TOLLGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001 - whatever stops the ping is the reason the suite cannot start
        return f"Redis at {url} is unreachable ({exc}); start it or set TOLLGATE_TEST_REDIS_URL"
    return None


def check_server() -> str | None:
    """Why the chosen backend (or Redis) cannot be used, or None."""
    if BACKEND == "sqlite":
        return check_redis()
    if BACKEND != "postgresql":
        return f"TOLLGATE_TEST_BACKEND must be sqlite or postgresql, not {BACKEND!r}"
    try:
        with _admin():
            pass
    except Exception as exc:  # noqa: BLE001 - whatever stops the connection is the reason the suite cannot start
        return f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable ({exc}); start it or set TOLLGATE_TEST_POSTGRES_URL"
    return check_redis()


def new_database_url(name: str = "tollgate.db") -> str:
    """A fresh, empty ledger database for one configuration."""
    if BACKEND == "sqlite":
        return f"sqlite:///{name}"
    return new_postgres_database_url()


def new_postgres_database_url() -> str:
    """A fresh, empty PostgreSQL database (dropped at the end of the run), whatever the backend."""
    dbname = "tg_test_" + uuid.uuid4().hex[:12]
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    _created.append(dbname)
    admin = Database.from_url(POSTGRES_ADMIN_URL, Path())
    credentials = admin.user + (f":{admin.password}" if admin.password else "")
    return f"postgresql://{credentials}@{admin.host}:{admin.port}/{dbname}"


def drop_created_databases() -> None:
    if not _created:
        return
    with _admin() as conn:
        while _created:
            conn.execute(f'DROP DATABASE IF EXISTS "{_created.pop()}" WITH (FORCE)')


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
