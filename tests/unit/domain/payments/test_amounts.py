"""What a payment buys (domain/payments/amounts.py): minor units to micro-credits, exactly, by one rule."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.money import AmountError
from domain.payments.amounts import CreditRates, UnsupportedCurrency, minor_unit_exponent


def test_each_currency_counts_its_minor_units_as_stripe_does():
    assert [minor_unit_exponent(c) for c in ("usd", "eur", "jpy", "krw", "kwd", "bhd", "isk", "huf", "twd")] == [
        2, 2, 0, 0, 3, 3, 2, 2, 2,
    ]  # fmt: skip


def test_a_payment_buys_its_amount_at_the_rate_of_its_currency():
    rates = CreditRates.of(usd="100", jpy="0.7", kwd=330, isk="0.72")
    assert rates.micros(2000, "usd") == 2_000 * 1_000_000  # USD 20.00 at 100 credits per dollar
    assert rates.micros(1, "usd") == 1_000_000  # one cent, one credit
    assert rates.micros(2000, "jpy") == 1_400 * 1_000_000  # ¥2000 at 0.7 credits per yen
    assert rates.micros(1_500, "kwd") == 495 * 1_000_000  # 1.500 dinars at 330 credits per dinar
    assert rates.micros(10_000, "isk") == 72 * 1_000_000  # 100 krónur, two decimals in Stripe's API
    assert rates.micros(0, "usd") == 0


@pytest.mark.parametrize(
    ("currency", "rate"),
    [("usd", "0.00001"), ("eur", "1.234567"), ("jpy", "0.0000001"), ("kwd", "0.0001")],
)
def test_a_rate_that_would_buy_a_fraction_of_a_micro_credit_is_refused_when_set(currency, rate):
    with pytest.raises(AmountError, match="decimals"):
        CreditRates.of(**{currency: rate})


def test_the_finest_rates_each_currency_allows_are_exact():
    rates = CreditRates.of(usd="0.0001", jpy="0.000001", kwd="0.001")
    assert [rates.micros_per_minor_unit(c) for c in ("usd", "jpy", "kwd")] == [1, 1, 1]


@pytest.mark.parametrize("rate", ["0", "-1", "NaN", "Infinity", "sNaN", "1e11", "abc"])
def test_a_rate_must_be_a_positive_finite_number(rate):
    with pytest.raises(AmountError):
        CreditRates.of(usd=rate)


@pytest.mark.parametrize("currency", ["USD", "us", "usdx", "", "€"])
def test_a_currency_is_a_lowercase_iso_code(currency):
    with pytest.raises(AmountError, match="ISO 4217"):
        CreditRates({currency: Decimal(100)})


def test_a_payment_in_a_currency_without_a_rate_is_refused_by_name():
    with pytest.raises(UnsupportedCurrency, match=r"'gbp' \(rates are set for: eur, usd\)"):
        CreditRates.of(usd=100, eur=110).micros(500, "gbp")


@pytest.mark.parametrize("amount", [-1, 1.5, True, "2000", Decimal(2000)])
def test_an_amount_is_a_whole_number_of_minor_units(amount):
    with pytest.raises(AmountError):
        CreditRates.of(usd=100).micros(amount, "usd")


def test_an_amount_beyond_the_largest_credit_amount_is_refused():
    rates = CreditRates.of(usd=100_000)
    assert rates.micros(10_000_000, "usd") == 10**10 * 1_000_000  # USD 100,000.00: the most one amount may be
    with pytest.raises(AmountError, match="more than"):
        rates.micros(10_000_001, "usd")


@given(
    currency=st.sampled_from(["usd", "jpy", "kwd"]),
    units=st.integers(min_value=1, max_value=10**6),
    parts=st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=5),
)
def test_parts_of_a_payment_buy_exactly_what_the_whole_buys(currency, units, parts):
    """A payment refunded in parts takes back exactly what it bought: the conversion is exact and
    additive, equal to the amount's value in Decimal arithmetic."""
    places = 6 - minor_unit_exponent(currency)
    rate = Decimal(units).scaleb(-places)  # the finest rates the currency allows
    rates = CreditRates({currency: rate})
    assert sum(rates.micros(p, currency) for p in parts) == rates.micros(sum(parts), currency)
    exact = Decimal(sum(parts)) * rate * Decimal(1_000_000) / Decimal(10) ** minor_unit_exponent(currency)
    assert rates.micros(sum(parts), currency) == exact
