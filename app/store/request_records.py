"""The ``request_records`` table: each answered request as its gateway process saw it.

Rows are written in batches by one thread per gateway process (``app/observability/record_writer.py``)
and read by the request lookup (``GET /v1/requests/{id}``) from any process sharing the database. A
row is written once: a request id already there (a batch retried after a failed commit) is skipped.
Old rows are purged by the sweeper, a small batch per transaction, like expired answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.store.database import Database, Sql, Transaction
from app.store.housekeeping import purge_batched
from app.store.storable import storable_text

RECORD_COLUMNS = (
    "request_id",
    "team_name",
    "key_id",
    "model",
    "endpoint",
    "method",
    "path",
    "status",
    "streamed",
    "started_at",
    "first_byte_ms",
    "duration_ms",
    "deployment",
    "upstream_model",
    "attempts",
    "upstream_errors",
    "error",
    "charged",
)
_INSERT = f"INSERT INTO request_records ({', '.join(RECORD_COLUMNS)})"


def write_records(tx: Transaction, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert the rows (tuples of ``RECORD_COLUMNS``), skipping request ids already recorded. Their
    text is stored by the rule the projections' rows follow too (``app/store/storable.py``): a record echoes what a
    client sent (a model name in an error), and one holding NUL once failed every batch after it."""
    stored = [tuple(storable_text(v) if isinstance(v, str) else v for v in row) for row in rows]
    tx.insert_many(_INSERT, stored, "ON CONFLICT (request_id) DO NOTHING")


def find_record(sql: Sql, request_id: str, team_name: str | None = None) -> dict[str, Any] | None:
    """The request's record (only if it is ``team_name``'s, when given), or None."""
    query = f"SELECT {', '.join(RECORD_COLUMNS)} FROM request_records WHERE request_id = ?"
    params: list[Any] = [request_id]
    if team_name is not None:
        query += " AND team_name = ?"
        params.append(team_name)
    rows = sql.query(query, params)
    return rows[0] if rows else None


def purge_old_records(database: Database, before: float) -> int:
    """Delete the records of requests that arrived before ``before`` (Unix time); returns how many."""
    return purge_batched(database, "request_records", "started_at < ?", before)
