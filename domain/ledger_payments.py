"""Payments on the team ledger: credit a payment bought, once, and refunds and disputes that take it back.

A payment provider (Stripe) tells the gateway a payment succeeded, was refunded or disputed, as often
as it likes and in any order; the ledger makes each fact count once. A payment's credit is a paid lot
named by the payment's id (``CreditsAdded`` with ``payment_intent``), recorded once however often it
is told. A refund or a dispute is an event of its own, never an edit: it takes the payment's credit
back, from the payment's own lot first, then from the rest of the available balance in the drawing
order; what the balance cannot give (the credit was spent, or is held by requests in flight) is what
the team then owes (``owed``), which the next credit pays first and which refuses every request
(402) until it is paid. A dispute closed in the team's favour gives the disputed credit back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from domain import credit_lots
from domain import ledger_events as events
from domain.credit_lots import PAID, LotTerms
from domain.ledger_errors import InvalidAmount, LedgerError
from domain.ledger_state import LedgerState, Payment, check_positive

if TYPE_CHECKING:
    from datetime import datetime


class PaymentNotFound(LedgerError):
    """A refund or dispute of a payment the team's ledger never credited."""


@dataclass(frozen=True, slots=True)
class PaymentFacts:
    """What a provider says of a succeeded payment: its id (the once-only key), the credit it buys,
    and the provider's other ids and amounts, kept on the event for auditors and reconciliation."""

    payment_intent: str
    amount: int  # micro-credits
    checkout_session: str = ""
    customer: str = ""
    currency: str = ""
    amount_minor: int = 0
    #: The auto-recharge attempt the payment settles (its metadata says so; ``""``: a top-up).
    recharge: str = ""

    def record(self) -> dict[str, str]:
        return {
            "checkout_session": self.checkout_session,
            "customer": self.customer,
            "currency": self.currency,
            "amount_minor": str(self.amount_minor),
        }


@dataclass(frozen=True, slots=True)
class Reversal:
    """A refund or a dispute: its provider id (the once-only key), the payment, the credit it takes."""

    reversal_id: str
    payment_intent: str
    amount: int  # micro-credits


class TeamPayments(LedgerState):
    """The payment commands of the team aggregate (a part of ``TeamLedger``, never used alone)."""

    if TYPE_CHECKING:
        version: int

        def now(self) -> datetime: ...

        def trigger_event(self, event_class: Any, **kwargs: Any) -> None: ...

        def expire_lots(self, at: datetime) -> None: ...

        def add_credits(
            self,
            amount: int,
            reference: str = "",
            *,
            actor: str = "",
            reason: str = "",
            terms: LotTerms = credit_lots.PAID_FOREVER,
            payment: PaymentFacts | None = None,
        ) -> int: ...

    def credit_payment(self, payment: PaymentFacts, *, actor: str = "") -> bool:
        """Credit what ``payment`` bought as a paid lot, once: False (and nothing recorded) if the
        payment was credited before."""
        if not payment.payment_intent:
            raise InvalidAmount("a payment must name its id")
        if payment.payment_intent in self.payments:
            return False
        self.add_credits(
            payment.amount, payment.payment_intent, actor=actor, reason="payment", terms=LotTerms(PAID), payment=payment
        )
        return True

    def refund_payment(self, refund: Reversal, *, actor: str = "") -> int:
        """Take back the credit a refund of the payment gave back (once per refund); returns what the
        balance lost (the rest is owed)."""
        return self._reverse(events.PaymentRefunded, refund, actor)

    def refund_to_total(self, payment_intent: str, charge_id: str, total_refunded: int, *, actor: str = "") -> int:
        """A provider's running total refunded of the payment's charge (micro-credits): what it adds to
        what the ledger took back before is taken now. A repeated or late event, whose total the ledger
        has reached already, takes nothing."""
        payment = self._payment(payment_intent)
        more = total_refunded - payment.refunded
        if more <= 0:
            return 0
        return self.refund_payment(
            Reversal(f"{charge_id}:refunded:{total_refunded}", payment_intent, more), actor=actor
        )

    def open_dispute(self, dispute: Reversal, *, actor: str = "") -> int:
        """Take back the credit a dispute of the payment holds (once per dispute); returns what the
        balance lost (the rest is owed)."""
        return self._reverse(events.DisputeOpened, dispute, actor)

    def close_dispute(self, dispute_id: str, payment_intent: str, *, won: bool, actor: str = "") -> int:
        """Record a dispute's end (once): won, its credit comes back as a paid lot (paying what is owed
        first); lost, the credit stays taken. Returns what came back."""
        payment = self._payment(payment_intent)
        if f"{dispute_id}:closed" in payment.reversals:
            return 0
        if dispute_id not in payment.reversals:
            raise PaymentNotFound(f"dispute {dispute_id!r} of payment {payment_intent!r} was never opened")
        at = self.now()
        self.expire_lots(at)
        amount = payment.disputed if won else 0
        owed_paid = min(self.owed, amount)
        self.trigger_event(
            events.DisputeClosed,
            timestamp=at,
            payment_intent=payment_intent,
            dispute_id=dispute_id,
            won=won,
            amount=amount,
            lot=f"lot-{self.version + 1}" if amount > owed_paid else "",
            owed_paid=owed_paid,
            balance_after=self.balance + amount - owed_paid,
            actor=actor,
        )
        return amount

    def _payment(self, payment_intent: str) -> Payment:
        payment = self.payments.get(payment_intent)
        if payment is None:
            raise PaymentNotFound(f"team {self.name!r} has no payment {payment_intent!r}")
        return payment

    def _reverse(self, event_class: Any, reversal: Reversal, actor: str) -> int:
        check_positive(reversal.amount, "a refund or dispute")
        payment = self._payment(reversal.payment_intent)
        if reversal.reversal_id in payment.reversals:
            return 0
        at = self.now()
        self.expire_lots(at)
        room = max(0, self.available)
        own = self.lots.get(payment.lot)
        from_own = min(reversal.amount, room, own.remaining if own is not None else 0)
        drawn = {payment.lot: from_own} if from_own else {}
        others = {lot_id: lot for lot_id, lot in self.lots.items() if lot_id != payment.lot}
        drawn.update(credit_lots.draw(others, min(reversal.amount, room) - from_own))
        taken = sum(drawn.values())
        self.trigger_event(
            event_class,
            timestamp=at,
            payment_intent=reversal.payment_intent,
            reversal_id=reversal.reversal_id,
            amount=reversal.amount,
            taken=taken,
            drawn=drawn,
            owed_added=reversal.amount - taken,
            balance_after=self.balance - taken,
            actor=actor,
        )
        return taken
