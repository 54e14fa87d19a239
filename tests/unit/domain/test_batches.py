"""A batch on the team ledger: one hold for every line's worst case, each line charged from its own
usage at the model's batch price against it, once, and the rest released when the batch settles."""

from dataclasses import replace
from decimal import Decimal

import pytest

from domain.attribution import Attribution
from domain.ledger import AlreadyCharged, BudgetExceeded, HoldNotFound
from domain.ledger_holds import BatchLine, RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, PRICE, funded, replay

HALF = replace(PRICE, batch_discount=Decimal("0.5"))
BATCH = RequestOnLedger("batch_1", "k1", "m", "batches", Attribution({"team": "search"}, "alice"))


def line(custom_id: str, input_tokens: int, output_tokens: int) -> BatchLine:
    return BatchLine(custom_id, "m", TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens))


def test_a_batch_price_is_a_discount_on_every_token_rate_or_rates_of_its_own():
    table, basis = HALF.for_batch()
    assert (table.input, table.output, table.cache_create, table.cache_hit) == (
        Decimal("1.25"),
        Decimal(5),
        Decimal("1.5625"),
        Decimal("0.625"),
    )
    assert basis == "batch_discount:0.5"
    own = replace(PRICE, batch=Price(Decimal(1), Decimal(4), Decimal(1), Decimal("0.5")))
    assert own.for_batch()[0].output == Decimal(4)
    assert own.for_batch()[1] == "batch"
    assert PRICE.for_batch() == (PRICE, "batch:none")  # no batch price: a line costs what a request does
    assert Price.from_record(HALF.as_record()) == HALF
    assert Price.from_record(own.as_record()) == own


def test_each_line_is_charged_at_the_batch_price_against_the_batch_hold_and_the_rest_released():
    team = funded(1_000_000)
    team.submit_batch(BATCH, 300_000)
    assert (team.held, team.available) == (300_000, 700_000)

    first, _ = team.charge_batch_line(BATCH, line("req-1", 100, 50), HALF, CPU)
    # (100 × 1.25 + 50 × 5) USD per million × 100 credits/USD = 37,500 micro-credits
    assert (first.cost, first.charged, first.hold) == (37_500, 37_500, 37_500)
    assert (first.request_id, first.batch_id, first.custom_id, first.lease) == (
        "batch_1:req-1",
        "batch_1",
        "req-1",
        "batch_1",
    )
    assert first.basis == "batch_discount:0.5"
    assert first.price["output"] == "5.0"
    assert (first.tags, first.end_user, first.endpoint) == ({"team": "search"}, "alice", "batches")
    second, _ = team.charge_batch_line(BATCH, line("req-2", 10, 10), HALF, CPU)
    assert second.cost == (10 * Decimal("1.25") + 10 * 5) * 100  # 6,250

    assert team.held == 300_000 - 37_500 - 6_250
    assert team.settle_batch("batch_1", "completed") == 300_000 - 37_500 - 6_250
    assert (team.balance, team.held, team.holds) == (1_000_000 - 43_750, 0, {})
    assert team.settle_batch("batch_1", "completed") == 0  # settled once
    again = replay(team)
    assert (again.balance, again.held, again.key_held) == (team.balance, 0, {})


def test_a_line_is_charged_once_and_never_after_its_batch_settled():
    team = funded(1_000_000)
    team.submit_batch(BATCH, 100_000)
    team.charge_batch_line(BATCH, line("a", 1, 1), HALF, CPU)
    with pytest.raises(AlreadyCharged):
        team.charge_batch_line(BATCH, line("a", 1, 1), HALF, CPU)
    team.settle_batch("batch_1", "cancelled")
    with pytest.raises(HoldNotFound):
        team.charge_batch_line(BATCH, line("b", 1, 1), HALF, CPU)


def test_a_batch_hold_never_expires_and_counts_against_the_budgets():
    team = funded(1_000_000)
    team.set_budget(500_000, "month")
    team.submit_batch(BATCH, 400_000)
    placed = team.holds["batch_1"].placed
    assert team.release_expired(now=placed + 10**6, timeout=60) == []
    with pytest.raises(BudgetExceeded):
        team.place_hold(RequestOnLedger("r", "k1", "m", "chat.completions"), 200_000)
    assert team.held == 400_000
