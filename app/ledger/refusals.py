"""The one table from the ledger's refusals to what a client or an operator is told.

The API's billing, the admin API and the CLI all say a refusal in the same words: the gateway's
error (``app/errors.py``) carries the HTTP status the APIs answer with, and its message is what
the CLI prints. The most specific entry for the refusal's class wins; a refusal of the ledger
without an entry of its own is the request's fault (400, in the ledger's own words).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.errors import (
    Conflict,
    GatewayError,
    InsufficientCreditsError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    ServiceUnavailable,
)
from app.ledger.writer import LedgerUnavailable
from domain.budgets import RESET_NAMES
from domain.ledger import (
    BudgetExceeded,
    InsufficientCredits,
    KeyNotFound,
    LedgerError,
    RequestInProgress,
    TeamAlreadyExists,
    TeamNotFound,
    TeamSuspended,
)
from domain.money import credits_from_micros, format_credits

E = TypeVar("E", bound=Exception)


@dataclass(frozen=True, slots=True)
class _Refusal(Generic[E]):
    refusal: type[E]
    told: Callable[[E], GatewayError]


def _over_budget(exc: BudgetExceeded) -> GatewayError:
    whose = f"key '{exc.key_id}' of team '{exc.team}'" if exc.key_id else f"team '{exc.team}'"
    period = RESET_NAMES.get(exc.period) or "lifetime"
    resets = f"it resets at {exc.resets_at}" if exc.resets_at else "it does not reset"
    headers = {"x-tollgate-budget-resets-at": exc.resets_at} if exc.resets_at else {}
    return InsufficientCreditsError(
        f"Budget exceeded: this request can cost up to {format_credits(exc.needed)} credits but {whose} has "
        f"{format_credits(exc.available)} credits left of its {period} budget of {format_credits(exc.limit)} "
        f"credits ({resets}). Lower max_tokens, or wait for the reset.",
        needed=exc.needed, available=exc.available, headers=headers, budget={
            "scope": "key" if exc.key_id else "team", "key_id": exc.key_id or None, "period": exc.period,
            "limit": credits_from_micros(exc.limit), "remaining": credits_from_micros(exc.available),
            "resets_at": exc.resets_at or None})


def _insufficient(exc: InsufficientCredits) -> GatewayError:
    return InsufficientCreditsError(
        f"Insufficient credits: this request can cost up to {format_credits(exc.needed)} credits "
        f"but team '{exc.team}' has {format_credits(exc.available)} available. Add credits or lower max_tokens.",
        needed=exc.needed, available=exc.available)


_TABLE: dict[type[Exception], _Refusal[Any]] = {entry.refusal: entry for entry in (
    _Refusal(TeamSuspended, lambda exc: PermissionDenied(f"Team '{exc.team}' is suspended.")),
    _Refusal(InsufficientCredits, _insufficient),
    _Refusal(BudgetExceeded, _over_budget),
    _Refusal(RequestInProgress, lambda exc: Conflict(
        "A request with this Idempotency-Key is still in progress; retry when it has finished.",
        headers={"x-should-retry": "true", "retry-after": "1"})),
    _Refusal(TeamNotFound, lambda exc: NotFound(str(exc))),
    _Refusal(KeyNotFound, lambda exc: NotFound(str(exc))),
    _Refusal(TeamAlreadyExists, lambda exc: InvalidRequest(str(exc), status=409)),
    _Refusal(LedgerError, lambda exc: InvalidRequest(str(exc))),
    _Refusal(LedgerUnavailable, lambda exc: ServiceUnavailable(f"The billing ledger is unavailable: {exc}")),
)}


def refusal(exc: LedgerError | LedgerUnavailable) -> GatewayError:
    """What the ledger's refusal ``exc`` is told as: the entry of its class, or of the nearest
    class it derives from."""
    for cls in type(exc).__mro__:
        entry = _TABLE.get(cls)
        if entry is not None:
            return entry.told(exc)
    raise AssertionError(f"no entry for {type(exc).__name__}")  # unreachable: LedgerError has one
