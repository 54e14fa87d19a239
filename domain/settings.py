"""The configuration file's schema and its validation.

One TOML file names the database, the credit rate and the models with their prices and upstreams.
Validation is pure (it takes the file's text), so every command reports a bad file the same way:
the file, the key and what is wrong. Numbers are parsed as ``Decimal`` so prices stay exact.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal

import msgspec

from domain.endpoints import GENERATION
from domain.pricing import CHAT_RATES, LongContext, Price
from domain.settings_checks import check_semantics, deployment_keys

#: The wire protocol each kind speaks. Routes choose pass-through or translation by it, so the
#: deployments of one model must all speak the same one.
UPSTREAM_WIRES = {
    "openai": "chat",
    "demo": "chat",
    "openai-responses": "responses",
    "anthropic": "messages",
    "bedrock": "messages",
}
DATABASE_URL_ENV = "TOLLGATE_DATABASE_URL"
REDIS_URL_ENV = "TOLLGATE_REDIS_URL"


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the key."""

    def __init__(self, origin: str, key: str, problem: str) -> None:
        super().__init__(f"{origin}: {key}: {problem}" if key else f"{origin}: {problem}")
        self.origin = origin
        self.key = key
        self.problem = problem


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Every field carries a ``#:`` comment: ``scripts/config_reference.py`` builds the
    configuration reference (docs/configuration-reference.md) from them, and its test fails for a field without one."""


class EffortLevel(_Strict, frozen=True):  # msgspec inherits frozen; type checkers need it said again
    #: The level's name as requests send it (`reasoning_effort`, `reasoning.effort`), e.g. `low`.
    value: str
    #: Its label for people, listed by `GET /v1/models`.
    display: str


class RateTable(_Strict, frozen=True):
    """A whole table of token rates (long-context and service-tier prices), USD per million tokens."""

    #: USD per million prompt tokens that are neither written to nor read from a prompt cache.
    input: Decimal
    #: USD per million output tokens (reasoning included).
    output: Decimal
    #: USD per million prompt tokens written to the prompt cache with the default (5-minute) lifetime.
    cache_write: Decimal
    #: USD per million prompt tokens read from the prompt cache.
    cache_hit: Decimal
    #: USD per million prompt tokens written to the prompt cache for an hour (unset: as `cache_write`).
    cache_write_1h: Decimal | None = None


class LongContextPricing(RateTable, frozen=True, kw_only=True):
    #: Prompt tokens (as the upstream counts them) above which the whole request, output and cache
    #: tokens included, is priced at this table's rates instead of the base ones.
    threshold: int


class TierPricing(RateTable, frozen=True, kw_only=True):
    #: The tier's own long-context rates (unset: requests served at this tier have none).
    long_context: LongContextPricing | None = None


class ImageTokenPricing(_Strict, frozen=True):
    """An image model's image-token rates, USD per million tokens (its text tokens are `input` and `output`)."""

    #: USD per million image tokens read: the input images of an edit (`input_tokens_details.image_tokens`).
    input: Decimal
    #: USD per million image tokens generated (`output_tokens_details.image_tokens`, or every output
    #: token when the answer does not detail them).
    output: Decimal


