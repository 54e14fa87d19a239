"""What every admin route shares: the admin-key check, JSON answers, parameter checks, and ledger
commands run off the event loop with their refusals mapped to HTTP errors."""

from __future__ import annotations

import asyncio
import hmac
import os
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

from litestar import Request, Response

from app.errors import AuthenticationFailed, InvalidRequest, PermissionDenied
from app.http.routes.auth import presented_key
from app.json import encode
from app.ledger.refusals import refusal
from app.ledger.results import BudgetSummary, KeySummary, Limits, TeamSummary
from app.ledger.writer import LedgerUnavailable
from app.runtime import Runtime
from domain.endpoints import parse_endpoints
from domain.ledger import LedgerError
from domain.money import AmountError, credits_from_micros, micros_from_credits


def is_admin_key(runtime: Runtime, key: str) -> bool:
    """Whether ``key`` is the admin key (never, while its environment variable is unset)."""
    expected = os.environ.get(runtime.settings.admin_key_env)
    return expected is not None and expected != "" and hmac.compare_digest(key.encode(), expected.encode())


async def require_admin(request: Request[Any, Any, Any]) -> None:
    runtime: Runtime = request.app.state.runtime
    expected = os.environ.get(runtime.settings.admin_key_env)
    key = presented_key(request)
    if key is None:
        raise AuthenticationFailed("The admin API needs the admin key as 'Authorization: Bearer ADMIN_KEY'.")
    if is_admin_key(runtime, key):
        return
    if await runtime.keys.principal_for(key) is not None:
        raise PermissionDenied("A team key cannot use the admin API.")
    if not expected:
        raise PermissionDenied(f"The admin API is off: set {runtime.settings.admin_key_env} to enable it.")
    raise AuthenticationFailed("Incorrect admin key provided.")


def json_response(body: Any, status: int = 200) -> Response[bytes]:
    return Response(encode(body), status_code=status, media_type="application/json")


def credits_param(value: Any, name: str) -> int:
    try:
        micros = micros_from_credits(str(value))
    except AmountError as exc:
        raise InvalidRequest(f"Invalid '{name}': {exc}", param=name) from None
    if micros < 0:
        raise InvalidRequest(f"Invalid '{name}': must not be negative.", param=name)
    return micros


R = TypeVar("R")


async def ledger_call(call: Callable[..., R], *args: object) -> R:
    """Run an admin command (which waits for the ledger writer) off the event loop; the ledger's
    refusals are answered as ``app/ledger/refusals.py`` says."""
    try:
        return await asyncio.to_thread(call, *args)
    except (LedgerError, LedgerUnavailable) as exc:
        raise refusal(exc) from None


def team_fields(summary: TeamSummary, *, policy: bool = True) -> dict[str, Any]:
    """A team as the admin API answers it; ``policy``: with its pricing policy (the clamp and its
    price adjustments), which only the ledger knows (not a list read from the balances)."""
    fields = {"name": summary.name, "balance": credits_from_micros(summary.balance),
              "held": credits_from_micros(summary.held),
              "available": credits_from_micros(summary.balance - summary.held),
              "suspended": summary.suspended, "rpm": summary.rpm, "tpm": summary.tpm}
    if policy:
        fields["clamp_output_to_balance"] = summary.clamp_output
        fields["price_adjustments"] = [{"model": model or None, "percent": Decimal(percent)}
                                       for model, percent in summary.price_adjustments]
        fields["budget"] = budget_fields(summary.budget)
    return fields


def key_fields(k: KeySummary) -> dict[str, Any]:
    return {"id": k.key_id, "name": k.label, "revoked": k.revoked, "models": list(k.models),
            "endpoints": list(k.endpoints), "rpm": k.rpm, "tpm": k.tpm, "clamp_output_to_balance": k.clamp_output,
            "budget": budget_fields(k.budget)}


def budget_fields(budget: BudgetSummary | None) -> dict[str, Any] | None:
    """A budget as the APIs answer it (credits): its limit per period, what was spent this period and
    what is held against it, what is left, and when the period resets (None: a lifetime budget)."""
    if budget is None:
        return None
    return {"limit": credits_from_micros(budget.limit), "period": budget.period,
            "spent": credits_from_micros(budget.spent), "held": credits_from_micros(budget.held),
            "remaining": credits_from_micros(budget.left),
            "resets_at": budget.resets_at.isoformat() if budget.resets_at else None}


def limits(rpm: int | None, tpm: int | None) -> Limits:
    for name, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None and value < 0:
            raise InvalidRequest(f"Invalid '{name}': a per-minute limit must be a whole number >= 0 (0 removes it).",
                                 param=name)
    return Limits(rpm, tpm)


def endpoint_names(names: list[str]) -> list[str]:
    try:
        return parse_endpoints(",".join(names))
    except ValueError as exc:
        raise InvalidRequest(f"Invalid 'endpoints': {exc}.", param="endpoints") from None


def check_models(runtime: Runtime, models: list[str]) -> list[str]:
    unknown = [m for m in models if runtime.settings.model(m) is None]
    if unknown:
        raise InvalidRequest(f"Unknown model(s): {', '.join(unknown)}.", param="models")
    return models
