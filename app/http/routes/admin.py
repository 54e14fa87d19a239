"""The admin API under /admin: teams, keys, credits, balances, audit history and usage.

Protected by an admin key (the one named by ``admin_key_env``, or a named one issued by ``tollgate
admin-key issue``), never by a team key: a team key gets 403, and so does an auditor's key on every
route that changes something (``require_admin``). Everything it changes goes through the ledger
writer, like the CLI, and its events name the admin key that caused them and the ``reason`` given
(in the body, or the ``x-tollgate-reason`` header).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from litestar import Request, Response, Router, get, post, put
from litestar.params import FromPath, FromQuery

from app.errors import InvalidRequest
from app.http.routes.admin_alerts import alert_handlers
from app.http.routes.admin_budgets import budget_handlers
from app.http.routes.admin_common import (
    actor_of,
    check_models,
    credits_param,
    endpoint_names,
    json_response,
    key_fields,
    ledger_call,
    limits,
    reason_of,
    require_admin,
    team_fields,
    text_param,
)
from app.http.routes.admin_policies import policy_handlers
from app.http.routes.admin_statements import statement_handlers
from app.http.routes.admin_verify import verify_handlers
from app.http.routes.answers import (
    BalanceAtAnswer,
    HistoryPage,
    IssuedKey,
    KeyList,
    KeyModelsAnswer,
    RevokedKey,
    TeamAnswer,
    TeamList,
    TeamWithKeys,
    UsageAnswer,
    answers,
)
from app.http.routes.auto_recharge import admin_recharge_handlers
from app.http.routes.request_body import request_json, validate
from app.http.routes.requests import admin_read_request
from app.ledger.balance_at import balance_at, parse_instant
from app.ledger.queries import MAX_USAGE_PER_PAGE, USAGE_PER_PAGE, history_page, usage, usage_by
from app.ledger.results import KeyTerms, TeamSummary
from app.paging import MAX_HISTORY_PER_PAGE, check_page, check_since
from app.runtime import Runtime
from domain.attribution import AttributionError, dimension_of
from domain.credit_lot import DEFAULT_PRIORITY
from domain.credit_lots import PAID, LotTerms
from domain.ledger_errors import InvalidAmount
from domain.money import AmountError, credits_from_micros, micros_from_credits


class Because(msgspec.Struct):
    """The body of a route that needs nothing else: why (optional; kept on the event)."""

    reason: str = ""


class NewTeam(msgspec.Struct):
    name: str
    credits: Any = "0"  # credits as a decimal string ("12.5") or a JSON number; checked by _credits
    rpm: int | None = None
    tpm: int | None = None
    reason: str = ""


class NewCredits(msgspec.Struct):
    amount: Any
    reference: str = ""
    reason: str = ""
    #: The lot the credit comes in as (``domain/credit_lots.py``): its kind, expiry (ISO 8601 with a
    #: time zone; "": never) and priority (0-100, lower used first).
    kind: str = PAID
    expires_at: str = ""
    priority: Any = DEFAULT_PRIORITY


class Adjustment(msgspec.Struct):
    amount: Any  # credits, negative to take them back
    reason: str
    reference: str = ""


class NewKey(msgspec.Struct):
    name: str = ""
    models: list[str] = []
    endpoints: list[str] = []
    rpm: int | None = None
    tpm: int | None = None
    reason: str = ""


class KeyModels(msgspec.Struct):
    models: list[str]
    reason: str = ""


@get("/teams", responses=answers(TeamList, "every team, with its balance"))
async def list_teams(request: Request[Any, Any, Any]) -> Response[bytes]:
    store = request.app.state.runtime.store
    rows = await asyncio.to_thread(store.balances)
    teams = [team_fields(TeamSummary(r.team_name, r.balance, r.held), policy=False) for r in rows]
    return json_response({"object": "list", "data": teams})


@post("/teams", responses=answers(TeamAnswer, "the team opened", 201))
async def create_team(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewTeam)
    summary = await ledger_call(
        runtime.ledger.create_team,
        new.name,
        credits_param(new.credits, "credits"),
        limits(new.rpm, new.tpm),
        actor=actor_of(request),
        reason=reason_of(request, new.reason),
    )
    return json_response(team_fields(summary), 201)


@get("/teams/{name:str}", responses=answers(TeamWithKeys, "the team, with its keys"))
async def show_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    summary = await ledger_call(runtime.ledger.team_summary, name)
    keys = await ledger_call(runtime.ledger.list_keys, name)
    return json_response({**team_fields(summary), "keys": [key_fields(k) for k in keys]})


@post("/teams/{name:str}/credits", status_code=200, responses=answers(TeamAnswer, "the team, credited"))
async def add_credits(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewCredits)
    amount = credits_param(new.amount, "amount")
    if amount == 0:
        raise InvalidRequest("Invalid 'amount': must be greater than 0.", param="amount")
    try:
        terms = LotTerms.parse(new.kind, new.expires_at, new.priority)
    except InvalidAmount as exc:
        raise InvalidRequest(f"Invalid credit lot: {exc}.", param="kind") from None
    return json_response(
        team_fields(
            await ledger_call(
                runtime.ledger.top_up,
                name,
                amount,
                text_param(new.reference, "reference"),
                actor=actor_of(request),
                reason=reason_of(request, new.reason),
                terms=terms,
            )
        )
    )


@post("/teams/{name:str}/adjustments", status_code=200, responses=answers(TeamAnswer, "the team, adjusted"))
async def adjust_credits(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    """A correction (a refund, or credits taken back) with its reason: an event of its own."""
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), Adjustment)
    try:
        amount = micros_from_credits(str(new.amount))
    except AmountError as exc:
        raise InvalidRequest(f"Invalid 'amount': {exc}", param="amount") from None
    if amount == 0 or not new.reason.strip():
        raise InvalidRequest("An adjustment moves credits (not 0) and says why ('reason').", param="amount")
    summary = await ledger_call(
        runtime.ledger.adjust_credits,
        name,
        amount,
        reason_of(request, new.reason),
        text_param(new.reference, "reference"),
        actor=actor_of(request),
    )
    return json_response(team_fields(summary))


@get("/teams/{name:str}/keys", responses=answers(KeyList, "the team's keys"))
async def list_keys(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    keys = await ledger_call(runtime.ledger.list_keys, name)
    return json_response({"object": "list", "data": [key_fields(k) for k in keys]})


@post("/teams/{name:str}/keys", responses=answers(IssuedKey, "the new key (its secret shown this once)", 201))
async def issue_key(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request, b"{}"), NewKey)
    terms = KeyTerms(check_models(runtime, new.models), endpoint_names(new.endpoints), limits(new.rpm, new.tpm))
    key = await ledger_call(
        runtime.ledger.issue_key,
        name,
        text_param(new.name, "name"),
        terms,
        actor=actor_of(request),
        reason=reason_of(request, new.reason),
    )
    return json_response(
        {
            "id": key.key_id,
            "key": key.secret,
            "name": new.name,
            "models": new.models,
            "endpoints": endpoint_names(new.endpoints),
            "rpm": new.rpm or None,
            "tpm": new.tpm or None,
        },
        201,
    )


@post("/teams/{name:str}/keys/{key_id:str}/revoke", status_code=200, responses=answers(RevokedKey, "the key, revoked"))
async def revoke_key(request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    reason = reason_of(request, validate(await request_json(request, b"{}"), Because).reason)
    await ledger_call(runtime.ledger.revoke_key, name, key_id, actor=actor_of(request), reason=reason)
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "revoked": True})


@put("/teams/{name:str}/keys/{key_id:str}/models", responses=answers(KeyModelsAnswer, "the key's models"))
async def restrict_key(request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    body = validate(await request_json(request), KeyModels)
    await ledger_call(
        runtime.ledger.restrict_key,
        name,
        key_id,
        check_models(runtime, body.models),
        actor=actor_of(request),
        reason=reason_of(request, body.reason),
    )
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "models": sorted(set(body.models))})


@get("/teams/{name:str}/history", responses=answers(HistoryPage, "one page of the team's ledger entries"))
async def team_history(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    page: FromQuery[int] = 1,
    per_page: FromQuery[int] = 50,
    since: FromQuery[str | None] = None,
) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    check_page(page, per_page, MAX_HISTORY_PER_PAGE)
    check_since(since)
    await ledger_call(runtime.ledger.team_summary, name)  # 404 for an unknown team
    return json_response(await asyncio.to_thread(history_page, runtime.store, name, page, per_page, since))


@get("/teams/{name:str}/balance", responses=answers(BalanceAtAnswer, "the team's balance now, or at the instant 'at'"))
async def team_balance(
    request: Request[Any, Any, Any], name: FromPath[str], at: FromQuery[str | None] = None
) -> Response[bytes]:
    """The balance, held credit and last event of the team at the instant ``at`` (ISO 8601, UTC unless
    it says otherwise; now if absent), exactly as replaying its events up to then gives them."""
    runtime: Runtime = request.app.state.runtime
    try:
        instant = parse_instant(at) if at is not None else None
    except ValueError:
        raise InvalidRequest(f"Invalid 'at': expected an ISO 8601 date or time, got {at!r}.", param="at") from None
    found = await ledger_call(balance_at, runtime.store, name, instant)
    return json_response(
        {
            "team": found.team,
            "at": instant.isoformat() if instant is not None else None,
            "balance": credits_from_micros(found.balance),
            "held": credits_from_micros(found.held),
            "available": credits_from_micros(found.balance - found.held),
            "balance_micros": found.balance,
            "held_micros": found.held,
            "version": found.version,
            "last_event": {
                "version": found.version,
                "type": found.event,
                "occurred_at": found.occurred_at.isoformat(),
                "request_id": found.request_id,
            },
        }
    )


@get(
    "/teams/{name:str}/usage",
    responses=answers(
        UsageAnswer, "usage by model, and by key × model × day; or, with 'by', by the values of a tag or by end user"
    ),
)
async def team_usage(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    by: FromQuery[str | None] = None,
    since: FromQuery[str | None] = None,
    page: FromQuery[int] = 1,
    per_page: FromQuery[int] = USAGE_PER_PAGE,
) -> Response[bytes]:
    """``by``: ``tag:<name>`` or ``user``, the usage by its values (``""``: charges without it, ``null``:
    those beyond the day's bounds), which add up to the team's charges, ``per_page`` values a page;
    ``since``: from that day on (with ``by``)."""
    runtime: Runtime = request.app.state.runtime
    check_since(since)
    check_page(page, per_page, MAX_USAGE_PER_PAGE)
    try:
        dimension = dimension_of(by) if by is not None else None
    except AttributionError as exc:
        raise InvalidRequest(f"Invalid 'by': {exc}.", param="by") from None
    await ledger_call(runtime.ledger.team_summary, name)
    if dimension is not None:
        return json_response(await asyncio.to_thread(usage_by, runtime.store, name, dimension, since, page, per_page))
    return json_response(await asyncio.to_thread(usage, runtime.store, name))


admin_router = Router(
    path="/admin",
    route_handlers=[
        list_teams,
        create_team,
        show_team,
        add_credits,
        adjust_credits,
        list_keys,
        issue_key,
        revoke_key,
        restrict_key,
        team_history,
        team_balance,
        team_usage,
        admin_read_request,
        *policy_handlers,
        *budget_handlers,
        *alert_handlers,
        *admin_recharge_handlers,
        *statement_handlers,
        *verify_handlers,
    ],
    before_request=require_admin,
)
