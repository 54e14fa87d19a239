"""The gateway's Stripe account, through the official ``stripe`` library.

The library does the wire (form encoding with brackets, Idempotency-Keys, retries) and checks every
webhook's signature (``Webhook.construct_event``: HMAC-SHA256 in constant time, the signed timestamp
within 300 s). Its client is blocking, so its calls run in a thread. Stripe is told the team on both
the Checkout Session and the PaymentIntent it makes (``metadata.tollgate_team``): Stripe copies
neither's metadata to the other, and a dispute names only the PaymentIntent.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import stripe

from domain.payments.amounts import CreditRates, minor_unit_exponent
from domain.payments.stripe_events import TEAM_KEY
from domain.settings_payments import Payments, credits_per_unit


@dataclass(frozen=True, slots=True)
class Checkout:
    """A Checkout Session made for a team's top-up: where to pay, and what it buys."""

    session_id: str
    url: str
    amount: Decimal
    amount_minor: int
    currency: str
    micros: int


class StripeAccount:
    """Checkout Sessions made, PaymentIntents read, webhooks verified, for one Stripe account."""

    def __init__(self, payments: Payments, credits_per_usd: Decimal) -> None:
        self.payments = payments
        self.rates = CreditRates.of(**{payments.currency: credits_per_unit(payments, credits_per_usd)})
        self._http = stripe.RequestsClient()
        base: Any = {"api": payments.api_base} if payments.api_base else None  # the library's BaseAddresses
        self.client = stripe.StripeClient(
            os.environ.get(payments.secret_key_env, ""), base_addresses=base, http_client=self._http
        )
        self._webhook_secret = os.environ.get(payments.webhook_secret_env, "")

    def amount_minor(self, amount: Decimal) -> int:
        """``amount`` (units of the currency) in its minor units; ``ValueError`` if not a whole number of them."""
        minor = amount * 10 ** minor_unit_exponent(self.payments.currency)
        if minor != minor.to_integral_value():
            raise ValueError(f"{amount} {self.payments.currency} is not a whole number of its smallest unit")
        return int(minor)

    async def checkout(self, team: str, amount: Decimal) -> Checkout:
        """A Checkout Session for ``amount`` of the currency, its payment's card saved for later
        (auto-recharge pays off-session with it)."""
        minor = self.amount_minor(amount)
        currency = self.payments.currency
        params: dict[str, Any] = {
            "mode": "payment",
            "line_items": [
                {
                    "price_data": {"currency": currency, "unit_amount": minor, "product_data": {"name": "Credits"}},
                    "quantity": 1,
                }
            ],
            "metadata": {TEAM_KEY: team},
            "payment_intent_data": {"metadata": {TEAM_KEY: team}, "setup_future_usage": "off_session"},
            "customer_creation": "always",
            "success_url": self.payments.success_url,
            "cancel_url": self.payments.cancel_url,
        }
        create = self.client.v1.checkout.sessions.create
        session = await asyncio.to_thread(create, params=params)  # type: ignore[arg-type]  # the typed dict's shape
        return Checkout(session.id, session.url or "", amount, minor, currency, self.rates.micros(minor, currency))

    def verified_event(self, payload: bytes, signature: str) -> dict[str, Any]:
        """The delivery's event, once its signature is checked (``stripe.SignatureVerificationError``
        or ``ValueError`` if it is not Stripe's, or is not JSON)."""
        event = stripe.Webhook.construct_event(payload, signature, self._webhook_secret)
        found: dict[str, Any] = event.to_dict()
        return found

    async def team_of_payment(self, payment_intent: str) -> str | None:
        """The team a PaymentIntent's metadata names (a dispute names only the PaymentIntent)."""
        intent = await asyncio.to_thread(self.client.v1.payment_intents.retrieve, payment_intent)
        metadata: Any = intent.to_dict().get("metadata") or {}
        team = metadata.get(TEAM_KEY)
        return str(team) if team else None

    def close(self) -> None:
        self._http.close()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
