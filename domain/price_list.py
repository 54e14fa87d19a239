"""Price list files: the ``[[models]]`` entries of a configuration file, read for their prices alone.

``tollgate ledger rerate`` takes one to re-price a period; the configuration file itself is one (its
other keys are ignored), so a team can re-rate against the prices it serves with.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal

import msgspec

from domain.endpoint_prices import check_endpoint_prices
from domain.endpoints import GENERATION
from domain.pricing import Price
from domain.settings import ConfigError, Pricing, config_error_from
from domain.settings_checks import check_pricing


class PricedModel(msgspec.Struct, frozen=True):
    """A model's entry in a price list file: its id, its pricing and the endpoints it serves (whose
    quantities the pricing must price; anything else is ignored)."""

    id: str
    pricing: Pricing
    endpoints: list[str] = msgspec.field(default_factory=lambda: list(GENERATION))


class _PriceListFile(msgspec.Struct, frozen=True):
    models: list[PricedModel]


def parse_price_list(text: str, origin: str) -> dict[str, Price]:
    """The prices of a price list file: ``[[models]]`` entries with an ``id`` and a ``pricing``
    table, as in the configuration file (which is itself one; its other keys are ignored)."""
    try:
        data = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(origin, "", f"not valid TOML: {exc}") from None
    try:
        listed = msgspec.convert(data, _PriceListFile, strict=False)
    except msgspec.ValidationError as exc:
        raise config_error_from(origin, str(exc)) from None

    def fail(key: str, problem: str) -> None:
        raise ConfigError(origin, key, problem)

    prices: dict[str, Price] = {}
    for i, model in enumerate(listed.models):
        if model.id in prices:
            fail(f"models[{i}].id", f"duplicate model id {model.id!r}")
        check_pricing(model.pricing, f"models[{i}].pricing", fail)
        check_endpoint_prices(model.endpoints, model.pricing, f"models[{i}]", fail)
        prices[model.id] = model.pricing.to_price()
    return prices
