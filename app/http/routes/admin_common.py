"""What every admin route shares: the admin-key check and its roles, who is acting and why, JSON
answers, parameter checks, and ledger commands run off the event loop with their refusals mapped
to HTTP errors."""

from __future__ import annotations

import asyncio
import hmac
import os
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

from litestar import Request, Response

from app.admin_keys import ADMIN_KEY_PREFIX, CONFIG_ADMIN, AdminIdentity
from app.errors import AuthenticationFailed, InvalidRequest, PermissionDenied
from app.http.refusals import http_error
from app.http.routes.auth import client_address, presented_key, team_principal, wrong_key
from app.json import encode
from app.ledger.refusals import REFUSALS
from app.ledger.results import BudgetSummary, KeySummary, Limits, TeamSummary
from app.runtime import Runtime
from domain.admin_keys import OPERATOR
from domain.bounds import RPM, TPM
from domain.client_text import ClientTextError, checked_text, header_text
from domain.endpoints import parse_endpoints
from domain.money import AmountError, credits_from_micros, micros_from_credits

#: The methods an auditor's key may use: they read, and change nothing.
READING_METHODS = frozenset({"GET", "HEAD"})
#: Why an operator did what a request does, for routes whose body has no ``reason`` (or no body).
REASON_HEADER = "x-tollgate-reason"
MAX_REASON = 500


def is_admin_key(runtime: Runtime, key: str) -> bool:
    """Whether ``key`` is the admin key (never, while its environment variable is unset)."""
    expected = os.environ.get(runtime.settings.admin_key_env)
    return expected is not None and expected != "" and hmac.compare_digest(key.encode(), expected.encode())


async def admin_identity(runtime: Runtime, key: str) -> AdminIdentity | None:
    """Who ``key`` makes its bearer: the configured admin key's operator, a named admin key's holder,
    or None (no admin key). A revoked admin key is refused here (401), as a revoked team key is."""
    if is_admin_key(runtime, key):
        return CONFIG_ADMIN
    if not key.startswith(ADMIN_KEY_PREFIX):  # a team's key, or nothing: no admin key lookup
        return None
    record = await runtime.admin_keys.record_for(key)
    if record is None:
        return None
    if record.revoked:
        raise AuthenticationFailed(f"This admin key ({record.key_id}) was revoked.")
    return AdminIdentity(record.key_id, record.name, record.role)


async def require_admin(request: Request[Any, Any, Any]) -> None:
    """The admin API's one guard (every route under /admin, and /metrics): an admin key, whose role
    allows the request's method. An auditor only reads (``GET``, ``HEAD``); any other method needs an
    operator, so a write route added later is an operator's without a line of its own."""
    runtime: Runtime = request.app.state.runtime
    expected = os.environ.get(runtime.settings.admin_key_env)
    key = presented_key(request)
    if key is None:
        raise AuthenticationFailed("The admin API needs an admin key as 'Authorization: Bearer ADMIN_KEY'.")
    runtime.key_guesses.check(client_address(request))  # every admin key is checked: the configured one may be weak
    identity = await admin_identity(runtime, key)
    if identity is None:
        if await team_principal(request, runtime, key) is not None:
            raise PermissionDenied("A team key cannot use the admin API.")
        if not expected and not key.startswith(ADMIN_KEY_PREFIX):
            raise PermissionDenied(
                f"The admin API is off: set {runtime.settings.admin_key_env}, or issue an admin "
                "key (tollgate admin-key issue), to enable it."
            )
        raise await wrong_key(request, runtime, "Incorrect admin key provided.")
    if identity.role != OPERATOR and request.method not in READING_METHODS:
        raise PermissionDenied(
            f"This admin key ({identity.key_id}, '{identity.name}') has the role "
            f"'{identity.role}', which reads but changes nothing: {request.method} "
            f"{request.url.path} needs a key with the role '{OPERATOR}'."
        )
    request.state.admin = identity


