"""The configuration rules the schema cannot say: ranges, URLs, names, and how a model's deployments fit.

Kept apart from the schema (``domain/settings.py``) so each reads on its own: the schema says what a key
is, this module what values it may take. Every check reports through ``fail(key, problem)``, which raises
the caller's error (``ConfigError``), so the first broken rule in the file's order is what the user reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from domain.bounds import (
    CONNECTIONS,
    CREDITS_PER_USD,
    IMAGE_PRICE,
    KEY_FAILURES,
    PRICE_RATE,
    SECONDS,
    STREAMS,
    TOKENS,
    TOOL_FEE,
    Bound,
)
from domain.endpoint_prices import check_endpoint_kinds, check_endpoint_prices
from domain.pricing import BASE_TIERS
from domain.settings_log import check_transparency
from domain.settings_payments import check_payments

if TYPE_CHECKING:  # the schema imports this module to check what it parsed
    from domain.settings import Model, Pricing, RateTable, Settings, Upstream

#: Reports a broken rule: the key (``models[0].pricing.input``) and what is wrong; it raises.
Fail = Callable[[str, str], None]

#: The wires a `vertex` deployment may speak, by `api`: Anthropic's models or Gemini.
VERTEX_APIS = ("messages", "gemini")
#: The wires a `bedrock` deployment may speak, by `api`: Anthropic's models (InvokeModel) or Converse.
BEDROCK_APIS = ("messages", "converse")
UPSTREAM_KINDS = ("openai", "openai-responses", "anthropic", "azure-openai", "bedrock", "gemini", "vertex", "demo")
#: The settings only an `azure-openai` deployment takes, with the values each may have (None: any text).
_AZURE_ONLY: dict[str, tuple[str, ...] | None] = {
    "api_version": None,
    "api": ("chat", "responses"),
    "auth": ("api-key", "entra"),
    "tenant_id": None,
    "client_id": None,
    "client_secret_env": None,
    "authority_host": None,
}
#: What happens to a built-in tool (a provider-run tool such as web search) in a request: `pass` it
#: to the upstream, `drop` it (the request is served without it) or `refuse` the request.
BUILTIN_TOOL_POLICIES = ("pass", "drop", "refuse")
TOKENIZERS = ("o200k", "anthropic", "bytes")
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")


def deployment_keys(model: Model, index: int) -> list[tuple[str, Upstream]]:
    """Each deployment of ``models[index]`` with the key that names it in the file, for error messages."""
    if model.upstreams is not None:
        return [(f"models[{index}].upstreams[{j}]", up) for j, up in enumerate(model.upstreams)]
    return [(f"models[{index}].upstream", model.upstream)] if model.upstream is not None else []


def check_semantics(settings: Settings, fail: Fail) -> None:
    """Every rule the schema cannot say, in the file's order: the first broken one is reported
    (``fail`` raises the caller's error, naming the key)."""
    _check_ledger_and_stores(settings, fail)
    _check_limits_and_logging(settings, fail)
    if not settings.models:
        fail("models", "at least one [[models]] entry is required")
    seen: set[str] = set()
    for i, model in enumerate(settings.models):
        _check_model(model, i, seen, fail)
        _check_deployments(model, i, fail)
    for i, hook in enumerate(settings.webhooks):
        if not hook.url.startswith(("http://", "https://")):
            fail(f"webhooks[{i}].url", f"must be an http:// or https:// URL, got {hook.url!r}")
        if not hook.secret_env.strip():
            fail(
                f"webhooks[{i}].secret_env",
                "must name the environment variable holding the secret alerts are "
                "signed with (a receiver cannot tell an unsigned alert from a forged one)",
            )
    if settings.webhook_retry_max_seconds < 1:
        fail("webhook_retry_max_seconds", "must be at least 1 second")
    if settings.payments is not None:
        check_payments(settings.payments, fail)
    if settings.transparency is not None:
        check_transparency(settings.transparency, fail)


def _check_ledger_and_stores(settings: Settings, fail: Fail) -> None:
    """The credit rate, the database and Redis, and the ledger's timings."""
    _check_bound(CREDITS_PER_USD, settings.credits_per_usd, "credits_per_usd", fail)
    url = settings.database_url
    if not (
        (url.startswith("sqlite:///") and len(url) > len("sqlite:///"))
        or re.match(r"^postgres(ql)?://[^/]*/[^/?#]+", url)
    ):
        fail(
            "database_url",
            f"unsupported URL {url!r}: use sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DBNAME",
        )
    if settings.redis_url is not None and not re.match(r"^rediss?://[^/\s]+(/\d+)?$", settings.redis_url):
        fail("redis_url", f"unsupported URL {settings.redis_url!r}: use redis://HOST:PORT/DB (or rediss:// for TLS)")
    _check_bound(CONNECTIONS, settings.database_pool_size, "database_pool_size", fail)
    if settings.batch_poll_seconds <= 0:
        fail("batch_poll_seconds", "must be greater than 0 (seconds)")
    if settings.hold_timeout <= 0:
        fail("hold_timeout", "must be greater than 0 (seconds)")
    if settings.instance_dead_after < 6:
        fail(
            "instance_dead_after", "must be at least 6 (seconds: two heartbeats), or live processes are taken for dead"
        )
    if settings.idempotency_ttl <= 0:
        fail("idempotency_ttl", "must be greater than 0 (seconds)")
    if settings.request_record_days < 0:
        fail("request_record_days", "must not be negative (days; 0 keeps no request records)")
    if settings.lease_idle_seconds <= 0:
        fail("lease_idle_seconds", "must be greater than 0 (seconds)")
    if not 10 <= settings.snapshot_every <= 1_000_000:
        fail("snapshot_every", "must be between 10 and 1000000 (events)")
    if settings.shutdown_timeout < 0:
        fail("shutdown_timeout", "must not be negative (seconds)")
    for name in _DURATIONS:
        _check_bound(SECONDS, getattr(settings, name), name, fail)


#: Every top-level setting in seconds: each has its own least value (above), and all the same most.
_DURATIONS = (
    "hold_timeout",
    "batch_poll_seconds",
    "instance_dead_after",
    "idempotency_ttl",
    "lease_idle_seconds",
    "shutdown_timeout",
    "header_timeout",
    "body_timeout",
    "write_timeout",
    "webhook_retry_max_seconds",
)


def _check_bound(bound: Bound, value: object, key: str, fail: Fail) -> None:
    """Refuse a number out of its range (``domain/bounds.py``), naming the key."""
    wrong = bound.violation(value)
    if wrong is not None:
        fail(key, wrong)


def _check_limits_and_logging(settings: Settings, fail: Fail) -> None:
    """The limits against abuse, the metrics port and the log settings."""
    if not 8 <= settings.max_json_depth <= 256:
        fail("max_json_depth", "must be between 8 and 256")
    for name in (
        "max_request_bytes",
        "max_form_parts",
        "max_form_field_bytes",
        "max_upload_bytes",
        "max_messages",
        "max_tools",
        "max_content_parts",
        "max_header_bytes",
        "max_headers",
    ):
        if getattr(settings, name) < 1:
            fail(name, "must be at least 1")
    for name in ("max_streams_per_key", "max_streams"):
        _check_bound(STREAMS, getattr(settings, name), name, fail)
    _check_bound(KEY_FAILURES, settings.max_key_failures_per_minute, "max_key_failures_per_minute", fail)
    for name in ("header_timeout", "body_timeout", "write_timeout"):
        if getattr(settings, name) <= 0:
            fail(name, "must be greater than 0 (seconds)")
    if settings.metrics_port is not None and not 1 <= settings.metrics_port <= 65535:
        fail("metrics_port", "must be a TCP port, 1 to 65535")
    if settings.log_format not in LOG_FORMATS:
        fail("log_format", f"unknown format {settings.log_format!r}; expected one of {', '.join(LOG_FORMATS)}")
    if settings.log_level not in LOG_LEVELS:
        fail("log_level", f"unknown level {settings.log_level!r}; expected one of {', '.join(LOG_LEVELS)}")


def _check_model(model: Model, index: int, seen: set[str], fail: Fail) -> None:
    """One [[models]] entry but its deployments; ``seen``: the ids of the entries before it."""
    key = f"models[{index}]"
    if not model.id:
        fail(f"{key}.id", "must not be empty")
    if model.id in seen:
        fail(f"{key}.id", f"duplicate model id {model.id!r}")
    seen.add(model.id)
    for name in ("context_window", "max_output_tokens", "audio_tokens_per_second"):
        _check_bound(TOKENS, getattr(model, name), f"{key}.{name}", fail)
    check_pricing(model.pricing, f"{key}.pricing", fail)
    _check_image_defaults(model, key, fail)
    check_endpoint_prices(model.endpoints, model.pricing, key, fail)
    if model.tokenizer is not None and model.tokenizer not in TOKENIZERS:
        fail(f"{key}.tokenizer", f"unknown tokenizer {model.tokenizer!r}; expected one of {', '.join(TOKENIZERS)}")
    if model.builtin_tools is not None and model.builtin_tools not in BUILTIN_TOOL_POLICIES:
        fail(
            f"{key}.builtin_tools",
            f"unknown policy {model.builtin_tools!r}; expected one of {', '.join(BUILTIN_TOOL_POLICIES)}",
        )
    values = [level.value for level in model.effort_levels]
    if model.default_effort_level not in values:
        fail(f"{key}.default_effort_level", f"{model.default_effort_level!r} is not one of effort_levels {values}")


def check_pricing(pricing: Pricing, key: str, fail: Fail) -> None:
    """Prices are never negative; a long-context threshold is a positive number of tokens; a tier is
    named as upstreams report it, and the base price is never a tier of its own."""
    tables: list[tuple[str, Pricing | RateTable]] = [(key, pricing)]
    thresholds: list[tuple[str, int]] = []
    if pricing.long_context is not None:
        tables.append((f"{key}.long_context", pricing.long_context))
        thresholds.append((f"{key}.long_context.threshold", pricing.long_context.threshold))
    for name, tier in pricing.service_tiers.items():
        if name in BASE_TIERS or not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name):
            fail(
                f"{key}.service_tiers.{name}",
                "a tier is named as upstreams report it (e.g. flex, priority); the base price is not a tier of its own",
            )
        tables.append((f"{key}.service_tiers.{name}", tier))
        if tier.long_context is not None:
            tables.append((f"{key}.service_tiers.{name}.long_context", tier.long_context))
            thresholds.append((f"{key}.service_tiers.{name}.long_context.threshold", tier.long_context.threshold))
    if pricing.batch is not None:
        tables.append((f"{key}.batch", pricing.batch))
    _check_batch_price(pricing, key, fail)
    for where, table in tables:
        for field_name in table.__struct_fields__:
            value = getattr(table, field_name)
            if isinstance(value, Decimal):  # a price left unset is the endpoint check's (endpoint_prices.py)
                _check_bound(PRICE_RATE, value, f"{where}.{field_name}", fail)
    for where, threshold in thresholds:
        _check_bound(TOKENS, threshold, where, fail)
    for tool, fee in pricing.tool_fees.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", tool):
            fail(f"{key}.tool_fees.{tool}", "a tool is named in lower case, e.g. web_search")
        _check_bound(TOOL_FEE, fee, f"{key}.tool_fees.{tool}", fail)
    _check_image_prices(pricing, key, fail)


