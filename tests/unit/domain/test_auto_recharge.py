"""Auto-recharge on the team ledger: an attempt begun when a charge takes the available balance under
the threshold, for the difference up to the target, never two at once, within a monthly cap; its
credit counted once its payment succeeded; off after three failures in a row, with an alert."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest

from domain import clock
from domain.auto_recharge import RETRY_SECONDS
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


def pending(team: TeamLedger) -> tuple[str, int]:
    """The attempt the last charge began (it must have begun one)."""
    assert team.recharge is not None
    assert team.recharge.pending
    return team.recharge.pending, team.recharge.pending_amount


def started_events(team: TeamLedger) -> list[TeamLedger.RechargeStarted]:
    return [e for e in team.pending_events if isinstance(e, TeamLedger.RechargeStarted)]


def test_a_charge_under_the_threshold_begins_one_attempt_for_the_difference_up_to_the_target():
    team = recharging()
    spend(team, "r1", 400)
    assert team.recharge is not None
    assert not team.recharge.pending
    spend(team, "r2", 300)
    attempt, amount = pending(team)
    assert amount == 1_700  # from 300 up to 2,000
    spend(team, "r3", 100)  # still under the threshold, one attempt pending: no second
    with pytest.raises(RechargePending):
        team.begin_recharge()
    assert team.recharge_due() == 0
    assert team.balance == 200  # nothing credited before the payment succeeded
    assert [e.attempt for e in started_events(team)] == [attempt]
    team.credit_payment(PaymentFacts("pi_r1", 1_700, recharge=attempt))
    assert team.balance == 1_900
    assert team.recharge is not None
    assert (team.recharge.pending, team.recharge.failures) == ("", 0)
    assert replay(team).recharge == team.recharge


def test_a_lease_taking_the_available_balance_under_the_threshold_begins_an_attempt():
    team = recharging()
    team.lease_credits("lease-1", 600, 600)
    assert pending(team)[1] == 1_600  # 400 available left


def test_attempts_stop_at_the_monthly_cap_and_start_again_next_month():
    team = recharging()
    team.set_auto_recharge(threshold=500, target=2_000, monthly_cap=2_500)
    for n in range(3):
        spend(team, f"r{n}", team.available - 100)
        if team.recharge is None or not team.recharge.pending:
            break
        attempt, amount = pending(team)
        team.credit_payment(PaymentFacts(f"pi_{n}", amount, recharge=attempt))
    assert team.recharge is not None
    assert team.recharge.month_total == 2_500  # 1,900 then the 600 the cap had left
    assert team.recharge_due() == 0
    clock.shift(timedelta(days=32))
    assert team.recharge_due() == 1_900


def test_after_a_failure_the_next_attempt_waits_before_asking_the_card_again():
    team = recharging()
    spend(team, "r1", 700)
    team.recharge_failed(pending(team)[0], "card_declined")
    spend(team, "r2", 10)
    assert team.recharge is not None
    assert not team.recharge.pending
    clock.shift(timedelta(seconds=RETRY_SECONDS + 1))
    spend(team, "r3", 10)
    assert pending(team)[1] == 1_720


def test_three_failed_payments_in_a_row_turn_auto_recharge_off_with_an_alert():
    team = recharging(balance=1_000)
    attempts = []
    for n in range(3):
        clock.shift(timedelta(seconds=(RETRY_SECONDS + 1) * n))
        spend(team, f"r{n}", 100 if n else 600)
        attempt, _ = pending(team)
        attempts.append(attempt)
        still_on = team.recharge_failed(attempt, "card_declined")
        assert still_on is (n < 2)
    assert len(set(attempts)) == 3
    assert team.recharge is not None
    assert not team.recharge.enabled
    clock.shift(timedelta(seconds=(RETRY_SECONDS + 1) * 4))
    spend(team, "r9", 10)
    assert not team.recharge.pending
    assert team.recharge_due() == 0
    (alert,) = [e for e in team.pending_events if isinstance(e, TeamLedger.AlertRaised)]
    assert (alert.kind, alert.request_id) == (RECHARGE_OFF, attempts[-1])
    assert team.recharge_failed(attempts[-1], "again") is False  # told twice: nothing more
    assert replay(team).recharge == team.recharge


def test_a_success_between_failures_starts_the_count_again():
    team = recharging(balance=1_000)
    spend(team, "r0", 600)
    for n in range(2):
        team.recharge_failed(pending(team)[0], "card_declined")
        clock.shift(timedelta(seconds=(RETRY_SECONDS + 1) * (n + 1)))
        spend(team, f"r{n + 1}", 10)
    attempt, amount = pending(team)
    team.credit_payment(PaymentFacts("pi_ok", amount, recharge=attempt))
    assert team.recharge is not None
    assert (team.recharge.failures, team.recharge.enabled, team.recharge.failed_at) == (0, True, 0.0)


@pytest.mark.parametrize(("threshold", "target", "cap"), [(500, 500, 100), (500, 400, 100), (-1, 10, 10), (0, 10, 0)])
def test_settings_that_could_not_work_are_refused(threshold: int, target: int, cap: int):
    team = TeamLedger.open("acme")
    with pytest.raises(InvalidAmount):
        team.set_auto_recharge(threshold=threshold, target=target, monthly_cap=cap)


def test_turned_off_it_begins_nothing():
    team = recharging(balance=100)
    team.set_auto_recharge(threshold=500, target=2_000, monthly_cap=5_000, enabled=False)
    spend(team, "r1", 50)
    assert team.recharge_due() == 0
    assert team.begin_recharge() is None
    assert started_events(team) == []
