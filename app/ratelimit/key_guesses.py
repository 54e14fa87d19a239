"""Failed key attempts, throttled per client address.

A key that is not known costs a look-up in the key directory (the database) and tells its sender
that it was wrong: a client trying keys is guessing, or flooding the directory. So each client
address has a budget of failed attempts — ``max_key_failures_per_minute``, a token bucket like every
rate limit here (``domain/rate_limits.py``), in Redis when ``redis_url`` is set (every process shares
it) and in memory otherwise — and an address that spent it gets 429 with ``Retry-After`` for every
key that must be looked up or compared, until its bucket refills.

A valid key is never slowed: checking costs no I/O (each process remembers which addresses are over
their budget, as the shared bucket last told it), a failure is counted only after its key was found
wrong, and a team key the process has served already (its cache) is not checked at all — so the
clients behind one address with a guesser are refused only keys new to the gateway, until the
guesser's budget refills. IPv6 addresses are counted by their /64, which one client usually holds
whole. If Redis stops answering, failures are counted in this process's memory meanwhile.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time

from app.errors import RateLimited
from app.observability import metrics
from app.ratelimit import LimiterStore
from app.ratelimit.memory import MemoryLimiter
from domain.rate_limits import REQUESTS, Limit

log = logging.getLogger("tollgate.ratelimit")

#: Addresses remembered as over their budget, at most (the oldest are forgotten first).
_MAX_BLOCKED = 100_000


def address_of(host: str | None) -> str:
    """The unit a budget is kept for: an IPv4 address, an IPv6 /64, or the host as given."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class KeyGuesses:
    def __init__(self, store: LimiterStore, per_minute: int) -> None:
        self._store = store
        self._fallback = MemoryLimiter()
        self._per_minute = per_minute
        self._blocked: dict[str, float] = {}  # address → until (monotonic)

    def check(self, address: str) -> None:
        """429 if ``address`` spent its failed attempts (no I/O: what this process was told last)."""
        until = self._blocked.get(address)
        if until is None:
            return
        wait = until - time.monotonic()
        if wait <= 0:
            del self._blocked[address]
            return
        raise self._refusal(wait)

    async def failed(self, address: str) -> None:
        """Count a failed attempt from ``address``; 429 if it was one more than its budget."""
        if self._per_minute <= 0:
            return
        limit = Limit(f"keys:{address}", REQUESTS, self._per_minute, 1)
        try:
            decision = await self._store.admit([limit])
        except Exception as exc:  # noqa: BLE001 - the shared store is down: count here meanwhile
            log.warning("failed key attempts counted in memory: the rate-limit store is unavailable (%s)", exc)
            decision = await self._fallback.admit([limit])
        if decision.admitted:
            return
        if len(self._blocked) >= _MAX_BLOCKED:
            del self._blocked[next(iter(self._blocked))]
        self._blocked[address] = time.monotonic() + decision.retry_after
        raise self._refusal(decision.retry_after)

    @staticmethod
    def _refusal(wait: float) -> RateLimited:
        metrics.RATE_LIMITED.labels("address", "failed_keys").inc()
        seconds = max(1, math.ceil(wait))
        error = RateLimited(
            f"Too many requests with a wrong API key from this address; try again in {seconds} s, with a valid key.",
            headers={"retry-after": str(seconds)},
        )
        error.retryable = False  # the same key will not be right on a retry
        return error
