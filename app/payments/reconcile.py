"""``tollgate payments reconcile``: the ledger's payments against Stripe's own list.

Webhooks can be lost for good (an endpoint down past Stripe's three days of retries, a secret
rotated wrongly). Reconciliation asks Stripe for every succeeded PaymentIntent of a Tollgate top-up
created since a date, with its charge's refunded total, and compares each with the team's ledger:
a payment the ledger never credited, or refunds it has not all taken back. ``--apply`` records each
as the webhook would have (the payment's credit naming its PaymentIntent, the refund by the charge's
running total), so a webhook that does arrive later changes nothing. Where the ledger took back more
than Stripe refunded, it is reported only: an operator decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.ledger.service import LedgerService
from app.payments.stripe_account import StripeAccount
from domain.ledger import TeamLedger, TeamNotFound
from domain.ledger_payments import PaymentFacts
from domain.ledger_state import Payment
from domain.payments.stripe_events import TEAM_KEY

#: What a difference is, in the report.
NOT_CREDITED, REFUND_MISSING, TOOK_MORE = (
    "payment not credited",
    "refund not taken back",
    "took back more than refunded",
)


@dataclass(frozen=True, slots=True)
class StripePayment:
    """A succeeded PaymentIntent of a top-up, as Stripe lists it."""

    team: str
    payment_intent: str
    charge: str
    micros: int
    refunded_micros: int
    customer: str
    currency: str
    amount_minor: int


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    payment: StripePayment
    #: Micro-credits the ledger lacks (a payment's credit, a refund's remainder) or has too much of.
    micros: int


def stripe_payments(account: StripeAccount, since: datetime) -> Iterator[StripePayment]:
    """Every succeeded top-up PaymentIntent created since ``since``, newest first (Stripe's order)."""
    params: Any = {"created": {"gte": int(since.timestamp())}, "limit": 100, "expand": ["data.latest_charge"]}
    for intent in account.client.v1.payment_intents.list(params=params).auto_paging_iter():
        found = intent.to_dict()
        team = (found.get("metadata") or {}).get(TEAM_KEY)
        if found.get("status") != "succeeded" or not team:
            continue
        charge = found.get("latest_charge") or {}
        currency = str(found["currency"])
        received = int(found.get("amount_received") or found["amount"])
        yield StripePayment(
            str(team),
            str(found["id"]),
            str(charge.get("id", "")) if isinstance(charge, dict) else str(charge),
            account.rates.micros(received, currency),
            account.rates.micros(int(charge.get("amount_refunded", 0)) if isinstance(charge, dict) else 0, currency),
            str(found.get("customer") or ""),
            currency,
            received,
        )


def differences(account: StripeAccount, ledger: LedgerService, since: datetime) -> list[Difference]:
    """What the ledger and Stripe disagree on about the top-ups since ``since``."""
    found: list[Difference] = []
    for paid in stripe_payments(account, since):
        try:
            payment = ledger.command(paid.team, _payment_of(paid.payment_intent))
        except TeamNotFound:
            continue
        if payment is None:
            found.append(Difference(NOT_CREDITED, paid, paid.micros))
        elif payment.refunded < paid.refunded_micros:
            found.append(Difference(REFUND_MISSING, paid, paid.refunded_micros - payment.refunded))
        elif payment.refunded > paid.refunded_micros:
            found.append(Difference(TOOK_MORE, paid, payment.refunded - paid.refunded_micros))
    return found


def _payment_of(payment_intent: str) -> Callable[[TeamLedger], Payment | None]:
    return lambda team: team.payments.get(payment_intent)


def apply(ledger: LedgerService, difference: Difference) -> bool:
    """Record what the webhook would have; False for a difference an operator must decide."""
    paid = difference.payment
    if difference.kind == NOT_CREDITED:
        facts = PaymentFacts(paid.payment_intent, paid.micros, "", paid.customer, paid.currency, paid.amount_minor)
        credited = bool(ledger.command(paid.team, lambda t: t.credit_payment(facts, actor="reconcile")))
        if paid.refunded_micros:  # and what was refunded of it since
            ledger.command(paid.team, _refunded(paid))
        return credited
    if difference.kind == REFUND_MISSING:
        return ledger.command(paid.team, _refunded(paid)) > 0
    return False


def _refunded(paid: StripePayment) -> Callable[[TeamLedger], int]:
    return lambda team: team.refund_to_total(paid.payment_intent, paid.charge, paid.refunded_micros, actor="reconcile")