def _check_image_prices(pricing: Pricing, key: str, fail: Fail) -> None:
    """Images are priced by ``SIZE/QUALITY``; a model billed by image tokens has the per-image table
    its requests are held at."""
    for kind, each in pricing.images.items():
        if not _IMAGE_KIND.fullmatch(kind):
            fail(f"{key}.images.{kind}", 'an image is priced by "SIZE/QUALITY", e.g. "1024x1024/standard"')
        _check_bound(IMAGE_PRICE, each, f"{key}.images.{kind}", fail)
    if pricing.image_tokens is not None:
        if not pricing.images:
            fail(f"{key}.images", "a model with image_tokens needs its images table too: requests are held at it")
        for name in ("input", "output"):
            if getattr(pricing, name) is None:
                fail(f"{key}.{name}", "required with image_tokens: the answers' text tokens are billed at it")
        for name in ("input", "output"):
            _check_bound(PRICE_RATE, getattr(pricing.image_tokens, name), f"{key}.image_tokens.{name}", fail)


#: ``SIZE/QUALITY``: a size as OpenAI writes it (``1024x1536``) and a quality (``hd``, ``high``).
_IMAGE_KIND = re.compile(r"[1-9][0-9]{0,4}x[1-9][0-9]{0,4}/[a-z][a-z0-9_-]{0,31}")


