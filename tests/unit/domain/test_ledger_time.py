"""A team's ledger keeps its own time: the ledger clock, never before the team's latest event.

Processes' clocks differ (a drill's runs ahead, a host's drifts): a team's events are recorded in
time order whichever process records them, and a budget's period is judged at the team's instant, so
a clock that ran ahead can bring a period forward but never make one spendable twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from domain import clock
from domain.ledger import BudgetExceeded, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, replay
from tests.unit.domain.test_budgets import CREDIT, ONE_CREDIT

NOON = datetime(2026, 11, 26, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def restore_clock() -> Iterator[None]:
    yield
    clock.shift(timedelta())


def set_clock(instant: datetime) -> None:
    clock.shift(instant - datetime.now(UTC))


def spend(team: TeamLedger, request_id: str, amount: int) -> TeamLedger.Charged:
    team.place_hold(RequestOnLedger(request_id, "k1", "m", "chat"), amount * CREDIT)
    return team.charge(
        RequestOnLedger(request_id, "k1", "m", "chat"), TokenUsage(output_tokens=amount), ONE_CREDIT, CPU
    )


def opened() -> TeamLedger:
    set_clock(NOON)
    team = TeamLedger.open("acme")
    team.add_credits(100 * CREDIT)
    team.issue_key("k1", "h1")
    team.set_budget(10 * CREDIT, "day", "k1")
    return team


def test_a_team_s_events_never_go_back_in_time_whatever_the_clock_says():
    team = opened()
    set_clock(NOON + timedelta(days=1))
    ahead = spend(team, "r1", 1)
    set_clock(NOON - timedelta(days=31))  # a clock far behind: nothing is recorded before what was
    behind = spend(team, "r2", 1)
    team.add_credits(1)
    stamps = [event.timestamp for event in team.pending_events]
    assert stamps == sorted(stamps)
    assert behind.timestamp == ahead.timestamp == stamps[-1] == team.now()
    assert team.spend["k1"]["day"] == ["2026-11-27", 2 * CREDIT]  # both in the 27th: the count never went back
    assert replay(team).now() == team.now()


def test_a_day_s_budget_is_spent_once_even_after_a_clock_ran_a_day_ahead():
    team = opened()
    spend(team, "today", 10)  # the 26th's budget, all of it
    with pytest.raises(BudgetExceeded):
        spend(team, "today-again", 1)
    set_clock(NOON + timedelta(days=1))  # a drill's process: the 27th
    spend(team, "tomorrow", 10)
    set_clock(NOON)  # the wall clock's process, the same 26th: judged at the 27th, whose budget is spent
    with pytest.raises(BudgetExceeded) as refused:
        spend(team, "third-time", 1)
    assert refused.value.resets_at == "2026-11-28T00:00:00+00:00"
    assert team.budget_left("k1", team.now())[0] == 0
    set_clock(NOON + timedelta(days=2))  # the 28th, when it comes: a new budget
    assert spend(team, "the-28th", 10).charged == 10 * CREDIT
