"""The configuration file's schema and its validation.

One TOML file names the database, the credit rate and the models with their prices and upstreams.
Validation is pure (it takes the file's text), so every command reports a bad file the same way:
the file, the key and what is wrong. Numbers are parsed as ``Decimal`` so prices stay exact.

This module holds the file's top level (:class:`Settings`: the ledger, the server's limits and
timeouts, the webhooks) and the parsing; the models' tables, their deployments and prices are in
``domain/settings_models.py``, re-exported here, so ``from domain.settings import Model`` still reads.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal

import msgspec

from domain.settings_checks import check_semantics, deployment_keys
from domain.settings_log import Transparency
from domain.settings_models import (
    UPSTREAM_WIRES,
    EffortLevel,
    ImageDefaults,
    ImageTokenPricing,
    LongContextPricing,
    Model,
    Pricing,
    RateTable,
    TierPricing,
    Upstream,
    _Strict,
)
from domain.settings_payments import Payments

__all__ = [
    "DATABASE_URL_ENV",
    "MIN_ADMIN_KEY",
    "REDIS_URL_ENV",
    "UPSTREAM_WIRES",
    "ConfigError",
    "EffortLevel",
    "ImageDefaults",
    "ImageTokenPricing",
    "LongContextPricing",
    "Model",
    "Pricing",
    "RateTable",
    "Settings",
    "TierPricing",
    "Upstream",
    "Webhook",
    "config_error_from",
    "parse_settings",
    "require_strong_admin_key",
    "require_upstream_secrets",
    "require_webhook_secrets",
]

DATABASE_URL_ENV = "TOLLGATE_DATABASE_URL"
REDIS_URL_ENV = "TOLLGATE_REDIS_URL"


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the key."""

    def __init__(self, origin: str, key: str, problem: str) -> None:
        super().__init__(f"{origin}: {key}: {problem}" if key else f"{origin}: {problem}")
        self.origin = origin
        self.key = key
        self.problem = problem


class Webhook(_Strict, frozen=True):
    #: Where alerts are POSTed (JSON), each under its `x-tollgate-alert-id` (the receiver's
    #: idempotency key: an alert may arrive more than once, never not at all).
    url: str
    #: The environment variable holding the secret every alert is signed with: `x-tollgate-signature:
    #: t=UNIX_SECONDS,v1=HEX`, the HMAC-SHA256 of `<t>.<alert id>.<body>` (see Alerts: how a receiver
    #: checks it). `tollgate serve` refuses to start while the variable is unset or empty.
    secret_env: str


