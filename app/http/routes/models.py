"""GET /v1/models: the models this gateway offers, with their limits and prices (no auth).

The prices are those the ledger's price list has in force now (``app/ledger/prices.py``): the
``pricing`` fields the specification names, and the rest of the price (1-hour cache writes,
long-context rates, service tiers, tool fees) beside them when the model has it. The list is
encoded once and again only when the price list changes (or a scheduled price takes effect)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from litestar import Request, Response, get

from app.http.routes.answers import ModelList, answers
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
        "reasoning": {
            "effort_levels": [{"value": e.value, "display": e.display} for e in model.effort_levels],
            "default_effort_level": model.default_effort_level,
        },
        "pricing": _pricing(price),
    }


def _pricing(price: Price) -> dict[str, Any]:
    """The price as the model list shows it: every number (not the strings a ledger event keeps)."""
    def numbers(record: dict[str, Any]) -> dict[str, Any]:
        return {k: numbers(v) if isinstance(v, dict) else v if isinstance(v, int) else Decimal(v)
                for k, v in record.items()}

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


@get("/v1/models", sync_to_thread=False,
     responses=answers(ModelList, "every model, with its limits, effort levels and prices"))
def list_models(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(request.app.state.model_list.body(), media_type="application/json")
