"""Token buckets in Redis, shared by every gateway process that names the same ``redis_url``.

One Lua script decides over all of a request's buckets atomically (Redis runs scripts one at a
time), with Redis's own clock, so processes on different hosts agree on time. The arithmetic is
that of ``domain.rate_limits``; a bucket untouched for two minutes expires (it would be full).
Bucket names carry the ledger's identity, so two ledgers sharing one Redis never share limits.
"""

from __future__ import annotations

import asyncio
import logging
import math

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from app.observability import timeline
from domain.rate_limits import Decision, Level, Limit

log = logging.getLogger("tollgate.ratelimit")

_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local n = #KEYS
local levels = {}
local ok = true
for i = 1, n do
  local cap = tonumber(ARGV[2 * i - 1])
  local cost = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', KEYS[i], 'level', 'ts')
  local level = cap
  if state[1] then
    level = math.min(cap, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * cap / 60)
  end
  levels[i] = level
  if level < cost then ok = false end
end
local out = {}
for i = 1, n do
  local level = levels[i]
  if ok then
    level = level - tonumber(ARGV[2 * i])
    redis.call('HSET', KEYS[i], 'level', tostring(level), 'ts', tostring(now))
    redis.call('EXPIRE', KEYS[i], 120)
  end
  out[i] = tostring(level)
end
table.insert(out, 1, ok and 1 or 0)
return out
"""

#: Token corrections for many buckets at once: ARGV holds (delta, per-minute) for each key.
_CORRECT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i = 1, #KEYS do
  local delta = tonumber(ARGV[2 * i - 1])
  local cap = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', KEYS[i], 'level', 'ts')
  local level = cap
  if state[1] then
    level = math.min(cap, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * cap / 60)
  end
  level = math.min(cap, level - delta)
  redis.call('HSET', KEYS[i], 'level', tostring(level), 'ts', tostring(now))
  redis.call('EXPIRE', KEYS[i], 120)
end
return 1
"""


class RedisLimiter:
    shared = True

    #: Connections per process. More requests than this in flight wait for one (up to the socket
    #: timeout) rather than fail: redis-py's default pool refuses the 101st with "Too many
    #: connections", which turned bursts of 64 requests (and their token corrections) into 503s.
    MAX_CONNECTIONS = 64
    #: Token corrections wait this long and go to Redis together: one round trip per interval
    #: instead of one per request (a round trip costs ~0.1 ms of CPU on each side). A bucket of
    #: tokens per *minute* is no less right for learning of a request's real size 50 ms later.
    CORRECTION_DELAY = 0.05

    def __init__(self, url: str, namespace: str) -> None:
        # A connection Redis closed (it restarted, or dropped idle clients) fails on its next use; one
        # retry, on a fresh connection, keeps that from becoming a 503 while Redis answers again. A
        # Redis that does not answer at all still fails within its timeouts (a timeout is not retried).
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=self.MAX_CONNECTIONS,
            timeout=2,
            socket_timeout=2,
            socket_connect_timeout=2,
            retry=retry,
        )
        # from_pool: the client owns the pool, so aclose() disconnects its connections too (a client
        # built with connection_pool= leaves them open, each a socket left for the collector to find).
        self._redis = aioredis.Redis.from_pool(pool)
        self._prefix = f"tollgate:{namespace}:rl:"
        self._admit = self._redis.register_script(_ADMIT)
        self._correct = self._redis.register_script(_CORRECT)
        self._corrections: dict[str, list[int]] = {}  # bucket → [token delta, per minute]
        self._flushing: asyncio.Task[None] | None = None

    async def admit(self, limits: list[Limit]) -> Decision:
        args: list[int] = []
        for limit in limits:
            args += [limit.per_minute, limit.cost]
        result = await self._admit(keys=[self._prefix + limit.name for limit in limits], args=args)
        admitted = int(result[0]) == 1
        levels = tuple(Level(limit, float(value)) for limit, value in zip(limits, result[1:], strict=True))
        if admitted:
            return Decision(True, levels)
        short = [level for level in levels if level.remaining < level.limit.cost]
        wait = max((level.wait_for(level.limit.cost) for level in short), default=math.inf)
        return Decision(False, levels, wait)

    async def correct(self, limits: list[Limit], delta: int) -> None:
        """Queue the correction; it is sent with the others of the next ``CORRECTION_DELAY``."""
        if not (limits and delta):
            return
        for limit in limits:
            entry = self._corrections.setdefault(self._prefix + limit.name, [0, limit.per_minute])
            entry[0] += delta
            entry[1] = limit.per_minute
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        try:
            await asyncio.sleep(self.CORRECTION_DELAY)
        finally:
            self._flushing = None
            await self.flush()

    async def flush(self) -> None:
        """Send every queued correction now."""
        queued, self._corrections = self._corrections, {}
        queued = {key: entry for key, entry in queued.items() if entry[0]}
        if not queued:
            return
        args: list[int] = []
        for delta, per_minute in queued.values():
            args += [delta, per_minute]
        try:
            with timeline.span("redis.flush", len(queued), cpu=False):
                await self._correct(keys=list(queued), args=args)
        except Exception as exc:  # noqa: BLE001 - corrections that fail are logged; the requests they follow are done
            log.warning("could not correct %d token estimates: %s", len(queued), exc)

    async def aclose(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            await asyncio.gather(self._flushing, return_exceptions=True)
        await self.flush()
        await self._redis.aclose()


async def reachable(url: str) -> None:
    """Raise if Redis at ``url`` does not answer (a client of its own: clients belong to one event loop)."""
    client = aioredis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        await client.ping()
    finally:
        await client.aclose()
