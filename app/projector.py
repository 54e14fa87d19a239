"""Keeps this process's view of the audit history and usage current.

The ledger writer wakes it after every commit; it also looks every few seconds, for events other
processes wrote. Any number of processes may run one: the projection's tracking makes their work
exactly-once.
"""

from __future__ import annotations

import logging
import threading

from projections.event_store import LedgerStore

log = logging.getLogger("tollgate.projector")


class Projector:
    def __init__(self, store: LedgerStore, poll_seconds: float = 5.0) -> None:
        self._store = store
        self._poll = poll_seconds
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="tollgate-projector", daemon=True)

    def start(self) -> Projector:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        from projections.history import HistoryProjection

        history = HistoryProjection(self._store, self._store.database)  # its connection belongs to this thread
        try:
            while not self._stopping:
                try:
                    history.catch_up()
                except Exception:
                    log.exception("the audit history projection could not catch up; retrying")
                self._wake.wait(self._poll)
                self._wake.clear()
            history.catch_up()
        finally:
            history.close()