class Pricing(_Strict, frozen=True):
    """A model's prices. Which of them a model must give depends on the endpoints it serves
    (``domain/endpoint_prices.py``): the four token rates for the generation endpoints, `input` alone
    for embeddings; a price an endpoint bills that is missing refuses the file."""

    #: USD per million prompt tokens that are neither written to nor read from a prompt cache
    #: (required for every generation endpoint and `embeddings`).
    input: Decimal | None = None
    #: USD per million output tokens (reasoning included); required for the generation endpoints.
    output: Decimal | None = None
    #: USD per million prompt tokens written to the provider's prompt cache (the default, 5-minute
    #: lifetime); required for the generation endpoints.
    cache_create: Decimal | None = None
    #: USD per million prompt tokens read from the provider's prompt cache; required for the generation endpoints.
    cache_hit: Decimal | None = None
    #: USD per million prompt tokens written to the prompt cache for an hour (Anthropic bills them at
    #: 2 × input, against 1.25 × for 5 minutes); unset: billed as `cache_create`.
    cache_write_1h: Decimal | None = None
    #: `{threshold, input, output, cache_write, cache_hit, cache_write_1h}`: above `threshold` prompt
    #: tokens the whole request is priced at these rates (unset: no long-context price).
    long_context: LongContextPricing | None = None
    #: Prices by the service tier the upstream reports serving a request at, e.g. `{flex = {input,
    #: output, cache_write, cache_hit}, priority = {...}}`; a tier not listed is billed at the base price.
    service_tiers: dict[str, TierPricing] = msgspec.field(default_factory=dict)
    #: USD per call of a provider-run tool, by tool (`web_search`, `web_fetch`, `file_search`,
    #: `code_interpreter`), charged per call the upstream reports making, never for declaring the tool.
    tool_fees: dict[str, Decimal] = msgspec.field(default_factory=dict)
    #: A line of a batch (`/v1/batches`, Anthropic's message batches) is billed at every token rate less
    #: this fraction (`0.5`: half price, as OpenAI and Anthropic bill batches). Unset, and no `batch`
    #: rates: a batch line costs what the same request costs.
    batch_discount: Decimal | None = None
    #: `{input, output, cache_write, cache_hit}`: the rates a batch line is billed at, instead of a discount.
    batch: RateTable | None = None
    #: USD per generated image by `"SIZE/QUALITY"`, e.g. `{"1024x1024/standard" = 0.04,
    #: "1024x1792/hd" = 0.12}`: the sizes and qualities the model offers (others: 400). A model billed
    #: per image is charged from this table; one with `image_tokens` is charged by its tokens and
    #: held at this table (see Prices: images).
    images: dict[str, Decimal] = msgspec.field(default_factory=dict)
    #: `{input, output}`: USD per million image tokens, for image models whose answers report
    #: token usage (gpt-image); unset: images are charged per image from `images`.
    image_tokens: ImageTokenPricing | None = None
    #: USD per second of audio transcribed or translated, the seconds read from the uploaded file
    #: (whole, rounded up) or as the upstream reports them; required for `audio.transcriptions` and
    #: `audio.translations`. OpenAI publishes it per minute: whisper-1's $0.006 is `0.0001`.
    audio_second: Decimal | None = None
    #: USD per million characters of `input` turned into speech; required for `audio.speech`
    #: (OpenAI's tts-1: `15`, tts-1-hd: `30`).
    input_characters: Decimal | None = None

    def to_price(self) -> Price:
        """The price charges use: a token rate the model has no price for is held as 0 and named in
        ``unpriced`` (the endpoint check guarantees no endpoint the model serves bills it)."""
        rates: list[Decimal | None] = [self.input, self.output, self.cache_create, self.cache_hit]
        zero = Decimal(0)
        return Price(
            self.input or zero,
            self.output or zero,
            self.cache_create or zero,
            self.cache_hit or zero,
            self.cache_write_1h,
            _long_context(self.long_context),
            {
                name: Price(
                    t.input, t.output, t.cache_write, t.cache_hit, t.cache_write_1h, _long_context(t.long_context)
                )
                for name, t in self.service_tiers.items()
            },
            dict(self.tool_fees),
            self.batch_discount,
            None
            if self.batch is None
            else Price(
                self.batch.input,
                self.batch.output,
                self.batch.cache_write,
                self.batch.cache_hit,
                self.batch.cache_write_1h,
            ),
            frozenset(name for name, rate in zip(CHAT_RATES, rates, strict=True) if rate is None),
            image_input=self.image_tokens.input if self.image_tokens is not None else None,
            image_output=self.image_tokens.output if self.image_tokens is not None else None,
            images=dict(self.images),
            audio_second=self.audio_second,
            input_characters=self.input_characters,
        )


def _long_context(table: LongContextPricing | None) -> LongContext | None:
    if table is None:
        return None
    return LongContext(
        table.threshold, Price(table.input, table.output, table.cache_write, table.cache_hit, table.cache_write_1h)
    )


class Upstream(_Strict, frozen=True):
    """One deployment of a model: a provider endpoint, its key and the name it knows the model by."""

    #: `openai` (any OpenAI-compatible chat-completions server), `openai-responses` (a server of the
    #: OpenAI Responses API, such as OpenAI's own: its Codex models are served only there),
    #: `anthropic` (the Anthropic Messages API), `bedrock` (Anthropic models on AWS Bedrock, signed
    #: with SigV4) or `demo` (built in: answers locally, no network, no key).
    kind: str
    #: The provider's URL, required unless `kind` is `demo` or `bedrock`: ending in `/v1` for `openai` and
    #: `openai-responses`, without `/v1` for `anthropic` (e.g. `https://api.anthropic.com`); for
    #: `bedrock` the runtime endpoint (unset: `https://bedrock-runtime.{region}.amazonaws.com`).
    base_url: str | None = None
    #: For `bedrock` (required there, refused elsewhere): the AWS region requests are signed for and,
    #: unless `base_url` is set, sent to (e.g. `us-east-1`). The credentials come from the usual AWS
    #: chain (environment, `AWS_PROFILE` and the shared files, or a role), not from `api_key_env`.
    region: str | None = None
    #: The environment variable holding the provider key (sent as `Authorization: Bearer` to
    #: OpenAI upstreams, `x-api-key` to Anthropic); `tollgate serve` refuses to start while it is unset.
    api_key_env: str | None = None
    #: The name this deployment knows the model by (unset: the model's `id`); for `bedrock` the model
    #: id or cross-region inference profile in the URL (e.g. `us.anthropic.claude-sonnet-4-20250514-v1:0`).
    model: str | None = None
    #: The longest wait for each read from the upstream, in seconds (a stream may run longer in all); exceeded: 504.
    timeout: Decimal = Decimal(600)
    #: The longest wait to connect to the upstream, in seconds; exceeded: 504.
    connect_timeout: Decimal = Decimal(10)
    #: This deployment's share of first attempts among a model's `upstreams`.
    weight: int = 1

    @property
    def wire(self) -> str:
        return UPSTREAM_WIRES.get(self.kind, "chat")


