"""Everything a running gateway holds: settings, ledger, writer, keys, upstream clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import FrameType
from typing import Any
from wsgiref.simple_server import WSGIServer

from app.admin_keys import AdminKeyDirectory
from app.alerts.webhooks import WebhookDelivery
from app.batches.poller import BatchPoller
from app.batches.settle import SettleWith
from app.clock_shift import shift_clock_from_environment
from app.keys import KeyDirectory
from app.ledger.billing import Billing, ThisProcess
from app.ledger.health import LedgerHealth
from app.ledger.leases import Leases
from app.ledger.log_checkpoints import CheckpointSigner
from app.ledger.prices import PriceBook
from app.ledger.projector import Projector
from app.ledger.service import LedgerService
from app.ledger.streams_in_flight import StreamsInFlight
from app.ledger.sweeper import HoldSweeper, SweepTimes
from app.ledger.verify_runs import VerifyRuns
from app.ledger.writer import LedgerWriter
from app.log_key import log_signer
from app.observability import metrics, timeline
from app.observability.record_writer import RecordWriter
from app.payments.recharger import Recharger
from app.payments.stripe_account import StripeAccount
from app.ratelimit import RateLimiter
from app.ratelimit.choice import limiter_store
from app.ratelimit.key_guesses import KeyGuesses
from app.ratelimit.streams import StreamSlots
from app.store.batch_store import BatchStore
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.instances import InstanceRegistry
from app.store.probe import LedgerProbe
from app.store.writer_lock import WriterLock
from app.upstream import AnthropicUpstream, DemoUpstream, OpenAIResponsesUpstream, OpenAIUpstream, Upstream
from app.upstream.azure import API_KEY, AzureOpenAIResponsesUpstream, AzureOpenAIUpstream, AzureResource
from app.upstream.bedrock import BedrockUpstream, default_endpoint
from app.upstream.bedrock_converse import BedrockConverseUpstream
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.entra_token import PUBLIC_AUTHORITY, EntraToken
from app.upstream.fallback import Deployment, FallbackUpstream
from app.upstream.gemini import GeminiUpstream
from app.upstream.google_token import GoogleToken, load_credentials
from app.upstream.vertex import VertexAnthropicUpstream, VertexGeminiUpstream, VertexPlace
from app.upstream.vertex import default_endpoint as vertex_endpoint
from domain.settings import Model, Settings
from domain.settings import Upstream as UpstreamSettings
from domain.settings_models import price_key

log = logging.getLogger("tollgate")

#: Seconds the shutdown waits for requests cut off by ``shutdown_timeout`` to settle their holds
#: (their charges are queued to the writer) before giving the credit leases back.
SETTLE_WAIT = 5.0
#: Seconds short of ``instance_dead_after`` after which a process that has not heard its heartbeat
#: go through holds no request: the others may take it for dead from then on (a beat's own time and
#: the hosts' clocks apart), and release its leases.
VOUCH_MARGIN = 1.0
#: Seconds the heartbeat waits for the event loop to forget the lease book, once it found this
#: process was taken for dead, before it vouches for the process again.
LEASE_AFRESH_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class BillingServices:
    """What the billed path (``app/http/relay.py``, ``app/http/billed_call.py``) uses of a running
    gateway, and nothing more: the billing, the rate limits and stream slots a request is admitted
    by, each model's upstream, and the streams in flight a dead process's are billed from."""

    billing: Billing
    limiter: RateLimiter
    streams: StreamSlots
    upstreams: Mapping[str, FallbackUpstream]
    in_flight: StreamsInFlight


@dataclass
class Runtime:
    settings: Settings
    store: LedgerStore
    writer: LedgerWriter
    #: The ledger's commands as named methods, over ``writer``: what the admin API uses.
    ledger: LedgerService
    keys: KeyDirectory
    billing: Billing
    #: Each model's deployments, behind one upstream that fails over between them.
    upstreams: dict[str, FallbackUpstream]
    http: UpstreamClient
    projector: Projector
    sweeper: HoldSweeper
    limiter: RateLimiter
    #: Open streams per key and per process (``max_streams_per_key``, ``max_streams``).
    streams: StreamSlots
    leases: Leases
    instances: InstanceRegistry
    health: LedgerHealth
    #: The streams being relayed and what each delivered, reported with every heartbeat.
    in_flight: StreamsInFlight
    #: The ledger's price list, which every hold and charge is priced by.
    prices: PriceBook
    #: The named admin keys (``app/admin_keys.py``), for the admin API's guard.
    admin_keys: AdminKeyDirectory
    #: Failed key attempts per client address (``max_key_failures_per_minute``).
    key_guesses: KeyGuesses
    #: Sends the alerts the events recorded to the configured webhooks.
    webhooks: WebhookDelivery
    #: ``ledger verify`` for the admin API: one run at a time, in a process of its own.
    verify_runs: VerifyRuns
    #: Writes each answered request's record for the request lookup (None: ``request_record_days = 0``).
    records: RecordWriter | None = None
    #: Stripe, when teams may buy credit themselves (``[payments]``).
    stripe: StripeAccount | None = None
    #: Pays the auto-recharge attempts the charges began, on the teams' saved cards (with ``stripe``).
    recharger: Recharger | None = None
    #: Signs the transparency log's checkpoints (``[transparency]``), with the key receipts are signed with.
    checkpoints: CheckpointSigner | None = None
    #: A team's files and batches (``/v1/files``, ``/v1/batches``), and the poller that settles batches.
    batches: BatchStore = field(default=None)  # type: ignore[assignment]
    batch_poller: BatchPoller | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list, repr=False)
    _metrics_server: WSGIServer | None = field(default=None, repr=False)

    @cached_property
    def billing_services(self) -> BillingServices:
        """The part of this runtime the billed path holds (made once)."""
        return BillingServices(self.billing, self.limiter, self.streams, self.upstreams, self.in_flight)

    async def start(self) -> None:
        """On the serving loop: give idle credit leases back, probe the ledger every second, serve
        metrics on their own port if so configured, and stop taking work on SIGTERM."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.leases.run()), loop.create_task(self.health.run()), *timeline.watch_loop()]
        if self.batch_poller is not None:
            self._tasks.append(loop.create_task(self.batch_poller.run()))
        self.instances.stream_reports = lambda: self.in_flight.reports_from(loop)

        # Taken for dead while stuck, this process's leases were released: its book must lease afresh,
        # before the heartbeat vouches for this process again (``InstanceRegistry.heard_within``).
        def lease_afresh() -> None:
            forgotten = threading.Event()

            def forget() -> None:
                self.leases.forget_all()
                forgotten.set()

            loop.call_soon_threadsafe(forget)
            forgotten.wait(timeout=LEASE_AFRESH_WAIT)

        self.instances.on_reregistered = lease_afresh
        port = self.settings.metrics_port
        if port is not None and not os.environ.get(metrics.MULTIPROCESS_DIR_ENV):  # with workers: the supervisor's
            from prometheus_client import start_http_server

            self._metrics_server, _ = start_http_server(port, addr=self.settings.metrics_host)
        self._drain_on_signals()

    def _drain_on_signals(self) -> None:
        """Readiness turns 503 the moment the process is told to stop, before uvicorn stops accepting;
        uvicorn's own handler (which this one calls) does the rest."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def draining(
                signum: int, frame: FrameType | None, previous: Callable[[int, FrameType | None], Any] = previous
            ) -> None:
                self.health.draining = True
                previous(signum, frame)

            signal.signal(sig, draining)

    async def aclose(self) -> None:
        """After uvicorn let the requests in flight finish (``shutdown_timeout``): settle what is
        held, give the leases back, flush the writer, and close everything."""
        self.health.draining = True
        for task in self._tasks:
            task.cancel()
        self.billing.pay_owed()  # a last try for charges the ledger could not record earlier
        with contextlib.suppress(TimeoutError):  # requests cut off at the deadline queue their charges
            async with asyncio.timeout(SETTLE_WAIT):
                await self.leases.settled()
        if self.billing.owed:
            log.error(
                "stopping with %d charge(s) the ledger could not record; their leases expire after "
                "hold_timeout and those requests are never charged",
                self.billing.owed,
            )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE_WAIT):
                await self.leases.grown()
        await self.leases.give_back(self.leases.all_idle())  # before the writer stops
        await self.limiter.aclose()
        await self.streams.aclose()
        await self.http.aclose()
        self.sweeper.stop()
        await self.verify_runs.aclose()
        self.webhooks.stop()
        if self.recharger is not None:
            self.recharger.stop()  # an attempt being paid is finished first

        if self.stripe is not None:
            self.stripe.close()
        self.writer.stop()  # every queued command is committed first
        if self.checkpoints is not None:
            self.checkpoints.stop()  # its last checkpoint holds the writer's last events
        if self.records is not None:
            self.records.stop()  # what is waiting is written first
        self.projector.stop()
        self.batches.close()
        self.instances.stop()
        self.health.close()
        self.store.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        metrics.forget_this_process()
        log.info("stopped: every request settled, leases returned, the ledger flushed")


def _adapter(up: UpstreamSettings, http: UpstreamClient) -> Upstream:
    """The client for one deployment."""
    if up.kind == "demo":
        return DemoUpstream()
    api_key = os.environ.get(up.api_key_env) if up.api_key_env else None
    kinds: dict[str, type[AnthropicUpstream | OpenAIResponsesUpstream | OpenAIUpstream]] = {
        "anthropic": AnthropicUpstream,
        "openai-responses": OpenAIResponsesUpstream,
    }
    timeout = Timeouts(connect=float(up.connect_timeout), read=float(up.timeout))
    if up.kind == "azure-openai":
        return _azure_adapter(up, api_key, timeout, http)
    if up.kind == "vertex":
        place = VertexPlace(up.base_url or vertex_endpoint(up.region or ""), up.project or "", up.region or "")
        token = GoogleToken(load_credentials(up.credentials_file))
        vertex = VertexAnthropicUpstream if up.wire == "messages" else VertexGeminiUpstream
        return vertex(place, token, timeout=timeout, client=http)
    if up.kind == "gemini":
        return GeminiUpstream(up.base_url or "", api_key, timeout=timeout, client=http)
    if up.kind == "bedrock":
        region = up.region or ""
        bedrock = BedrockConverseUpstream if up.wire == "converse" else BedrockUpstream
        return bedrock(up.base_url or default_endpoint(region), region, timeout=timeout, client=http)
    kind = kinds.get(up.kind, OpenAIUpstream)
    return kind(up.base_url or "", api_key, timeout=timeout, client=http)


def _azure_adapter(up: UpstreamSettings, api_key: str | None, timeout: Timeouts, http: UpstreamClient) -> Upstream:
    """An Azure OpenAI deployment's client: its key, a token read from the environment, or its
    service principal's token, which the client gets and refreshes itself."""
    resource = AzureResource(up.base_url or "", up.api_version or "", up.auth or API_KEY)
    azure = AzureOpenAIResponsesUpstream if up.wire == "responses" else AzureOpenAIUpstream
    if not up.tenant_id:
        return azure(resource, api_key, timeout=timeout, client=http)
    secret = os.environ.get(up.client_secret_env or "", "")
    entra = EntraToken(up.authority_host or PUBLIC_AUTHORITY, up.tenant_id, up.client_id or "", secret)
    return azure(resource, None, timeout=timeout, client=http, token=entra)


