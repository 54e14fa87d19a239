from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.pricing import (
    Exposure,
    LongContext,
    Price,
    affordable_output_tokens,
    cost_in_micros,
    price_usage,
    worst_case_in_micros,
)
from domain.usage import TokenUsage, tool_calls_of

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


# -- everything providers bill (issue #18) --------------------------------------------------------

D = Decimal
#: An Opus-like price: 1-hour writes at 2 × input, long context above 200k, a priority tier, web search.
OPUS = Price(
    D(5),
    D(25),
    D("6.25"),
    D("0.5"),
    cache_write_1h=D(10),
    long_context=LongContext(200_000, Price(D(10), D("37.5"), D("12.5"), D(1), D(20))),
    service_tiers={
        "flex": Price(D("2.5"), D("12.5"), D("3.125"), D("0.25")),
        "priority": Price(
            D(10), D(50), D("12.5"), D(1), long_context=LongContext(200_000, Price(D(20), D(75), D(25), D(2)))
        ),
    },
    tool_fees={"web_search": D("0.01")},
)
CPU = D(100)


def test_1_hour_cache_writes_have_their_own_rate_and_fall_back_to_the_5_minute_one():
    usage = TokenUsage(input_tokens=10, output_tokens=100, cache_write_1h_tokens=100_000)
    assert cost_in_micros(usage, OPUS, CPU) == (10 * 5 + 100_000 * 10 + 100 * 25) * 100
    without = Price(D(5), D(25), D("6.25"), D("0.5"))
    assert cost_in_micros(usage, without, CPU) == (10 * 5 + 100_000 * D("6.25") + 100 * 25) * 100
    assert usage.prompt_tokens == 100_010


def test_past_the_threshold_the_whole_request_is_priced_at_the_long_context_rates():
    at = TokenUsage(input_tokens=200_000, output_tokens=1000)
    past = TokenUsage(input_tokens=199_000, cache_hit_tokens=1001, output_tokens=1000)
    assert price_usage(at, OPUS, CPU).basis == "base"
    assert cost_in_micros(at, OPUS, CPU) == (200_000 * 5 + 1000 * 25) * 100
    priced = price_usage(past, OPUS, CPU)
    assert priced.basis == "long_context"
    assert priced.micros == (199_000 * 10 + 1001 * 1 + 1000 * D("37.5")) * 100  # output and hits re-priced too


def test_the_tier_served_prices_the_request_and_an_unknown_or_base_tier_is_the_base():
    usage = TokenUsage(input_tokens=1000, output_tokens=500, service_tier="flex")
    assert price_usage(usage, OPUS, CPU).basis == "tier:flex"
    assert cost_in_micros(usage, OPUS, CPU) == (1000 * D("2.5") + 500 * D("12.5")) * 100
    for tier in ("", "default", "standard", "auto", "scale"):
        same = TokenUsage(input_tokens=1000, output_tokens=500, service_tier=tier)
        assert price_usage(same, OPUS, CPU).basis == "base"
        assert cost_in_micros(same, OPUS, CPU) == (1000 * 5 + 500 * 25) * 100
    long_priority = TokenUsage(input_tokens=250_000, output_tokens=10, service_tier="priority")
    assert price_usage(long_priority, OPUS, CPU).basis == "tier:priority+long_context"
    assert cost_in_micros(long_priority, OPUS, CPU) == (250_000 * 20 + 10 * 75) * 100


def test_tool_fees_are_per_call_reported_and_a_tool_without_a_fee_is_free():
    base = TokenUsage(input_tokens=100, output_tokens=10)
    called = TokenUsage(100, 10, tool_calls=tool_calls_of({"web_search": 3, "web_fetch": 2, "code": 0}))
    assert called.tool_calls == (("web_fetch", 2), ("web_search", 3))
    assert cost_in_micros(called, OPUS, CPU) - cost_in_micros(base, OPUS, CPU) == 3 * D("0.01") * 10**6 * 100
    assert price_usage(called, OPUS, CPU).parts["tool:web_search"] == 3_000_000
    assert "tool:web_fetch" not in price_usage(called, OPUS, CPU).parts