def _check_image_defaults(model: Model, key: str, fail: Fail) -> None:
    """An image model's defaults are among the sizes and qualities its table prices."""
    if model.image_defaults is None:
        return
    kinds = [kind.partition("/") for kind in model.pricing.images]
    for axis, offered in (("size", {k[0] for k in kinds}), ("quality", {k[2] for k in kinds})):
        value = getattr(model.image_defaults, axis)
        if value is not None and value not in offered:
            fail(
                f"{key}.image_defaults.{axis}",
                f"{value!r} is not priced in pricing.images (offered: {', '.join(sorted(offered)) or 'none'})",
            )


def _check_batch_price(pricing: Pricing, key: str, fail: Fail) -> None:
    """A batch price is a discount (a fraction below 1) or rates of its own, not both."""
    if pricing.batch is not None and pricing.batch_discount is not None:
        fail(f"{key}.batch", "give either `batch` (a batch line's own rates) or `batch_discount`, not both")
    if pricing.batch_discount is not None and not Decimal(0) <= pricing.batch_discount < 1:
        fail(f"{key}.batch_discount", "a fraction off every token rate, from 0 up to (not including) 1, e.g. 0.5")


def _check_deployments(model: Model, index: int, fail: Fail) -> None:
    key = f"models[{index}]"
    if model.upstream is None and model.upstreams is None:
        fail(f"{key}.upstream", "required key is missing (or list several deployments as `upstreams = [...]`)")
    if model.upstream is not None and model.upstreams is not None:
        fail(f"{key}.upstreams", "give either `upstream` or `upstreams`, not both")
    if model.upstreams is not None and not model.upstreams:
        fail(f"{key}.upstreams", "must list at least one deployment")
    for where, upstream in deployment_keys(model, index):
        _check_deployment(where, upstream, fail)
    check_endpoint_kinds(model.endpoints, [(where, up.kind) for where, up in deployment_keys(model, index)], key, fail)
    _check_deployment_prices(model, index, fail)
    count = len(model.deployments)
    if model.max_attempts is not None and not 1 <= model.max_attempts <= count:
        fail(f"{key}.max_attempts", f"must be between 1 and the number of deployments ({count})")


