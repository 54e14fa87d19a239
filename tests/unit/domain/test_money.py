from decimal import Decimal

import pytest

from domain.money import (
    MAX_CREDITS_AMOUNT,
    AmountError,
    credits_from_micros,
    micros_from_credits,
    round_up_to_micros,
    usd_from_micros,
)


def test_credit_amounts_parse_exactly_to_micro_credits():
    assert micros_from_credits("100") == 100_000_000
    assert micros_from_credits("12.5") == 12_500_000
    assert micros_from_credits("0.000001") == 1


@pytest.mark.parametrize(
    "text", ["0.0000001", "abc", "nan", "NaN", "inf", "Infinity", "-Infinity", "", "1e-7", "1e-999999999"]
)
def test_credit_amounts_that_are_not_exact_micro_credits_are_refused(text):
    with pytest.raises(AmountError):
        micros_from_credits(text)


@pytest.mark.parametrize(
    "text", ["10000000000000", "1e999999", "1e999999999999", "1e18", "9223372036854", "10000000000.000001", "-1e20"]
)
def test_credit_amounts_beyond_the_largest_one_amount_may_be_are_refused(text):
    with pytest.raises(AmountError, match="out of range"):
        micros_from_credits(text)


def test_the_largest_amount_is_accepted_and_many_of_them_fit_a_64_bit_balance():
    assert micros_from_credits(str(MAX_CREDITS_AMOUNT)) == MAX_CREDITS_AMOUNT * 1_000_000
    assert micros_from_credits("-0") == 0
    assert micros_from_credits("1E+5") == 100_000_000_000
    assert 900 * MAX_CREDITS_AMOUNT * 1_000_000 < 2**63 - 1


def test_the_rounding_rule_rounds_up_to_a_whole_micro_credit():
    assert round_up_to_micros(Decimal(10)) == 10
    assert round_up_to_micros(Decimal("10.0001")) == 11
    assert round_up_to_micros(Decimal("0.5")) == 1
    assert round_up_to_micros(Decimal(0)) == 0


def test_usd_is_derived_exactly_from_micro_credits():
    assert usd_from_micros(1_000_000, Decimal(100)) == Decimal("0.01")
    assert usd_from_micros(11_250, Decimal(100)) == Decimal("0.0001125")
    assert credits_from_micros(11_250) == Decimal("0.01125")
    assert credits_from_micros(0) == 0


def test_round_amounts_are_written_without_an_exponent():
    assert str(credits_from_micros(100_000_000)) == "100"
    assert str(usd_from_micros(100_000_000, Decimal(1))) == "100"
    assert str(credits_from_micros(-2_500_000)) == "-2.5"
