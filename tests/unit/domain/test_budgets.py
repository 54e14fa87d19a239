"""Budgets on the team ledger: a key's (or the team's) spend per UTC period, held like the balance."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import clock
from domain.budgets import period_end, period_of
from domain.ledger import BudgetExceeded, HoldNotFound, InsufficientCredits, LedgerError, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, funded, replay

#: One output token costs exactly 1 credit (1,000,000 micro-credits) at CPU credits per USD.
ONE_CREDIT = Price(input=Decimal(0), output=Decimal(10_000), cache_create=Decimal(0), cache_hit=Decimal(0))
CREDIT = 1_000_000


@pytest.fixture
def at() -> Iterator[list[datetime]]:
    """The ledger's clock, set by the test: ``at[0] = instant``."""
    instant = [datetime(2026, 11, 26, 23, 59, 50, tzinfo=UTC)]
    real = datetime.now(UTC)
    clock.shift(instant[0] - real)
    yield instant
    clock.shift(timedelta())


def set_clock(at: list[datetime], instant: datetime) -> None:
    at[0] = instant
    clock.shift(instant - datetime.now(UTC))


def with_key(balance: int = 100) -> TeamLedger:
    team = funded(balance * CREDIT)
    team.issue_key("k1", "h1")
    team.issue_key("k2", "h2")
    return team


def spend(team: TeamLedger, request_id: str, amount: int, key_id: str = "k1") -> TeamLedger.Charged:
    team.place_hold(RequestOnLedger(request_id, key_id, "m", "chat"), amount * CREDIT)
    return team.charge(
        RequestOnLedger(request_id, key_id, "m", "chat"), TokenUsage(output_tokens=amount), ONE_CREDIT, CPU
    )


@pytest.mark.parametrize(
    ("period", "name", "end"),
    [
        ("day", "2026-11-26", datetime(2026, 11, 27, tzinfo=UTC)),
        ("week", "2026-W48", datetime(2026, 11, 30, tzinfo=UTC)),  # ISO weeks start on Monday
        ("month", "2026-11", datetime(2026, 12, 1, tzinfo=UTC)),
        ("none", "", None),
    ],
)
def test_periods_are_utc_calendar_periods(period, name, end):
    instant = datetime(2026, 11, 26, 23, 59, 59, tzinfo=UTC)
    assert period_of(period, instant) == name
    assert period_end(period, instant) == end
    assert period_end("month", datetime(2026, 12, 31, 12, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)


def test_a_key_cannot_hold_more_than_its_budget_has_left(at):
    team = with_key()
    team.set_budget(10 * CREDIT, "day", "k1")
    spend(team, "r1", 6)
    team.place_hold(RequestOnLedger("r2", "k1", "m", "chat"), 3 * CREDIT)  # in flight: counts against the budget too
    with pytest.raises(BudgetExceeded) as refused:
        team.place_hold(RequestOnLedger("r3", "k1", "m", "chat"), 2 * CREDIT)
    assert (refused.value.available, refused.value.limit, refused.value.key_id) == (CREDIT, 10 * CREDIT, "k1")
    assert refused.value.resets_at == "2026-11-27T00:00:00+00:00"
    assert isinstance(refused.value, InsufficientCredits)  # told as a 402, like the balance
    team.place_hold(RequestOnLedger("r4", "k1", "m", "chat"), CREDIT)
    team.place_hold(RequestOnLedger("r5", "k2", "m", "chat"), 50 * CREDIT)  # another key has no budget


def test_the_budget_resets_when_the_period_changes_in_the_events(at):
    team = with_key()
    team.set_budget(10 * CREDIT, "day", "k1")
    spend(team, "r1", 10)
    with pytest.raises(BudgetExceeded):
        team.place_hold(RequestOnLedger("r2", "k1", "m", "chat"), 1)
    set_clock(at, datetime(2026, 11, 27, 0, 0, 1, tzinfo=UTC))
    assert spend(team, "r2", 10).key_budget_left == 0  # a whole new day's budget, spent exactly
    with pytest.raises(BudgetExceeded):
        team.place_hold(RequestOnLedger("r3", "k1", "m", "chat"), 1)
    assert replay(team).spend == team.spend  # counted from the events' own timestamps


def test_a_charge_never_takes_more_than_the_budget_has_left(at):
    team = with_key()
    team.set_budget(5 * CREDIT, "month", "k1")
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 2 * CREDIT)
    charged = team.charge(
        RequestOnLedger("r1", "k1", "m", "chat"), TokenUsage(output_tokens=9), ONE_CREDIT, CPU
    )  # the upstream reported more than the hold allowed for
    assert (charged.charged, charged.uncollected, charged.key_budget_left) == (5 * CREDIT, 4 * CREDIT, 0)


