"""Keeps this process's view of the audit history and usage current, and its key cache honest.

It follows key and team policy changes every ``poll_seconds`` (a read, which never blocks the
ledger writer), and catches the audit history up every ``history_seconds``: the history is for
auditors and operators, not for the request path, and catching it up after every commit would
make it compete with the ledger writer for the database's write lock on every request. Readers
that need it current (``ledger export``, the admin API) catch it up themselves first. Any number
of processes may run one: the projection's tracking makes their work exactly-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from uuid import UUID

from domain.ledger import TeamLedger
from projections.event_store import LedgerStore

log = logging.getLogger("tollgate.projector")


_KEY_EVENTS = tuple(f"{TeamLedger.__module__}:{cls.__qualname__}"
                    for cls in (TeamLedger.KeyRevoked, TeamLedger.KeyModelsRestricted,
                                TeamLedger.KeyEndpointsRestricted, TeamLedger.KeyLimitsSet, TeamLedger.TeamLimitsSet,
                                TeamLedger.Suspended, TeamLedger.Reinstated))


class Projector:
    """Also tells this process when a key or a team's policy changed anywhere (``on_key_change(key_id)``,
    ``on_team_change(team_id)``), by following the log on its own cursor: the shared projection
    position says nothing about this process."""

    def __init__(self, store: LedgerStore, poll_seconds: float = 0.25, history_seconds: float = 2.0,
                 on_key_change: Callable[[str], None] | None = None,
                 on_team_change: Callable[[UUID], None] | None = None) -> None:
        self._store = store
        self._poll = poll_seconds
        self._history_every = history_seconds
        self._on_key_change = on_key_change
        self._on_team_change = on_team_change
        self._seen = store.recorder.max_notification_id() or 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="tollgate-projector", daemon=True)

    def start(self) -> Projector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        from projections.history import HistoryProjection

        history: HistoryProjection | None = None  # its connection belongs to this thread
        try:
            caught_up_at = 0.0
            while not self._stopping:
                try:
                    self._follow_key_changes()
                    if time.monotonic() - caught_up_at >= self._history_every:
                        caught_up_at = time.monotonic()
                        history = history or HistoryProjection(self._store, self._store.database)
                        history.catch_up()
                except Exception:
                    log.exception("the audit history projection could not catch up; retrying")
                    if history is not None:  # its connection may be gone with the database: open a new one
                        history.close()
                        history = None
                self._wake.wait(self._poll)
                self._wake.clear()
            try:
                history = history or HistoryProjection(self._store, self._store.database)
                history.catch_up()
            except Exception:
                log.exception("the audit history could not catch up before stopping; the next start does it")
        finally:
            if history is not None:
                history.close()

    def _follow_key_changes(self) -> None:
        top = self._store.recorder.max_notification_id() or 0
        if top <= self._seen:
            return
        for n in self._store.recorder.select_notifications(self._seen, 100_000, stop=top, topics=_KEY_EVENTS,
                                                            inclusive_of_start=False):
            event = self._store.mapper.to_domain_event(n)
            key_id = getattr(event, "key_id", None)
            if key_id is not None and self._on_key_change is not None:
                self._on_key_change(key_id)
            elif key_id is None and self._on_team_change is not None:
                self._on_team_change(event.originator_id)
        self._seen = top
