"""Auto-recharge's settings: set by the operator (``PUT /admin/teams/{name}/auto-recharge``) or by
the team itself with its key (``PUT /v1/credits/auto-recharge``), and read back with its latest
attempts (``GET`` on either).

Amounts are credits (exact decimals, as everywhere in the API): ``threshold`` (a charge taking the
available balance under it begins an attempt), ``target`` (what the attempt tops the available
balance up to) and ``monthly_cap`` (the most recharged per UTC month). ``{"enabled": false}`` turns
it off, keeping its figures. Setting it is a ledger event (``AutoRechargeSet``); each attempt and
failure is one too (``docs/payments.md``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from litestar import Request, Response, get, put
from litestar.params import FromPath

from app.errors import InvalidRequest
from app.http.routes.admin_common import actor_of, credits_param, json_response, ledger_call, reason_of, text_param
from app.http.routes.answers import DataAnswer, answers
from app.http.routes.auth import authenticate
from app.http.routes.request_body import request_json, validate
from app.ledger.queries import recent_recharges
from app.runtime import Runtime
from domain.auto_recharge import Recharge, RechargeSetting
from domain.money import credits_from_micros


class NewAutoRecharge(msgspec.Struct):
    """The settings as sent: credits as numbers or decimal strings."""

    threshold: Any = None
    target: Any = None
    monthly_cap: Any = None
    enabled: bool = True
    reason: str = ""


def setting_of(body: dict[str, Any]) -> tuple[RechargeSetting, str]:
    """The setting a request body asks for, and its reason (400 for a figure that is not credits)."""
    new = validate(body, NewAutoRecharge)
    figures = {}
    for name in ("threshold", "target", "monthly_cap"):
        value = getattr(new, name)
        if value is None and new.enabled:
            raise InvalidRequest(
                f"Missing '{name}': auto-recharge needs a threshold, a target and a monthly cap.", param=name
            )
        figures[name] = 0 if value is None else credits_param(value, name)
    return RechargeSetting(**figures, enabled=new.enabled), new.reason


def recharge_fields(recharge: Recharge | None, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """Auto-recharge as the API answers it (credits), with its latest attempts."""
    return {
        "enabled": bool(recharge and recharge.enabled),
        "threshold": credits_from_micros(recharge.threshold) if recharge else None,
        "target": credits_from_micros(recharge.target) if recharge else None,
        "monthly_cap": credits_from_micros(recharge.monthly_cap) if recharge else None,
        "failures_in_a_row": recharge.failures if recharge else 0,
        "pending": recharge.pending or None if recharge else None,
        "month": recharge.month or None if recharge else None,
        "recharged_this_month": credits_from_micros(recharge.month_total) if recharge else "0",
        "attempts": [
            {
                "id": a["attempt"],
                "credits": credits_from_micros(int(a["amount"])),
                "began_at": a["occurred_at"],
                "settled_at": a["settled_at"],
                "outcome": a["outcome"] or None,
                "payment_intent": a["payment_intent"] or None,
                "last_error": a["last_error"] or None,
            }
            for a in attempts
        ],
    }


async def _answer(runtime: Runtime, team: str, recharge: Recharge | None) -> dict[str, Any]:
    attempts = await asyncio.to_thread(recent_recharges, runtime.store, team)
    return {"team": team, "auto_recharge": recharge_fields(recharge, attempts)}


# ----------------------------------------------------------------- the operator's (under /admin)
@put("/teams/{name:str}/auto-recharge", responses=answers(DataAnswer, "the team's auto-recharge, as set"))
async def set_auto_recharge(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    setting, reason = setting_of(await request_json(request))
    recharge = await ledger_call(
        runtime.ledger.set_auto_recharge, name, setting, actor=actor_of(request), reason=reason_of(request, reason)
    )
    return json_response(await _answer(runtime, name, recharge))


@get("/teams/{name:str}/auto-recharge", responses=answers(DataAnswer, "the team's auto-recharge and latest attempts"))
async def show_auto_recharge(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    recharge = await ledger_call(runtime.ledger.auto_recharge, name)
    return json_response(await _answer(runtime, name, recharge))


admin_recharge_handlers = [set_auto_recharge, show_auto_recharge]


# ----------------------------------------------------------------- the team's own (its key)
@put("/v1/credits/auto-recharge", responses=answers(DataAnswer, "the team's auto-recharge, as set"))
async def set_own_auto_recharge(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    setting, reason = setting_of(await request_json(request))
    actor = f"key:{principal.key_id}"
    recharge = await ledger_call(
        runtime.ledger.set_auto_recharge,
        principal.team_name,
        setting,
        actor=actor,
        reason=text_param(reason, "reason"),
    )
    return json_response({"data": await _answer(runtime, principal.team_name, recharge)})


@get("/v1/credits/auto-recharge", responses=answers(DataAnswer, "the team's auto-recharge and latest attempts"))
async def show_own_auto_recharge(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    recharge = await ledger_call(runtime.ledger.auto_recharge, principal.team_name)
    return json_response({"data": await _answer(runtime, principal.team_name, recharge)})


team_recharge_handlers = [set_own_auto_recharge, show_own_auto_recharge]
