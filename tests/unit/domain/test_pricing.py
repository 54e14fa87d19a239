from decimal import Decimal

import pytest

from domain.pricing import Price, TokenUsage, cost_in_micros, worst_case_in_micros

PRICE = Price(input=Decimal("2.5"), output=Decimal(10), cache_create=Decimal("3.125"), cache_hit=Decimal("1.25"))


def test_each_token_kind_is_priced_at_its_own_rate():
    # 1M tokens of a kind at $X per million, 100 credits per USD = X * 100 credits.
    assert cost_in_micros(TokenUsage(input_tokens=1_000_000), PRICE, Decimal(100)) == 250 * 1_000_000
    assert cost_in_micros(TokenUsage(output_tokens=1_000_000), PRICE, Decimal(100)) == 1000 * 1_000_000
    assert cost_in_micros(TokenUsage(cache_write_tokens=1_000_000), PRICE, Decimal(100)) == 312_500_000
    assert cost_in_micros(TokenUsage(cache_hit_tokens=1_000_000), PRICE, Decimal(100)) == 125_000_000


def test_a_request_cost_is_the_exact_sum_rounded_up_once():
    usage = TokenUsage(input_tokens=3, output_tokens=1, cache_hit_tokens=1)
    # 3*2.5 + 1*10 + 1*1.25 = 18.75 micro-credits per credit-per-USD; * 1 credit/USD = 18.75 -> 19
    assert cost_in_micros(usage, PRICE, Decimal(1)) == 19
    # Rounding each kind separately would give 8 + 10 + 2 = 20: the rule rounds the total.


def test_the_worst_case_prices_every_prompt_token_at_the_dearest_input_rate():
    assert worst_case_in_micros(100, 50, PRICE, Decimal(100)) == 81_250  # (100 * 3.125 + 50 * 10) * 100
    assert worst_case_in_micros(100, 50, PRICE, Decimal(100)) >= cost_in_micros(
        TokenUsage(input_tokens=40, cache_write_tokens=60, output_tokens=50), PRICE, Decimal(100)
    )


def test_usage_counts_must_be_non_negative_integers():
    with pytest.raises(ValueError, match="input_tokens must be a non-negative integer"):
        TokenUsage(input_tokens=-1)
    with pytest.raises(ValueError, match="output_tokens must be a non-negative integer"):
        TokenUsage(output_tokens=1.5)  # type: ignore[arg-type]


def test_prices_survive_the_round_trip_through_an_event_record():
    assert Price.from_record(PRICE.as_record()) == PRICE
    usage = TokenUsage(1, 2, 3, 4)
    assert TokenUsage.from_record(usage.as_record()) == usage
    assert usage.prompt_tokens == 8
    assert usage.total_tokens == 10