def _check_deployment(where: str, upstream: Upstream, fail: Fail) -> None:
    """One deployment on its own (``where``: its key in the file)."""
    if upstream.kind not in UPSTREAM_KINDS:
        fail(f"{where}.kind", f"unknown kind {upstream.kind!r}; expected one of {', '.join(UPSTREAM_KINDS)}")
    if upstream.kind != "demo":
        if not upstream.base_url and upstream.kind not in ("bedrock", "gemini", "vertex"):
            fail(f"{where}.base_url", f"required for kind {upstream.kind!r}")
        elif upstream.base_url and not re.match(r"^https?://[^/\s]+", upstream.base_url):
            fail(f"{where}.base_url", f"not an http(s) URL: {upstream.base_url!r}")
    _check_azure(where, upstream, fail)
    _check_bedrock(where, upstream, fail)
    _check_vertex(where, upstream, fail)
    for name in ("timeout", "connect_timeout"):
        if getattr(upstream, name) <= 0:
            fail(f"{where}.{name}", "must be greater than 0")
    if upstream.weight < 1:
        fail(f"{where}.weight", "must be at least 1")


def _check_service_principal(where: str, upstream: Upstream, fail: Fail) -> None:
    """An Azure deployment whose Entra token Tollgate gets for its service principal."""
    if upstream.auth != "entra":
        fail(f"{where}.auth", 'must be "entra" for a service principal (tenant_id)')
    for name in ("tenant_id", "client_id", "client_secret_env"):
        if not getattr(upstream, name):
            fail(f"{where}.{name}", "required for a service principal (tenant_id, client_id, client_secret_env)")
    host = upstream.authority_host
    if host is not None and not host.startswith(("https://", "http://")):
        fail(f"{where}.authority_host", f"must be a URL (https://login.microsoftonline.com), got {host!r}")


