"""Auto-recharge's payments: each attempt a charge began is paid off-session on the team's saved card.

The ledger decides when an attempt is due and records it (``RechargeStarted``, in the commit of the
charge that took the available balance under the threshold: ``domain/ledger_recharge.py``); the
history projection puts it in the outbox (``projections/recharges.py``). This thread, in every
gateway process that takes payments, claims each due attempt in the database (one process pays it)
and creates one PaymentIntent for it with Stripe's library:

- on the card saved by the team's latest Checkout payment (its customer and payment method, read
  from that PaymentIntent), ``off_session`` and confirmed at once, for the attempt's amount in the
  currency's minor units (rounded up to a whole minor unit: the credit is what the payment buys);
- with the attempt's id as the Idempotency-Key, so a creation retried after a lost answer, by this
  process or another, is the same payment: never two for one attempt;
- with ``metadata.tollgate_recharge`` naming the attempt, so its webhooks settle the same attempt.

Its verdict goes on the ledger: a payment that succeeded is credited (once per PaymentIntent,
whichever of this and its webhook comes first); a declined card (``CardError``) or a payment Stripe
refused to make is a failed attempt, and the third in a row turns auto-recharge off with an alert.
No verdict (Stripe unreachable, a 5xx, a payment still processing) is tried again later.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import stripe

from app.ledger.service import LedgerService
from app.payments.stripe_account import StripeAccount
from app.store.database import Database, Sql
from domain.ledger_payments import PaymentFacts
from domain.payments.stripe_events import RECHARGE_KEY, TEAM_KEY
from projections.recharges import RechargeOutbox

log = logging.getLogger("tollgate.payments")

#: How often the outbox is looked at, in seconds.
POLL_SECONDS = 0.25
#: How long a claimed attempt is this process's before another may try (longer than Stripe's timeout).
CLAIM_SECONDS = 90.0
#: Seconds before a try without a verdict is made again (doubling up to ``LONGEST_WAIT``).
FIRST_WAIT = 2.0
LONGEST_WAIT = 300.0


def minor_units(micros: int, micros_per_minor: int) -> int:
    """The smallest whole number of minor units that buys at least ``micros``."""
    return -(-micros // micros_per_minor)


class Recharger:
    """A thread that pays every due auto-recharge attempt, until stopped."""

    def __init__(self, database: Database, ledger: LedgerService, account: StripeAccount) -> None:
        self._database = database
        self._ledger = ledger
        self._account = account
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tollgate-auto-recharge", daemon=True)

    def start(self) -> Recharger:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=CLAIM_SECONDS)

    def _run(self) -> None:
        sql = Sql(self._database)
        outbox = RechargeOutbox(sql)
        try:
            while not self._stop.wait(POLL_SECONDS):
                try:
                    for attempt in outbox.due(time.time()):
                        if self._stop.is_set():
                            break
                        if outbox.claim(attempt, time.time() + CLAIM_SECONDS):
                            self._pay(outbox, attempt)
                except Exception:
                    log.warning("auto-recharge paused: its outbox could not be read or written", exc_info=True)
        finally:
            sql.close()

    def _pay(self, outbox: RechargeOutbox, row: dict[str, Any]) -> None:
        attempt, team = str(row["attempt"]), str(row["team_name"])
        now = datetime.now(UTC).isoformat()
        pending, intents = self._ledger.recharge_facts(team)
        if pending != attempt:  # credited by its webhook, failed, or the settings changed meanwhile
            outbox.settled(attempt, now, "not pending")
            return
        try:
            card = self._saved_card(intents)
            if card is None:
                self._failed(outbox, team, attempt, "no saved card: the team has not paid through Checkout yet")
                return
            intent = self._create(team, attempt, int(row["amount"]), card)
        except stripe.CardError as exc:
            self._failed(outbox, team, attempt, f"card declined: {exc.code or ''} {exc.user_message or ''}".strip())
            return
        except (stripe.InvalidRequestError, stripe.AuthenticationError, stripe.PermissionError) as exc:
            self._failed(outbox, team, attempt, f"Stripe refused the payment: {exc.user_message or exc}")
            return
        except stripe.StripeError as exc:  # no verdict: unreachable, 5xx, rate limited
            self._retry(outbox, row, f"{type(exc).__name__}: {exc.user_message or exc}")
            return
        if intent.get("status") != "succeeded":
            self._retry(outbox, row, f"payment {intent.get('id')} is {intent.get('status')}")
            return
        credited = self._credit(team, attempt, intent)
        outbox.settled(attempt, now, "succeeded" if credited else "succeeded (credited by its webhook)", intent["id"])

    def _saved_card(self, intents: list[str]) -> tuple[str, str] | None:
        """The customer and payment method of the team's latest payment that saved its card."""
        for payment_intent in intents:
            found = self._account.client.v1.payment_intents.retrieve(payment_intent).to_dict()
            customer, method = found.get("customer"), found.get("payment_method")
            if isinstance(customer, str) and isinstance(method, str) and found.get("setup_future_usage"):
                return customer, method
        return None

    def _create(self, team: str, attempt: str, micros: int, card: tuple[str, str]) -> dict[str, Any]:
        currency = self._account.payments.currency
        params: Any = {
            "amount": minor_units(micros, self._account.rates.micros_per_minor_unit(currency)),
            "currency": currency,
            "customer": card[0],
            "payment_method": card[1],
            "off_session": True,
            "confirm": True,
            "description": f"Tollgate auto-recharge for {team}",
            "metadata": {TEAM_KEY: team, RECHARGE_KEY: attempt},
        }
        created = self._account.client.v1.payment_intents.create(params=params, options={"idempotency_key": attempt})
        intent: dict[str, Any] = created.to_dict()
        return intent

    def _credit(self, team: str, attempt: str, intent: dict[str, Any]) -> bool:
        rates, currency = self._account.rates, str(intent["currency"])
        facts = PaymentFacts(
            str(intent["id"]),
            rates.micros(int(intent["amount_received"]), currency),
            "",
            str(intent.get("customer") or ""),
            currency,
            int(intent["amount_received"]),
            recharge=attempt,
        )
        return self._ledger.command(team, lambda t: t.credit_payment(facts, actor="auto_recharge"))

    def _failed(self, outbox: RechargeOutbox, team: str, attempt: str, why: str) -> None:
        still_on = self._ledger.recharge_failed(team, attempt, why)
        log.warning("auto-recharge %s of team %r failed (%s)%s", attempt, team, why, "" if still_on else ": now off")
        outbox.settled(attempt, datetime.now(UTC).isoformat(), f"failed: {why}")

    def _retry(self, outbox: RechargeOutbox, row: dict[str, Any], why: str) -> None:
        wait = min(LONGEST_WAIT, FIRST_WAIT * 2 ** max(0, int(row["tries"])))
        log.warning("auto-recharge %s: no verdict yet (%s); trying again in %.0f s", row["attempt"], why, wait)
        outbox.retry(str(row["attempt"]), time.time() + wait, why)
