"""The `[payments]` table: credit a team buys itself, through Stripe Checkout.

Without it the gateway takes no payments (credit comes from operators alone). With it, a team's key
may start a top-up (`POST /v1/credits/checkout`), Stripe's webhooks credit it once the payment
succeeded (`POST /webhooks/stripe`), and refunds and disputes take it back (docs/payments.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal

from domain.settings_models import _Strict


class Payments(_Strict, frozen=True):
    #: The environment variable holding Stripe's secret API key (`sk_live_…`, `sk_test_…`); `tollgate
    #: serve` refuses to start while it is unset.
    secret_key_env: str = "STRIPE_SECRET_KEY"
    #: The environment variable holding the webhook endpoint's signing secret (`whsec_…`): every
    #: delivery's `Stripe-Signature` is checked with it; `tollgate serve` refuses to start while it is unset.
    webhook_secret_env: str = "STRIPE_WEBHOOK_SECRET"
    #: Stripe's API address (unset: Stripe's own, `https://api.stripe.com`; a test points it elsewhere).
    api_base: str | None = None
    #: The currency top-ups are paid in (ISO 4217, lower case).
    currency: str = "usd"
    #: Credits one unit of `currency` buys (unset: `credits_per_usd` for `usd`; required for another
    #: currency). It must make every minor unit a whole number of micro-credits.
    credits_per_unit: Decimal | None = None
    #: The least a top-up may be, in units of `currency`.
    min_amount: Decimal = Decimal(5)
    #: The most a top-up may be, in units of `currency`.
    max_amount: Decimal = Decimal(10_000)
    #: Where Stripe Checkout sends the payer after paying (Stripe fills in `{CHECKOUT_SESSION_ID}`).
    success_url: str = "https://example.com/credits?paid={CHECKOUT_SESSION_ID}"
    #: Where Stripe Checkout sends the payer who cancelled.
    cancel_url: str = "https://example.com/credits?cancelled=1"


def credits_per_unit(payments: Payments, credits_per_usd: Decimal) -> Decimal:
    """The credits one unit of the top-ups' currency buys."""
    return payments.credits_per_unit if payments.credits_per_unit is not None else credits_per_usd


def check_payments(payments: Payments, fail: Callable[[str, str], None]) -> None:
    """The table's rules the schema cannot say (``fail`` raises, naming the key)."""
    if not payments.currency.isalpha() or payments.currency != payments.currency.lower():
        fail("payments.currency", f"an ISO 4217 code in lower case, e.g. usd; got {payments.currency!r}")
    if payments.credits_per_unit is None and payments.currency != "usd":
        fail("payments.credits_per_unit", "required for a currency other than usd")
    if payments.credits_per_unit is not None and payments.credits_per_unit <= 0:
        fail("payments.credits_per_unit", "must be above 0")
    if not 0 < payments.min_amount <= payments.max_amount:
        fail("payments.min_amount", "must be above 0 and at most max_amount")


def require_payment_secrets(payments: Payments | None, origin: str, environ: Mapping[str, str]) -> None:
    """Check, before serving, that Stripe's key and the webhook secret are set."""
    from domain.settings import ConfigError

    if payments is None:
        return
    for name in ("secret_key_env", "webhook_secret_env"):
        variable = getattr(payments, name)
        if not environ.get(variable):
            raise ConfigError(origin, f"payments.{name}", f"environment variable {variable} is not set")
