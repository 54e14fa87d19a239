"""What a verified Stripe event does to a team's ledger: each fact counted once.

Stripe delivers an event at least once, in any order, and again on every retry; the team's ledger
makes each count once (a payment by its PaymentIntent, a refund by the charge's running total, a
dispute by its id: ``domain/ledger_payments.py``). An event that is not a Tollgate top-up's, or names
a team this ledger does not have, is answered 200 and left alone (Stripe would otherwise retry it
for three days); one the ledger refuses (a refund of a payment never credited) is answered 200 too,
logged, and found again by ``tollgate payments reconcile``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from app.ledger.service import LedgerService
from app.payments.stripe_account import StripeAccount
from domain.ledger import TeamLedger, TeamNotFound
from domain.ledger_errors import LedgerError
from domain.ledger_payments import PaymentFacts, Reversal
from domain.payments import stripe_events as se

log = logging.getLogger("tollgate.payments")


async def apply_event(ledger: LedgerService, account: StripeAccount, event: dict[str, Any]) -> str:
    """Record what ``event`` says on its team's ledger; returns what was done, for the answer and the log."""
    record = se.read_event(event)
    if isinstance(record, se.Ignored):
        return f"ignored: {record.reason}"
    team = getattr(record, "team", None)
    payment_intent = getattr(record, "payment_intent_id", None)
    if not team and payment_intent:
        team = await account.team_of_payment(payment_intent)
    if not team:
        return "ignored: no Tollgate team named"
    try:
        return await asyncio.to_thread(_record, ledger, account, team, record)
    except TeamNotFound:
        log.error("Stripe event %s names team %r, which this ledger does not have", record.event_id, team)
        return "ignored: unknown team"
    except LedgerError as exc:
        log.error("Stripe event %s for team %r was not recorded: %s", record.event_id, team, exc)
        return f"not recorded: {exc}"


def _record(ledger: LedgerService, account: StripeAccount, team: str, record: Any) -> str:
    rates = account.rates
    if isinstance(record, se.PaymentSucceeded):
        facts = PaymentFacts(
            record.payment_intent_id,
            rates.micros(record.amount_minor, record.currency),
            record.checkout_session_id or "",
            record.customer_id or "",
            record.currency,
            record.amount_minor,
            recharge=record.recharge or "",
        )
        credited = ledger.command(team, lambda t: t.credit_payment(facts, actor="stripe"))
        return "credited" if credited else "credited before"
    if isinstance(record, se.PaymentRefunded):
        total = rates.micros(record.refunded_minor, record.currency)

        def refund(t: TeamLedger) -> int:
            return t.refund_to_total(record.payment_intent_id, record.charge_id, total, actor="stripe")

        return f"refund took {ledger.command(team, refund)}"
    if isinstance(record, se.DisputeOpened) and record.payment_intent_id:
        dispute = Reversal(
            record.dispute_id, record.payment_intent_id, rates.micros(record.amount_minor, record.currency)
        )
        return f"dispute took {ledger.command(team, lambda t: t.open_dispute(dispute, actor='stripe'))}"
    if isinstance(record, se.DisputeClosed) and record.payment_intent_id:
        pi = record.payment_intent_id

        def close(t: TeamLedger) -> int:
            return t.close_dispute(record.dispute_id, pi, won=record.won, actor="stripe")

        return f"dispute closed, {ledger.command(team, close)} back"
    if isinstance(record, se.PaymentFailed) and record.recharge:
        attempt, why = record.recharge, f"card declined: {record.decline_code or record.code or 'no reason given'}"
        still_on = ledger.recharge_failed(team, attempt, why)
        return "auto-recharge attempt failed" + ("" if still_on else ": auto-recharge off")
    return f"ignored: {type(record).__name__}"
