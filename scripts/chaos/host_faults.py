"""The multi-host suite's faults: what breaks between one gateway host and the rest (``netns.py``).

Each is injected on one host (its ``victim``), during the load, and recorded like the single-host
faults (``faults.py``), so the verdict can judge each answer by what was happening to the host that
gave it:

- **cut off from PostgreSQL, from Redis, or from both**, for :data:`CUT_SECONDS`, its clients still
  connected: its packets to them dropped silently, then let through again;
- **a lossy link**: :data:`LOSS_PERCENT` of its packets to the database and Redis dropped at random;
- **frozen** (``SIGSTOP``) past the dead-process limit the suite's configuration sets, then resumed
  (``SIGCONT``): the others take it for dead meanwhile;
- **its clock offset**: each host's ledger clock runs :data:`CLOCK_OFFSETS` seconds off the others'
  from its start (``TOLLGATE_CLOCK_OFFSET``), for the whole run.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass

from scripts.chaos.gateways import GatewayProcess
from scripts.chaos.netns import Topology

CUT_POSTGRES = "host cut off from PostgreSQL"
CUT_REDIS = "host cut off from Redis"
CUT_BOTH = "host cut off from PostgreSQL and Redis"
LOSSY = "host's link to the database lossy"
FREEZE = "host frozen (SIGSTOP)"
CLOCK = "host clock offset"
#: The faults after which a host's own answers may be the ledger's or the rate limits' 503s, or none.
HOST_FAULTS = (CUT_POSTGRES, CUT_REDIS, CUT_BOTH, LOSSY, FREEZE)
DATABASE_CUT = (CUT_POSTGRES, CUT_BOTH, LOSSY)
REDIS_CUT = (CUT_REDIS, CUT_BOTH, LOSSY)

#: Seconds a partition lasts: past the connections' 10 s limit on unacknowledged data, so queries in
#: flight fail rather than wait (``app/store/database.py``, ``LIVENESS``).
CUT_SECONDS = 12.0
LOSS_PERCENT = 10.0
LOSSY_SECONDS = 10.0
#: The suite's dead-process limit in this mode (``instance_dead_after``), and how long a freeze lasts.
DEAD_AFTER = 8.0
FREEZE_SECONDS = DEAD_AFTER + 4.0
#: Each host's ledger clock against the wall clock, in seconds (host 0 keeps the wall clock; a ledger
#: clock never runs behind the wall clock, TOLLGATE_CLOCK_OFFSET refuses that, so the others run ahead).
CLOCK_OFFSETS = (0.0, 2.0, 1.0)


def host_clock(host: int) -> float:
    return CLOCK_OFFSETS[host % len(CLOCK_OFFSETS)]


@dataclass
class HostFaults:
    """Injects the faults between hosts, on the topology the run built."""

    topology: Topology
    gateways: list[GatewayProcess]

    def describe(self, kind: str, host: int) -> str:
        where = f"host {host} ({self.topology.host_address(host)})"
        if kind == CUT_POSTGRES:
            return f"{where}: its packets to PostgreSQL dropped for {CUT_SECONDS:.0f} s"
        if kind == CUT_REDIS:
            return f"{where}: its packets to Redis dropped for {CUT_SECONDS:.0f} s"
        if kind == CUT_BOTH:
            return f"{where}: its packets to PostgreSQL and Redis dropped for {CUT_SECONDS:.0f} s"
        if kind == LOSSY:
            lost = f"{LOSS_PERCENT:.0f} % of its packets to the database and Redis"
            return f"{where}: {lost} dropped for {LOSSY_SECONDS:.0f} s"
        if kind == FREEZE:
            return f"{where}: SIGSTOP for {FREEZE_SECONDS:.0f} s (dead after {DEAD_AFTER:.0f} s), then SIGCONT"
        raise ValueError(f"unknown host fault {kind!r}")

    async def inject(self, kind: str, host: int) -> None:
        """The fault on ``host``, for its time, then healed (returns once it is)."""
        topology = self.topology
        if kind in (CUT_POSTGRES, CUT_REDIS, CUT_BOTH):
            cut = {
                CUT_POSTGRES: [topology.database_address],
                CUT_REDIS: [topology.redis_address],
                CUT_BOTH: [topology.database_address, topology.redis_address],
            }[kind]
            await asyncio.to_thread(topology.cut, host, cut)
            await self._heal_after(host, CUT_SECONDS)
        elif kind == LOSSY:
            await asyncio.to_thread(topology.degrade, host, LOSS_PERCENT)
            await self._heal_after(host, LOSSY_SECONDS)
        elif kind == FREEZE:
            pid = self.gateways[host].pid
            os.kill(pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(FREEZE_SECONDS)
            finally:
                os.kill(pid, signal.SIGCONT)
        else:
            raise ValueError(f"unknown host fault {kind!r}")

    async def _heal_after(self, host: int, seconds: float) -> None:
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.to_thread(self.topology.heal, host)


def offsets_note(hosts: int) -> str:
    return ", ".join(f"host {h} {host_clock(h):+.1f} s" for h in range(hosts))
