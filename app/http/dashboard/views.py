"""The dashboard API's answers, as typed structs built from the ledger's read models.

The handlers encode these with ``app.json.encode`` (money as exact JSON numbers, every digit kept;
Litestar's own encoder would write decimals as strings), and the same structs document the answers
in the OpenAPI document, so the schema at /schema cannot drift from what is sent.

Amounts here are credits (``Decimal``, from ``credits_from_micros``): the page shows them to people.
The export keeps the ledger's own rows (micro-credits), the same as ``tollgate ledger export``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

import msgspec
from litestar.openapi.spec import OpenAPIType
from litestar.params import KwargDefinition

from app.ledger.results import Funds, KeySummary, TeamSummary
from domain.money import credits_from_micros

#: Decimals go out as JSON numbers (``app.json.encode``); Litestar would document them as strings.
Credits = Annotated[
    Decimal,
    KwargDefinition(
        schema_extra={"type": OpenAPIType.NUMBER, "description": "credits, exact: every digit, never a rounded float"}
    ),
]
Usd = Annotated[
    Decimal,
    KwargDefinition(
        schema_extra={
            "type": OpenAPIType.NUMBER,
            "description": "US dollars, exact: every digit, never a rounded float",
        }
    ),
]


class SessionView(msgspec.Struct):
    """Who signed in: a team key's team, or the admin with every team to pick from."""

    role: Literal["team", "admin"]
    team: str | None
    key_id: str | None
    teams: list[str]


class KeyView(msgspec.Struct):
    id: str
    name: str
    revoked: bool
    models: list[str]
    endpoints: list[str]


class LotView(msgspec.Struct):
    """A lot of the team's credit with something left, in the order charges use them."""

    id: str
    kind: str
    remaining: Credits
    expires_at: str | None
    priority: int


class CheckoutView(msgspec.Struct):
    """A Checkout Session made for a top-up: the page goes to ``url`` to pay."""

    id: str
    url: str


class BuyView(msgspec.Struct):
    """What a top-up may be, when the gateway takes payments: its currency and bounds."""

    currency: str
    min_amount: str
    max_amount: str


class TeamView(msgspec.Struct):
    name: str
    balance: Credits
    held: Credits
    available: Credits
    suspended: bool
    rpm: int | None
    tpm: int | None
    keys: list[KeyView]
    lots: list[LotView] = msgspec.field(default_factory=list)
    owed: Credits = Decimal(0)
    buy: BuyView | None = None


class EntryView(msgspec.Struct):
    """One ledger entry: a top-up (``amount`` > 0), a charge (``amount`` < 0), an adjustment, or an
    operator's action that moves no money (``key_issued``, ``suspended``…: ``amount`` 0), in credits;
    an operator's entry says who (``actor``) and why (``reason``)."""

    occurred_at: str
    kind: str
    key_id: str
    request_id: str
    endpoint: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    amount: Credits
    cost_usd: Usd
    balance_after: Credits
    reference: str
    tags: str = ""  # the charge's attribution tags, ``name=value,...``
    end_user: str = ""
    actor: str = ""
    reason: str = ""


class HistoryView(msgspec.Struct):
    team: str
    data: list[EntryView]
    page: int
    per_page: int
    total: int
    has_more: bool


class RequestsView(msgspec.Struct):
    """The team's latest charges, newest first."""

    team: str
    data: list[EntryView]


class AlertView(msgspec.Struct):
    """An alert the ledger raised: a budget's share reached, or the balance under a line (credits),
    and whether every webhook has it yet."""

    occurred_at: str
    id: str
    kind: str
    key_id: str
    threshold: str
    value: Decimal
    budget_limit: Decimal | None
    period: str
    delivered: bool
    deliveries: int


class AlertsView(msgspec.Struct):
    team: str
    data: list[AlertView]


def alert_view(row: dict[str, Any]) -> AlertView:
    balance = row["kind"] == "balance_below"
    threshold = f"{credits_from_micros(int(row['threshold']))} credits" if balance else f"{row['threshold']} %"
    return AlertView(
        row["occurred_at"],
        row["alert_id"],
        row["kind"],
        row["key_id"],
        threshold,
        credits_from_micros(int(row["value"])),
        None if balance else credits_from_micros(int(row["budget_limit"])),
        row["period"],
        bool(row["deliveries"]) and all(d["delivered_at"] for d in row["deliveries"]),
        len(row["deliveries"]),
    )


