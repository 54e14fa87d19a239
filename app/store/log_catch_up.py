"""Appending to the transparency log the events a ledger stored before it had one (migration 0021),
in the order they were stored, a page per statement, on the migration's own connection."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from app.store.database import EVENTS_TABLE
from app.store.log_append import LogWriter


def catch_up_log(connection: Any, dialect: str, page: int) -> int:
    """Append every stored event the log does not have yet (a DB-API ``connection`` of ``dialect``,
    ``sqlite`` or ``postgresql``); returns how many were appended."""
    kind = "postgresql" if dialect.startswith("postgres") else "sqlite"
    table, marker = EVENTS_TABLE[kind], "%s" if kind == "postgresql" else "?"
    order = "notification_id" if kind == "postgresql" else "rowid"  # SQLite's notification id is the row id
    cursor = connection.cursor()
    if not _exists(cursor, kind, table):
        return 0  # the event store is made after: nothing stored yet
    writer = LogWriter(marker, lock_rows=kind == "postgresql")
    cursor.execute("SELECT COUNT(*) FROM log_leaves")
    done = int(cursor.fetchone()[0])
    cursor.execute(
        f"SELECT originator_id, originator_version, topic, state FROM {table} ORDER BY {order} "
        f"LIMIT {marker} OFFSET {marker}",
        (page, done),
    )
    appended = 0
    while rows := cursor.fetchall():
        events = [StoredEvent(_uuid(r[0]), int(r[1]), str(r[2]), bytes(r[3])) for r in rows]
        appended += len(writer.append(cursor, events))
        cursor.execute(
            f"SELECT originator_id, originator_version, topic, state FROM {table} ORDER BY {order} "
            f"LIMIT {marker} OFFSET {marker}",
            (page, done + appended),
        )
    return appended


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _exists(cursor: Any, kind: str, table: str) -> bool:
    if kind == "postgresql":
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
    else:
        cursor.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return bool(cursor.fetchone()[0])
