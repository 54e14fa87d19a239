"""Auto-recharge on the team ledger: an attempt begun when a charge takes the available balance under
the threshold, for the difference up to the target, never two at once, within a monthly cap; its
credit counted once its payment succeeded; off after three failures in a row, with an alert."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest

from domain import clock
from domain.ledger import InvalidAmount, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.ledger_payments import PaymentFacts
from domain.ledger_recharge import RECHARGE_OFF, RechargePending
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import replay

ONE_EACH = Price(input=Decimal(0), output=Decimal("0.01"), cache_create=Decimal(0), cache_hit=Decimal(0))


@pytest.fixture(autouse=True)
def ledger_clock() -> Iterator[None]:
    yield
    clock.shift(timedelta())


def spend(team: TeamLedger, request_id: str, micros: int) -> None:
    request = RequestOnLedger(request_id, "k", "m", "chat")
    team.place_hold(request, micros)
    team.charge(request, TokenUsage(0, micros), ONE_EACH, Decimal(100))


def recharging(balance: int = 1_000) -> TeamLedger:
    team = TeamLedger.open("acme")
    team.add_credits(balance, "opening")
    team.set_auto_recharge(threshold=500, target=2_000, monthly_cap=5_000)
    return team


def test_a_charge_under_the_threshold_makes_one_attempt_for_the_difference_up_to_the_target():
    team = recharging()
    spend(team, "r1", 400)
    assert team.recharge_due() == 0  # 600 left: not under 500
    spend(team, "r2", 300)
    assert team.recharge_due() == 1_700
    started = team.begin_recharge()
    assert started is not None
    attempt, amount = started
    assert amount == 1_700
    with pytest.raises(RechargePending):
        team.begin_recharge()  # never two at once
    assert team.recharge_due() == 0
    assert team.balance == 300  # nothing credited before the payment succeeded
    team.credit_payment(PaymentFacts("pi_r1", 1_700, recharge=attempt))
    assert team.balance == 2_000
    assert team.recharge is not None
    assert (team.recharge.pending, team.recharge.failures) == ("", 0)
    assert replay(team).recharge == team.recharge


def test_attempts_stop_at_the_monthly_cap_and_start_again_next_month():
    team = recharging()
    team.set_auto_recharge(threshold=500, target=2_000, monthly_cap=2_500)
    for n in range(3):
        spend(team, f"r{n}", team.available - 100)
        started = team.begin_recharge()
        if started is None:
            break
        team.credit_payment(PaymentFacts(f"pi_{n}", started[1], recharge=started[0]))
    assert team.recharge is not None
    assert team.recharge.month_total == 2_500  # 1,900 then the 600 the cap had left
    assert team.recharge_due() == 0
    clock.shift(timedelta(days=32))
    assert team.recharge_due() == 1_900


def test_three_failed_payments_in_a_row_turn_auto_recharge_off_with_an_alert():
    team = recharging(balance=100)
    for n in range(3):
        started = team.begin_recharge()
        assert started is not None
        still_on = team.recharge_failed(started[0], "card_declined")
        assert still_on is (n < 2)
    assert team.recharge is not None
    assert not team.recharge.enabled
    assert team.recharge_due() == 0
    (alert,) = [e for e in team.collect_events() if isinstance(e, TeamLedger.AlertRaised)]
    assert (alert.kind, alert.request_id) == (RECHARGE_OFF, started[0])
    assert team.recharge_failed(started[0], "again") is False  # told twice: nothing more


def test_a_success_between_failures_starts_the_count_again():
    team = recharging(balance=100)
    for _ in range(2):
        started = team.begin_recharge()
        assert started is not None
        team.recharge_failed(started[0], "card_declined")
    started = team.begin_recharge()
    assert started is not None
    team.credit_payment(PaymentFacts("pi_ok", started[1], recharge=started[0]))
    assert team.recharge is not None
    assert (team.recharge.failures, team.recharge.enabled) == (0, True)


@pytest.mark.parametrize(("threshold", "target", "cap"), [(500, 500, 100), (500, 400, 100), (-1, 10, 10), (0, 10, 0)])
def test_settings_that_could_not_work_are_refused(threshold: int, target: int, cap: int):
    team = TeamLedger.open("acme")
    with pytest.raises(InvalidAmount):
        team.set_auto_recharge(threshold=threshold, target=target, monthly_cap=cap)


def test_turned_off_it_begins_nothing():
    team = recharging(balance=100)
    team.set_auto_recharge(threshold=500, target=2_000, monthly_cap=5_000, enabled=False)
    assert team.recharge_due() == 0
    assert team.begin_recharge() is None
