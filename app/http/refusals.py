"""The one table from the ledger's refusals to the HTTP errors every wire answers them with.

The ledger (``domain/ledger_errors.py``) and its service layer (``app/ledger/refusals.py``) refuse in
their own terms and words (``told``); only here does a refusal get its HTTP status, its error type in
each protocol, its headers and the fields its body adds. The generation endpoints' billed call, the
admin API and the admin verify run all answer through :func:`http_error`. The most specific entry for
the refusal's class wins; a refusal of the ledger without an entry of its own is the request's fault
(400, in the ledger's own words).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from app.errors import (
    Conflict,
    GatewayError,
    InsufficientCreditsError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    ServiceUnavailable,
)
from app.ledger.refusals import REFUSALS, IdempotencyKeyReused, ServiceRefusal
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
from domain.money import credits_from_micros

Refusal = LedgerError | ServiceRefusal


def _over_budget(exc: BudgetExceeded) -> GatewayError:
    headers = {"x-tollgate-budget-resets-at": exc.resets_at} if exc.resets_at else {}
    return InsufficientCreditsError(
        exc.told,
        needed=exc.needed,
        available=exc.available,
        headers=headers,
        budget={
            "scope": "key" if exc.key_id else "team",
            "key_id": exc.key_id or None,
            "period": exc.period,
            "limit": credits_from_micros(exc.limit),
            "remaining": credits_from_micros(exc.available),
            "resets_at": exc.resets_at or None,
        },
    )


def _insufficient(exc: InsufficientCredits) -> GatewayError:
    return InsufficientCreditsError(exc.told, needed=exc.needed, available=exc.available)


#: Each refusal's class, and the HTTP error it is answered with (its words are the refusal's ``told``).
_TABLE: dict[type[Exception], Callable[[Any], GatewayError]] = {
    TeamSuspended: lambda exc: PermissionDenied(exc.told),
    InsufficientCredits: _insufficient,
    BudgetExceeded: _over_budget,
    RequestInProgress: lambda exc: Conflict(exc.told, headers={"x-should-retry": "true", "retry-after": "1"}),
    IdempotencyKeyReused: lambda exc: Conflict(exc.told),
    TeamNotFound: lambda exc: NotFound(exc.told),
    KeyNotFound: lambda exc: NotFound(exc.told),
    TeamAlreadyExists: lambda exc: InvalidRequest(exc.told, status=409),
    LedgerError: lambda exc: InvalidRequest(exc.told),
    # the ledger is away, owes a charge, cannot verify: transient, nothing was charged
    ServiceRefusal: lambda exc: ServiceUnavailable(exc.told),
}


def http_error(exc: Refusal) -> GatewayError:
    """What the refusal ``exc`` is answered with: the entry of its class, or of the nearest class
    it derives from."""
    for cls in type(exc).__mro__:
        told = _TABLE.get(cls)
        if told is not None:
            return told(exc)
    raise AssertionError(f"no entry for {type(exc).__name__}")  # unreachable: both bases have one


@contextmanager
def answered_over_http() -> Iterator[None]:
    """Within the block, a refusal of the ledger or of its service is raised as its HTTP error."""
    try:
        yield
    except REFUSALS as exc:
        raise http_error(exc) from None


@contextmanager
def service_refusals_answered() -> Iterator[None]:
    """Within the block, a refusal of the ledger's service (the ledger away, a charge owed) is
    raised as its HTTP error; any other error is a fault, answered as one (a charge the ledger
    itself refuses for a reason of its own is a bug, not the client's doing)."""
    try:
        yield
    except ServiceRefusal as exc:
        raise http_error(exc) from None
