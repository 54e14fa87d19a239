"""Admin routes for what keys and teams may do: endpoints, rate limits, suspension, the clamp of
output to the balance, price adjustments; and the price list.

Each change is a ledger event, so it is audited like money, and every gateway process sees it
(its projector evicts the affected keys from its cache within a poll interval).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
from litestar import Request, Response, get, post, put
from litestar.params import FromPath

from app.errors import InvalidRequest
from app.http.routes.admin_common import (
    actor_of,
    endpoint_names,
    json_response,
    ledger_call,
    limits,
    reason_of,
    team_fields,
)
from app.http.routes.answers import (
    KeyClampAnswer,
    KeyEndpointsAnswer,
    KeyLimitsAnswer,
    PriceListAnswer,
    TeamAnswer,
    answers,
)
from app.http.routes.request_body import request_json, validate
from app.runtime import Runtime
from domain.ledger import team_id


class KeyEndpoints(msgspec.Struct):
    endpoints: list[str]
    reason: str = ""


class NewLimits(msgspec.Struct):
    """Per-minute limits; a field left out stays as it is, 0 removes that limit."""

    rpm: int | None = None
    tpm: int | None = None
    reason: str = ""


class Suspension(msgspec.Struct):
    """Why the team is suspended (or reinstated)."""

    reason: str = ""


class Clamp(msgspec.Struct):
    """Whether a request the available balance cannot cover is served with the output limit it
    covers (``x-tollgate-output-clamped``) instead of a 402."""

    clamp_output_to_balance: bool
    reason: str = ""


class PriceAdjustment(msgspec.Struct):
    """A markup (positive) or discount (negative) in percent on the price list, for ``model`` or
    (none) every model without its own; 0 ends it."""

    percent: Decimal
    model: str | None = None
    reason: str = ""


@put("/teams/{name:str}/keys/{key_id:str}/endpoints", responses=answers(KeyEndpointsAnswer, "the key's endpoints"))
async def restrict_key_endpoints(
    request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]
) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    body = validate(await request_json(request), KeyEndpoints)
    endpoints = endpoint_names(body.endpoints)
    await ledger_call(
        runtime.ledger.restrict_key_endpoints,
        name,
        key_id,
        endpoints,
        actor=actor_of(request),
        reason=reason_of(request, body.reason),
    )
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "endpoints": sorted(set(endpoints))})


@put("/teams/{name:str}/keys/{key_id:str}/limits", responses=answers(KeyLimitsAnswer, "the key's limits"))
async def limit_key(request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewLimits)
    key = await ledger_call(
        runtime.ledger.limit_key,
        name,
        key_id,
        limits(new.rpm, new.tpm),
        actor=actor_of(request),
        reason=reason_of(request, new.reason),
    )
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "rpm": key.rpm, "tpm": key.tpm})


@put("/teams/{name:str}/limits", responses=answers(TeamAnswer, "the team, with its limits"))
async def limit_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewLimits)
    summary = await ledger_call(
        runtime.ledger.limit_team,
        name,
        limits(new.rpm, new.tpm),
        actor=actor_of(request),
        reason=reason_of(request, new.reason),
    )
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


@post("/teams/{name:str}/suspend", status_code=200, responses=answers(TeamAnswer, "the team, suspended"))
async def suspend_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    reason = reason_of(request, validate(await request_json(request, b"{}"), Suspension).reason)
    summary = await ledger_call(runtime.ledger.suspend, name, reason, actor=actor_of(request))
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


@post("/teams/{name:str}/reinstate", status_code=200, responses=answers(TeamAnswer, "the team, reinstated"))
async def reinstate_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    reason = reason_of(request, validate(await request_json(request, b"{}"), Suspension).reason)
    summary = await ledger_call(runtime.ledger.reinstate, name, actor=actor_of(request), reason=reason)
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


@put("/teams/{name:str}/clamp", responses=answers(TeamAnswer, "the team, with its clamp setting"))
async def clamp_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    body = validate(await request_json(request), Clamp)
    clamp = body.clamp_output_to_balance
    await ledger_call(
        runtime.ledger.clamp_output, name, clamp, "", actor=actor_of(request), reason=reason_of(request, body.reason)
    )
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(await ledger_call(runtime.ledger.team_summary, name)))


@put("/teams/{name:str}/keys/{key_id:str}/clamp", responses=answers(KeyClampAnswer, "the key's clamp setting"))
async def clamp_key(request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    body = validate(await request_json(request), Clamp)
    clamp = body.clamp_output_to_balance
    await ledger_call(
        runtime.ledger.clamp_output,
        name,
        clamp,
        key_id,
        actor=actor_of(request),
        reason=reason_of(request, body.reason),
    )
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "clamp_output_to_balance": clamp})


@put("/teams/{name:str}/price-adjustment", responses=answers(TeamAnswer, "the team, with its price adjustments"))
async def adjust_team_prices(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), PriceAdjustment)
    if new.model is not None and runtime.settings.model(new.model) is None:
        raise InvalidRequest(f"Unknown model: {new.model!r}.", param="model")
    await ledger_call(
        runtime.ledger.adjust_prices,
        name,
        new.percent,
        new.model or "",
        reason_of(request, new.reason),
        actor=actor_of(request),
    )
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(await ledger_call(runtime.ledger.team_summary, name)))


@get("/prices", responses=answers(PriceListAnswer, "every model's prices: the one in force now, and every entry"))
async def price_list(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    prices = runtime.prices.price_list
    now = datetime.now(UTC)
    data = []
    for model in sorted(prices.entries):
        current = prices.in_force(model, now)
        data.append(
            {
                "model": model,
                "in_force": current.ref if current is not None else None,
                "entries": [
                    {
                        "ref": e.ref,
                        "effective_from": e.effective_from.isoformat(),
                        "recorded_at": e.recorded_at.isoformat(),
                        "reason": e.reason,
                        "actor": e.actor,
                        "price": e.price.as_record(),
                    }
                    for e in prices.history(model)
                ],
            }
        )
    return json_response({"object": "list", "data": data})


policy_handlers = [
    restrict_key_endpoints,
    limit_key,
    limit_team,
    suspend_team,
    reinstate_team,
    clamp_team,
    clamp_key,
    adjust_team_prices,
    price_list,
]