class Settings(_Strict, frozen=True):
    #: The models clients may ask for, one `[[models]]` table each (at least one).
    models: list[Model]
    #: The ledger: `sqlite:///PATH` (relative to the configuration file's folder; `sqlite:////abs/path`)
    #: or `postgresql://USER:PASSWORD@HOST:PORT/DBNAME` (for production and several processes).
    database_url: str = "sqlite:///tollgate.db"
    #: PostgreSQL connections each gateway process keeps open for the event store (up to twice as many
    #: under load, plus one each for its projector and its process registration).
    database_pool_size: int = 10
    #: The environment variable holding the configured admin API key, an operator's: at least 32
    #: characters, or the gateway refuses to start (while it is unset, only named admin keys open the
    #: admin API: `tollgate admin-key issue`).
    admin_key_env: str = "TOLLGATE_ADMIN_KEY"
    #: Seconds after which an unsettled hold counts as abandoned and is released, whatever its
    #: process: the backstop for a process that is alive but stuck (a dead one's holds go sooner,
    #: see `instance_dead_after`).
    hold_timeout: Decimal = Decimal(900)
    #: Seconds between two polls of a batch upstream (`/v1/batches`, `/v1/messages/batches`): when the
    #: upstream says it ended, its lines are charged and the rest of its hold released. One gateway
    #: process polls a batch at a time; another takes over `3 × batch_poll_seconds + 2` seconds after
    #: that process stops (it died, or was restarted).
    batch_poll_seconds: Decimal = Decimal(30)
    #: Seconds of silence (no heartbeat; processes beat every 3 seconds) after which a gateway
    #: process counts as dead: any other process, or the next to start, charges its streams for what
    #: they had delivered at its last heartbeat and releases its holds and credit leases. A process
    #: on the same host whose pid is gone counts as dead at once.
    instance_dead_after: Decimal = Decimal(15)
    #: Seconds an answer stored under an `Idempotency-Key` is replayed to retries; after that a
    #: retry with the key is a new request (served and charged again), and the stored answer is purged.
    idempotency_ttl: Decimal = Decimal(86400)
    #: Days each answered request's record (status, timings, the deployment that answered, attempts)
    #: is kept for `GET /v1/requests/{id}`; older records are purged (their charges stay in the
    #: ledger, and the lookup still answers from it). 0 keeps none.
    request_record_days: int = 30
    #: Seconds a credit lease nothing is held against stays with its gateway process before it goes
    #: back to the team (shorter: other processes find the credit sooner; longer: fewer writes).
    lease_idle_seconds: Decimal = Decimal(2)
    #: A snapshot of a team's ledger every this many of its events, taken beside the request path:
    #: a team loads from its latest snapshot plus at most this many events, however long its history
    #: (smaller: quicker loads, more rows; snapshots are a cache, `tollgate ledger verify` checks them).
    snapshot_every: int = 250
    #: Credits one US dollar buys: the rate at which USD prices become charges.
    credits_per_usd: Decimal = Decimal(100)
    #: Where rate limits live when several gateway processes share the database (unset: in memory,
    #: and the gateway refuses to start beside another one).
    redis_url: str | None = None
    #: Where Prometheus scrapes `/metrics`: unset, on the gateway's own port behind the admin key
    #: (`Authorization: Bearer ADMIN_KEY`); a port number, on a listener of its own at `metrics_host`
    #: with no key (bind it where only Prometheus reaches it).
    metrics_port: int | None = None
    #: The address the separate metrics listener binds to (only with `metrics_port`).
    metrics_host: str = "127.0.0.1"
    #: `json` (one JSON object per line on standard error: one per request, and every warning) or
    #: `text` (the same lines for people).
    log_format: str = "json"
    #: The least severe log level written: `debug`, `info` (one line per request), `warning` or `error`.
    log_level: str = "info"
    #: Seconds that requests and streams still running when the gateway is told to stop (SIGTERM)
    #: get to finish; what is still running then is cut off and billed for what it delivered.
    shutdown_timeout: Decimal = Decimal(30)
    #: How deeply a request's JSON body may nest arrays and objects (deeper: 400). Coding agents'
    #: bodies, tool schemas included, nest about 12 levels; at most 256.
    max_json_depth: int = 128
    #: The largest request body in bytes (more: 413, read no further): 64 MiB holds the 50 MB of
    #: images OpenAI takes in one request once base64-encoded; Anthropic takes 32 MB.
    max_request_bytes: int = 64 * 1024 * 1024
    #: The most parts one multipart/form-data request (an audio or image upload) may carry, its
    #: text fields and files together (more: 400, read no further). OpenAI's image edits take 16
    #: images and a dozen fields.
    max_form_parts: int = 64
    #: The largest text field of a multipart/form-data request, in bytes (more: 413, read no further);
    #: the longest OpenAI takes is an image prompt of 32,000 characters.
    max_form_field_bytes: int = 256 * 1024
    #: The largest file one multipart/form-data request may upload, in bytes (more: 413, read no
    #: further). An endpoint may take less: audio at most 25 MiB, as OpenAI does. Files are spooled to
    #: a temporary file as they arrive (beyond 1 MiB each), never held whole in memory.
    max_upload_bytes: int = 50 * 1024 * 1024
    #: The most messages (`messages`) or input items (`input`) one request may carry (more: 400);
    #: Anthropic's own limit.
    max_messages: int = 100_000
    #: The most tools one request may declare (more: 400); OpenAI takes 128 functions.
    max_tools: int = 1_000
    #: The most content parts (blocks) one request may carry in all its messages and `system` (more: 400).
    max_content_parts: int = 200_000
    #: The largest request head in bytes: the request line and every header's name and value (more:
    #: 431 and the connection is closed).
    max_header_bytes: int = 64 * 1024
    #: The most headers one request may send (more: 431 and the connection is closed).
    max_headers: int = 100
    #: Seconds a client has to send a request's line and headers, from the moment it connects (or
    #: starts its next request on the same connection); late: 408 and the connection is closed.
    header_timeout: Decimal = Decimal(20)
    #: Seconds a client has to send a request's whole body once its headers are in; late: 408 in the
    #: endpoint's shape and the connection is closed.
    body_timeout: Decimal = Decimal(60)
    #: Seconds the gateway waits for a client to take more of an answer it sends (the connection's
    #: buffers full: the client stopped reading); then the connection is cut, and a stream is billed
    #: for what was sent until then.
    write_timeout: Decimal = Decimal(60)
    #: The most streams one API key may have open at once, across every gateway process sharing
    #: `redis_url` (more: 429 with `retry-after`).
    max_streams_per_key: int = 100
    #: The most streams one gateway process serves at once, whoever asks (more: 429 with `retry-after`).
    max_streams: int = 1_000
    #: Requests with a wrong API key or admin key one client address may make per minute (an IPv6
    #: address counts by its /64), across every process sharing `redis_url`; past it, 429 with
    #: `retry-after` for every key but a team key the process has already served, until the
    #: allowance refills (a token bucket, as rate limits are). 0: no limit.
    max_key_failures_per_minute: int = 30
    #: Receivers of alerts (budget thresholds, low balances), one `[[webhooks]]` table each; an
    #: alert is retried with backoff from a durable outbox until each receiver accepts it (2xx).
    webhooks: list[Webhook] = msgspec.field(default_factory=list)
    #: Credit teams buy themselves through Stripe Checkout (unset: none; see Payments).
    payments: Payments | None = None
    #: The transparency log's signed checkpoints and receipts (unset: the log is kept, nothing is signed).
    transparency: Transparency | None = None
    #: The longest wait, in seconds, between two deliveries of an alert a receiver refused or did
    #: not answer (the wait doubles from half a second up to this).
    webhook_retry_max_seconds: Decimal = Decimal(300)

    def model(self, model_id: str) -> Model | None:
        for model in self.models:
            if model.id == model_id:
                return model
        return None


