"""Rate limits as token buckets: what is admitted, what is left, when it is full again.

A limit of N per minute is a bucket holding at most N, refilled continuously at N/60 per second,
so a client may burst up to its limit and then goes at the limit's pace; there is no window edge
at which twice the limit gets through. A request takes 1 from each requests bucket and its token
estimate from each tokens bucket; it is admitted only if *every* bucket that applies has enough,
and then it takes from all of them (all or nothing). Token estimates are corrected when the usage
is known, which may leave a bucket below zero: the next requests then wait until it refills.

The same arithmetic runs in memory (one process) and as a Redis script (many processes):
``app/ratelimit``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REQUESTS = "requests"
TOKENS = "tokens"


@dataclass(frozen=True, slots=True)
class Limit:
    """One bucket that applies to a request: whose it is (key or team), what it counts, and the cost."""

    scope: str  # "key:<id>" or "team:<uuid>"
    kind: str  # REQUESTS or TOKENS
    per_minute: int
    cost: int

    @property
    def name(self) -> str:
        return f"{self.scope}:{self.kind}"

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0


@dataclass(frozen=True, slots=True)
class Level:
    """A bucket's state after a decision: what is left, and the seconds until it is full again."""

    limit: Limit
    remaining: float

    @property
    def reset_seconds(self) -> float:
        return max(0.0, (self.limit.per_minute - self.remaining) / self.limit.rate)

    def wait_for(self, cost: int) -> float:
        """Seconds until ``cost`` fits (infinite if it never can: above the limit itself)."""
        if cost > self.limit.per_minute:
            return math.inf
        return max(0.0, (cost - self.remaining) / self.limit.rate)


@dataclass(frozen=True, slots=True)
class Decision:
    admitted: bool
    levels: tuple[Level, ...]
    retry_after: float = 0.0  # seconds, when refused; infinite if the request can never fit

    def binding(self, kind: str) -> Level | None:
        """The bucket of this kind with the least left: the one a client should pace itself by."""
        of_kind = [level for level in self.levels if level.limit.kind == kind]
        return min(of_kind, key=lambda level: level.remaining / level.limit.per_minute) if of_kind else None


def refilled(level: float, last: float, now: float, limit: Limit) -> float:
    """A bucket's level at ``now`` (a new bucket is full)."""
    return min(float(limit.per_minute), level + max(0.0, now - last) * limit.rate)


def decide(levels_now: list[float], limits: list[Limit]) -> Decision:
    """Admit if every bucket holds the request's cost; the levels returned are after taking it."""
    short = [Level(limit, level) for limit, level in zip(limits, levels_now, strict=True) if level < limit.cost]
    if short:
        wait = max(level.wait_for(level.limit.cost) for level in short)
        return Decision(
            False, tuple(Level(limit, level) for limit, level in zip(limits, levels_now, strict=True)), wait
        )
    return Decision(
        True, tuple(Level(limit, level - limit.cost) for limit, level in zip(limits, levels_now, strict=True))
    )
