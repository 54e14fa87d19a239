"""Money in Tollgate: integer micro-credits, and the one rounding rule.

Every amount the ledger stores is an ``int`` number of micro-credits (1 credit = 1,000,000
micro-credits), like TigerBeetle's integer amounts: sums are exact, and there is no float anywhere.

**The rounding rule** (the only place a money amount is rounded): a request's cost is first computed
exactly, as a ``Decimal`` number of micro-credits (tokens × USD-per-million price × credits-per-USD),
and that exact total is rounded **up** to a whole micro-credit, once per request
(:func:`round_up_to_micros`). Holds use the same rule, so a hold always covers the charge it
guards when the usage stays within the hold's token bound.

USD figures are never stored as the source of truth: they are derived from micro-credits by an
exact division (:func:`usd_from_micros`), shown with up to 28 significant digits.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation

MICROS_PER_CREDIT = 1_000_000
_MICROS = Decimal(MICROS_PER_CREDIT)
_ONE_MICRO = Decimal("0.000001")


#: The most credits one amount typed by a person (a top-up, a new team's credits) may be: 10^10
#: credits, 10^16 micro-credits. The ledger keeps balances in signed 64-bit micro-credits (at most
#: about 9.2 × 10^18), so more than 900 top-ups of this size still fit in one balance, while any real
#: top-up (at the default 100 credits per USD, this is USD 100 million) stays far below it. A typo
#: of a few extra digits is refused here, with a clear message, rather than deep in the ledger.
MAX_CREDITS_AMOUNT = 10**10


class AmountError(ValueError):
    """A credit amount that cannot be represented exactly in micro-credits."""


def round_up_to_micros(exact_micros: Decimal) -> int:
    """Apply the rounding rule: an exact micro-credit amount, rounded up to a whole micro-credit."""
    return int(exact_micros.to_integral_value(rounding=ROUND_CEILING))


def micros_from_credits(amount: str | int | Decimal) -> int:
    """Parse a credit amount typed by a person (``"12.5"``) into exact micro-credits.

    Amounts with more than six decimals are refused rather than rounded: a top-up is an
    operator's statement of fact, not a computed cost. So are amounts beyond
    :data:`MAX_CREDITS_AMOUNT` either way, and anything that is not a finite number.
    """
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation:
        raise AmountError(f"not a number: {amount!r}") from None
    if not value.is_finite():
        raise AmountError(f"not a finite number: {amount!r}")
    if value.copy_abs() > MAX_CREDITS_AMOUNT:  # exact: before any arithmetic that could overflow
        raise AmountError(f"{amount!r} is out of range: one amount may be at most {MAX_CREDITS_AMOUNT:,} credits")
    if value != value.quantize(_ONE_MICRO):  # exact, however small (a product could underflow to 0)
        raise AmountError(f"{amount!r} has more than 6 decimals (1 micro-credit is the smallest unit)")
    return int(value.scaleb(6))  # at most 17 digits here: exact


def _plain(value: Decimal) -> Decimal:
    """Drop trailing zeros without switching to exponent form (``100``, never ``1E+2``)."""
    value = value.normalize()
    exponent = value.as_tuple().exponent  # an int for every finite amount (a letter only for NaN and infinity)
    return value.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 else value


def credits_from_micros(micros: int) -> Decimal:
    """Micro-credits as an exact ``Decimal`` number of credits (for responses and reports)."""
    return _plain(Decimal(micros) / _MICROS)


def credits_from_exact(exact_micros: Decimal) -> Decimal:
    """An exact (unrounded) amount of micro-credits, such as one part of a cost, in credits: shown,
    never stored or summed into a balance (only a request's rounded total is)."""
    return _plain(exact_micros / _MICROS)


def usd_from_micros(micros: int, credits_per_usd: Decimal) -> Decimal:
    """The USD value of an amount of micro-credits, derived (never stored as the truth)."""
    return _plain(Decimal(micros) / (_MICROS * credits_per_usd))


def format_credits(micros: int) -> str:
    """A human-readable credit amount, e.g. ``12.500001``."""
    return f"{credits_from_micros(micros):f}"
