"""Admin routes for what keys and teams may do: endpoints, rate limits, suspension.

Each change is a ledger event, so it is audited like money, and every gateway process sees it
(its projector evicts the affected keys from its cache within a poll interval).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post, put

from app.http.routes.admin_common import endpoint_names, json_response, ledger_call, limits, team_fields
from app.http.routes.answers import KeyEndpointsAnswer, KeyLimitsAnswer, TeamAnswer, answers
from app.http.routes.request_body import request_json, validate
from app.runtime import Runtime
from domain.ledger import team_id


class KeyEndpoints(msgspec.Struct):
    endpoints: list[str]


class NewLimits(msgspec.Struct):
    """Per-minute limits; a field left out stays as it is, 0 removes that limit."""

    rpm: int | None = None
    tpm: int | None = None


class Suspension(msgspec.Struct):
    reason: str = ""


@put("/teams/{name:str}/keys/{key_id:str}/endpoints", responses=answers(KeyEndpointsAnswer, "the key's endpoints"))
async def restrict_key_endpoints(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    endpoints = endpoint_names(validate(await request_json(request), KeyEndpoints).endpoints)
    await ledger_call(runtime.ledger.restrict_key_endpoints, name, key_id, endpoints)
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "endpoints": sorted(set(endpoints))})


@put("/teams/{name:str}/keys/{key_id:str}/limits", responses=answers(KeyLimitsAnswer, "the key's limits"))
async def limit_key(request: Request[Any, Any, Any], name: str, key_id: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewLimits)
    key = await ledger_call(runtime.ledger.limit_key, name, key_id, limits(new.rpm, new.tpm))
    runtime.keys.forget(key_id)
    return json_response({"id": key_id, "rpm": key.rpm, "tpm": key.tpm})


@put("/teams/{name:str}/limits", responses=answers(TeamAnswer, "the team, with its limits"))
async def limit_team(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewLimits)
    summary = await ledger_call(runtime.ledger.limit_team, name, limits(new.rpm, new.tpm))
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


@post("/teams/{name:str}/suspend", status_code=200, responses=answers(TeamAnswer, "the team, suspended"))
async def suspend_team(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    reason = validate(await request_json(request, b"{}"), Suspension).reason
    summary = await ledger_call(runtime.ledger.suspend, name, reason)
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


@post("/teams/{name:str}/reinstate", status_code=200, responses=answers(TeamAnswer, "the team, reinstated"))
async def reinstate_team(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    summary = await ledger_call(runtime.ledger.reinstate, name)
    runtime.keys.forget_team(team_id(name))
    return json_response(team_fields(summary))


policy_handlers = [restrict_key_endpoints, limit_key, limit_team, suspend_team, reinstate_team]
