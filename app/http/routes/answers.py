"""What the admin API, the health checks and the model list answer, for the OpenAPI document.

Their handlers build their JSON themselves (``json_response``, encoded once), so Litestar sees a
``Response[bytes]`` and documented each answer as a string. These structs describe the bodies as
they are sent (the schemathesis fuzzer checks every answer against them); handlers name them in
``responses=``. Fields are required where every answer has them; credits are JSON numbers.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar.openapi import ResponseSpec


class TeamAnswer(msgspec.Struct):
    name: str
    balance: float
    held: float
    available: float
    suspended: bool
    rpm: int | None
    tpm: int | None
    #: Whether a request the balance cannot cover is served with what it covers (not in lists).
    clamp_output_to_balance: bool | None = None
    #: The team's markups or discounts in percent, by model (``model`` null: every model; not in lists).
    price_adjustments: list[dict[str, Any]] | None = None
    #: The team's own budget (limit, period, spent, held, remaining, resets_at), if any (not in lists).
    budget: dict[str, Any] | None = None


class KeyAnswer(msgspec.Struct):
    id: str
    name: str
    revoked: bool
    models: list[str]
    endpoints: list[str]
    rpm: int | None
    tpm: int | None
    clamp_output_to_balance: bool


class TeamWithKeys(TeamAnswer, kw_only=True):
    keys: list[KeyAnswer]


class TeamList(msgspec.Struct):
    object: str
    data: list[TeamAnswer]


class KeyList(msgspec.Struct):
    object: str
    data: list[KeyAnswer]


class IssuedKey(msgspec.Struct):
    id: str
    key: str
    name: str
    models: list[str]
    endpoints: list[str]
    rpm: int | None
    tpm: int | None


class RevokedKey(msgspec.Struct):
    id: str
    revoked: bool


class KeyModelsAnswer(msgspec.Struct):
    id: str
    models: list[str]


class KeyEndpointsAnswer(msgspec.Struct):
    id: str
    endpoints: list[str]


class BudgetAnswer(msgspec.Struct):
    """A key's (``id``) or its team's budget, where it stands now (``budget`` null: none)."""

    team: str
    id: str | None
    budget: dict[str, Any] | None


class AlertsAnswer(msgspec.Struct):
    """A team's alert thresholds, and (when listed) its latest alerts with their deliveries."""

    team: str
    thresholds: list[dict[str, Any]]
    alerts: list[dict[str, Any]] | None = None


class KeyClampAnswer(msgspec.Struct):
    id: str
    clamp_output_to_balance: bool


class PriceListAnswer(msgspec.Struct):
    """Every model's prices in the ledger's price list: which is in force, and every entry."""

    object: str
    data: list[dict[str, Any]]


class KeyLimitsAnswer(msgspec.Struct):
    id: str
    rpm: int | None
    tpm: int | None


class LastEvent(msgspec.Struct):
    version: int
    type: str
    occurred_at: str
    request_id: str


class BalanceAtAnswer(msgspec.Struct):
    team: str
    at: str | None
    balance: float
    held: float
    available: float
    balance_micros: int
    held_micros: int
    version: int
    last_event: LastEvent


class HistoryPage(msgspec.Struct):
    object: str
    data: list[dict[str, Any]]
    page: int
    per_page: int
    total: int
    has_more: bool


class UsageAnswer(msgspec.Struct):
    """Without ``by``: ``by_model`` and ``daily``; with it: ``by``, ``since``, ``dimensions``, a page of
    ``data`` (``page``, ``per_page``, ``values`` in all, ``has_more``) and the team's ``total``."""

    team: str
    by_model: list[dict[str, Any]] | None = None
    daily: list[dict[str, Any]] | None = None
    by: str | None = None
    since: str | None = None
    dimensions: list[str] | None = None
    data: list[dict[str, Any]] | None = None
    total: dict[str, Any] | None = None
    page: int | None = None
    per_page: int | None = None
    values: int | None = None
    has_more: bool | None = None


class Liveness(msgspec.Struct):
    status: str


class Readiness(msgspec.Struct):
    status: str
    checks: dict[str, str]


class DataAnswer(msgspec.Struct):
    """OpenRouter's envelope (``GET /v1/credits``, ``GET /v1/key``): the answer under ``data``."""

    data: dict[str, Any]


class ModelList(msgspec.Struct):
    object: str
    data: list[dict[str, Any]]


class AnthropicModelList(msgspec.Struct):
    """The model list for a request that carries ``anthropic-version``: a page of Anthropic's shape."""

    data: list[dict[str, Any]]
    has_more: bool
    first_id: str | None
    last_id: str | None


class OpenAIModel(msgspec.Struct):
    """A model in OpenAI's shape, with the gateway's fields (as in the list)."""

    id: str
    object: str
    created: int
    owned_by: str
    display_name: str
    context_window: int
    max_output_tokens: int
    capabilities: dict[str, Any]
    #: The endpoints the model serves, by name (``chat.completions``, ``embeddings``, ...).
    endpoints: list[str]
    reasoning: dict[str, Any]
    pricing: dict[str, Any]


class AnthropicModel(msgspec.Struct):
    """A model in Anthropic's shape, for a request that carries ``anthropic-version``."""

    type: str
    id: str
    display_name: str
    created_at: str
    lifecycle: str
    max_input_tokens: int
    max_tokens: int


#: What the model routes answer: OpenAI's shapes, or Anthropic's (``anthropic-version``).
ModelPage = ModelList | AnthropicModelList
ModelAnswer = OpenAIModel | AnthropicModel


def answers(view: Any, description: str, status: int = 200) -> dict[int, ResponseSpec]:
    return {status: ResponseSpec(data_container=view, description=description, generate_examples=False)}
