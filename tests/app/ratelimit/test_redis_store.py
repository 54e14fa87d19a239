"""The Redis token buckets under a burst: more requests in flight than the client has connections."""

from __future__ import annotations

import asyncio
import uuid

from app.ratelimit.redis_store import RedisLimiter
from domain.rate_limits import REQUESTS, Limit
from tests.gateway import REDIS_URL


async def test_a_burst_larger_than_the_connection_pool_waits_for_connections_instead_of_failing():
    limiter = RedisLimiter(REDIS_URL, f"test-{uuid.uuid4().hex}")
    limit = [Limit("key:burst", REQUESTS, 1_000_000, 1)]
    try:
        burst = 4 * RedisLimiter.MAX_CONNECTIONS
        decisions = await asyncio.gather(*(limiter.admit(limit) for _ in range(burst)),
                                         *(limiter.correct(limit, -1) for _ in range(burst)))
    finally:
        await limiter.aclose()
    assert all(d.admitted for d in decisions[:burst])
