"""The one table from the ledger's refusals to HTTP errors (``app/http/refusals.py``): each refusal's
status, error type and words, which every wire answers with and the CLI prints (``told``)."""

from __future__ import annotations

import pytest

from app.errors import (
    Conflict,
    InsufficientCreditsError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    ServiceUnavailable,
)
from app.http.refusals import answered_over_http, http_error, service_refusals_answered
from app.ledger.refusals import (
    ChargeNotRecorded,
    ChargeOwed,
    IdempotencyKeyReused,
    LedgerNotWritable,
    VerifyUnavailable,
)
from app.ledger.writer import LedgerUnavailable, RefusedByStore
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
from domain.ledger_errors import RefusingBudget


@pytest.mark.parametrize(
    ("refused", "told", "status", "message"),
    [
        (TeamSuspended("acme"), PermissionDenied, 403, "Team 'acme' is suspended."),
        (
            InsufficientCredits("acme", 2_500_000, 1_000_000),
            InsufficientCreditsError,
            402,
            (
                "Insufficient credits: this request can cost up to 2.5 credits but team 'acme' has 1 available. "
                "Add credits or lower max_tokens."
            ),
        ),
        (
            RequestInProgress("acme", "r1"),
            Conflict,
            409,
            "A request with this Idempotency-Key is still in progress; retry when it has finished.",
        ),
        (IdempotencyKeyReused(), Conflict, 409, "This Idempotency-Key was already used for a different request body."),
        (TeamNotFound("ghost"), NotFound, 404, "team 'ghost' does not exist"),
        (KeyNotFound("acme", "key_x"), NotFound, 404, "team 'acme' has no key 'key_x'"),
        (TeamAlreadyExists("acme"), InvalidRequest, 409, "team 'acme' already exists"),
        (LedgerError("team 'acme' is already suspended"), InvalidRequest, 400, "team 'acme' is already suspended"),
        (RefusedByStore("too big", "balance"), InvalidRequest, 400, "the ledger refused this command: too big"),
        (LedgerUnavailable("no database"), ServiceUnavailable, 503, "The billing ledger is unavailable: no database"),
        (
            LedgerNotWritable(),
            ServiceUnavailable,
            503,
            (
                "The billing ledger cannot be written right now, so the gateway serves nothing it could not "
                "charge; nothing was charged. Retry shortly."
            ),
        ),
        (
            ChargeOwed(LedgerUnavailable("no database")),
            ServiceUnavailable,
            503,
            (
                "The billing ledger is unavailable (no database); this stream will be charged once it can be "
                "written again."
            ),
        ),
        (
            ChargeNotRecorded(RefusedByStore("gone")),
            ServiceUnavailable,
            503,
            "The billing ledger could not record this request's charge: the ledger refused this command: gone",
        ),
        (VerifyUnavailable("no report"), ServiceUnavailable, 503, "The ledger could not be verified now: no report"),
    ],
)
def test_every_refusal_is_told_by_the_one_table(refused, told, status, message):
    error = http_error(refused)
    assert type(error) is told
    assert (error.status, error.message) == (status, message)
    assert refused.told == message  # the CLI's words are the APIs'


def test_a_retry_in_progress_is_told_to_come_back_shortly():
    assert http_error(RequestInProgress("acme", "r1")).response_headers()["retry-after"] == "1"


def test_an_exceeded_budget_says_which_budget_and_when_it_resets():
    refused = BudgetExceeded(
        "acme",
        2_000_000,
        500_000,
        RefusingBudget(key_id="key_1", limit=10_000_000, period="day", resets_at="2030-01-02T00:00:00Z"),
    )
    error = http_error(refused)
    assert isinstance(error, InsufficientCreditsError)
    assert error.message == (
        "Budget exceeded: this request can cost up to 2 credits but key 'key_1' of team 'acme' "
        "has 0.5 credits left of its daily budget of 10 credits (it resets at "
        "2030-01-02T00:00:00Z). Lower max_tokens, or wait for the reset."
    )
    assert error.headers == {"x-tollgate-budget-resets-at": "2030-01-02T00:00:00Z"}
    assert error.budget is not None
    assert error.budget["scope"] == "key"
    assert error.budget["period"] == "day"


def test_a_block_answers_the_refusals_it_is_for_and_lets_faults_through():
    with pytest.raises(PermissionDenied), answered_over_http():
        raise TeamSuspended("acme")
    with pytest.raises(ServiceUnavailable), service_refusals_answered():
        raise ChargeOwed(LedgerUnavailable("no database"))
    # a charge the ledger refuses for its own reason is a fault (a 500), not the client's doing
    with pytest.raises(LedgerError), service_refusals_answered():
        raise LedgerError("model 'x' has no price in force")
