"""Where a gateway keeps its rate limits: in memory while it is the only process on its database,
in Redis (``redis_url``) as soon as there may be several.

Limits kept in one process's memory would let N processes admit N times the limit, so a process
without ``redis_url`` refuses to start beside another live gateway on the same database, and a
process with it refuses to start beside one without (that one's limits would not be shared).
"""

from __future__ import annotations

import asyncio

from app.ratelimit.memory import MemoryLimiter
from app.ratelimit.redis_store import RedisLimiter, reachable
from app.store.event_store import LedgerStore
from app.store.instances import InstanceRegistry
from domain.settings import Settings


class StartupRefused(Exception):
    """The gateway must not serve in this configuration; the message says what to change."""


def limiter_store(settings: Settings, store: LedgerStore) -> tuple[MemoryLimiter | RedisLimiter, InstanceRegistry]:
    registry = InstanceRegistry(store.database, shared_limits=settings.redis_url is not None)
    peers = registry.register()
    if settings.redis_url is None:
        if peers:
            registry.stop()
            where = ", ".join(f"pid {p.pid} on {p.host}" for p in peers)
            raise StartupRefused(
                f"another gateway process serves this database ({where}); rate limits kept in one process's "
                'memory would not hold across processes: set redis_url (e.g. "redis://127.0.0.1:6379/0") '
                "in the configuration of every gateway process"
            )
        return MemoryLimiter(), registry
    unshared = [p for p in peers if not p.shared_limits]
    if unshared:
        registry.stop()
        where = ", ".join(f"pid {p.pid} on {p.host}" for p in unshared)
        raise StartupRefused(
            f"a gateway process without redis_url serves this database ({where}); "
            "its rate limits are not shared: restart it with redis_url set"
        )
    try:  # fail at start, not on the first request
        asyncio.run(reachable(settings.redis_url))
    except Exception as exc:  # noqa: BLE001 - any failure to reach Redis refuses the start, with its reason
        registry.stop()
        raise StartupRefused(f"redis_url {settings.redis_url!r} is unreachable: {exc}") from None
    return RedisLimiter(settings.redis_url, registry.ledger_identity()), registry
