"""Keeps this process's view of the audit history and usage current, and its key cache honest.

It follows key and team policy changes every ``poll_seconds`` (a read, which never blocks the
ledger writer), and catches the audit history up every ``history_seconds``, in bounded slices: the
history is for auditors and operators, not for the request path, and catching it up after every
commit would make it compete with the ledger writer for the database's write lock on every request. Readers
that need it current (``ledger export``, the admin API) catch it up themselves first. Any number
of processes may run one: the projection's tracking makes their work exactly-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from app.observability import metrics, timeline
from app.store.event_store import LedgerStore
from domain.admin_keys import AdminKeys
from domain.ledger import TeamLedger
from domain.prices import PriceList

if TYPE_CHECKING:
    from projections.history import HistoryProjection

log = logging.getLogger("tollgate.projector")

#: The audit history is caught up this many events at a time (a couple of milliseconds of work) ...
SLICE_EVENTS = 100
#: ... and, while there is a backlog (after a restart, or an outage), with a rest after each slice
#: so that it takes at most this share of the time: the request path, which shares the process and
#: its interpreter lock, keeps its latency while a backlog of a million events drains in minutes.
BACKLOG_SHARE = 0.25
#: How often the projection's lag and set-aside events are read for the health endpoint and the metrics.
REPORT_SECONDS = 1.0
#: At most this many pages (of 500 events) are caught up when the process stops; the next start does the rest.
STOP_PAGES = 20


_PRICE_SET = f"{PriceList.__module__}:{PriceList.PriceSet.__qualname__}"
_KEY_EVENTS = (
    *(
        f"{TeamLedger.__module__}:{cls.__qualname__}"
        for cls in (
            TeamLedger.KeyRevoked,
            TeamLedger.KeyModelsRestricted,
            TeamLedger.KeyEndpointsRestricted,
            TeamLedger.KeyLimitsSet,
            TeamLedger.TeamLimitsSet,
            TeamLedger.Suspended,
            TeamLedger.Reinstated,
            TeamLedger.PricesAdjusted,
            TeamLedger.OutputClampSet,
            TeamLedger.BudgetSet,
        )
    ),
    _PRICE_SET,
    f"{AdminKeys.__module__}:{AdminKeys.AdminKeyRevoked.__qualname__}",
)


@dataclass(frozen=True)
class ProjectionStatus:
    """How the audit history projection stood when this process's projector last looked (every
    couple of seconds): what the health endpoint and the metrics report."""

    behind: int = 0  # events not projected yet
    quarantined: int = 0  # events set aside, unable to be projected (``projections/quarantine.py``)
    problem: str | None = None  # why the last catch-up failed (the database, never an event), until one succeeds

    def readiness_checks(self) -> dict[str, str]:
        """The projection's lines in ``/health/ready``'s checks (they never make it unready: requests are
        served and charged whatever the projection's state)."""
        state = "current" if not self.behind else f"{self.behind} events behind"
        if self.problem:
            state = f"failing: {self.problem}"
        quarantined = f"{self.quarantined} (tollgate ledger verify lists them)" if self.quarantined else "0"
        return {"history_projection": state, "quarantined_events": quarantined}


class Projector:
    """Also tells this process when a key (a team's, or a revoked admin key) or a team's policy changed
    anywhere (``on_key_change(key_id)``, ``on_team_change(team_id)``), or a price was recorded
    (``on_prices_change()``), by following the log on its own cursor: the shared projection position
    says nothing about this process."""

    def __init__(
        self,
        store: LedgerStore,
        poll_seconds: float = 0.25,
        history_seconds: float = 2.0,
        on_key_change: Callable[[str], None] | None = None,
        on_team_change: Callable[[UUID], None] | None = None,
        on_prices_change: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._poll = poll_seconds
        self._history_every = history_seconds
        self._on_key_change = on_key_change
        self._on_team_change = on_team_change
        self._on_prices_change = on_prices_change
        self._seen = store.recorder.max_notification_id() or 0
        self.status = ProjectionStatus()
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
            caught_up_at = reported_at = 0.0
            while not self._stopping:
                pause = self._poll
                try:
                    with timeline.span("projector.poll"):
                        self._follow_key_changes()
                    if time.monotonic() - caught_up_at >= self._history_every:
                        history = history or HistoryProjection(self._store, self._store.database)
                        started = time.monotonic()
                        with timeline.span("projector.slice"):
                            caught_up = history.catch_up(batch=SLICE_EVENTS, pages=1) < SLICE_EVENTS
                        if time.monotonic() - reported_at >= REPORT_SECONDS:
                            self._report(history)
                            reported_at = time.monotonic()
                        if caught_up:
                            caught_up_at = time.monotonic()
                        else:  # a backlog: the next slice after a rest that leaves the request path the GIL
                            pause = min(self._poll, (time.monotonic() - started) * (1 / BACKLOG_SHARE - 1))
                except Exception as exc:
                    if self.status.problem is None:  # said once, with its traceback; not at every retry
                        log.exception("the audit history projection could not catch up; retrying until it can")
                    self.status = ProjectionStatus(
                        self.status.behind, self.status.quarantined, f"{type(exc).__name__}: {str(exc).strip()}"[:300]
                    )
                    if history is not None:  # its connection may be gone with the database: open a new one
                        history.close()
                        history = None
                self._wake.wait(pause)
                self._wake.clear()
            try:
                history = history or HistoryProjection(self._store, self._store.database)
                history.catch_up(pages=STOP_PAGES)
            except Exception:
                log.exception("the audit history could not catch up before stopping; the next start does it")
        finally:
            if history is not None:
                history.close()

    def _report(self, history: HistoryProjection) -> None:
        """Say how the projection stands: in ``status`` (the health endpoint) and the metrics."""
        behind = max(0, (self._store.recorder.max_notification_id() or 0) - history.position())
        if self.status.problem is not None:
            log.warning("the audit history projection catches up again (%s events behind)", behind)
        self.status = ProjectionStatus(behind, history.quarantined_count())
        metrics.PROJECTION_LAG.set(behind)
        metrics.PROJECTION_QUARANTINED.set(self.status.quarantined)

    def _follow_key_changes(self) -> None:
        top = self._store.recorder.max_notification_id() or 0
        if top <= self._seen:
            return
        while True:  # a page at a time: only policy events are read, but there may be many
            page = self._store.recorder.select_notifications(
                self._seen, 1000, stop=top, topics=_KEY_EVENTS, inclusive_of_start=False
            )
            prices_changed = False
            for n in page:
                if n.topic == _PRICE_SET:
                    prices_changed = True
                    continue
                event = self._store.mapper.to_domain_event(n)
                key_id = getattr(event, "key_id", None)
                if key_id and self._on_key_change is not None:
                    self._on_key_change(key_id)
                elif not key_id and self._on_team_change is not None:
                    self._on_team_change(event.originator_id)
            if prices_changed and self._on_prices_change is not None:
                self._on_prices_change()
            if len(page) < 1000:
                break
            self._seen = page[-1].id
        self._seen = top
