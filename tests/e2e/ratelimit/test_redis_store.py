"""The Redis token buckets under a burst: more requests in flight than the client has connections."""

from __future__ import annotations

import asyncio
import uuid

from app.ratelimit.redis_store import RedisLimiter
from domain.rate_limits import REQUESTS, TOKENS, Limit
from tests.support.backend import REDIS_URL


async def test_a_burst_larger_than_the_connection_pool_waits_for_connections_instead_of_failing():
    limiter = RedisLimiter(REDIS_URL, f"test-{uuid.uuid4().hex}")
    limit = [Limit("key:burst", REQUESTS, 1_000_000, 1)]
    try:
        burst = 4 * RedisLimiter.MAX_CONNECTIONS
        decisions = await asyncio.gather(
            *(limiter.admit(limit) for _ in range(burst)), *(limiter.correct(limit, -1) for _ in range(burst))
        )
    finally:
        await limiter.aclose()
    assert all(d.admitted for d in decisions[:burst])


async def test_token_corrections_of_many_requests_reach_redis_together_and_are_all_applied():
    limiter = RedisLimiter(REDIS_URL, f"test-{uuid.uuid4().hex}")
    bucket = Limit("key:corrected", TOKENS, 6_000, 500)  # 100 tokens a second come back
    try:
        for _ in range(10):  # ten requests estimated at 500 tokens, each of which used 100
            assert (await limiter.admit([bucket])).admitted
        await asyncio.gather(*(limiter.correct([bucket], -400) for _ in range(10)))
        assert limiter._flushing is not None  # queued, not sent one by one
        await limiter.flush()
        level = (await limiter.admit([Limit("key:corrected", TOKENS, 6_000, 0)])).levels[0].remaining
    finally:
        await limiter.aclose()
    assert 5_000 <= level <= 5_100  # 6,000 − 10 × 100 used, plus what refilled meanwhile
