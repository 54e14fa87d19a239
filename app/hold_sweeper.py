"""Releases holds whose requests were abandoned: their gateway process died before settling.

Every gateway process sweeps (so whichever notices first releases them); the ledger makes the
release happen once, and a request that was only slow is still charged when it finishes.
"""

from __future__ import annotations

import logging
import threading
import time

from app.ledger_writer import LedgerWriter
from projections.event_store import LedgerStore

log = logging.getLogger("tollgate.holds")


class HoldSweeper:
    def __init__(self, store: LedgerStore, writer: LedgerWriter, timeout: float) -> None:
        self._store = store
        self._writer = writer
        self._timeout = timeout
        self._interval = max(0.5, min(30.0, timeout / 2))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tollgate-hold-sweeper", daemon=True)

    def start(self) -> HoldSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def sweep(self) -> None:
        now = time.time()
        for team in self._store.balances(holding_only=True):
            self._writer.on_team(team.team_id, team.team_name,
                                 lambda t: t.release_expired(now, self._timeout))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sweep()
            except Exception:
                log.exception("sweeping abandoned holds failed; trying again later")
