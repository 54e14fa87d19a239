"""Everything a running gateway holds: settings, ledger, writer, keys, upstream clients."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path


from app.billing import Billing
from app.keys import KeyDirectory
from app.leases import Leases
from app.ledger_writer import LedgerWriter
from app.hold_sweeper import HoldSweeper
from app.projector import Projector
from app.ratelimit import RateLimiter
from app.ratelimit.choice import limiter_store
from app.routes.models import model_list_body
from app.upstream import AnthropicUpstream, DemoUpstream, OpenAIUpstream, Upstream
from app.upstream.fallback import Deployment, FallbackUpstream
from app.upstream.client import Timeouts, UpstreamClient
from projections.writer_lock import WriterLock
from domain.settings import Settings
from projections.instances import InstanceRegistry
from domain.settings import Upstream as UpstreamSettings
from projections.event_store import LedgerStore, open_ledger_store


@dataclass
class Runtime:
    settings: Settings
    store: LedgerStore
    writer: LedgerWriter
    keys: KeyDirectory
    billing: Billing
    #: Each model's deployments, behind one upstream that fails over between them.
    upstreams: dict[str, FallbackUpstream]
    http: UpstreamClient
    model_list_body: bytes
    projector: Projector
    sweeper: HoldSweeper
    limiter: RateLimiter
    leases: Leases
    instances: InstanceRegistry
    started_at: float = field(default_factory=time.time)
    lease_keeper: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        """On the serving loop: give idle credit leases back every second."""
        self.lease_keeper = asyncio.get_running_loop().create_task(self.leases.run())

    async def aclose(self) -> None:
        if self.lease_keeper is not None:
            self.lease_keeper.cancel()
        await self.leases.give_back(self.leases.all_idle())  # before the writer stops
        await self.limiter.aclose()
        await self.http.aclose()
        self.sweeper.stop()
        self.writer.stop()
        self.projector.stop()
        self.instances.stop()
        self.store.close()


def _adapter(up: UpstreamSettings, http: UpstreamClient) -> Upstream:
    """The client for one deployment."""
    if up.kind == "demo":
        return DemoUpstream()
    api_key = os.environ.get(up.api_key_env) if up.api_key_env else None
    kind = AnthropicUpstream if up.kind == "anthropic" else OpenAIUpstream
    timeout = Timeouts(connect=float(up.connect_timeout), read=float(up.timeout))
    return kind(up.base_url or "", api_key, timeout=timeout, client=http)


def build_runtime(settings: Settings, base_dir: Path) -> Runtime:
    store = open_ledger_store(settings.database_url, base_dir, settings.database_pool_size)
    try:
        limits, instances = limiter_store(settings, store)
    except BaseException:
        store.close()
        raise
    limiter = RateLimiter(limits)
    keys = KeyDirectory(store)
    projector = Projector(store, on_key_change=keys.forget, on_team_change=keys.forget_team).start()
    # Several processes on one ledger (redis_url is what lets them run side by side): take turns.
    shared = settings.redis_url is not None
    writer = LedgerWriter(store, lock=WriterLock(store.database) if shared else None).start()
    leases = Leases(writer, idle_seconds=float(settings.lease_idle_seconds))
    sweeper = HoldSweeper(store, writer, float(settings.hold_timeout)).start()
    http = UpstreamClient(max_connections=1000)
    upstreams = {
        model.id: FallbackUpstream(
            model.id,
            [Deployment(_adapter(up, http), model.name_at(up), up.weight) for up in model.deployments],
            max_attempts=model.attempts,
        )
        for model in settings.models
    }
    return Runtime(
        settings=settings,
        store=store,
        writer=writer,
        keys=keys,
        projector=projector,
        sweeper=sweeper,
        billing=Billing(writer, settings, limiter, leases),
        leases=leases,
        limiter=limiter,
        instances=instances,
        upstreams=upstreams,
        http=http,
        model_list_body=model_list_body(settings, int(time.time())),
    )
