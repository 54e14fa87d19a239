"""The admin API under /admin: teams, keys, credits, balances, audit history and usage.

Protected by the admin key (the environment variable named by ``admin_key_env``), never by a team
key: a team key gets 403. Everything it changes goes through the ledger writer, like the CLI.
"""

from __future__ import annotations

import asyncio
import hmac
import os
from typing import Any

import msgspec
from litestar import Request, Response, Router, get, post, put

from app import admin
from app.errors import AuthenticationFailed, InvalidRequest, NotFound, PermissionDenied
from app.json import encode
from app.routes.auth import presented_key
from app.routes.request_body import read_json_object, validate
from app.runtime import Runtime
from domain.ledger import KeyNotFound, LedgerError, TeamAlreadyExists, TeamNotFound
from domain.money import AmountError, credits_from_micros, micros_from_credits


async def require_admin(request: Request[Any, Any, Any]) -> None:
    runtime: Runtime = request.app.state.runtime
    expected = os.environ.get(runtime.settings.admin_key_env)
    key = presented_key(request)
    if key is None:
        raise AuthenticationFailed("The admin API needs the admin key as 'Authorization: Bearer ADMIN_KEY'.")
    if expected and hmac.compare_digest(key.encode(), expected.encode()):
        return
    if await runtime.keys.principal_for(key) is not None:
        raise PermissionDenied("A team key cannot use the admin API.")
    if not expected:
        raise PermissionDenied(f"The admin API is off: set {runtime.settings.admin_key_env} to enable it.")
    raise AuthenticationFailed("Incorrect admin key provided.")


def _json(body: Any, status: int = 200) -> Response[bytes]:
    return Response(encode(body), status_code=status, media_type="application/json")


def _credits(value: Any, name: str) -> int:
    try:
        micros = micros_from_credits(str(value))
    except AmountError as exc:
        raise InvalidRequest(f"Invalid '{name}': {exc}", param=name) from None
    if micros < 0:
        raise InvalidRequest(f"Invalid '{name}': must not be negative.", param=name)
    return micros


async def _ledger(call: Any, *args: Any) -> Any:
    """Run an admin command (which waits for the ledger writer) off the event loop, mapping refusals."""
    try:
        return await asyncio.to_thread(call, *args)
    except (TeamNotFound, KeyNotFound) as exc:
        raise NotFound(str(exc)) from None
    except TeamAlreadyExists as exc:
        raise InvalidRequest(str(exc), status=409) from None
    except LedgerError as exc:
        raise InvalidRequest(str(exc)) from None


def _team(summary: admin.TeamSummary) -> dict[str, Any]:
    return {"name": summary.name, "balance": credits_from_micros(summary.balance),
            "held": credits_from_micros(summary.held), "available": credits_from_micros(summary.balance - summary.held)}


def _key(k: admin.KeySummary) -> dict[str, Any]:
    return {"id": k.key_id, "name": k.label, "revoked": k.revoked, "models": list(k.models)}


class NewTeam(msgspec.Struct):
    name: str
    credits: Any = "0"  # credits as a decimal string ("12.5") or a JSON number; checked by _credits


class NewCredits(msgspec.Struct):
    amount: Any
    reference: str = ""


class NewKey(msgspec.Struct):
    name: str = ""
    models: list[str] = []


class KeyModels(msgspec.Struct):
    models: list[str]


def _check_models(runtime: Runtime, models: list[str]) -> list[str]:
    unknown = [m for m in models if runtime.settings.model(m) is None]
    if unknown:
        raise InvalidRequest(f"Unknown model(s): {', '.join(unknown)}.", param="models")
    return models


@get("/teams")
async def list_teams(request: Request[Any, Any, Any]) -> Response[bytes]:
    store = request.app.state.runtime.store
    rows = await asyncio.to_thread(store.balances)
    return _json({"object": "list", "data": [_team(admin.TeamSummary(r.team_name, r.balance, r.held)) for r in rows]})


