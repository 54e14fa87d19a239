"""What a payment buys: an amount in a currency's minor units as micro-credits, exactly.

Stripe states every amount as an integer in the currency's smallest unit (``amount: 2000`` is USD
20.00, ``amount: 2000`` in JPY is ¥2000, ``amount: 2000`` in KWD is 2.000 dinars): the *exponent* of
the currency says how many minor units make one unit, as Stripe counts them (``docs.stripe.com/currencies``):

- 0 for Stripe's zero-decimal currencies (:data:`ZERO_DECIMAL`: JPY, KRW, …);
- 3 for its three-decimal ones (:data:`THREE_DECIMAL`: BHD, JOD, KWD, OMR, TND);
- 2 for every other, ISK, HUF and TWD included (Stripe's API keeps two decimals for them, even where
  only whole units may be charged).

**The rule.** An operator sets, per currency accepted, how many credits one unit buys
(:class:`CreditRates`; USD at ``credits_per_usd``). One minor unit then buys
``credits per unit × 1,000,000 / 10^exponent`` micro-credits, and that figure must be a whole number:
a rate that would make it fractional (more than 4 decimals for a two-decimal currency: ``0.00001``
credits per USD) is refused when the rates are made, so that no payment is ever rounded, and a refund
of any part of a payment takes back exactly what that part bought. A payment of ``amount_minor`` buys
``amount_minor × that figure`` micro-credits: integers only, no float anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from domain.money import MAX_CREDITS_AMOUNT, MICROS_PER_CREDIT, AmountError

#: Stripe's zero-decimal currencies: an amount is a number of whole units.
ZERO_DECIMAL = frozenset({
    "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf",
})  # fmt: skip
#: Stripe's three-decimal currencies: an amount is a number of thousandths.
THREE_DECIMAL = frozenset({"bhd", "jod", "kwd", "omr", "tnd"})
_CODE = re.compile(r"[a-z]{3}")


class UnsupportedCurrency(AmountError):
    """A payment in a currency the operator set no rate for."""


def minor_unit_exponent(currency: str) -> int:
    """How many decimal places Stripe's amounts in ``currency`` (lowercase ISO 4217) have."""
    if currency in ZERO_DECIMAL:
        return 0
    if currency in THREE_DECIMAL:
        return 3
    return 2


@dataclass(frozen=True, slots=True)
class CreditRates:
    """Credits one unit of each accepted currency buys (``{"usd": Decimal(100)}``), checked when made:
    lowercase ISO codes, positive finite rates that make one minor unit a whole number of micro-credits."""

    per_unit: Mapping[str, Decimal]
    _micros_per_minor: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        micros: dict[str, int] = {}
        for currency, rate in self.per_unit.items():
            if not isinstance(currency, str) or not _CODE.fullmatch(currency):
                raise AmountError(f"a currency is a lowercase ISO 4217 code (usd, eur), got {currency!r}")
            micros[currency] = _micros_per_minor(currency, rate)
        object.__setattr__(self, "_micros_per_minor", micros)

    @classmethod
    def of(cls, **per_unit: str | int | Decimal) -> CreditRates:
        """Rates written as text or integers: ``CreditRates.of(usd="100", eur=110)``."""
        try:
            return cls({currency: Decimal(str(rate)) for currency, rate in per_unit.items()})
        except InvalidOperation:
            raise AmountError(f"a credit rate must be a number, got {per_unit!r}") from None

    def micros_per_minor_unit(self, currency: str) -> int:
        found = self._micros_per_minor.get(currency)
        if found is None:
            accepted = ", ".join(sorted(self._micros_per_minor)) or "none"
            raise UnsupportedCurrency(f"no credit rate for {currency!r} (rates are set for: {accepted})")
        return found

    def micros(self, amount_minor: int, currency: str) -> int:
        """The micro-credits ``amount_minor`` of ``currency`` buys (the module's rule). Refuses
        (``AmountError``) a negative or non-integer amount, and one beyond the largest credit amount."""
        if not isinstance(amount_minor, int) or isinstance(amount_minor, bool) or amount_minor < 0:
            raise AmountError(f"an amount in minor units is a whole number ≥ 0, got {amount_minor!r}")
        micros = amount_minor * self.micros_per_minor_unit(currency)
        if micros > MAX_CREDITS_AMOUNT * MICROS_PER_CREDIT:
            raise AmountError(f"{amount_minor} {currency} buys more than {MAX_CREDITS_AMOUNT:,} credits")
        return micros


def _micros_per_minor(currency: str, rate: Decimal) -> int:
    if not isinstance(rate, Decimal) or not rate.is_finite() or rate <= 0:
        raise AmountError(f"the credit rate of {currency} must be a positive number, got {rate!r}")
    if rate > MAX_CREDITS_AMOUNT:
        raise AmountError(f"the credit rate of {currency} is out of range: at most {MAX_CREDITS_AMOUNT:,} credits")
    exact = rate.scaleb(6 - minor_unit_exponent(currency))
    if exact != exact.to_integral_value():
        places = 6 - minor_unit_exponent(currency)
        raise AmountError(
            f"the credit rate of {currency} ({rate}) must have at most {places} decimals, so that one minor unit "
            "buys a whole number of micro-credits"
        )
    return int(exact)
