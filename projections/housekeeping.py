"""Purging what the ledger keeps only for a while: Idempotency-Key answers past their time to live.

Expired answers are already ignored when a retry looks them up (``find_idempotent``), so purging is
about space, not correctness: it runs off the hot path, in small batches, each its own short
transaction, so that it never holds a lock the ledger writer waits for.
"""

from __future__ import annotations

import time

from projections.database import Database, Sql

#: Rows deleted per transaction.
BATCH = 1000


def purge_expired_answers(database: Database, now: float | None = None) -> int:
    """Delete the stored answers whose time to live has passed; returns how many."""
    cutoff = time.time() if now is None else now
    row = "rowid" if database.kind == "sqlite" else "ctid"
    sql = Sql(database)
    purged = 0
    try:
        while True:
            with sql.transaction() as tx:
                deleted = tx.execute(f"DELETE FROM idempotency_keys WHERE {row} IN (SELECT {row} FROM idempotency_keys "
                                     f"WHERE expires_at <= ? LIMIT {BATCH})", (cutoff,))
            purged += max(deleted, 0)
            if deleted < BATCH:
                return purged
    finally:
        sql.close()