def actor_of(request: Request[Any, Any, Any]) -> str:
    """How the events this request causes name who caused them (``admin:<key id>``, ``admin:config``)."""
    identity: AdminIdentity = request.state.admin  # set by ``require_admin``, which runs before every route
    return identity.actor


def reason_of(request: Request[Any, Any, Any], given: str = "") -> str:
    """Why, as the request says it: the body's ``reason`` if it has one, else the ``x-tollgate-reason``
    header (for the routes without a body, its bytes read as UTF-8); kept on the events with the actor."""
    if given:
        return text_param(given, "reason")
    try:
        header = header_text(request.headers.get(REASON_HEADER, ""), REASON_HEADER)
    except ClientTextError as exc:
        raise InvalidRequest(f"Invalid '{REASON_HEADER}' header: {exc.problem}.", param="reason") from None
    return text_param(header, "reason")


def text_param(value: str, name: str, max_chars: int = MAX_REASON) -> str:
    """An operator's text the events record (a reason, a reference, a key's name), by the rule every
    recorded client text follows (``domain/client_text.py``): a 400 naming it otherwise."""
    try:
        return checked_text(value, name, max_chars)
    except ClientTextError as exc:
        raise InvalidRequest(f"Invalid '{name}': {exc.problem}.", param=name) from None


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


async def ledger_call(call: Callable[..., R], *args: object, **kwargs: object) -> R:
    """Run an admin command (which waits for the ledger writer) off the event loop; the ledger's
    refusals are answered as ``app/http/refusals.py`` says."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except REFUSALS as exc:
        raise http_error(exc) from None


def team_fields(summary: TeamSummary, *, policy: bool = True) -> dict[str, Any]:
    """A team as the admin API answers it; ``policy``: with its pricing policy (the clamp and its
    price adjustments), which only the ledger knows (not a list read from the balances)."""
    fields = {
        "name": summary.name,
        "balance": credits_from_micros(summary.balance),
        "held": credits_from_micros(summary.held),
        "available": credits_from_micros(summary.balance - summary.held),
        "suspended": summary.suspended,
        "rpm": summary.rpm,
        "tpm": summary.tpm,
    }
    if policy:
        fields["clamp_output_to_balance"] = summary.clamp_output
        fields["price_adjustments"] = [
            {"model": model or None, "percent": Decimal(percent)} for model, percent in summary.price_adjustments
        ]
        fields["budget"] = budget_fields(summary.budget)
    return fields


def key_fields(k: KeySummary) -> dict[str, Any]:
    return {
        "id": k.key_id,
        "name": k.label,
        "revoked": k.revoked,
        "models": list(k.models),
        "endpoints": list(k.endpoints),
        "rpm": k.rpm,
        "tpm": k.tpm,
        "clamp_output_to_balance": k.clamp_output,
        "budget": budget_fields(k.budget),
    }


def budget_fields(budget: BudgetSummary | None) -> dict[str, Any] | None:
    """A budget as the APIs answer it (credits): its limit per period, what was spent this period and
    what is held against it, what is left, and when the period resets (None: a lifetime budget)."""
    if budget is None:
        return None
    return {
        "limit": credits_from_micros(budget.limit),
        "period": budget.period,
        "spent": credits_from_micros(budget.spent),
        "held": credits_from_micros(budget.held),
        "remaining": credits_from_micros(budget.left),
        "resets_at": budget.resets_at.isoformat() if budget.resets_at else None,
    }


def limits(rpm: int | None, tpm: int | None) -> Limits:
    """The rate limits a request sets, each in its range (``domain/bounds.py``; 0 removes it), or a 400
    naming the field: refused here, before the ledger is asked (which refuses them as well)."""
    for name, value, bound in (("rpm", rpm, RPM), ("tpm", tpm, TPM)):
        if value is not None and value != 0 and (wrong := bound.violation(value)) is not None:
            raise InvalidRequest(
                f"Invalid '{name}': a per-minute limit {wrong} (0 removes it), got {value}.", param=name
            )
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
