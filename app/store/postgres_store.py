"""The PostgreSQL recorder: events, plus the read models written in the same transaction.

The library's insert transaction runs this hook first, then locks the events table and appends; a
version conflict rolls the read-model rows back with the events. The events' leaves are appended to
the transparency log last, under that lock (``app/store/log_append.py``).

A connection whose insert transaction failed is closed, never handed back to the pool. The insert
runs in psycopg's pipeline mode, where statements after the one that failed are skipped by the
server, yet psycopg may already count some of them as prepared (a statement it prepares on its
sixth use is not re-checked in a pipeline), and the library ends the failed transaction with a
COMMIT, which does not clear psycopg's cache as a ROLLBACK would. The next user of that connection
then got ``prepared statement "_pg3_7" does not exist`` — for every team, until the process
restarted. A new connection costs a few milliseconds, and only after a failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from eventsourcing.utils import retry
from psycopg import Cursor, sql
from psycopg.rows import DictRow, dict_row

from app.store.database import LIVENESS
from app.store.log_append import LogWriter
from app.store.read_models import ReadModelQueries, ReadModelWriter


class PostgresLedgerRecorder(ReadModelQueries, PostgresApplicationRecorder):
    read_models = ReadModelWriter("%s")
    #: Its size row locked until the transaction ends: every process's appends in turn, no fork.
    log = LogWriter("%s", lock_rows=True)

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's insert (one pipelined transaction: read models, table lock, events), except
        that a connection it failed on is discarded."""
        failure: BaseException | None = None
        notification_ids: Sequence[int] | None = None
        hashes = self.log.leaf_hashes(stored_events)  # before the transaction and its table lock
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.transaction():
                    with conn.cursor() as curs:
                        self._insert_events(curs, stored_events, **kwargs)
                    if stored_events:
                        with conn.cursor() as curs:
                            try:
                                self._insert_stored_events(curs, stored_events, **kwargs)
                                pipeline.sync()  # a constraint violation is raised here, not at commit
                                notification_ids = self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
                                self._append_to_log(curs, stored_events, hashes, kwargs.get("logged"))
                            except Exception as exc:  # noqa: BLE001 - re-raised once the pipeline has ended
                                failure = exc
            except BaseException:
                with contextlib.suppress(Exception):
                    conn.close()
                raise
            if failure is not None:
                with contextlib.suppress(Exception):
                    conn.close()
                raise failure
        return notification_ids

    def _insert_events(self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._insert_events(curs, stored_events, **kwargs)
        self.read_models.write(
            curs,
            kwargs.get("keys", ()),
            kwargs.get("balances", ()),
            kwargs.get("idempotent", ()),
            kwargs.get("charges", ()),
            kwargs.get("admin_keys", ()),
        )

    def _append_to_log(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], hashes: Sequence[bytes], sink: Any
    ) -> None:
        """The events' leaves, appended after the events themselves: a save that loses a version race
        fails on the events' own key (a conflict the writer decides again) before the log is touched."""
        logged = self.log.append(curs, stored_events, hashes)
        if sink is not None:
            sink.extend(logged)

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.executemany(sql, rows)

    def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(sql, params)
            return curs.fetchall()

    def select_newer_events(
        self, versions: Sequence[tuple[UUID, int]], page: int, connection: Any = None
    ) -> list[StoredEvent]:
        """The events of each ``(team id, version)`` after that version, at most ``page`` a team, in
        one query: each team is its own index range scan (``LATERAL``), whatever the table's size.
        On ``connection`` if given (the writer lock's, in the pipeline that takes the locks), else
        on one of the pool's."""
        if not versions:
            return []
        if connection is not None:
            return self._newer_events(connection, versions, page)
        with self.datastore.get_connection() as conn:
            return self._newer_events(conn, versions, page)

    def _newer_events(self, conn: Any, versions: Sequence[tuple[UUID, int]], page: int) -> list[StoredEvent]:
        query = sql.SQL(
            "SELECT e.originator_id, e.originator_version, e.topic, e.state "
            "FROM unnest(%s::uuid[], %s::bigint[]) AS v(id, version) CROSS JOIN LATERAL ("
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table} "
            "WHERE originator_id = v.id AND originator_version > v.version "
            "ORDER BY originator_version LIMIT %s) AS e ORDER BY e.originator_id, e.originator_version"
        ).format(schema=sql.Identifier(self.datastore.schema), table=sql.Identifier(self.events_table_name))
        with conn.cursor(row_factory=dict_row) as curs:
            curs.execute(query, ([tid for tid, _ in versions], [v for _, v in versions], page), prepare=True)
            return [
                StoredEvent(
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]


class LedgerPostgresFactory(PostgresFactory):
    """The library's PostgreSQL persistence (``PERSISTENCE_MODULE`` names this class), its pool's
    connections guarded against a server that stops answering (``app/store/database.py``: ``LIVENESS``)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)  # the library gives its pool a dict of connection parameters
        kwargs.update(LIVENESS)  # the pool opens later: every connection gets them
