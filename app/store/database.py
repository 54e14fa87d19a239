"""Where the ledger lives: one ``database_url``, SQLite or PostgreSQL, seen by every tool the same way.

``sqlite:///relative.db`` is relative to the configuration file's folder (``sqlite:////abs.db`` is
absolute); ``postgresql://user:password@host:port/dbname`` is a PostgreSQL database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from app.store.many_rows import insert_rows
from app.store.migrations import HEAD

if TYPE_CHECKING:  # psycopg is imported where PostgreSQL is used, not by every SQLite command
    import psycopg

EVENTS_TABLE = {"sqlite": "stored_events", "postgresql": "ledger_events"}
_SCHEMA_LOCK = 0x746F6C6C  # the advisory lock that serialises schema creation across processes


#: Every PostgreSQL connection's guard against a peer it can no longer reach, on both ends (a network
#: partition drops packets silently, so neither end hears of it).
#:
#: - This end: data sent and not acknowledged within ``tcp_user_timeout`` ms, or an idle connection
#:   whose keepalives go unanswered (5 s, then 3 probes 2 s apart), fails the connection. Without it,
#:   a query in flight waited for TCP's own retries, about 15 minutes; with it, the ledger is away
#:   (503), a delivered stream's charge owed, and the pools reconnect once the server answers.
#: - The server's end (``options``: the same limits for the server's socket of this session): a
#:   session whose gateway was cut off while it held locks — the events table's during an insert,
#:   the log's size row, a team's advisory lock — is ended within seconds, and its locks with it.
#:   Without it, one partitioned host stalled every other host's writes until the server's TCP gave
#:   up (the multi-host chaos suite: every request on the other hosts timed out for a minute).
LIVENESS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
    "options": "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 "
    "-c tcp_user_timeout=10000",
}


@dataclass(frozen=True)
class Database:
    kind: str  # "sqlite" or "postgresql"
    path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = ""
    password: str = ""
    dbname: str = ""

    @classmethod
    def from_url(cls, url: str, base_dir: Path) -> Database:
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            return cls("sqlite", path=(path if path.is_absolute() else base_dir / path).resolve())
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
            raise ValueError(f"unsupported database URL {url!r}")
        return cls(
            "postgresql",
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=unquote(parts.username or ""),
            password=unquote(parts.password or ""),
            dbname=unquote(parts.path.strip("/")),
        )

    @property
    def events_table(self) -> str:
        return EVENTS_TABLE[self.kind]

    def conninfo(self) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(
            host=self.host,
            port=self.port,
            user=self.user or None,
            password=self.password or None,
            dbname=self.dbname,
            **LIVENESS,
        )

    def sqlalchemy_url(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.path}"
        from sqlalchemy import URL

        return URL.create(
            "postgresql+psycopg",
            username=self.user or None,
            password=self.password or None,
            host=self.host,
            port=self.port,
            database=self.dbname,
        ).render_as_string(hide_password=False)

    def eventsourcing_env(self, pool_size: int, *, create_tables: bool) -> dict[str, str]:
        if self.kind == "sqlite":
            assert self.path is not None
            return {
                "PERSISTENCE_MODULE": "app.store.sqlite_store:LedgerSQLiteFactory",
                "SQLITE_DBNAME": str(self.path),
                "SQLITE_LOCK_TIMEOUT": "30",
                "APPLICATION_RECORDER_TOPIC": "app.store.sqlite_store:SQLiteLedgerRecorder",
                "CREATE_TABLE": "y" if create_tables else "n",
            }
        return {
            "PERSISTENCE_MODULE": "app.store.postgres_store:LedgerPostgresFactory",
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_POOL_SIZE": str(pool_size),
            "POSTGRES_MAX_OVERFLOW": str(pool_size),
            "POSTGRES_LOCK_TIMEOUT": "5",
            "POSTGRES_CONNECT_TIMEOUT": "5",  # also the pool's wait for a connection; the library retries 10 times
            "POSTGRES_PRE_PING": "y",
            # a session its gateway stopped talking to mid-transaction (cut off) gives its locks up:
            # the recorder's transactions never wait on Python for more than milliseconds
            "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "5",
            "APPLICATION_RECORDER_TOPIC": "app.store.postgres_store:PostgresLedgerRecorder",
            "CREATE_TABLE": "y" if create_tables else "n",
        }

    def schema_is_current(self) -> bool:
        """Whether the event store exists and the read models are at the newest migration."""
        if self.kind == "sqlite":
            assert self.path is not None
            if not self.path.exists():
                return False
            with closing(sqlite3.connect(self.path)) as db:
                try:
                    row = db.execute("SELECT version_num FROM alembic_version").fetchone()
                    db.execute(f"SELECT 1 FROM {self.events_table} LIMIT 1")
                except sqlite3.OperationalError:
                    return False
            return bool(row) and row[0] == HEAD
        import psycopg

        with psycopg.connect(self.conninfo(), connect_timeout=10) as conn:
            return self._pg_schema_is_current(conn)

    def _pg_schema_is_current(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL, to_regclass('alembic_version') IS NOT NULL", (self.events_table,)
        ).fetchone()
        if row is None or not (row[0] and row[1]):
            return False
        version = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return version is not None and version[0] == HEAD

    def create_schema(self, create_event_store: Callable[[], object]) -> None:
        """Create the event store and migrate the read models, once, even with racing processes."""
        from app.store.schema import upgrade_read_models

        if self.kind == "sqlite":
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            create_event_store()
            upgrade_read_models(self.sqlalchemy_url())
            return
        import psycopg

        with psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
            try:
                if not self._pg_schema_is_current(conn):
                    create_event_store()
                    upgrade_read_models(self.sqlalchemy_url())
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))


class Sql:
    """A plain DB-API connection to the ledger's database, for the projections (write SQL with ``?``)."""

    def __init__(self, database: Database, *, any_thread: bool = False, rebuildable: bool = False) -> None:
        """``any_thread``: the caller serialises use of the connection across threads itself.
        ``rebuildable``: it writes only what can be projected again from the events (the audit
        history, with its position in the same transaction), so on SQLite its commits are not
        flushed to the disk one by one (``synchronous=NORMAL``, still atomic and consistent in WAL
        mode: a power cut may undo its last slices, and their events are projected again). It then
        holds SQLite's one write lock for the time of its inserts, not of a flush, and the ledger
        writer's own (flushed) commits wait less behind it."""
        self.kind = database.kind
        if database.kind == "sqlite":
            assert database.path is not None
            self._conn: Any = sqlite3.connect(
                database.path, timeout=30, isolation_level=None, check_same_thread=not any_thread
            )
            self._conn.row_factory = sqlite3.Row
            if rebuildable:
                self._conn.execute("PRAGMA synchronous=NORMAL")
        else:
            import psycopg
            from psycopg.rows import dict_row

            self._conn = psycopg.connect(database.conninfo(), autocommit=True, row_factory=dict_row, connect_timeout=10)

    def _sql(self, sql: str) -> str:
        return sql if self.kind == "sqlite" else sql.replace("?", "%s")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self._conn.execute(self._sql(sql), params)]

    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows as plain tuples, in the order of the query's columns (a third of a dict's size)."""
        if self.kind == "sqlite":
            return [tuple(row) for row in self._conn.execute(sql, params)]
        from psycopg.rows import tuple_row

        with self._conn.cursor(row_factory=tuple_row) as cursor:
            return cursor.execute(self._sql(sql), params).fetchall()  # type: ignore[no-any-return]

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        if self.kind == "sqlite":
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield Transaction(self._conn.cursor(), self._sql, self.kind)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        else:
            with self._conn.transaction(), self._conn.cursor() as cursor:
                yield Transaction(cursor, self._sql, self.kind)

    @contextmanager
    def snapshot(self) -> Iterator[Sql]:
        """Read several queries from one consistent state of the database, while others write."""
        if self.kind == "sqlite":
            self._conn.execute("BEGIN")  # deferred: WAL readers keep the snapshot of their first read
            try:
                yield self
            finally:
                self._conn.execute("COMMIT")
        else:
            with self._conn.transaction():
                self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield self

    def close(self) -> None:
        self._conn.close()


class Transaction:
    def __init__(self, cursor: Any, translate: Any, kind: str) -> None:
        self._cursor = cursor
        self._translate = translate
        self._kind = kind

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cursor.execute(self._translate(sql), params)
        return int(self._cursor.rowcount)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._cursor.executemany(self._translate(sql), rows)

    def insert_many(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``head`` (``INSERT INTO t (a, b)``) with every row in one statement, ``tail`` after it
        (``app/store/many_rows.py``)."""
        insert_rows(_Translated(self._cursor, self._translate), head, rows, tail)

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Plain inserts of many rows (no conflict clause): PostgreSQL's COPY, six times quicker than
        its one INSERT a row; SQLite's INSERT a row is already quick."""
        if not rows:
            return
        if self._kind == "sqlite":
            self._cursor.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
            )
            return
        with self._cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


class _Translated:
    """A cursor whose statements are written with ``?`` markers, translated for its database."""

    def __init__(self, cursor: Any, translate: Callable[[str], str]) -> None:
        self._cursor = cursor
        self._translate = translate

    def execute(self, sql: str, params: Sequence[Any], /) -> Any:
        return self._cursor.execute(self._translate(sql), params)
