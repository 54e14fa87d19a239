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
from typing import Literal

import msgspec

from domain.pricing import Price

UPSTREAM_KINDS = ("openai", "anthropic", "demo")
DATABASE_URL_ENV = "TOLLGATE_DATABASE_URL"
TOKENIZERS = ("o200k", "anthropic", "bytes")
REDIS_URL_ENV = "TOLLGATE_REDIS_URL"


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the key."""

    def __init__(self, origin: str, key: str, problem: str) -> None:
        super().__init__(f"{origin}: {key}: {problem}" if key else f"{origin}: {problem}")
        self.origin = origin
        self.key = key
        self.problem = problem


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class EffortLevel(_Strict):
    value: str
    display: str


class Pricing(_Strict):
    input: Decimal
    output: Decimal
    cache_create: Decimal
    cache_hit: Decimal


class Upstream(_Strict):
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    timeout: Decimal = Decimal(600)  # seconds to wait for each read (a stream may run longer in all)
    connect_timeout: Decimal = Decimal(10)


class Model(_Strict):
    id: str
    display_name: str
    owned_by: str
    context_window: int
    max_output_tokens: int
    pricing: Pricing
    upstream: Upstream
    vision: bool = False
    default_effort_level: str = "medium"
    effort_levels: list[EffortLevel] = msgspec.field(
        default_factory=lambda: [EffortLevel("low", "Low"), EffortLevel("medium", "Medium"), EffortLevel("high", "High")]
    )
    created: int = 0
    #: How the gateway counts this model's tokens: "o200k", "anthropic" or "bytes" (default: by the
    #: upstream's wire, o200k for OpenAI-compatible and demo upstreams, anthropic for Anthropic's).
    tokenizer: str | None = None

    @property
    def price(self) -> Price:
        p = self.pricing
        return Price(input=p.input, output=p.output, cache_create=p.cache_create, cache_hit=p.cache_hit)

    @property
    def upstream_model(self) -> str:
        """The model name sent upstream (defaults to the id clients use)."""
        return self.upstream.model or self.id


class Settings(_Strict):
    models: list[Model]
    database_url: str = "sqlite:///tollgate.db"
    database_pool_size: int = 10
    #: The environment variable holding the admin API key (the admin API is off while it is unset).
    admin_key_env: str = "TOLLGATE_ADMIN_KEY"
    #: Seconds after which an unsettled hold counts as abandoned (its process died) and is released.
    hold_timeout: Decimal = Decimal(900)
    credits_per_usd: Decimal = Decimal(100)
    #: Where rate limits live when several gateway processes share the database (unset: in memory,
    #: and the gateway refuses to start beside another one).
    redis_url: str | None = None

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
        raise _config_error_from(origin, str(exc)) from None
    _check_semantics(settings, origin)
    return settings


_AT_PATH = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def _config_error_from(origin: str, message: str) -> ConfigError:
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


def _check_semantics(settings: Settings, origin: str) -> None:
    def fail(key: str, problem: str) -> None:
        raise ConfigError(origin, key, problem)

    if settings.credits_per_usd <= 0:
        fail("credits_per_usd", "must be greater than 0")
    url = settings.database_url
    if not (
        (url.startswith("sqlite:///") and len(url) > len("sqlite:///"))
        or re.match(r"^postgres(ql)?://[^/]*/[^/?#]+", url)
    ):
        fail("database_url", f"unsupported URL {url!r}: use sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DBNAME")
    if settings.redis_url is not None and not re.match(r"^rediss?://[^/\s]+(/\d+)?$", settings.redis_url):
        fail("redis_url", f"unsupported URL {settings.redis_url!r}: use redis://HOST:PORT/DB (or rediss:// for TLS)")
    if settings.database_pool_size < 1:
        fail("database_pool_size", "must be at least 1")
    if settings.hold_timeout <= 0:
        fail("hold_timeout", "must be greater than 0 (seconds)")
    if not settings.models:
        fail("models", "at least one [[models]] entry is required")
    seen: set[str] = set()
    for i, model in enumerate(settings.models):
        key = f"models[{i}]"
        if not model.id:
            fail(f"{key}.id", "must not be empty")
        if model.id in seen:
            fail(f"{key}.id", f"duplicate model id {model.id!r}")
        seen.add(model.id)
        for name in ("context_window", "max_output_tokens"):
            if getattr(model, name) <= 0:
                fail(f"{key}.{name}", "must be greater than 0")
        for name in ("input", "output", "cache_create", "cache_hit"):
            if getattr(model.pricing, name) < 0:
                fail(f"{key}.pricing.{name}", "must not be negative")
        if model.tokenizer is not None and model.tokenizer not in TOKENIZERS:
            fail(f"{key}.tokenizer", f"unknown tokenizer {model.tokenizer!r}; expected one of {', '.join(TOKENIZERS)}")
        values = [level.value for level in model.effort_levels]
        if model.default_effort_level not in values:
            fail(f"{key}.default_effort_level", f"{model.default_effort_level!r} is not one of effort_levels {values}")
        upstream = model.upstream
        if upstream.kind not in UPSTREAM_KINDS:
            fail(f"{key}.upstream.kind", f"unknown kind {upstream.kind!r}; expected one of {', '.join(UPSTREAM_KINDS)}")
        if upstream.kind != "demo":
            if not upstream.base_url:
                fail(f"{key}.upstream.base_url", f"required for kind {upstream.kind!r}")
            elif not re.match(r"^https?://[^/\s]+", upstream.base_url):
                fail(f"{key}.upstream.base_url", f"not an http(s) URL: {upstream.base_url!r}")
        for name in ("timeout", "connect_timeout"):
            if getattr(upstream, name) <= 0:
                fail(f"{key}.upstream.{name}", "must be greater than 0")


def require_upstream_secrets(settings: Settings, origin: str, environ: Mapping[str, str]) -> None:
    """Check, before serving, that every upstream key named in the file is set in the environment."""
    for i, model in enumerate(settings.models):
        env_name = model.upstream.api_key_env
        if env_name and not environ.get(env_name):
            raise ConfigError(
                origin, f"models[{i}].upstream.api_key_env", f"environment variable {env_name} is not set"
            )