def price_key_of(model: Model, up: UpstreamSettings) -> str:
    """A deployment's key in the price list when it has a price of its own; "" for the model's."""
    return price_key(model.id, up.name) if up.pricing is not None else ""


def build_runtime(settings: Settings, base_dir: Path) -> Runtime:
    timeline.start_from_environment()  # off unless TOLLGATE_TIMELINE names a file (scripts/bench --stalls)
    if shifted := shift_clock_from_environment():  # the wall clock unless a drill's TOLLGATE_CLOCK_OFFSET says so
        log.warning(
            "the ledger clock runs %s s ahead of the wall clock (TOLLGATE_CLOCK_OFFSET, a drill): the teams "
            "this process charges move into its time",
            shifted,
        )
    store = open_ledger_store(settings.database_url, base_dir, settings.database_pool_size)
    try:
        limits, instances = limiter_store(settings, store)
    except BaseException:
        store.close()
        raise
    timeline.traced(instances, "beat", "heartbeat")
    limiter = RateLimiter(limits)
    streams = StreamSlots(
        settings.max_streams_per_key,
        settings.max_streams,
        settings.redis_url,
        instances.ledger_identity() if settings.redis_url else "",
    )
    keys = KeyDirectory(store)
    admin_keys = AdminKeyDirectory(store)

    def key_changed(key_id: str) -> None:  # a team's key, or an admin key (their ids differ)
        keys.forget(key_id)
        admin_keys.forget(key_id)

    try:
        prices = PriceBook(store, settings).open()
    except BaseException:
        store.close()
        raise
    projector = Projector(
        store, on_key_change=key_changed, on_team_change=keys.forget_team, on_prices_change=prices.reload
    ).start()
    # Several processes on one ledger (redis_url is what lets them run side by side): take turns.
    shared = settings.redis_url is not None
    writer = LedgerWriter(
        store, lock=WriterLock(store.database) if shared else None, snapshot_every=settings.snapshot_every
    ).start()
    writer.warm(store.recent_teams())  # in the background: the first requests find their teams loaded

    def owner() -> str:  # the id every hold and lease of this process is recorded under
        return instances.instance_id

    ledger = LedgerService(writer, float(settings.hold_timeout))
    leases = Leases(ledger, idle_seconds=float(settings.lease_idle_seconds), owner=owner)
    # A process silent for nearly the dead-process limit may have been taken for dead, its leases
    # released: it holds nothing until a heartbeat gets through and says whether it was.
    vouched_within = float(settings.instance_dead_after) - VOUCH_MARGIN

    def vouched() -> bool:
        return instances.heard_within(vouched_within)

    health = LedgerHealth(writer, LedgerProbe(store.database), vouched=vouched, hurry=instances.beat_soon)

    def writable() -> bool:
        return health.writable

    billing = Billing(ledger, settings, prices, limiter, leases, ThisProcess(owner=owner, writable=writable))
    health.when_writable = billing.pay_owed
    billing.receipts = log_signer(settings.transparency, base_dir, os.environ)  # each charge's receipt, signed
    times = SweepTimes(
        float(settings.hold_timeout),
        dead_after=float(settings.instance_dead_after),
        record_days=settings.request_record_days,
    )
    sweeper = HoldSweeper(
        store, ledger, times, registry=instances, prices=prices, credits_per_usd=settings.credits_per_usd
    ).start()
    http = UpstreamClient(max_connections=1000)
    upstreams = {
        model.id: FallbackUpstream(
            model.id,
            [
                Deployment(_adapter(up, http), model.name_at(up), up.weight, price_key_of(model, up))
                for up in model.deployments
            ],
            max_attempts=model.attempts,
        )
        for model in settings.models
    }

    def deployment_name(model_id: str, index: int) -> str:
        deployments = upstreams[model_id].deployments if model_id in upstreams else []
        return deployments[index].model if 0 <= index < len(deployments) else ""

    batches = BatchStore(store.database)
    poller = BatchPoller(
        SettleWith(settings, batches, ledger, prices, still_mine=lambda: True),
        owner,
        float(settings.batch_poll_seconds),
    )
    records = (
        RecordWriter(store.database, deployment_name=deployment_name).start() if settings.request_record_days else None
    )
    account = StripeAccount(settings.payments, settings.credits_per_usd) if settings.payments is not None else None
    signer = billing.receipts
    every = float(settings.transparency.checkpoint_seconds) if settings.transparency is not None else 0.0
    return Runtime(
        checkpoints=CheckpointSigner(store.database, signer, every).start() if signer is not None else None,
        stripe=account,
        recharger=Recharger(store.database, ledger, account).start() if account is not None else None,
        records=records,
        settings=settings,
        store=store,
        writer=writer,
        ledger=ledger,
        keys=keys,
        admin_keys=admin_keys,
        key_guesses=KeyGuesses(limits, settings.max_key_failures_per_minute),
        projector=projector,
        sweeper=sweeper,
        billing=billing,
        health=health,
        leases=leases,
        limiter=limiter,
        streams=streams,
        instances=instances,
        in_flight=StreamsInFlight(),
        prices=prices,
        webhooks=WebhookDelivery(store.database, settings).start(),
        verify_runs=VerifyRuns(settings.database_url, base_dir),
        upstreams=upstreams,
        http=http,
        batches=batches,
        batch_poller=poller,
    )
