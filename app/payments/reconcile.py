"""``tollgate payments reconcile``: the ledger's payments against Stripe's own list.

Webhooks can be lost for good (an endpoint down past Stripe's three days of retries, a secret
rotated wrongly). Reconciliation asks Stripe for every succeeded PaymentIntent of a Tollgate top-up
created since a date, with its charge's refunded total, and compares each with the team's ledger:
a payment the ledger never credited, or refunds it has not all taken back. And the other way: every
payment the ledger credited since then is looked up at Stripe, and one Stripe does not have as
succeeded (a webhook forged with a leaked secret, a test-mode event sent to a live gateway) is a
difference too.

``--apply`` records each: a missing payment or refund as the webhook would have (the payment's
credit naming its PaymentIntent, the auto-recharge attempt it paid if any; the refund by the
charge's running total), so a webhook that does arrive later changes nothing; a credit Stripe never
took the money for as a reversal of that payment (``<PaymentIntent>:not-paid``: taken from the
balance, the rest owed if it was spent); credit taken back beyond what Stripe refunded as an
adjustment giving it back, its reference naming the charge. Entries of their own, never edits, each
made once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import stripe

from app.ledger.queries import credited_payments
from app.ledger.service import LedgerService
from app.payments.stripe_account import StripeAccount
from domain.ledger import TeamLedger, TeamNotFound
from domain.ledger_payments import PaymentFacts, Reversal
from domain.ledger_state import Payment
from domain.payments.stripe_events import RECHARGE_KEY, TEAM_KEY

#: What a difference is, in the report.
NOT_CREDITED, REFUND_MISSING, TOOK_MORE, NOT_PAID = (
    "payment not credited",
    "refund not taken back",
    "took back more than refunded",
    "credited but not paid",
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
    recharge: str = ""  # the auto-recharge attempt it paid ("": a top-up)


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
        yield _payment(account, str(team), found)


def _payment(account: StripeAccount, team: str, found: dict[str, Any]) -> StripePayment:
    """A succeeded PaymentIntent as the reconciliation reads it (its charge expanded)."""
    charge = found.get("latest_charge") or {}
    currency = str(found["currency"])
    received = int(found.get("amount_received") or found["amount"])
    return StripePayment(
        team,
        str(found["id"]),
        str(charge.get("id", "")) if isinstance(charge, dict) else str(charge),
        account.rates.micros(received, currency),
        account.rates.micros(int(charge.get("amount_refunded", 0)) if isinstance(charge, dict) else 0, currency),
        str(found.get("customer") or ""),
        currency,
        received,
        str((found.get("metadata") or {}).get(RECHARGE_KEY) or ""),
    )


def differences(account: StripeAccount, ledger: LedgerService, since: datetime) -> list[Difference]:
    """What the ledger and Stripe disagree on about the top-ups since ``since``."""
    found: list[Difference] = []
    listed: set[str] = set()
    for paid in stripe_payments(account, since):
        listed.add(paid.payment_intent)
        try:
            payment = ledger.command(paid.team, _payment_of(paid.payment_intent))
        except TeamNotFound:
            continue
        if payment is None:
            found.append(Difference(NOT_CREDITED, paid, paid.micros))
        elif payment.refunded < paid.refunded_micros:
            found.append(Difference(REFUND_MISSING, paid, paid.refunded_micros - payment.refunded))
        elif payment.refunded > paid.refunded_micros and not ledger.command(paid.team, _adjusted_under(paid)):
            found.append(Difference(TOOK_MORE, paid, payment.refunded - paid.refunded_micros))
    return found + unpaid_credits(account, ledger, since, listed)


def unpaid_credits(
    account: StripeAccount, ledger: LedgerService, since: datetime, listed: set[str]
) -> list[Difference]:
    """The payments the ledger credited since ``since`` that Stripe does not have as succeeded
    (each not in Stripe's list is looked up alone: its PaymentIntent may be older than ``since``)."""
    found: list[Difference] = []
    for row in credited_payments(ledger.store, since.isoformat()):
        payment_intent, team = str(row["reference"]), str(row["team_name"])
        if payment_intent in listed:
            continue
        try:
            intent = account.client.v1.payment_intents.retrieve(payment_intent).to_dict()
        except stripe.InvalidRequestError:  # no such PaymentIntent at all
            intent = {"id": payment_intent, "status": "missing", "amount": 0, "currency": account.payments.currency}
        if intent.get("status") == "succeeded":
            continue
        try:
            payment = ledger.command(team, _payment_of(payment_intent))
        except TeamNotFound:
            continue
        if payment is None:
            continue
        unpaid = StripePayment(team, payment_intent, "", 0, 0, "", account.payments.currency, 0)
        kept = payment.amount - payment.refunded - payment.disputed
        if kept > 0:
            found.append(Difference(f"{NOT_PAID} (Stripe: {intent.get('status')})", unpaid, kept))
    return found


def _payment_of(payment_intent: str) -> Callable[[TeamLedger], Payment | None]:
    return lambda team: team.payments.get(payment_intent)


def apply(ledger: LedgerService, difference: Difference) -> bool:
    """Record what the webhook would have, or the adjustment that corrects the ledger (once each)."""
    paid = difference.payment
    if difference.kind.startswith(NOT_PAID):  # taken back as a reversal of the payment, into debt if spent
        unpaid = Reversal(f"{paid.payment_intent}:not-paid", paid.payment_intent, difference.micros)
        ledger.command(paid.team, lambda t: t.refund_payment(unpaid, actor="reconcile"))
        return True
    if difference.kind == TOOK_MORE:
        reason = f"payments reconcile: {difference.kind}"
        ledger.adjust_credits(paid.team, difference.micros, reason, _took_more_reference(paid), actor="reconcile")
        return True
    if difference.kind == NOT_CREDITED:
        facts = PaymentFacts(
            paid.payment_intent,
            paid.micros,
            "",
            paid.customer,
            paid.currency,
            paid.amount_minor,
            recharge=paid.recharge,
        )
        credited = bool(ledger.command(paid.team, lambda t: t.credit_payment(facts, actor="reconcile")))
        if paid.refunded_micros:  # and what was refunded of it since
            ledger.command(paid.team, _refunded(paid))
        return credited
    if difference.kind == REFUND_MISSING:
        return ledger.command(paid.team, _refunded(paid)) > 0
    return False


def _took_more_reference(paid: StripePayment) -> str:
    """The adjustment giving back what the ledger took beyond Stripe's refunded total names the
    charge and that total: made once for it (a later refund makes a new total)."""
    return f"{paid.charge}:reconcile:{paid.refunded_micros}"


def _adjusted_under(paid: StripePayment) -> Callable[[TeamLedger], bool]:
    return lambda team: _took_more_reference(paid) in team.adjustment_references


def _refunded(paid: StripePayment) -> Callable[[TeamLedger], int]:
    return lambda team: team.refund_to_total(paid.payment_intent, paid.charge, paid.refunded_micros, actor="reconcile")
