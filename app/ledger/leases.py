"""Credit leases: requests held in this process's memory, against a slice of the team's balance
that the ledger has set aside for this process.

Without a lease every request costs two durable writes before its answer — its hold and its
charge. With one, the hold is a subtraction in memory and only the charge is written: the lease
itself (``CreditsLeased``) is durable, so other processes can never spend what this one may, and a
request is still refused with 402 before it goes upstream when its worst case does not fit. A lease
grows by several worst cases at a time (one durable write per many requests), and what is left
goes back to the team when it has been idle for a moment, or when the process stops. If the
process dies, another process releases the lease once the dead one's heartbeat has stopped
(``instance_dead_after``; ``hold_timeout`` is the backstop): nothing it held was charged, except
streams whose delivery it had reported.

The book lives on the event loop (no locks): the ledger writer's answers carry what each lease
holds after each charge or extension, applied here in commit order.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from app.ledger.durable import durable
from app.ledger.results import LEASE_PREFIX
from app.ledger.service import LedgerService
from app.observability import timeline

log = logging.getLogger("tollgate.leases")

#: A lease grows by this many times the worst case that needed it to grow, or by twice what the
#: requests in flight hold, whichever is more ...
GROWTH = 16
#: ... and it grows ahead, without anyone waiting, once what is free in it falls below this share
#: of what the requests in flight hold.
LOW_WATER = 0.5
#: Seconds a lease with nothing held against it is kept before it goes back to the team.
IDLE_SECONDS = 2.0


@dataclass
class Lease:
    lease_id: str
    team_id: UUID
    team_name: str
    remaining: int = 0  # what the ledger holds for this lease, as last told
    reserved: int = 0  # held in memory by requests in flight
    waiting: int = 0  # what requests waiting for it to grow will hold
    last_used: float = field(default_factory=time.monotonic)
    #: The growth in flight, set when it ends (None: none is). Requests that need more than is free
    #: wait for it, all at once, then look again.
    growth: asyncio.Event | None = None

    @property
    def free(self) -> int:
        return self.remaining - self.reserved


class Leases:
    def __init__(
        self,
        ledger: LedgerService,
        growth: int = GROWTH,
        idle_seconds: float = IDLE_SECONDS,
        owner: Callable[[], str] = str,
    ) -> None:
        """``owner``: this process's instance id, recorded on each lease."""
        self._ledger = ledger
        self._owner = owner
        self._growth = growth
        self._idle = idle_seconds
        self._by_team: dict[UUID, Lease] = {}
        #: Growths started ahead of need (kept so that the loop does not drop them, awaited at stop).
        self._ahead: set[asyncio.Task[None]] = set()
        #: Set whenever what is held against the leases may have dropped to nothing (``settled``).
        self._settling = asyncio.Event()
        #: Leases taken out of the book whose return the ledger could not take yet (tried again).
        self._unreturned: list[Lease] = []
        self._failed_once: set[str] = set()

    def free(self, team_id: UUID) -> int:
        """What the team's lease in this process has that no request in flight holds."""
        lease = self._by_team.get(team_id)
        return max(0, lease.free) if lease is not None else 0

    async def reserve(self, team_id: UUID, team_name: str, amount: int) -> Lease:
        """Hold ``amount`` against the team's lease, growing it first if needed (the ledger's
        refusals — ``InsufficientCredits``, ``TeamSuspended`` — propagate: nothing is held then).

        A lease is sized to what is in flight: a growth takes twice what the requests in flight
        hold, and starts before the lease runs out. A lease that grew by a fixed sixteen worst cases
        served sixteen of sixty-four concurrent requests; the rest queued behind one durable growth
        after another, and at chat c=64 the last of them waited 300-470 ms to be held (the
        benchmark's stall finder: ``lease.grow``)."""
        lease = self._by_team.get(team_id)
        if lease is None:
            lease = self._by_team[team_id] = Lease(LEASE_PREFIX + secrets.token_hex(8), team_id, team_name)
        if lease.free < amount:
            lease.waiting += amount
            try:
                grown = False  # a request grows the lease once at most: then it is held, as it fits
                while lease.free < amount and not grown:
                    if lease.growth is not None:
                        await lease.growth.wait()
                    else:
                        await self._grow_once(lease, amount)
                        grown = True
            finally:
                lease.waiting -= amount
        lease.reserved += amount
        lease.last_used = time.monotonic()
        if lease.free < lease.reserved * LOW_WATER and lease.growth is None:
            task = asyncio.get_running_loop().create_task(self._grow_ahead(lease, amount))
            self._ahead.add(task)
            task.add_done_callback(self._ahead.discard)
        return lease

    async def _grow_once(self, lease: Lease, amount: int) -> None:
        """Grow ``lease``, the one growth in flight for it; the requests that wait meanwhile are
        woken together when it ends, and look again.

        They used to queue on a lock, one behind the other: after a growth, each took its turn in a
        loop iteration of its own, and at c=64 (iterations of 20-40 ms, the loop saturated) the
        last of a burst waited 1.2-1.4 s to be held, though one growth had served them all (the
        stall finder, chat_stream c=64: every p99 outlier, at each run's start).

        A request grows the lease once at most, as it did under the lock: a lease the book forgot
        (this process was taken for dead) is given back after each growth, what it has free may
        never cover the request, and a request that grew it again until it did grew and returned
        it every 20 ms until the run ended (the multi-host chaos suite found it)."""
        done = lease.growth = asyncio.Event()
        try:
            await self._grow(lease, amount)
        finally:
            lease.growth = None
            done.set()

    async def _grow(self, lease: Lease, amount: int) -> None:
        needed = max(0, amount - lease.free)
        # Everyone who waits for this growth is served by it (requests that came while the last
        # growth was being written queued for the lock: after a quiet spell, a burst of sixty-four
        # took four growths in turn, one for each sixteen).
        wanted = max(amount * self._growth, 2 * (lease.reserved + max(lease.waiting, amount)))
        growing = self._ledger.lease(
            lease.team_id, lease.team_name, lease.lease_id, max(needed, 1), wanted, self._owner()
        )
        with timeline.span("lease.grow", [needed, wanted], cpu=False):
            lease.remaining = (await durable(growing)).remaining
        if self._by_team.get(lease.team_id) is not lease:
            # the book forgot it while a request waited to grow it (this process was found taken for
            # dead meanwhile): nobody else would give back what this growth just set aside
            await self.give_back([lease])

    async def _grow_ahead(self, lease: Lease, amount: int) -> None:
        """Grow a lease running low while its requests go on; a refusal (the team cannot afford
        more, or was suspended) is left for the next request that needs the growth to hear."""
        if (
            lease.growth is not None  # one is on its way already
            or lease.free >= lease.reserved * LOW_WATER
            or self._by_team.get(lease.team_id) is not lease
        ):
            return
        try:
            await self._grow_once(lease, amount)
        except Exception as exc:  # noqa: BLE001 - nobody waits for this growth: the next one says why
            log.debug("lease %s of team %s could not grow ahead: %s", lease.lease_id, lease.team_name, exc)

    async def grown(self) -> None:
        """Wait for the growths started ahead (at stop, before the leases are given back)."""
        while self._ahead:
            await asyncio.gather(*self._ahead, return_exceptions=True)

    def settle(self, lease: Lease, amount: int, remaining: int | None) -> None:
        """A request held against ``lease`` is done; ``remaining`` is what its charge left in the
        lease (``None``: nothing was charged)."""
        lease.reserved -= amount
        if remaining is not None:
            lease.remaining = remaining
        lease.last_used = time.monotonic()
        self._settling.set()

    async def settled(self) -> None:
        """Wait until nothing is held against any lease: requests cut off at shutdown queue their
        charges, whose answers come back to this loop. The caller bounds the wait."""
        while any(lease.reserved for lease in self._by_team.values()):
            self._settling.clear()
            await self._settling.wait()

    def idle(self, now: float | None = None) -> list[Lease]:
        """Take out of the book the leases nothing is held against and that were not used lately."""
        now = time.monotonic() if now is None else now
        done = [
            lease
            for lease in self._by_team.values()
            if lease.reserved == 0 and lease.growth is None and now - lease.last_used >= self._idle
        ]
        for lease in done:
            del self._by_team[lease.team_id]
        return done

    def forget_all(self) -> None:
        """This process was taken for dead and its leases released by another: lease afresh. Requests
        held against the old leases still settle (their charges come out of the available balance).

        The old leases are given back all the same: a process cut off from the database, taken for
        dead, then reconnected, may have taken a lease between the others' sweep and its own finding
        out, under the owner they swept — no one else would ever release it, and its credit stayed
        held until the holds' timeout (the multi-host chaos suite found it). Giving back a lease
        already released changes nothing (``return_lease`` is a no-op then)."""
        orphans = list(self._by_team.values())
        self._by_team.clear()
        self._settling.set()
        if orphans:
            task = asyncio.get_running_loop().create_task(self.give_back(orphans))
            self._ahead.add(task)  # kept until done, as the growths are, and awaited at stop
            task.add_done_callback(self._ahead.discard)

    def all_idle(self) -> list[Lease]:
        """Every lease in the book, taken out of it, and those not yet given back after a failure."""
        return [*self.idle(now=float("inf")), *self._take_unreturned()]

    def _take_unreturned(self) -> list[Lease]:
        unreturned, self._unreturned = self._unreturned, []
        return unreturned

    async def give_back(self, leases: list[Lease]) -> None:
        """Return what is left of ``leases`` to their teams (one durable write per team). A lease the
        ledger could not take back now (the database away) is tried again at the next tick, and at
        stop: left alone, its credit stayed held until the holds' timeout (the multi-host chaos suite
        found one given back while PostgreSQL refused connections). Giving back a lease twice changes
        nothing."""
        for lease in leases:
            try:
                await durable(self._ledger.return_lease(lease.team_id, lease.team_name, lease.lease_id))
            except Exception as exc:  # noqa: BLE001 - tried again at the next tick
                if lease.lease_id not in self._failed_once:
                    log.warning(
                        "could not return lease %s of team %s (will try again): %s",
                        lease.lease_id,
                        lease.team_name,
                        exc,
                    )
                self._failed_once.add(lease.lease_id)
                self._unreturned.append(lease)
            else:
                self._failed_once.discard(lease.lease_id)

    async def run(self) -> None:
        """Give idle leases back, and those a failure kept, until cancelled."""
        while True:
            await asyncio.sleep(min(1.0, self._idle / 2))
            with timeline.span("leases.give_back", cpu=False):
                await self.give_back([*self.idle(), *self._take_unreturned()])
