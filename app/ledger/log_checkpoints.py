"""Signing the transparency log's checkpoints: every few seconds while events arrive, a C2SP
checkpoint of the log's size and root, signed with the log's key and kept (all of them).

Every gateway process with the key runs this, and they take turns (``LogReads.sign_in_turn``: an
advisory lock on PostgreSQL, the write lock on SQLite): a process signs only when the log grew since
the latest kept checkpoint and that one is at least nine tenths of the interval old, whoever signed
it. However many processes run, checkpoints come about one an interval, not one a process; an
auditor walking them all (``tollgate log audit``) has no more to prove. Should two processes still
sign the same size, the note is the same (Ed25519 is deterministic) and is kept once.
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from datetime import UTC, datetime

from app.store.database import Database, Sql
from app.store.log_reads import KeptCheckpoint, LogHead, LogReads
from domain.transparency.checkpoint import Checkpoint, sign_checkpoint
from domain.transparency.keys import NoteSigner

log = logging.getLogger("tollgate.transparency")

#: The part of the interval the latest checkpoint must be old before another is signed: a process
#: woken a little early by its timer still signs on time.
DUE = 0.9


def sign_now(
    reads: LogReads, signer: NoteSigner, every: float = 0.0, now: datetime | None = None
) -> KeptCheckpoint | None:
    """Sign and keep a checkpoint of the log as it stands, if it grew since the latest one (or none
    was signed yet) and that one was signed at least ``DUE × every`` seconds ago; returns it (None:
    nothing new, not due yet, or another process signing right now)."""

    def sign(head: LogHead, latest: KeptCheckpoint | None) -> KeptCheckpoint | None:
        at = now or datetime.now(UTC)  # in the turn: each process's checkpoint is later than the one before
        if latest is not None:
            if latest.size >= head.size:
                return None
            age = (at - datetime.fromisoformat(latest.signed_at)).total_seconds()
            if 0 <= age < DUE * every:  # a clock behind another process's never stops the signing
                return None
        note = sign_checkpoint(Checkpoint(signer.name, head.size, head.root), signer).decode()
        return KeptCheckpoint(head.size, head.root, note, at.isoformat())

    return reads.sign_in_turn(sign)


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
            while not self._stop.is_set():
                sql = self._sign(sql, self._every)
                self._stop.wait(self._every)
            sql = self._sign(sql, 0.0)  # due or not: the last events this process wrote, in a checkpoint
        finally:
            if sql is not None:
                sql.close()

    def _sign(self, sql: Sql | None, every: float) -> Sql | None:
        """One round; returns the connection for the next (None: a new one, the database having
        dropped this one, or never opened it)."""
        try:
            sql = sql or Sql(self._database)
            sign_now(LogReads(sql), self.signer, every)
            return sql
        except Exception:
            log.warning("no checkpoint signed this time: the log could not be read", exc_info=True)
            if sql is not None:
                with suppress(Exception):
                    sql.close()
            return None
