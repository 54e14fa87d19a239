"""GET /v1/credits and GET /v1/key: what a team key's caller can see of its money and its key.

Both answer in OpenRouter's shapes (``{"data": {...}}`` with ``total_credits`` / ``total_usage``,
and ``label`` / ``limit`` / ``usage`` / ``usage_daily`` / … / ``rate_limit``), so usage tools written
for it work unchanged, with Tollgate's own fields beside them: the balance, what is held (each open
hold and credit lease, with its request id and age) and what is available. Amounts are credits, the
team's unit (exact decimals). Either key header is accepted (``Authorization: Bearer`` or
``x-api-key``); errors come in the chat error shape.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get

from app.errors import AuthenticationFailed
from app.http.routes.admin_common import budget_fields, json_response
from app.http.routes.answers import DataAnswer, answers
from app.http.routes.auth import authenticate
from app.ledger.queries import key_spend
from app.ledger.results import CreditLot
from app.runtime import Runtime
from domain.auto_recharge import Recharge
from domain.budgets import RESET_NAMES
from domain.credit_lots import KINDS
from domain.money import credits_from_micros


@get(
    "/v1/credits",
    responses=answers(
        DataAnswer,
        "the team's credits: total_credits and total_usage (OpenRouter's), balance, held (each open hold "
        "and lease), available",
    ),
)
async def read_credits(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    funds = await asyncio.to_thread(runtime.ledger.funds, principal.team_name)
    now = time.time()
    holds = [
        {
            "id": h.held_for,
            "kind": "lease" if h.lease else "hold",
            "credits": credits_from_micros(h.amount),
            "age_seconds": round(max(0.0, now - h.since), 3),
        }
        for h in funds.holds
    ]
    return json_response(
        {
            "data": {
                "total_credits": credits_from_micros(funds.credited),
                "total_usage": credits_from_micros(funds.spent),
                "team": funds.name,
                "balance": credits_from_micros(funds.balance),
                "held": credits_from_micros(funds.held),
                "available": credits_from_micros(funds.balance - funds.held),
                "holds": holds,
                "lots": [_lot(lot) for lot in funds.lots],
                # what is left of each kind of credit: paid (money owed back) apart from promotional
                "by_kind": {
                    kind: credits_from_micros(sum(lot.remaining for lot in funds.lots if lot.kind == kind))
                    for kind in KINDS
                },
                "owed": credits_from_micros(funds.owed),
                # auto-recharge's figures (null: never set); GET /v1/credits/auto-recharge has its attempts
                "auto_recharge": _recharge(funds.recharge),
                "unit": "credits",
                "credits_per_usd": runtime.settings.credits_per_usd,
            }
        }
    )


def _recharge(recharge: Recharge | None) -> dict[str, Any] | None:
    if recharge is None:
        return None
    return {
        "enabled": recharge.enabled,
        "threshold": credits_from_micros(recharge.threshold),
        "target": credits_from_micros(recharge.target),
        "monthly_cap": credits_from_micros(recharge.monthly_cap),
        "pending": recharge.pending or None,
    }


def _lot(lot: CreditLot) -> dict[str, Any]:
    """A credit lot as the team sees it, in the order charges use them."""
    return {
        "id": lot.lot_id,
        "kind": lot.kind,
        "credits": credits_from_micros(lot.amount) if lot.amount else None,  # None: from before lots
        "remaining": credits_from_micros(lot.remaining),
        "priority": lot.priority,
        "added_at": datetime.fromtimestamp(lot.added, UTC).isoformat() if lot.added else None,
        "expires_at": datetime.fromtimestamp(lot.expires, UTC).isoformat() if lot.expires is not None else None,
        "reference": lot.reference,
    }


@get(
    "/v1/key",
    responses=answers(
        DataAnswer,
        "the calling key: its limits and its usage in all, today, this week and this month (OpenRouter's shape)",
    ),
)
async def read_key(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    keys = await asyncio.to_thread(runtime.ledger.list_keys, principal.team_name)
    key = next((k for k in keys if k.key_id == principal.key_id), None)
    if key is None or key.revoked:  # revoked since this process last read it
        raise AuthenticationFailed("Incorrect API key provided.")
    budget = key.budget
    spent = await asyncio.to_thread(
        key_spend, runtime.store, principal.team_name, principal.key_id, datetime.now(UTC).date()
    )
    rpm = principal.key_rpm or principal.team_rpm
    return json_response(
        {
            "data": {
                "label": key.label or key.key_id,
                "key_id": key.key_id,
                "team": principal.team_name,
                # The key's own budget (None: the team's balance is its only limit).
                "limit": credits_from_micros(budget.limit) if budget else None,
                "limit_remaining": credits_from_micros(budget.left) if budget else None,
                "limit_reset": RESET_NAMES[budget.period] if budget else None,
                "budget": budget_fields(budget),
                "usage": credits_from_micros(spent["total"]),
                "usage_daily": credits_from_micros(spent["daily"]),
                "usage_weekly": credits_from_micros(spent["weekly"]),
                "usage_monthly": credits_from_micros(spent["monthly"]),
                "is_free_tier": False,
                "is_provisioning_key": False,
                "rate_limit": {"requests": rpm, "interval": "1m"} if rpm else None,
                "limits": {
                    "rpm": principal.key_rpm,
                    "tpm": principal.key_tpm,
                    "team_rpm": principal.team_rpm,
                    "team_tpm": principal.team_tpm,
                    "models": list(key.models) or None,
                    "endpoints": list(key.endpoints) or None,
                },
                "clamp_output_to_balance": key.clamp_output,
                "unit": "credits",
            }
        }
    )
