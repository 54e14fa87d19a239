"""Every number an operator sets has one range (``domain/bounds.py``), and each way of setting it —
a ledger command, the configuration file — refuses a value out of it before anything is recorded."""

from __future__ import annotations

from decimal import Decimal

import pytest

from domain import bounds
from domain.bounds import OutOfBounds
from domain.ledger import LedgerError, TeamLedger
from domain.settings import ConfigError, parse_settings
from tests.unit.domain.test_settings import GOOD

HUGE = 2**70


@pytest.mark.parametrize(
    ("bound", "inside", "outside"),
    [
        (bounds.RPM, [1, 10**9], [0, -1, 10**9 + 1, HUGE, True, Decimal("1.5")]),
        (bounds.TPM, [1, 10**12], [0, 10**12 + 1, HUGE]),
        (bounds.AMOUNT, [1, 10**16], [0, 10**16 + 1, HUGE]),
        (bounds.BUDGET, [0, 10**16], [-1, 10**16 + 1]),
        (bounds.BALANCE_ALERT, [1, 10**16], [0, 10**16 + 1]),
        (
            bounds.BUDGET_ALERT_PERCENT,
            [Decimal("0.01"), Decimal(1000)],
            [Decimal(0), Decimal("1000.01"), Decimal("50.001"), Decimal("NaN"), Decimal("Infinity")],
        ),
        (
            bounds.PRICE_ADJUSTMENT_PERCENT,
            [Decimal(-100), Decimal(1000), Decimal("-12.3456")],
            [Decimal("-100.0001"), Decimal("1000.0001"), Decimal("1.23456")],
        ),
        (bounds.PRICE_RATE, [Decimal(0), Decimal(10_000)], [Decimal(-1), Decimal("10000.000001")]),
        (bounds.TOOL_FEE, [Decimal(0), Decimal(1_000)], [Decimal(-1), Decimal(1_001)]),
        (bounds.CREDITS_PER_USD, [Decimal("0.000001"), Decimal(100_000)], [Decimal(0), Decimal(100_001)]),
        (bounds.TOKENS, [1, 10**8], [0, 10**8 + 1]),
        (bounds.STREAMS, [1, 10**6], [0, 10**6 + 1]),
    ],
)
def test_each_bound_takes_its_range_and_nothing_else(bound, inside, outside):
    for value in inside:
        assert bound.problem(value) is None, value
        bound.check(value)
    for value in outside:
        assert bound.problem(value) is not None, value
        with pytest.raises(OutOfBounds, match=bound.what.split(" ")[0]):
            bound.check(value)


def test_the_dearest_request_the_bounds_allow_fits_in_a_balance():
    """The bounds are chosen so that a request priced at the most of everything, with the largest markup,
    is still a number of micro-credits the ledger's signed 64-bit columns hold."""
    from domain.ledger import MAX_BALANCE

    worst = (
        bounds.TOKENS.high
        * bounds.PRICE_RATE.high
        * bounds.CREDITS_PER_USD.high
        * (1 + bounds.PRICE_ADJUSTMENT_PERCENT.high / 100)
    )
    assert worst < MAX_BALANCE


def opened() -> TeamLedger:
    team = TeamLedger.open("acme")
    team.add_credits(10_000_000)
    team.issue_key("key_1", "hash")
    team.collect_events()
    return team


@pytest.mark.parametrize(
    "command",
    [
        lambda t: t.limit(HUGE, None),
        lambda t: t.limit(None, HUGE),
        lambda t: t.limit(-1, None),
        lambda t: t.limit_key("key_1", HUGE, None),
        lambda t: t.limit_key("key_1", None, 10**12 + 1),
        lambda t: t.add_credits(10**16 + 1),
        lambda t: t.adjust_credits(-(10**16 + 1), "too much"),
        lambda t: t.set_budget(10**16 + 1, "day"),
        lambda t: t.set_budget(HUGE, "day", "key_1"),
        lambda t: t.set_alert("balance_below", Decimal(HUGE)),
        lambda t: t.set_alert("budget_percent", Decimal(1001)),
        lambda t: t.adjust_prices(Decimal(HUGE)),
    ],
)
def test_the_ledger_refuses_a_number_out_of_range_and_records_nothing(command):
    team = opened()
    before = team.version
    with pytest.raises(LedgerError):
        command(team)
    assert team.version == before
    assert not team.collect_events()


def test_the_largest_limits_are_recorded_and_0_means_none():
    team = opened()
    team.limit(10**9, 10**12)
    assert (team.rpm, team.tpm) == (10**9, 10**12)
    team.limit(0, 0)
    assert (team.rpm, team.tpm) == (None, None)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("input = 2.5", "input = 10000.5"), "models[0].pricing.input"),
        (("pricing = {", "pricing = {tool_fees = {web_search = 5000}, "), "models[0].pricing.tool_fees.web_search"),
        (("credits_per_usd = 100", "credits_per_usd = 1000000"), "credits_per_usd"),
        (("context_window = 8192", "context_window = 1180591620717411303424"), "models[0].context_window"),
        (("max_output_tokens = 1024", "max_output_tokens = 100000001"), "models[0].max_output_tokens"),
        (("credits_per_usd = 100", "credits_per_usd = 100\nmax_streams_per_key = 1000001"), "max_streams_per_key"),
        (("credits_per_usd = 100", "credits_per_usd = 100\ndatabase_pool_size = 5000"), "database_pool_size"),
        (("credits_per_usd = 100", "credits_per_usd = 100\nhold_timeout = 1e300"), "hold_timeout"),
    ],
)
def test_the_configuration_refuses_a_number_out_of_range_naming_the_key(change, key):
    assert change[0] in GOOD
    with pytest.raises(ConfigError) as error:
        parse_settings(GOOD.replace(change[0], change[1], 1), "t.toml")
    assert error.value.key == key
    assert "at most" in error.value.problem
