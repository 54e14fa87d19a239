"""Token buckets in this process's memory: exact for a gateway that runs alone.

The event loop is single-threaded and nothing here awaits, so a decision over several buckets is
atomic without a lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from domain.rate_limits import Decision, Limit, decide, refilled


class MemoryLimiter:
    shared = False

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock or time.monotonic
        self._buckets: dict[str, tuple[float, float]] = {}  # name → (level, when)
        self._pruned_at = float("-inf")

    def _level(self, limit: Limit, now: float) -> float:
        level, last = self._buckets.get(limit.name, (float(limit.per_minute), now))
        return refilled(level, last, now, limit)

    async def admit(self, limits: list[Limit]) -> Decision:
        now = self._clock()
        decision = decide([self._level(limit, now) for limit in limits], limits)
        if decision.admitted:
            for level in decision.levels:
                self._buckets[level.limit.name] = (level.remaining, now)
            self._bounded(now)  # buckets of many names (client addresses) are bounded too
        return decision

    async def correct(self, limits: list[Limit], delta: int) -> None:
        """Take ``delta`` more tokens (or give them back, if negative) once the usage is known."""
        now = self._clock()
        for limit in limits:
            level = self._level(limit, now) - delta
            self._buckets[limit.name] = (min(float(limit.per_minute), level), now)
        self._bounded(now)

    def _bounded(self, now: float) -> None:
        """Past 100,000 buckets, drop those untouched for a minute (they are full again: dropping them
        changes nothing), at most once every 10 seconds (a scan of them all is not per request)."""
        if len(self._buckets) <= 100_000 or now - self._pruned_at < 10:
            return
        self._pruned_at = now
        for name, (_, last) in list(self._buckets.items()):
            if now - last > 60:
                del self._buckets[name]

    async def aclose(self) -> None:
        pass
