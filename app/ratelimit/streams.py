"""How many streams may be open at once: per API key, and in all in one gateway process.

A stream holds an upstream connection, a relay and a credit hold for as long as it runs, so a
client opening thousands would take the gateway from everyone else. HTTP/1.1 carries one request
at a time on a connection, and a client opens as many connections as it likes, so the honest unit
per client is its API key: at most ``max_streams_per_key`` open streams per key — across every
gateway process, when they share ``redis_url`` — and at most ``max_streams`` per process,
whoever asks. A stream takes its slot before anything is held and gives it back when its relay
ends, however it ends; over a limit, 429 ``rate_limit_error`` with ``retry-after``.

In Redis, a key's open streams are a sorted set of slot ids scored by when they expire: each
process renews its own slots every ``RENEW_EVERY`` seconds, so the slots of a process that died
expire within ``SLOT_TTL`` seconds, instead of counting against the key for ever. If Redis stops
answering, each process keeps the per-key limit on its own until it answers again (a looser limit,
rather than refusing every stream).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass

import redis.asyncio as aioredis

from app.errors import RateLimited
from app.observability import metrics

log = logging.getLogger("tollgate.ratelimit")

#: Seconds a slot in Redis lives without being renewed.
SLOT_TTL = 30.0
#: Seconds between renewals of a process's slots.
RENEW_EVERY = 10.0
#: Seconds a stream's end waits at most for Redis to take its slot back (it expires otherwise).
RELEASE_WAIT = 0.5
#: What a refused client is told to wait, in seconds: a stream ends at no predictable time.
RETRY_AFTER = "1"

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local open = redis.call('ZCARD', KEYS[1])
if open >= tonumber(ARGV[1]) then return {0, open} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return {1, open + 1}
"""

#: Renew the slots named by ARGV[i] in KEYS[i] (only those still there).
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', now + ttl, ARGV[i + 1])
  redis.call('EXPIRE', KEYS[i], math.ceil(ttl) + 1)
end
return 1
"""


@dataclass(eq=False)
class StreamSlot:
    """One open stream's place under the limits; ``release`` gives it back (once, however often
    called), before the stream's last byte goes out: a client that opens its next stream as soon as
    one ended must find its slot free, in every process."""

    owner: StreamSlots
    key_id: str
    member: str = ""  # its name in Redis's set of the key's streams (a slot of this process alone has none)
    in_redis: bool = False
    released: bool = False

    async def release(self) -> None:
        if not self.released:
            self.released = True
            await self.owner.give_back(self)


class StreamSlots:
    def __init__(self, per_key: int, per_process: int, redis_url: str | None = None, namespace: str = "") -> None:
        self.per_key = per_key
        self.per_process = per_process
        self._open: set[StreamSlot] = set()
        self._local: dict[str, int] = {}  # key id → this process's open streams (the whole count without Redis)
        self._redis = (
            None
            if redis_url is None
            else aioredis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        )
        self._prefix = f"tollgate:{namespace}:streams:"
        self._take = self._redis.register_script(_TAKE) if self._redis is not None else None
        self._renew = self._redis.register_script(_RENEW) if self._redis is not None else None
        self._renewer: asyncio.Task[None] | None = None

    @property
    def open(self) -> int:
        return len(self._open)

    async def take(self, key_id: str) -> StreamSlot:
        """A slot for a stream of this key, or 429 if the process or the key has all it may have."""
        if len(self._open) >= self.per_process:
            raise _refusal(
                "process",
                f"This gateway process is serving its limit of {self.per_process} concurrent streams; "
                "please try again shortly.",
            )
        slot = StreamSlot(self, key_id)
        if self._take is not None:
            slot.member = secrets.token_hex(8)
            try:
                taken, open_now = await self._take(
                    keys=[self._prefix + key_id], args=[self.per_key, SLOT_TTL, slot.member]
                )
                slot.in_redis = True
            except Exception as exc:  # noqa: BLE001 - Redis is down: this process keeps the limit alone meanwhile
                log.warning("stream limits cannot be shared right now (%s): this process counts them alone", exc)
                taken, open_now = None, None
        else:
            taken, open_now = None, None
        if taken is None:
            open_now = self._local.get(key_id, 0)
            taken = open_now < self.per_key
        if not taken:
            raise _refusal(
                "key",
                f"This API key has {open_now} streams open, its limit of {self.per_key} concurrent streams; "
                "please try again when one has ended.",
            )
        self._local[key_id] = self._local.get(key_id, 0) + 1
        self._open.add(slot)
        if slot.in_redis and self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())
        return slot

    async def give_back(self, slot: StreamSlot) -> None:
        self._open.discard(slot)
        left = self._local.get(slot.key_id, 1) - 1
        if left > 0:
            self._local[slot.key_id] = left
        else:
            self._local.pop(slot.key_id, None)
        if slot.in_redis and self._redis is not None:
            try:
                async with asyncio.timeout(RELEASE_WAIT):
                    await self._redis.zrem(self._prefix + slot.key_id, slot.member)
            except Exception as exc:  # noqa: BLE001 - the slot expires in Redis anyway
                log.warning("could not give a stream slot back (it expires within %g s): %r", SLOT_TTL, exc)

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY)
            shared = [slot for slot in self._open if slot.in_redis]
            if not shared or self._renew is None:  # slots are in Redis only when there is one
                continue
            try:
                await self._renew(
                    keys=[self._prefix + s.key_id for s in shared], args=[SLOT_TTL, *(s.member for s in shared)]
                )
            except Exception as exc:  # noqa: BLE001 - unrenewed slots expire; the next round tries again
                log.warning("could not renew %d stream slots: %s", len(shared), exc)

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        for slot in list(self._open):
            await slot.release()
        if self._redis is not None:
            await self._redis.aclose()


def _refusal(scope: str, message: str) -> RateLimited:
    metrics.RATE_LIMITED.labels(scope, "streams").inc()
    return RateLimited(message, headers={"retry-after": RETRY_AFTER})