def _check_azure(where: str, upstream: Upstream, fail: Fail) -> None:
    """The Azure-only settings: given exactly where they mean something, with a value they may have."""
    azure = upstream.kind == "azure-openai"
    for name, allowed in _AZURE_ONLY.items():
        value = getattr(upstream, name)
        if name == "api" and upstream.kind in ("vertex", "bedrock"):
            continue  # a vertex or bedrock deployment's api is checked with its other settings
        if value is not None and not azure:
            fail(f"{where}.{name}", f"only an azure-openai deployment takes {name}, not kind {upstream.kind!r}")
        if value is not None and allowed is not None and value not in allowed:
            fail(f"{where}.{name}", f"{value!r} is not one of {', '.join(allowed)}")
    if azure and not upstream.api_version:
        fail(f"{where}.api_version", "required for kind 'azure-openai' (the api-version query, e.g. \"2024-10-21\")")
    if azure and upstream.tenant_id is not None:
        _check_service_principal(where, upstream, fail)
    elif azure and not upstream.api_key_env:
        fail(f"{where}.api_key_env", "required for kind 'azure-openai' (Azure refuses a request without a credential)")
    elif (
        upstream.client_id is not None or upstream.client_secret_env is not None or upstream.authority_host is not None
    ):
        fail(f"{where}.tenant_id", "required with client_id, client_secret_env or authority_host (a service principal)")
    if azure and upstream.base_url and upstream.base_url.rstrip("/").endswith("/openai"):
        fail(f"{where}.base_url", "the resource's endpoint without /openai (https://NAME.openai.azure.com)")


def _check_bedrock(where: str, upstream: Upstream, fail: Fail) -> None:
    """A `bedrock` deployment names its region (SigV4 signs for it) and takes no key: AWS's own chain
    provides the credentials; no other kind takes a region."""
    if upstream.kind != "bedrock":
        if upstream.region is not None and upstream.kind != "vertex":
            fail(f"{where}.region", f"only bedrock and vertex deployments take region, not kind {upstream.kind!r}")
        return
    if not upstream.region or not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", upstream.region):
        fail(
            f"{where}.region", f"required for kind 'bedrock': an AWS region such as us-east-1, not {upstream.region!r}"
        )
    if upstream.api is not None and upstream.api not in BEDROCK_APIS:
        fail(f"{where}.api", f"for kind 'bedrock': one of {', '.join(BEDROCK_APIS)}, not {upstream.api!r}")
    if upstream.api_key_env is not None:
        fail(
            f"{where}.api_key_env",
            "a bedrock deployment signs with AWS credentials from the environment, a profile or a role; "
            "it takes no key",
        )


def _check_vertex(where: str, upstream: Upstream, fail: Fail) -> None:
    """A `vertex` deployment names its project, its location and its publisher's wire, and takes no
    key (a service account's tokens authenticate it); no other kind takes a project or a credentials file."""
    if upstream.kind != "vertex":
        for name in ("project", "credentials_file"):
            if getattr(upstream, name) is not None:
                fail(f"{where}.{name}", f"only a vertex deployment takes {name}, not kind {upstream.kind!r}")
        return
    if not upstream.project:
        fail(f"{where}.project", "required for kind 'vertex': the Google Cloud project")
    if not upstream.region or not re.fullmatch(r"[a-z]+(-[a-z]+\d*)*", upstream.region):
        fail(
            f"{where}.region",
            f"required for kind 'vertex': a location such as us-east5 or global, not {upstream.region!r}",
        )
    if upstream.api not in VERTEX_APIS:
        fail(f"{where}.api", f"required for kind 'vertex': one of {', '.join(VERTEX_APIS)}, not {upstream.api!r}")
    if upstream.api_key_env is not None:
        fail(
            f"{where}.api_key_env", "a vertex deployment authenticates with a service account's tokens; it takes no key"
        )


def _check_deployment_prices(model: Model, index: int, fail: Fail) -> None:
    """A deployment with a price of its own has a name, unique in the model, and prices everything
    the model's endpoints bill."""
    seen: set[str] = set()
    for where, upstream in deployment_keys(model, index):
        if upstream.name is not None:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", upstream.name):
                fail(f"{where}.name", f"letters, digits, '.', '_' and '-' (at most 64), not {upstream.name!r}")
            if upstream.name in seen:
                fail(f"{where}.name", f"{upstream.name!r} names another deployment of this model")
            seen.add(upstream.name)
        if upstream.pricing is not None:
            if upstream.name is None:
                fail(f"{where}.name", "required with pricing: the price list keeps the price as MODEL/NAME")
            check_pricing(upstream.pricing, f"{where}.pricing", fail)
            check_endpoint_prices(model.endpoints, upstream.pricing, where, fail)