class ImageDefaults(_Strict, frozen=True):
    """What the provider makes of an image request that leaves `size` or `quality` out, or says `auto`."""

    #: The size it then makes (unset: it chooses among the table's sizes, so the hold is the dearest).
    size: str | None = None
    #: The quality it then makes (unset: it chooses, held and — unless its answer says which —
    #: charged at the dearest of the table's qualities).
    quality: str | None = None


class Model(_Strict, frozen=True):
    #: The name clients send as `model`; unique in the file.
    id: str
    #: Its name for people, listed by `GET /v1/models`.
    display_name: str
    #: Its owner, listed by `GET /v1/models`.
    owned_by: str
    #: The longest prompt in tokens, by the gateway's count: a longer one gets 400 before the upstream is called.
    context_window: int
    #: The most output tokens a request may ask for (more: 400, or this many with `clamp_output_to_model`),
    #: and what a hold reserves when it asks none.
    max_output_tokens: int
    #: Prices in USD per million tokens, by kind, as exact decimals.
    pricing: Pricing
    #: The model's one deployment (`upstream = {...}`); a model gives exactly one of this and `upstreams`.
    upstream: Upstream | None = None
    #: Several deployments of the model (`upstreams = [{...}, ...]`), tried in a weighted random order.
    upstreams: list[Upstream] | None = None
    #: Deployments tried per request before giving up, 1 to their number (unset: every deployment once).
    max_attempts: int | None = None
    #: Whether the model takes images; images for a model without vision get 400.
    vision: bool = False
    #: Built-in tools in requests for this model (provider-run tools such as `web_search`, Anthropic's
    #: `web_search_…` or `code_execution_…`): `pass` them to the upstream, `drop` them (served without
    #: them, each named in `x-tollgate-dropped-tools`) or `refuse` the request (400). Unset: passed
    #: when the request goes to an upstream of its own protocol, dropped when it is translated.
    builtin_tools: str | None = None
    #: The effort level `GET /v1/models` lists as the default; one of `effort_levels`' values.
    default_effort_level: str = "medium"
    #: The reasoning effort levels offered; a request's effort is mapped to the nearest of them.
    effort_levels: list[EffortLevel] = msgspec.field(
        default_factory=lambda: [
            EffortLevel("low", "Low"),
            EffortLevel("medium", "Medium"),
            EffortLevel("high", "High"),
        ]
    )
    #: The Unix time `GET /v1/models` lists as `created` (0: when the gateway started).
    created: int = 0
    #: How the gateway counts this model's tokens: `o200k`, `anthropic` or `bytes` (unset: by the
    #: upstream's wire, `o200k` for OpenAI-compatible and demo upstreams, `anthropic` for Anthropic's).
    tokenizer: str | None = None
    #: Serve a request that asks more output (`max_tokens`, `max_completion_tokens`, `max_output_tokens`)
    #: than `max_output_tokens` with `max_output_tokens`, saying so in `x-tollgate-output-clamped`, instead
    #: of refusing it (400): for clients that ask a fixed large limit of a model they do not know
    #: (LiteLLM asks 128,000).
    clamp_output_to_model: bool = False
    #: For an image model: `{size, quality}`, what the provider makes when a request leaves them out
    #: or says `auto` (dall-e-3: `{size = "1024x1024", quality = "standard"}`); each unset one is
    #: the provider's choice, held at the dearest (see Prices: images).
    image_defaults: ImageDefaults | None = None
    #: The endpoints the model serves, by name (`chat.completions`, `responses`, `messages`,
    #: `embeddings`, ...; see the API reference): a request to another is 404. Its `pricing` must price
    #: every quantity these endpoints bill, or the file is refused. Unset: the three generation
    #: endpoints (`chat.completions`, `responses`, `messages`).
    endpoints: list[str] = msgspec.field(default_factory=lambda: list(GENERATION))

    def serves(self, endpoint: str) -> bool:
        """Whether a request to ``endpoint`` (its name, ``domain/endpoints.py``) may ask for this model."""
        return endpoint in self.endpoints

    @property
    def price(self) -> Price:
        """The price this file gives the model (the ledger's, once applied, is what charges use)."""
        return self.pricing.to_price()

    @property
    def deployments(self) -> list[Upstream]:
        """Every deployment that may answer for this model, in the file's order."""
        if self.upstreams:
            return list(self.upstreams)
        return [self.upstream] if self.upstream is not None else []

    @property
    def attempts(self) -> int:
        """How many deployments one request may try (each at most once)."""
        return self.max_attempts or len(self.deployments)

    def name_at(self, deployment: Upstream) -> str:
        """The model name sent to ``deployment`` (each may know the model by its own name; defaults to the id
        clients use)."""
        return deployment.model or self.id


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
            env_name = upstream.api_key_env
            if env_name and not environ.get(env_name):
                raise ConfigError(origin, f"{where}.api_key_env", f"environment variable {env_name} is not set")


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
