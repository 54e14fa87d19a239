"""Admin routes for alerts: the thresholds a team is alerted at (ledger events), and the alerts
raised, each with how its deliveries to the webhooks stand."""

from __future__ import annotations

import asyncio
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec
from litestar import Request, Response, get, put
from litestar.params import FromPath

from app.errors import InvalidRequest
from app.http.routes.admin_common import actor_of, credits_param, json_response, ledger_call, reason_of
from app.http.routes.answers import AlertsAnswer, answers
from app.http.routes.request_body import request_json, validate
from app.ledger.queries import recent_alerts
from app.ledger.results import AlertSetting
from app.runtime import Runtime
from domain.alerts import BALANCE_BELOW, KINDS, Threshold
from domain.money import credits_from_micros


class NewThreshold(msgspec.Struct):
    """``budget_percent`` (``value`` a percentage of the key's or team's budget) or ``balance_below``
    (``value`` credits); ``enabled`` false removes it."""

    kind: str
    value: Any
    key_id: str | None = None
    enabled: bool = True
    reason: str = ""


def threshold_fields(t: Threshold) -> dict[str, Any]:
    value: Any = credits_from_micros(int(t.value)) if t.kind == BALANCE_BELOW else Decimal(t.value)
    return {"kind": t.kind, "value": value, "key_id": t.key_id or None}


def alert_fields(alert: dict[str, Any]) -> dict[str, Any]:
    balance = alert["kind"] == BALANCE_BELOW
    return {
        "id": alert["alert_id"],
        "kind": alert["kind"],
        "key_id": alert["key_id"] or None,
        "threshold": credits_from_micros(int(alert["threshold"])) if balance else Decimal(alert["threshold"]),
        "value": credits_from_micros(int(alert["value"])),
        "budget_limit": credits_from_micros(int(alert["budget_limit"])) if not balance else None,
        "period": alert["period"] or None,
        "request_id": alert["request_id"] or None,
        "occurred_at": alert["occurred_at"],
        "deliveries": [
            {
                "url": d["url"],
                "attempts": d["attempts"],
                "delivered_at": d["delivered_at"],
                "last_error": d["last_error"] or None,
            }
            for d in alert["deliveries"]
        ],
    }


@put("/teams/{name:str}/alerts", responses=answers(AlertsAnswer, "the team's alert thresholds, as set"))
async def set_alert(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    new = validate(await request_json(request), NewThreshold)
    if new.kind not in KINDS:
        raise InvalidRequest(f"Invalid 'kind': one of {', '.join(KINDS)}.", param="kind")
    if new.kind == BALANCE_BELOW:
        value = Decimal(credits_param(new.value, "value"))
    else:
        try:
            value = Decimal(str(new.value))
        except InvalidOperation:
            raise InvalidRequest("Invalid 'value': a percentage, e.g. 80.", param="value") from None
    alert = AlertSetting(new.kind, value, new.key_id or "", enabled=new.enabled)
    thresholds = await ledger_call(
        runtime.ledger.set_alert, name, alert, actor=actor_of(request), reason=reason_of(request, new.reason)
    )
    return json_response({"team": name, "thresholds": [threshold_fields(t) for t in thresholds]})


@get("/teams/{name:str}/alerts", responses=answers(AlertsAnswer, "the team's thresholds and latest alerts"))
async def list_alerts(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    thresholds = await ledger_call(runtime.ledger.alert_thresholds, name)
    alerts = await asyncio.to_thread(recent_alerts, runtime.store, name)
    return json_response(
        {
            "team": name,
            "thresholds": [threshold_fields(t) for t in thresholds],
            "alerts": [alert_fields(a) for a in alerts],
        }
    )


alert_handlers = [set_alert, list_alerts]
