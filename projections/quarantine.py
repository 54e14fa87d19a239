"""Events a projection could not project, set aside so that the events after them are projected.

A projection applies the events in order, each slice in one transaction with its position. One
event it cannot project — unreadable, a shape the projection does not know, a row no database can
hold (``app/store/storable.py``) — must never stop it: once an event would have stopped the audit
history for every team until someone repaired the database by hand. Such an event is recorded here
(``projection_quarantine``: which projection, the event, why) in the very transaction that moves
the position past it, so it is skipped exactly once, whatever the number of projectors.

A quarantined event has no rows in the projection: the health endpoint, the metrics and
``ledger verify`` (which then fails) report it. It stays in the event store, untouched: once its
cause is fixed (an upgrade that knows it, a repaired event), ``tollgate ledger rebuild`` projects
it again, and forgets the quarantine.

Only a failure that is the event's own is quarantined: the event cannot be read, its rows cannot
be made, or the database refuses what they hold (a data exception, an integrity violation). A
database that cannot be reached, a lock, a broken connection is the database's state, never an
event's: the slice is retried, and nothing is quarantined for it.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from app.store.database import Sql, Transaction
from app.store.storable import storable_text

TABLE = "projection_quarantine"
COLUMNS = ("name", "notification_id", "topic", "error", "quarantined_at")
#: How much of the reason a quarantined event is kept with.
MAX_ERROR = 500
#: SQLSTATE classes of what a database refuses for the values written: data exceptions (a number
#: out of range, text it cannot hold) and integrity violations (a constraint).
_DATA_CLASSES = ("22", "23")
_UNIQUE_VIOLATION = "23505"


def why(exc: BaseException) -> str:
    """The reason an event is quarantined for, as it is kept (storable, bounded)."""
    return storable_text(f"{type(exc).__name__}: {str(exc).strip()}")[:MAX_ERROR]


def refused_for_its_data(exc: BaseException) -> bool:
    """Whether the database refused a write for the values it held (the event's fault), rather than
    for its own state (unreachable, locked, out of space: nobody's data). A unique key violated is
    not an event's: a row already there means the position was moved back behind the projection's
    rows, and every event after it would collide the same way (``ledger rebuild`` is the repair)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return "UNIQUE constraint" not in str(exc)
    if isinstance(exc, ValueError | TypeError | OverflowError | sqlite3.DataError):
        return True  # includes what the driver refused to send (text it cannot encode, an int too large)
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is not None:
        return str(sqlstate)[:2] in _DATA_CLASSES and sqlstate != _UNIQUE_VIOLATION
    return type(exc).__module__.startswith("psycopg") and type(exc).__name__ == "DataError"  # refused client-side


def add(tx: Transaction, name: str, quarantined: list[tuple[int, str, str]]) -> None:
    """Record ``(notification id, topic, why)`` of events projection ``name`` skips, in the
    transaction that moves its position past them."""
    now = datetime.now(UTC).isoformat()
    tx.executemany(
        f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (name, notification_id) DO NOTHING",
        [(name, nid, storable_text(topic), error, now) for nid, topic, error in quarantined],
    )


def forget(tx: Transaction, name: str, upto: int) -> None:
    """Drop the quarantine of projection ``name`` up to event ``upto`` (a rebuild projected them again)."""
    tx.execute(f"DELETE FROM {TABLE} WHERE name = ? AND notification_id <= ?", (name, upto))


def listed(sql: Sql, name: str, limit: int = 10) -> list[dict[str, Any]]:
    """The first ``limit`` events projection ``name`` quarantined, oldest first."""
    return sql.query(
        f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE name = ? ORDER BY notification_id LIMIT {int(limit)}", (name,)
    )


def ids(sql: Sql, name: str) -> set[int]:
    """Every event projection ``name`` quarantined (few: each is an event it could not project)."""
    return {
        int(r["notification_id"]) for r in sql.query(f"SELECT notification_id FROM {TABLE} WHERE name = ?", (name,))
    }


def count(sql: Sql, name: str) -> int:
    return int(sql.query(f"SELECT COUNT(*) AS n FROM {TABLE} WHERE name = ?", (name,))[0]["n"])
