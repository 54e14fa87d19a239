"""Admin routes for budgets: how much a key, or a whole team, may spend per UTC day, week or month
(or in all). Setting one is a ledger event (``BudgetSet``), which every gateway process sees within
a poll interval; the budget is enforced where the balance is, by the ledger's holds."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, put
from litestar.params import FromPath

from app.errors import InvalidRequest
from app.http.routes.admin_common import (
    actor_of,
    budget_fields,
    credits_param,
    json_response,
    ledger_call,
    reason_of,
)
from app.http.routes.answers import BudgetAnswer, answers
from app.http.routes.request_body import request_json, validate
from app.runtime import Runtime
from domain.budgets import parse_period
from domain.ledger import team_id


class NewBudget(msgspec.Struct):
    """``credits`` per ``period`` (day, week, month, none); ``credits`` null lifts the budget."""

    credits: Any
    period: str = "month"
    reason: str = ""


async def _set(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewBudget)
    try:
        period = parse_period(new.period)
    except ValueError as exc:
        raise InvalidRequest(f"Invalid 'period': {exc}.", param="period") from None
    limit = None if new.credits is None else credits_param(new.credits, "credits")
    budget = await ledger_call(
        runtime.ledger.set_budget,
        name,
        limit,
        period,
        key_id,
        actor=actor_of(request),
        reason=reason_of(request, new.reason),
    )
    if key_id:
        runtime.keys.forget(key_id)
    else:
        runtime.keys.forget_team(team_id(name))
    return json_response({"team": name, "id": key_id or None, "budget": budget_fields(budget)})


async def _show(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    budget = await ledger_call(runtime.ledger.budget, name, key_id)
    return json_response({"team": name, "id": key_id or None, "budget": budget_fields(budget)})


@put("/teams/{name:str}/budget", responses=answers(BudgetAnswer, "the team's budget, as set"))
async def set_team_budget(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    """The most the whole team may spend per period, whichever key spends it."""
    return await _set(request, name, "")


@get("/teams/{name:str}/budget", responses=answers(BudgetAnswer, "the team's budget, where it stands now"))
async def show_team_budget(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    return await _show(request, name, "")


@put("/teams/{name:str}/keys/{key_id:str}/budget", responses=answers(BudgetAnswer, "the key's budget, as set"))
async def set_key_budget(
    request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]
) -> Response[bytes]:
    """The most one key may spend per period."""
    return await _set(request, name, key_id)


@get(
    "/teams/{name:str}/keys/{key_id:str}/budget",
    responses=answers(BudgetAnswer, "the key's budget, where it stands now"),
)
async def show_key_budget(
    request: Request[Any, Any, Any], name: FromPath[str], key_id: FromPath[str]
) -> Response[bytes]:
    return await _show(request, name, key_id)


budget_handlers = [set_team_budget, show_team_budget, set_key_budget, show_key_budget]
