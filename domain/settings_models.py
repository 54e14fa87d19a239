"""The configuration file's models: what each model is, the deployments that serve it and its prices.

Part of the schema (``domain/settings.py`` holds the file's top level, the server's limits and the
parsing, and re-exports every table here): a ``[[models]]`` table is a :class:`Model`, its
``pricing`` a :class:`Pricing`, each deployment an :class:`Upstream`. Every table derives from
``_Strict``: an unknown key refuses the file, and each field's ``#:`` comment is its line in the
configuration reference (``scripts/config_reference.py`` reads this module's source too).
"""

from __future__ import annotations

from decimal import Decimal

import msgspec

from domain.endpoints import GENERATION
from domain.pricing import CHAT_RATES, LongContext, Price

#: The wire protocol each kind speaks. Routes choose pass-through or translation by it, so the
#: deployments of one model must all speak the same one.
UPSTREAM_WIRES = {
    "openai": "chat",
    "demo": "chat",
    "openai-responses": "responses",
    "anthropic": "messages",
    "bedrock": "messages",
    "gemini": "gemini",
}


def price_key(model_id: str, deployment: str | None) -> str:
    """A price's key in the price list: the model's id, or ``MODEL/NAME`` for a deployment's own."""
    return f"{model_id}/{deployment}" if deployment else model_id


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
    #: USD per million audio tokens a transcription model reads, for models whose answers report
    #: token usage (`usage: {"type": "tokens", ...}`: gpt-4o-transcribe's `6`, gpt-4o-mini-transcribe's
    #: `3`); with it, `input` (the prompt's text tokens) and `output` (the transcript's) are required.
    #: A transcription served by such a model is charged the tokens it reports (`audio_second`, if
    #: also set, prices an answer that reports none), and held for the file's seconds at the model's
    #: `audio_tokens_per_second` (see Prices: audio).
    audio_input: Decimal | None = None

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
            audio_input=self.audio_input,
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
    #: `anthropic` (the Anthropic Messages API), `azure-openai` (an Azure OpenAI resource: its
    #: deployments' chat completions or Responses API, and embeddings), `bedrock` (models on AWS
    #: Bedrock, signed with SigV4: Anthropic's through InvokeModel, others through Converse),
    #: `gemini` (Google's Gemini API, with an API key), `vertex`
    #: (Google Vertex AI: Anthropic or Gemini models, with a service account) or `demo` (built in:
    #: answers locally, no network, no key).
    kind: str
    #: The provider's URL, required unless `kind` is `demo`, `bedrock`, `gemini` or `vertex`: ending in `/v1` for
    #: `openai` and `openai-responses`, without `/v1` for `anthropic` (e.g. `https://api.anthropic.com`), the
    #: resource's endpoint for `azure-openai` (e.g. `https://NAME.openai.azure.com`, without `/openai`);
    #: for `bedrock` the runtime endpoint (unset: `https://bedrock-runtime.{region}.amazonaws.com`); for
    #: `gemini` the API's root, without `/v1beta` (unset: `https://generativelanguage.googleapis.com`);
    #: for `vertex` the endpoint, without `/v1` (unset: `https://{region}-aiplatform.googleapis.com`).
    base_url: str | None = None
    #: For `bedrock` (required there): the AWS region requests are signed for and, unless `base_url` is
    #: set, sent to (e.g. `us-east-1`); the credentials come from the usual AWS chain (environment,
    #: `AWS_PROFILE` and the shared files, or a role), not from `api_key_env`. For `vertex` (required
    #: there): the Vertex AI location (e.g. `us-east5`, `europe-west1`, `global`). Refused elsewhere.
    region: str | None = None
    #: For `vertex` (required there, refused elsewhere): the Google Cloud project the model is served in.
    project: str | None = None
    #: For `vertex`: a service account's JSON key file (its `token_uri` is where tokens are fetched);
    #: unset, Application Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's, or the
    #: metadata server's). `tollgate serve` refuses to start without usable credentials.
    credentials_file: str | None = None
    #: The environment variable holding the provider key (sent as `Authorization: Bearer` to
    #: OpenAI upstreams, `x-api-key` to Anthropic, `x-goog-api-key` to Gemini, `api-key` to Azure
    #: OpenAI, or for `azure-openai` with `auth = "entra"` a Microsoft Entra access token sent as
    #: `Authorization: Bearer`);
    #: `tollgate serve` refuses to start while it is unset.
    api_key_env: str | None = None
    #: For `azure-openai` (required there, refused elsewhere): the `api-version` query every request carries,
    #: e.g. `2024-10-21`.
    api_version: str | None = None
    #: For `azure-openai`: the generation API Tollgate calls, `chat` (Chat Completions at the
    #: deployment; the default) or `responses` (the Responses API). For `vertex` (required there):
    #: `messages` (an Anthropic model, through `rawPredict`) or `gemini` (a Gemini model, through
    #: `generateContent`). For `bedrock`: `messages` (an Anthropic model, through `InvokeModel`; the
    #: default) or `converse` (any other model Bedrock serves, Llama, Mistral or Amazon Nova, through
    #: `Converse`). It sets the wire the model speaks.
    api: str | None = None
    #: For `azure-openai`: how the credential in `api_key_env` is sent, `api-key` (the resource's key
    #: in the `api-key` header; the default) or `entra` (a Microsoft Entra access token, as a bearer:
    #: the service principal's below, or without `tenant_id` one read from `api_key_env`).
    auth: str | None = None
    #: For `azure-openai` with `auth = "entra"`: the service principal's tenant (directory) id. With
    #: it Tollgate gets the Microsoft Entra token itself and refreshes it before it expires (OAuth 2.0
    #: client credentials at `{authority_host}/{tenant_id}/oauth2/v2.0/token`, scope
    #: `https://cognitiveservices.azure.com/.default`); `client_id` and `client_secret_env` are then required.
    tenant_id: str | None = None
    #: For `azure-openai` with `tenant_id`: the service principal's application (client) id.
    client_id: str | None = None
    #: For `azure-openai` with `tenant_id`: the environment variable holding the service principal's
    #: client secret; `tollgate serve` refuses to start while it is unset.
    client_secret_env: str | None = None
    #: For `azure-openai` with `tenant_id`: the Microsoft identity platform's host (unset:
    #: `https://login.microsoftonline.com`; a sovereign cloud's own, e.g. `https://login.microsoftonline.us`).
    authority_host: str | None = None
    #: The name this deployment knows the model by (unset: the model's `id`); for `azure-openai`, the
    #: deployment's name; for `bedrock` the model id or cross-region inference profile in the URL (e.g.
    #: `us.anthropic.claude-sonnet-4-20250514-v1:0`).
    model: str | None = None
    #: The longest wait for each read from the upstream, in seconds (a stream may run longer in all); exceeded: 504.
    timeout: Decimal = Decimal(600)
    #: The longest wait to connect to the upstream, in seconds; exceeded: 504.
    connect_timeout: Decimal = Decimal(10)
    #: This deployment's share of first attempts among a model's `upstreams`.
    weight: int = 1
    #: A name for this deployment, unique within the model (e.g. `bedrock-eu`); required with `pricing`.
    name: str | None = None
    #: This deployment's own price, when it differs from the model's (a region, an inference profile,
    #: a data zone): a request it serves is charged at it, recorded in the price list as `MODEL/NAME`.
    #: Unset: the model's `pricing`. A hold reserves at the dearest price a request may be served at.
    pricing: Pricing | None = None

    @property
    def wire(self) -> str:
        if self.kind == "azure-openai":
            return self.api or "chat"
        if self.kind == "vertex":
            return self.api or "gemini"
        if self.kind == "bedrock":
            return self.api or "messages"
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
    #: every quantity these endpoints bill, or the file is refused. Unset: the four generation
    #: endpoints (`chat.completions`, `responses`, `messages`, `generate_content`).
    endpoints: list[str] = msgspec.field(default_factory=lambda: list(GENERATION))
    #: For a transcription model priced per token (`pricing.audio_input`): the most audio tokens it
    #: counts for a second of audio, what a transcription's hold reserves per second of the uploaded
    #: file. OpenAI does not publish the figure; its per-minute estimates for gpt-4o-transcribe come to
    #: about 17 a second, and the default leaves room threefold. A model counting more is still
    #: charged what it reports, beyond the hold as far as the team's available credits go.
    audio_tokens_per_second: int = 50

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

    def price_keys(self) -> list[str]:
        """The keys of every price this model is charged at, without building the prices (the hold
        reads them on every request)."""
        return [self.id, *(price_key(self.id, up.name) for up in self.deployments if up.pricing and up.name)]

    def priced_keys(self) -> list[tuple[str, Price]]:
        """Every price this model is charged at, by its key in the price list: the model's own (its
        id), then each deployment's that has one (``MODEL/NAME``)."""
        own = [
            (price_key(self.id, up.name), up.pricing.to_price()) for up in self.deployments if up.pricing and up.name
        ]
        return [(self.id, self.price), *own]

    def name_at(self, deployment: Upstream) -> str:
        """The model name sent to ``deployment`` (each may know the model by its own name; defaults to the id
        clients use)."""
        return deployment.model or self.id
