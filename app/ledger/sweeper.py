"""Releases holds nobody will settle: their gateway process died, or outlived any sane bound.

Two sweeps, run by every gateway process (whichever notices first does the work; the ledger makes
each release happen once, and a request that was only slow is still charged when it finishes):

- **Dead processes**, every couple of seconds: a process silent for ``instance_dead_after`` seconds
  (or, on this host, whose pid is gone) is dead. Its streams are charged for what they had
  delivered at its last heartbeat, then its holds and credit leases are released, and it is
  removed from the registry. A crash frees a team's money in seconds.
- **Expired holds**, every ``hold_timeout / 2``: any hold older than ``hold_timeout`` is released,
  whoever holds it — the backstop for a process that is alive but stuck.

Idempotency-Key answers past their time to live, and request records older than
``request_record_days``, are purged by the same thread, off the hot path.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from decimal import Decimal
from uuid import UUID

from eventsourcing.persistence import PersistenceError
from psycopg import errors as psycopg_errors

from app.ledger.results import ReleasedHolds
from app.ledger.service import LedgerService
from app.ledger.writer import LedgerUnavailable
from app.observability import timeline
from app.store.event_store import LedgerStore
from app.store.housekeeping import purge_expired_answers
from app.store.instances import InstanceRegistry, StreamReport
from app.store.request_records import purge_old_records
from domain import clock
from domain.attribution import tags_of_text
from domain.ledger import Delivery, LedgerError
from domain.prices import PriceSource
from domain.usage import TokenUsage

log = logging.getLogger("tollgate.holds")

#: Seconds between two looks for dead processes.
DEAD_CHECK_SECONDS = 2.0
#: Seconds between two purges of expired Idempotency-Key answers and old request records.
PURGE_SECONDS = 600.0
#: The longest wait for the writer to settle one sweep's commands.
SETTLE_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class SweepTimes:
    """When the sweeper acts: a hold open ``hold_timeout`` seconds is released, a process silent for
    ``dead_after`` seconds is dead (its holds settled), and request records are kept ``record_days``
    days (None: not purged here)."""

    hold_timeout: float
    dead_after: float = 15.0
    record_days: int | None = None


class HoldSweeper:
    def __init__(
        self,
        store: LedgerStore,
        ledger: LedgerService,
        times: SweepTimes,
        *,
        registry: InstanceRegistry | None = None,
        prices: PriceSource | None = None,
        credits_per_usd: Decimal = Decimal(100),
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._timeout = times.hold_timeout
        self._registry = registry
        self._dead_after = times.dead_after
        self._prices = prices
        self._credits_per_usd = credits_per_usd
        self._record_days = times.record_days
        self._interval = max(0.5, min(30.0, times.hold_timeout / 2))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tollgate-hold-sweeper", daemon=True)

    def start(self) -> HoldSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def sweep(self) -> None:
        """Release every hold older than ``hold_timeout``, by the ledger clock its holds were placed by."""
        now = clock.now().timestamp()
        for team in self._store.balances(holding_only=True):
            self._ledger.release_expired(team.team_id, team.team_name, now, self._timeout)

    def release_dead(self) -> list[str]:
        """Settle what dead processes left; returns their instance ids (removed from the registry
        once every team they held credit of is settled)."""
        if self._registry is None:
            return []
        dead = self._registry.dead_instances(self._dead_after)
        if not dead:
            return []
        deliveries: dict[UUID, list[Delivery]] = defaultdict(list)
        names: dict[UUID, str] = {}
        for report in self._registry.abandoned_streams(dead):
            team_id = UUID(report.team_id)
            names[team_id] = report.team_name
            deliveries[team_id].append(_delivery(report))
        for team in self._store.balances(holding_only=True):
            names[team.team_id] = team.team_name
        futures = {
            team_id: self._release(team_id, name, dead, deliveries.get(team_id, [])) for team_id, name in names.items()
        }
        released = 0
        for team_id, future in futures.items():
            try:
                released += len(future.result(timeout=SETTLE_TIMEOUT).held_by)
            except LedgerError as exc:  # a stream it reported was charged after all: release without charging
                log.warning(
                    "could not charge the abandoned streams of team %s (%s); releasing their holds", team_id, exc
                )
                again = self._release(team_id, names[team_id], dead, [])
                released += len(again.result(timeout=SETTLE_TIMEOUT).held_by)
        self._registry.forget(dead)  # not reached if a release failed: the next sweep tries again
        log.warning(
            "gateway process(es) %s stopped answering: %d hold(s) and lease(s) released, %d stream(s) "
            "charged for what they had delivered",
            ", ".join(dead),
            released,
            sum(len(d) for d in deliveries.values()),
        )
        return dead

    def _release(self, team_id: UUID, name: str, dead: list[str], delivered: list[Delivery]) -> Future[ReleasedHolds]:
        unpaid = [d for d in delivered if self._store.find_charge(team_id, d.request_id) is None]
        return self._ledger.release_abandoned(team_id, name, dead, unpaid, self._prices, self._credits_per_usd)

    def _run(self) -> None:
        next_sweep = time.monotonic() + self._interval
        next_purge = time.monotonic()
        while True:
            with timeline.span("sweeper.dead"):
                self._safely(self.release_dead, "releasing the holds of dead gateway processes")
            now = time.monotonic()
            if now >= next_sweep:
                with timeline.span("sweeper.expired"):
                    self._safely(self.sweep, "sweeping abandoned holds")
                next_sweep = now + self._interval
            if now >= next_purge:
                self._safely(lambda: purge_expired_answers(self._store.database), "purging expired answers")
                self._safely(self.purge_records, "purging old request records")
                next_purge = now + PURGE_SECONDS
            if self._stop.wait(DEAD_CHECK_SECONDS):
                return

    def purge_records(self) -> int:
        """Delete the request records older than ``request_record_days`` (0: every one, none are
        kept; None: this sweeper leaves them alone)."""
        if self._record_days is None:
            return 0
        return purge_old_records(self._store.database, time.time() - self._record_days * 86400)

    @staticmethod
    def _safely(action: Callable[[], object], what: str) -> None:
        try:
            action()
        except (PersistenceError, psycopg_errors.Error, sqlite3.Error, LedgerUnavailable) as exc:  # database away
            log.warning("%s failed (%s); trying again later", what, str(exc).strip() or type(exc).__name__)
        except Exception:
            log.exception("%s failed; trying again later", what)


def _delivery(report: StreamReport) -> Delivery:
    usage = TokenUsage(
        input_tokens=report.input_tokens,
        output_tokens=report.output_tokens,
        cache_write_tokens=report.cache_write_tokens,
        cache_hit_tokens=report.cache_hit_tokens,
    )
    return Delivery(
        report.request_id,
        report.key_id,
        report.model,
        report.endpoint,
        usage,
        report.lease,
        tags_of_text(report.tags),
        report.end_user,
        report.price_key,
    )