@post("/teams")
async def create_team(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(read_json_object(await request.body()), NewTeam)
    summary = await _ledger(admin.create_team, runtime.writer, new.name, _credits(new.credits, "credits"))
    return _json(_team(summary), 201)


@get("/teams/{name:str}")
async def show_team(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    summary = await _ledger(admin.team_summary, runtime.writer, name)
    keys = await _ledger(admin.list_keys, runtime.writer, name)
    return _json({**_team(summary), "keys": [_key(k) for k in keys]})


@post("/teams/{name:str}/credits")
async def add_credits(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(read_json_object(await request.body()), NewCredits)
    amount = _credits(new.amount, "amount")
    if amount == 0:
        raise InvalidRequest("Invalid 'amount': must be greater than 0.", param="amount")
    await _ledger(admin.add_credits, runtime.writer, name, amount, new.reference)
    return _json(_team(await _ledger(admin.team_summary, runtime.writer, name)))


@get("/teams/{name:str}/keys")
async def list_keys(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    keys = await _ledger(admin.list_keys, request.app.state.runtime.writer, name)
    return _json({"object": "list", "data": [_key(k) for k in keys]})


@post("/teams/{name:str}/keys")
async def issue_key(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(read_json_object(await request.body() or b"{}"), NewKey)
    secret = await _ledger(admin.issue_key, runtime.writer, name, new.name, _check_models(runtime, new.models))
    key_id = (await runtime.keys.principal_for(secret)).key_id  # type: ignore[union-attr]
    return _json({"id": key_id, "key": secret, "name": new.name, "models": new.models}, 201)


@post("/teams/{name:str}/keys/{key_id:str}/revoke", status_code=200)
async def revoke_key(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    await _ledger(admin.revoke_key, runtime.writer, name, key_id)
    runtime.keys.forget(key_id)
    return _json({"id": key_id, "revoked": True})


@put("/teams/{name:str}/keys/{key_id:str}/models")
async def restrict_key(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    body = validate(read_json_object(await request.body()), KeyModels)
    await _ledger(admin.restrict_key, runtime.writer, name, key_id, _check_models(runtime, body.models))
    runtime.keys.forget(key_id)
    return _json({"id": key_id, "models": sorted(set(body.models))})


def _history_page(runtime: Runtime, team: str, page: int, per_page: int, since: str | None) -> dict[str, Any]:
    from projections.history import HistoryProjection

    history = HistoryProjection(runtime.store, runtime.store.database)
    try:
        history.catch_up()
        total = history.count(team=team, since=since)
        rows = history.entries(team=team, since=since, limit=per_page, offset=(page - 1) * per_page)
    finally:
        history.close()
    return {"object": "list", "data": rows, "page": page, "per_page": per_page, "total": total,
            "has_more": page * per_page < total}


@get("/teams/{name:str}/history")
async def team_history(request: Request[Any, Any, Any], name: str, page: int = 1, per_page: int = 50,
                       since: str | None = None) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    if page < 1 or not 1 <= per_page <= 1000:
        raise InvalidRequest("'page' must be >= 1 and 'per_page' between 1 and 1000.")
    await _ledger(admin.team_summary, runtime.writer, name)  # 404 for an unknown team
    return _json(await asyncio.to_thread(_history_page, runtime, name, page, per_page, since))


def _usage(runtime: Runtime, team: str) -> dict[str, Any]:
    from projections.history import HistoryProjection

    history = HistoryProjection(runtime.store, runtime.store.database)
    try:
        history.catch_up()
        rows = history.usage(team=team)
    finally:
        history.close()
    by_model: dict[str, dict[str, Any]] = {}
    for r in rows:
        total = by_model.setdefault(r["model"], {"model": r["model"], "requests": 0, "input_tokens": 0,
                                                  "output_tokens": 0, "cost": 0})
        for field in ("requests", "input_tokens", "output_tokens", "cost"):
            total[field] += int(r[field])
    for total in by_model.values():
        total["cost"] = credits_from_micros(total["cost"])
    daily = [{**r, "cost": credits_from_micros(int(r["cost"]))} for r in rows]
    return {"team": team, "by_model": list(by_model.values()), "daily": daily}


@get("/teams/{name:str}/usage")
async def team_usage(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    await _ledger(admin.team_summary, runtime.writer, name)
    return _json(await asyncio.to_thread(_usage, runtime, name))


admin_router = Router(
    path="/admin",
    route_handlers=[list_teams, create_team, show_team, add_credits, list_keys, issue_key, revoke_key, restrict_key,
                    team_history, team_usage],
    before_request=require_admin,
)
