"""Signing the transparency log's checkpoints: every few seconds while events arrive, a C2SP
checkpoint of the log's size and root, signed with the log's key and kept (all of them).

Every gateway process with the key runs this; they need no coordination: a checkpoint of a given
size is the same text, and Ed25519 signatures are deterministic, so two processes signing the same
size make the same note, and the table keeps one (``ON CONFLICT DO NOTHING``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import UTC, datetime

from app.store.database import Database, Sql
from app.store.log_reads import KeptCheckpoint, LogReads
from domain.transparency.checkpoint import Checkpoint, sign_checkpoint
from domain.transparency.keys import NoteSigner

log = logging.getLogger("tollgate.transparency")


def sign_now(reads: LogReads, signer: NoteSigner) -> KeptCheckpoint | None:
    """Sign and keep a checkpoint of the log as it stands, if it grew since the last one (or none was
    signed yet); returns it (None: nothing new)."""
    head = reads.head()
    latest = reads.latest_checkpoint()
    if latest is not None and latest.size >= head.size:
        return None
    note = sign_checkpoint(Checkpoint(signer.name, head.size, head.root), signer).decode()
    kept = KeptCheckpoint(head.size, head.root, note, datetime.now(UTC).isoformat())
    reads.keep_checkpoint(kept)
    return kept


class CheckpointSigner:
    """A thread that signs a checkpoint every ``every`` seconds while the log grows, until stopped."""

    def __init__(self, database: Database, signer: NoteSigner, every: float) -> None:
        self._database = database
        self.signer = signer
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tollgate-log-checkpoints", daemon=True)

    def start(self) -> CheckpointSigner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        sql: Sql | None = None
        try:
            while True:
                sql = self._sign(sql)
                if self._stop.wait(self._every):
                    break
            sql = self._sign(sql)  # the last events this process wrote, in a checkpoint before it goes
        finally:
            if sql is not None:
                with contextlib.suppress(Exception):
                    sql.close()

    def _sign(self, sql: Sql | None) -> Sql | None:
        """One turn on the connection ``sql`` (made if None); the connection to use next (None: it
        broke, a database restarted, say, and the next turn connects again)."""
        try:
            sql = sql or Sql(self._database)
            sign_now(LogReads(sql), self.signer)
            return sql
        except Exception:
            log.warning("no checkpoint signed this time: the log could not be read", exc_info=True)
            if sql is not None:
                with contextlib.suppress(Exception):
                    sql.close()
            return None