def test_a_team_adjustment_applies_on_top_and_the_total_is_rounded_once():
    usage = TokenUsage(input_tokens=3, output_tokens=1)  # 3 × 5 + 25 = 40 micro-credits per credit/USD
    assert price_usage(usage, OPUS, D(1), D(-10)).micros == 36
    discounted = price_usage(TokenUsage(input_tokens=1), OPUS, D(1), D("-12.5"))  # 5 × 0.875 = 4.375
    assert discounted.micros == 5
    assert discounted.parts == {"input": D(5), "adjustment": D("-0.625")}


def test_a_price_survives_the_round_trip_through_an_event_record_whole():
    assert Price.from_record(OPUS.as_record()) == OPUS
    usage = TokenUsage(1, 2, 3, 4, 5, "flex", (("web_search", 2),))
    assert TokenUsage.from_record(usage.as_record()) == usage
    assert TokenUsage.from_record(
        {"input_tokens": 1, "output_tokens": 2, "cache_write_tokens": 3, "cache_hit_tokens": 4}
    ) == TokenUsage(1, 2, 3, 4)  # recorded before them


def test_the_worst_case_covers_every_tier_the_request_may_get_and_long_context_only_when_reachable():
    short = worst_case_in_micros(1000, 100, OPUS, CPU)
    assert short == (1000 * D("12.5") + 100 * 50) * 100  # priority's 1-hour-less table: 12.5 writes, 50 output
    assert worst_case_in_micros(1000, 100, OPUS, CPU, Exposure(frozenset())) == (1000 * 10 + 100 * 25) * 100
    assert worst_case_in_micros(1000, 100, OPUS, CPU, Exposure(frozenset({"flex"}))) == (1000 * 10 + 100 * 25) * 100
    long = worst_case_in_micros(250_000, 100, OPUS, CPU)
    assert long == (250_000 * 25 + 100 * 75) * 100  # priority's long-context table
    searching = worst_case_in_micros(1000, 100, OPUS, CPU, Exposure(frozenset(), {"web_search": 5}))
    assert searching == (1000 * 10 + 100 * 25) * 100 + 5 * 1_000_000
    assert worst_case_in_micros(1000, 100, OPUS, CPU, Exposure(frozenset()), D(20)) == (10_000 + 2_500) * 120


@given(prompt=st.integers(0, 400_000), output=st.integers(0, 64_000), data=st.data())
def test_the_worst_case_covers_whatever_the_usage_within_its_bounds(prompt, output, data):
    tier = data.draw(st.sampled_from(["", "flex", "priority", "default"]))
    split = data.draw(st.lists(st.integers(0, prompt), min_size=3, max_size=3).map(sorted))
    usage = TokenUsage(
        split[0],
        data.draw(st.integers(0, output)),
        split[1] - split[0],
        split[2] - split[1],
        prompt - split[2],
        tier,
        tool_calls_of({"web_search": data.draw(st.integers(0, 4))}),
    )
    exposure = Exposure(None, {"web_search": 4})
    adjustment = data.draw(st.sampled_from([D(0), D(15), D(-10)]))
    assert (
        worst_case_in_micros(prompt, output, OPUS, CPU, exposure, adjustment)
        >= price_usage(usage, OPUS, CPU, adjustment).micros
    )


@given(available=st.integers(0, 10**9), prompt=st.integers(0, 300_000))
def test_the_affordable_output_is_the_largest_the_balance_covers(available, prompt):
    ceiling = 64_000
    tokens = affordable_output_tokens(
        available, ceiling, lambda output: worst_case_in_micros(prompt, output, OPUS, CPU)
    )
    if tokens == 0:
        assert worst_case_in_micros(prompt, 1, OPUS, CPU) > available
    else:
        assert worst_case_in_micros(prompt, tokens, OPUS, CPU) <= available
        assert tokens == ceiling or worst_case_in_micros(prompt, tokens + 1, OPUS, CPU) > available
