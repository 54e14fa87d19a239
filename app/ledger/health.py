"""Whether this process may serve billed requests: the ledger can be written, its writer runs, and
its heartbeat vouches for what it holds.

Three sources say so. The writer reports a commit that failed (at once, on the writer thread), and
a probe (``app/store/probe.py``) asks the database every second. While either says no, billing
refuses new requests with 503 before anything goes upstream — a gateway that cannot record a charge
must not serve — and ``/health/ready`` answers 503, so a load balancer sends traffic elsewhere. The
probe's next success clears both: the writer's next commit is the proof. The third is the process's
heartbeat (``vouched``): silent for nearly the dead-process limit, the process may have been taken
for dead and its credit leases released by the others, so it serves nothing billed — and says it
is not ready — until a beat gets through (``InstanceRegistry.heard_within``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from app.ledger.writer import LedgerWriter
from app.observability import metrics, timeline
from app.store.probe import LedgerProbe

log = logging.getLogger("tollgate.health")

#: Seconds between two probes of the database.
PROBE_INTERVAL = 1.0


class LedgerHealth:
    def __init__(
        self,
        writer: LedgerWriter,
        probe: LedgerProbe,
        interval: float = PROBE_INTERVAL,
        vouched: Callable[[], bool] = lambda: True,
        hurry: Callable[[], None] = lambda: None,
    ) -> None:
        self._writer = writer
        self._probe = probe
        #: Whether this process's heartbeat got through recently enough to vouch for its leases.
        self._vouched = vouched
        #: Asks for a heartbeat now: called when the database answers again but no beat has yet.
        self._hurry = hurry
        self._interval = interval
        self.problem: str | None = None  # the probe's or the writer's last word; None: writable
        self.draining = False  # the process was told to stop: it finishes what it has, takes nothing new
        #: Called on the event loop after every probe that found the ledger writable (billing makes
        #: the charges it owes: ``Billing.pay_owed``).
        self.when_writable: Callable[[], None] | None = None
        writer.on_failure = self.commit_failed
        metrics.LEDGER_WRITABLE.set(1)

    @property
    def writable(self) -> bool:
        return self.problem is None and self._writer.running and self._vouched()

    def commit_failed(self, reason: str) -> None:
        """Called by the writer thread when a batch could not be saved."""
        self._set(f"a ledger commit failed: {reason}")

    def _set(self, problem: str | None) -> None:
        if problem != self.problem:
            if problem is None:
                log.warning("the ledger can be written again; serving")
            else:
                log.error("the ledger cannot be written (%s); billed requests get 503 until it can", problem)
        self.problem = problem
        metrics.LEDGER_WRITABLE.set(0 if problem else 1)

    async def check(self) -> None:
        self._set(await asyncio.to_thread(self._probe.problem))
        if self.problem is None and not self._vouched():
            self._hurry()  # the database is back: serve again as soon as a beat says whether we were taken for dead

    async def run(self) -> None:
        """Probe the database every ``interval`` seconds, until cancelled."""
        while True:
            try:
                with timeline.span("health.probe", cpu=False):
                    await self.check()
                if self.writable and self.when_writable is not None:
                    self.when_writable()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the probe must never die; its failure is the answer
                self._set(f"the probe failed: {exc}")
            await asyncio.sleep(self._interval)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        checks = {
            "event_store": "ok" if self.problem is None else self.problem,
            "writer": "running" if self._writer.running else "stopped",
            "heartbeat": "ok" if self._vouched() else "silent: possibly taken for dead, waiting for a beat",
            "accepting": "draining: shutting down" if self.draining else "yes",
        }
        return self.writable and not self.draining, checks

    def close(self) -> None:
        self._probe.close()
