"""Alerts on the team ledger: recorded once per crossing, in the command that moved the money."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from domain import clock
from domain.alerts import BALANCE_BELOW, BUDGET_PERCENT
from domain.ledger import LedgerError, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, funded, replay

ONE_CREDIT = Price(input=Decimal(0), output=Decimal(10_000), cache_create=Decimal(0), cache_hit=Decimal(0))
CREDIT = 1_000_000


@pytest.fixture(autouse=True)
def noon() -> Iterator[None]:
    clock.shift(datetime(2026, 11, 26, 12, tzinfo=UTC) - datetime.now(UTC))
    yield
    clock.shift(timedelta())


def spend(team: TeamLedger, request_id: str, amount: int, key_id: str = "k1") -> None:
    team.place_hold(RequestOnLedger(request_id, key_id, "m", "chat"), amount * CREDIT)
    team.charge(RequestOnLedger(request_id, key_id, "m", "chat"), TokenUsage(output_tokens=amount), ONE_CREDIT, CPU)


def alerts(team: TeamLedger) -> list[TeamLedger.AlertRaised]:
    return [e for e in team.pending_events if isinstance(e, TeamLedger.AlertRaised)]


def test_a_budget_alert_is_raised_once_per_crossing_and_again_in_the_next_period():
    team = funded(100 * CREDIT)
    team.issue_key("k1", "h1")
    team.set_budget(10 * CREDIT, "day", "k1")
    team.set_alert(BUDGET_PERCENT, Decimal(80), "k1")
    spend(team, "r1", 7)
    assert alerts(team) == []
    spend(team, "r2", 1)  # 8 of 10: exactly 80 %
    spend(team, "r3", 1)  # over the line already: no second alert
    raised = alerts(team)
    assert [(a.kind, a.threshold, a.value, a.limit, a.period, a.request_id) for a in raised] == [
        (BUDGET_PERCENT, "80", 8 * CREDIT, 10 * CREDIT, "2026-11-26", "r2")
    ]
    clock.shift(datetime(2026, 11, 27, 12, tzinfo=UTC) - datetime.now(UTC))
    spend(team, "r4", 9)
    assert [a.period for a in alerts(team)] == ["2026-11-26", "2026-11-27"]
    assert len({a.alert_id for a in alerts(team)}) == 2
    assert replay(team).alert_thresholds == team.alert_thresholds


def test_a_balance_alert_rearms_when_a_top_up_lifts_the_balance():
    team = funded(10 * CREDIT)
    team.issue_key("k1", "h1")
    team.set_alert(BALANCE_BELOW, Decimal(5 * CREDIT))
    spend(team, "r1", 5)  # 5 left: not under 5
    spend(team, "r2", 1)  # 4 left: under
    spend(team, "r3", 1)
    team.add_credits(10 * CREDIT)
    team.adjust_credits(-9 * CREDIT, "correction")  # a correction crosses it too
    assert [(a.value, a.request_id) for a in alerts(team)] == [(4 * CREDIT, "r2"), (4 * CREDIT, "")]


def test_alert_thresholds_are_checked_and_can_be_removed():
    team = funded(10 * CREDIT)
    team.issue_key("k1", "h1")
    for kind, value, key_id in (
        (BUDGET_PERCENT, Decimal(0), ""),
        (BUDGET_PERCENT, Decimal("80.123"), ""),
        (BALANCE_BELOW, Decimal(5), "k1"),
        ("odd", Decimal(1), ""),
        (BALANCE_BELOW, Decimal(-1), ""),
    ):
        with pytest.raises(LedgerError):
            team.set_alert(kind, value, key_id)
    team.set_alert(BALANCE_BELOW, Decimal(5 * CREDIT))
    team.set_alert(BALANCE_BELOW, Decimal(5 * CREDIT), enabled=False)
    spend(team, "r1", 8)
    assert alerts(team) == []
    assert team.alert_thresholds == {}
