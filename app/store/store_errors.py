"""Why the event store refused a transaction, told apart once, for every caller.

The library raises one ``IntegrityError`` for several causes (its recorders map every driver error onto a few): another
writer appended the same version first (retry after catching up), a unique key of a read model
written in the same transaction (retrying can only fail the same way), or a check constraint. It
raises ``OperationalError`` when the database cannot be reached. Treating them alike is how one
duplicate answer under an Idempotency-Key was retried twenty times as a "conflict" and then failed
every other team's commands in its batch.
"""

from __future__ import annotations

import re
import sqlite3

from eventsourcing.persistence import DataError, IntegrityError, PersistenceError


class StoreRefused(Exception):
    """The store refused a transaction; nothing in it was written."""


class VersionConflict(StoreRefused):
    """Another writer appended to one of these teams first: catch up and decide again."""


class DuplicateRecord(StoreRefused):
    """A unique key other than the events' version: ``constraint`` names it (``charged_requests``,
    ``idempotency_keys``, ...). Deciding again cannot help; the command that wrote it is refused."""

    def __init__(self, constraint: str, detail: str) -> None:
        super().__init__(f"{constraint}: {detail}")
        self.constraint = constraint


class StaleConnection(StoreRefused):
    """The connection was in a state that broke the transaction (prepared statements the server
    no longer has, an aborted transaction): it has been discarded, and the same writes on a fresh
    one will go through."""


class StoreUnreachable(StoreRefused):
    """The database did not answer, or is not accepting writes right now (read-only, full, shutting
    down): no command can be written."""


class RecordRejected(StoreRefused):
    """The database refused what was written (a value out of range, a check constraint, a broken
    connection state): the command that wrote it is refused, and only it."""


_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (\w+)\.")
#: SQLSTATEs of a connection in a bad state rather than of bad writes: invalid statement name (a
#: prepared statement psycopg believes in but the server lost), in failed transaction.
_STALE_STATES = frozenset({"26000", "25P02"})
#: SQLSTATE classes of writes the database refuses for what they contain: data exceptions (a number
#: out of range), integrity (a check), syntax or access rules. Any other error is the database's own
#: state (read-only, out of space, shutting down, unreachable), and fails the whole batch.
_DATA_CLASSES = frozenset({"22", "23", "42"})


def classify(exc: BaseException, events_table: str) -> StoreRefused:
    """The refusal ``exc`` (raised by a save) stands for."""
    if isinstance(exc, StoreRefused):
        return exc
    detail = str(exc).strip() or type(exc).__name__
    if getattr(exc.__cause__, "sqlstate", None) in _STALE_STATES:
        return StaleConnection(detail)
    if isinstance(exc, IntegrityError):
        constraint = _constraint(exc)
        if constraint in (f"{events_table}_pkey", events_table):
            return VersionConflict(detail)
        if constraint is not None and not _is_check(exc):
            return DuplicateRecord(constraint, detail)
        return RecordRejected(detail)
    if isinstance(exc, DataError) or str(getattr(exc.__cause__, "sqlstate", None) or "")[:2] in _DATA_CLASSES:
        return RecordRejected(detail)
    if isinstance(exc, PersistenceError):  # the database as a whole: unreachable, read-only, full, shutting down
        return StoreUnreachable(detail)
    return RecordRejected(detail)  # not the database's error: a value the driver could not send (an int too large)


def _constraint(exc: BaseException) -> str | None:
    """The violated constraint: PostgreSQL names it; SQLite names the table of a unique key."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    if diag is not None and getattr(diag, "constraint_name", None):
        return str(diag.constraint_name)
    if isinstance(cause, sqlite3.IntegrityError) or cause is None:
        match = _SQLITE_UNIQUE.search(str(cause if cause is not None else exc))
        if match:
            return match.group(1)
    return None


def _is_check(exc: BaseException) -> bool:
    cause = exc.__cause__
    return type(cause).__name__ == "CheckViolation" or "CHECK constraint failed" in str(cause or exc)