class ModelUsage(msgspec.Struct):
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    cost: Credits


class DailyUsage(ModelUsage):
    """Usage of one key on one model on one day (UTC)."""

    day: str
    key_id: str


class EndpointUsage(msgspec.Struct):
    """Usage of one endpoint (``endpoint``: its name, as key restrictions and the ledger name it;
    ``label``: for people; ``path``: what a client calls), every charge of the team under one."""

    endpoint: str
    label: str
    path: str
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    cost: Credits


class UsageView(msgspec.Struct):
    team: str
    by_model: list[ModelUsage]
    daily: list[DailyUsage]
    by_endpoint: list[EndpointUsage] = msgspec.field(default_factory=list)


class ValueUsage(msgspec.Struct):
    """Usage under one value of a tag, or of one end user (``""``: charges without it; ``None``: the
    values beyond a day's bounds, ``domain/attribution_bounds.py``)."""

    value: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    cost: Credits


class AttributionView(msgspec.Struct):
    """Usage by the values of one dimension (``user`` or ``tag:<name>``), adding up to ``total_cost``."""

    team: str
    by: str
    dimensions: list[str]
    data: list[ValueUsage]
    total_cost: Credits
    total_requests: int = 0
    values: int = 0  # how many values there are in all; ``data`` is the largest ``per_page`` of them
    has_more: bool = False


def attribution_view(answer: dict[str, Any]) -> AttributionView:
    """``app.ledger.queries.usage_by``'s answer (costs already in credits) as typed rows."""
    return AttributionView(
        answer["team"],
        answer["by"],
        answer["dimensions"],
        [msgspec.convert(r, ValueUsage, strict=False) for r in answer["data"]],
        answer["total"]["cost"],
        answer["total"]["requests"],
        answer["values"],
        answer["has_more"],
    )


def team_view(summary: TeamSummary, keys: list[KeySummary], funds: Funds, buy: BuyView | None) -> TeamView:
    lots = [
        LotView(
            lot.lot_id,
            lot.kind,
            credits_from_micros(lot.remaining),
            datetime.fromtimestamp(lot.expires, UTC).isoformat() if lot.expires is not None else None,
            lot.priority,
        )
        for lot in funds.lots
    ]
    return TeamView(
        summary.name,
        credits_from_micros(summary.balance),
        credits_from_micros(summary.held),
        credits_from_micros(summary.balance - summary.held),
        summary.suspended,
        summary.rpm,
        summary.tpm,
        [KeyView(k.key_id, k.label, k.revoked, list(k.models), list(k.endpoints)) for k in keys],
        lots,
        credits_from_micros(funds.owed),
        buy,
    )


def entry_view(row: dict[str, Any]) -> EntryView:
    """A ``ledger_entries`` row (micro-credits, as stored) in credits."""
    return EntryView(
        row["occurred_at"],
        row["kind"],
        row["key_id"],
        row["request_id"],
        row["endpoint"],
        row["model"],
        int(row["input_tokens"]),
        int(row["output_tokens"]),
        int(row["cache_write_tokens"]),
        int(row["cache_hit_tokens"]),
        credits_from_micros(int(row["amount"])),
        Decimal(row["cost_usd"]),
        credits_from_micros(int(row["balance_after"])),
        row["reference"],
        row.get("tags") or "",
        row.get("end_user") or "",
        row.get("actor") or "",
        row.get("reason") or "",
    )


def usage_view(usage: dict[str, Any]) -> UsageView:
    """``app.ledger.queries.usage``'s answer (costs already in credits) as typed rows."""
    return UsageView(
        usage["team"],
        [msgspec.convert(m, ModelUsage) for m in usage["by_model"]],
        [msgspec.convert(d, DailyUsage) for d in usage["daily"]],
        [msgspec.convert(e, EndpointUsage) for e in usage["by_endpoint"]],
    )
