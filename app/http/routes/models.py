"""GET /v1/models and GET /v1/models/{id}: the models this gateway offers, with their limits and
prices (no auth).

The prices are those the ledger's price list has in force now (``app/ledger/prices.py``): the
``pricing`` fields the specification names, and the rest of the price (1-hour cache writes,
long-context rates, service tiers, tool fees, the prices of other endpoints) beside them when the
model has it; a rate the model has no price for (an embeddings model's output) is left out, never
shown as 0. ``endpoints`` names the endpoints the model serves (``Model.endpoints``). The list is
encoded once and again only when the price list changes (or a scheduled price takes effect).

A request that carries ``anthropic-version`` (Anthropic's SDK always sends it) is answered in
Anthropic's shapes instead (``app/http/routes/anthropic_models.py``), its errors too; one that carries
Google's headers, in Google's (``app/http/routes/gemini_models.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath, FromQuery

from app.errors import ModelNotFound
from app.http.routes.answers import ModelAnswer, ModelPage, answers
from app.http.routes.anthropic_models import anthropic_card, anthropic_page
from app.http.routes.gemini_models import gemini_model, gemini_page, speaks_google
from app.json import encode
from app.ledger.prices import PriceBook
from domain.pricing import Price
from domain.settings import Model, Settings


def model_card(model: Model, default_created: int, price: Price) -> dict[str, Any]:
    return {
        "id": model.id,
        "object": "model",
        "created": model.created or default_created,
        "owned_by": model.owned_by,
        "display_name": model.display_name,
        "context_window": model.context_window,
        "max_output_tokens": model.max_output_tokens,
        "capabilities": {"vision": model.vision},
        "endpoints": list(model.endpoints),
        "reasoning": {
            "effort_levels": [{"value": e.value, "display": e.display} for e in model.effort_levels],
            "default_effort_level": model.default_effort_level,
        },
        "pricing": _pricing(price),
    }


def _pricing(price: Price) -> dict[str, Any]:
    """The price as the model list shows it: every number (not the strings a ledger event keeps)."""

    def numbers(record: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: numbers(v) if isinstance(v, dict) else v if isinstance(v, int) else Decimal(v) for k, v in record.items()
        }

    return numbers(price.as_record())


class ModelListCache:
    """The encoded model list, made again when the prices in force change."""

    def __init__(self, settings: Settings, prices: PriceBook, default_created: int) -> None:
        self._settings = settings
        self._prices = prices
        self._created = default_created
        self._body = b""
        self._priced: list[Price] = []

    def body(self) -> bytes:
        priced = [self._prices.current(m.id) for m in self._settings.models]
        if priced != self._priced:
            cards = [model_card(m, self._created, p) for m, p in zip(self._settings.models, priced, strict=True)]
            self._body = encode({"object": "list", "data": cards})
            self._priced = priced
        return self._body

    def card(self, model_id: str, anthropic: bool) -> bytes:
        """One model, as the list has it, or in Anthropic's shape; 404 for a model not configured."""
        model = self._settings.model(model_id)
        if model is None:
            raise ModelNotFound(model_id)
        if anthropic:
            return encode(anthropic_card(model, self._created))
        return encode(model_card(model, self._created, self._prices.current(model.id)))

    def anthropic_page(self, limit: int | None, after_id: str | None, before_id: str | None) -> bytes:
        return encode(
            anthropic_page(self._settings.models, self._created, limit=limit, after_id=after_id, before_id=before_id)
        )


def speaks_anthropic(request: Request[Any, Any, Any]) -> bool:
    """Whether the client is one of Anthropic's API, answered in its shapes."""
    return "anthropic-version" in request.headers


@get(
    "/v1/models",
    sync_to_thread=False,
    responses=answers(
        ModelPage,
        "every model, with its limits, effort levels and prices (with anthropic-version: "
        "a page of them in Anthropic's shape)",
    ),
)
def list_models(
    request: Request[Any, Any, Any],
    limit: FromQuery[int | None] = None,
    after_id: FromQuery[str | None] = None,
    before_id: FromQuery[str | None] = None,
) -> Response[bytes]:
    """``limit``, ``after_id`` and ``before_id`` page the list in Anthropic's shape (OpenAI's has no pages)."""
    if speaks_google(request):
        return gemini_page(request)
    models: ModelListCache = request.app.state.model_list
    body = models.anthropic_page(limit, after_id, before_id) if speaks_anthropic(request) else models.body()
    return Response(body, media_type="application/json")


@get(
    "/v1/models/{model_id:path}",
    sync_to_thread=False,
    responses=answers(ModelAnswer, "the model, as the list has it (with anthropic-version: in Anthropic's shape)"),
)
def read_model(request: Request[Any, Any, Any], model_id: FromPath[str]) -> Response[bytes]:
    """A model by its id (which may hold slashes: ``org/model``)."""
    if speaks_google(request):
        return gemini_model(request, model_id)
    models: ModelListCache = request.app.state.model_list
    return Response(models.card(model_id.removeprefix("/"), speaks_anthropic(request)), media_type="application/json")
