"""Purging what the ledger keeps only for a while: Idempotency-Key answers past their time to live.

Expired answers are already ignored when a retry looks them up (``find_idempotent``), so purging is
about space, not correctness: it runs off the hot path, in small batches, each its own short
transaction, so that it never holds a lock the ledger writer waits for.
"""

from __future__ import annotations

import time

from app.store.database import Database, Sql

#: Rows deleted per transaction.
BATCH = 1000


def purge_expired_answers(database: Database, now: float | None = None) -> int:
    """Delete the stored answers whose time to live has passed; returns how many."""
    return purge_batched(database, "idempotency_keys", "expires_at <= ?", time.time() if now is None else now)


def purge_batched(database: Database, table: str, condition: str, bound: float) -> int:
    """Delete the rows of ``table`` that ``condition`` (one ``?``, given ``bound``) selects, ``BATCH``
    at a time, each batch its own short transaction; returns how many."""
    row = "rowid" if database.kind == "sqlite" else "ctid"
    sql = Sql(database)
    purged = 0
    try:
        while True:
            with sql.transaction() as tx:
                deleted = tx.execute(
                    f"DELETE FROM {table} WHERE {row} IN (SELECT {row} FROM {table} WHERE {condition} LIMIT {BATCH})",
                    (bound,),
                )
            purged += max(deleted, 0)
            if deleted < BATCH:
                return purged
    finally:
        sql.close()