def test_a_team_budget_bounds_every_key_and_the_leases(at):
    team = with_key()
    team.set_budget(20 * CREDIT, "month")
    spend(team, "r1", 15, "k2")
    with pytest.raises(BudgetExceeded) as refused:
        team.place_hold(RequestOnLedger("r2", "k1", "m", "chat"), 6 * CREDIT)
    assert refused.value.key_id == ""
    assert team.lease_credits("lease_a", CREDIT, 100 * CREDIT) <= 5 * CREDIT
    with pytest.raises(BudgetExceeded):
        team.lease_credits("lease_b", 5 * CREDIT, 5 * CREDIT)


def test_a_budget_can_be_lifted_and_is_checked(at):
    team = with_key()
    team.set_budget(CREDIT, "week", "k1")
    team.set_budget(None, "week", "k1")
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 50 * CREDIT)
    assert team.budget_of("k1") is None
    with pytest.raises(LedgerError):
        team.set_budget(CREDIT, "fortnight", "k1")
    with pytest.raises(LedgerError):
        team.set_budget(-1, "day", "k1")
    with pytest.raises(LedgerError):
        team.set_budget(CREDIT, "day", "nope")


def test_released_holds_give_the_budget_back(at):
    team = with_key()
    team.set_budget(4 * CREDIT, "none", "k1")
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 4 * CREDIT)
    team.release_hold("r1", "upstream failed")
    assert team.key_held == {}
    spend(team, "r2", 4)


def test_a_snapshot_from_before_budgets_is_upcast():
    state: dict[str, object] = {}
    TeamLedger.upcast_v2_v3(state)
    assert state == {"budget": None, "spend": {}, "key_held": {}, "hold_keys": {}, "alert_thresholds": {}}


command = st.one_of(
    st.tuples(
        st.just("hold"), st.sampled_from(["r0", "r1", "r2", "r3"]), st.sampled_from(["k1", "k2"]), st.integers(0, 8)
    ),
    st.tuples(st.just("charge"), st.sampled_from(["r0", "r1", "r2", "r3"]), st.integers(0, 12)),
    st.tuples(st.just("release"), st.sampled_from(["r0", "r1", "r2", "r3"])),
    st.tuples(
        st.just("next_day"),
    ),
)


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(command, max_size=40))
def test_no_sequence_of_requests_spends_past_a_key_budget_in_any_day(commands):
    start = datetime(2026, 11, 26, 12, tzinfo=UTC)
    clock.shift(start - datetime.now(UTC))
    try:
        team = with_key(1000)
        team.set_budget(10 * CREDIT, "day", "k1")
        keys: dict[str, str] = {}
        for cmd in commands:
            try:
                if cmd[0] == "hold":
                    team.place_hold(RequestOnLedger(cmd[1], cmd[2], "m", "chat"), cmd[3] * CREDIT)
                    keys.setdefault(cmd[1], cmd[2])
                elif cmd[0] == "charge" and cmd[1] in keys:
                    team.charge(
                        RequestOnLedger(cmd[1], keys.pop(cmd[1]), "m", "chat"),
                        TokenUsage(output_tokens=cmd[2]),
                        ONE_CREDIT,
                        CPU,
                    )
                elif cmd[0] == "release":
                    team.release_hold(cmd[1], "test")
                    keys.pop(cmd[1], None)
                elif cmd[0] == "next_day":
                    start += timedelta(days=1)
                    clock.shift(start - datetime.now(UTC))
            except (InsufficientCredits, HoldNotFound):
                pass
            assert team.key_held.get("k1", 0) == sum(h.amount for h in team.holds.values() if h.key_id == "k1")
        by_day: dict[str, int] = {}
        for e in team.collect_events():
            if isinstance(e, TeamLedger.Charged) and e.key_id == "k1":
                by_day[e.timestamp.date().isoformat()] = by_day.get(e.timestamp.date().isoformat(), 0) + e.charged
        assert all(total <= 10 * CREDIT for total in by_day.values()), by_day
    finally:
        clock.shift(timedelta())