def parse_settings(text: str, origin: str, environ: Mapping[str, str] | None = None) -> Settings:
    """Validate a configuration file's text; ``origin`` names it in error messages.

    ``environ`` may override the database URL (``TOLLGATE_DATABASE_URL``), so secrets and
    deployment-specific URLs can stay out of the file.
    """
    try:
        data = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(origin, "", f"not valid TOML: {exc}") from None
    if environ and environ.get(DATABASE_URL_ENV):
        data["database_url"] = environ[DATABASE_URL_ENV]
    if environ and environ.get(REDIS_URL_ENV):
        data["redis_url"] = environ[REDIS_URL_ENV]
    try:
        settings = msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise config_error_from(origin, str(exc)) from None

    def fail(key: str, problem: str) -> None:
        raise ConfigError(origin, key, problem)

    check_semantics(settings, fail)
    return settings


_AT_PATH = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def config_error_from(origin: str, message: str) -> ConfigError:
    match = _AT_PATH.match(message)
    assert match is not None
    path = (match.group("path") or "").lstrip(".")
    problem = match.group("problem")
    missing = re.match(r"Object missing required field `(\w+)`", problem)
    if missing:
        path = f"{path}.{missing.group(1)}" if path else missing.group(1)
        problem = "required key is missing"
    unknown = re.match(r"Object contains unknown field `(\w+)`", problem)
    if unknown:
        path = f"{path}.{unknown.group(1)}" if path else unknown.group(1)
        problem = "unknown key"
    return ConfigError(origin, path, problem[:1].lower() + problem[1:])


def require_webhook_secrets(settings: Settings, origin: str, environ: Mapping[str, str]) -> None:
    """Check, before serving, that the secret of every webhook is set: alerts are never sent unsigned."""
    for i, hook in enumerate(settings.webhooks):
        if not environ.get(hook.secret_env):
            state = "empty" if hook.secret_env in environ else "not set"
            raise ConfigError(
                origin,
                f"webhooks[{i}].secret_env",
                f"environment variable {hook.secret_env} is {state} "
                "(the secret alerts to this webhook are signed with)",
            )


def require_upstream_secrets(settings: Settings, origin: str, environ: Mapping[str, str]) -> None:
    """Check, before serving, that every upstream key named in the file is set in the environment."""
    for i, model in enumerate(settings.models):
        for where, upstream in deployment_keys(model, i):
            for name in ("api_key_env", "client_secret_env"):
                env_name = getattr(upstream, name)
                if env_name and not environ.get(env_name):
                    raise ConfigError(origin, f"{where}.{name}", f"environment variable {env_name} is not set")


#: The shortest configured admin key (``admin_key_env``) a gateway serves with. That key opens every
#: admin route as an operator, and unlike an issued key (256 random bits) it is whatever was typed:
#: 32 characters of a generated key are 128 bits or more.
MIN_ADMIN_KEY = 32


def require_strong_admin_key(settings: Settings, origin: str, environ: Mapping[str, str]) -> None:
    """Check, before serving, that the configured admin key, if set, is at least ``MIN_ADMIN_KEY`` long."""
    key = environ.get(settings.admin_key_env)
    if key and len(key) < MIN_ADMIN_KEY:
        raise ConfigError(
            origin,
            "admin_key_env",
            f"the admin key in {settings.admin_key_env} is {len(key)} characters long; it must be "
            f"at least {MIN_ADMIN_KEY} (make one with: openssl rand -hex 32)",
        )
