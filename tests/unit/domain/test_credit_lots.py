"""Credit lots on the team ledger: the drawing order, the split each charge records, expiry written off
at its instant, holds that never count on credit about to expire, and replay giving the same split."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import clock
from domain.credit_lot import Lot
from domain.credit_lots import ADJUSTMENT, PAID, PROMOTIONAL, SETTLES_WITHIN, LotTerms, draw
from domain.ledger import InsufficientCredits, InvalidAmount, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import replay

#: One micro-credit per output token: a charge of N output tokens costs N micro-credits.
ONE_EACH = Price(input=Decimal(0), output=Decimal("0.01"), cache_create=Decimal(0), cache_hit=Decimal(0))
PER_USD = Decimal(100)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def ledger_clock() -> Iterator[None]:
    yield
    clock.shift(timedelta())


def later(by: timedelta) -> None:
    """Move the ledger's clock ``by`` further on."""
    clock.shift(clock.now() - datetime.now(UTC) + by)


def spend(team: TeamLedger, request_id: str, micros: int) -> TeamLedger.Charged:
    team.place_hold(RequestOnLedger(request_id, "k", "m", "chat"), micros)
    return team.charge(RequestOnLedger(request_id, "k", "m", "chat"), TokenUsage(0, micros), ONE_EACH, PER_USD)


def remaining(team: TeamLedger) -> dict[str, int]:
    return {lot_id: lot.remaining for lot_id, lot in team.lots.items()}


def test_lots_are_drawn_by_priority_then_soonest_expiry_then_promotional_before_paid_then_oldest():
    at = 1_000_000.0
    lots = {
        "paid-old": Lot(PAID, 10, 10, at, None, 50, 1),
        "paid-new": Lot(PAID, 10, 10, at, None, 50, 5),
        "promo": Lot(PROMOTIONAL, 10, 10, at, None, 50, 6),
        "adjust": Lot(ADJUSTMENT, 10, 10, at, None, 50, 7),
        "expiring": Lot(PAID, 10, 10, at, at + 3600, 50, 8),
        "first": Lot(PAID, 10, 10, at, None, 10, 9),
    }
    assert list(draw(lots, 60)) == ["first", "expiring", "promo", "adjust", "paid-old", "paid-new"]
    assert draw(lots, 25) == {"first": 10, "expiring": 10, "promo": 5}
    assert sum(draw(lots, 1_000).values()) == 60  # what the lots cannot cover is not in the split


def test_each_charge_records_the_lots_it_took_and_replay_gives_the_same_split():
    team = TeamLedger.open("acme")
    team.add_credits(1_000, "bought")
    team.add_credits(300, "welcome", terms=LotTerms(PROMOTIONAL))
    first = spend(team, "r1", 500)
    assert first.drawn == {"lot-3": 300, "lot-2": 200}  # the promotional credit first
    assert remaining(team) == {"lot-2": 800}
    assert team.balance == 800
    assert remaining(replay(team)) == remaining(team)


def test_a_lot_s_remainder_is_written_off_at_its_expiry_instant_before_the_next_event():
    team = TeamLedger.open("acme")
    expires = clock.now() + DAY
    team.add_credits(1_000, "paid")
    team.add_credits(500, "trial", terms=LotTerms(PROMOTIONAL, expires))
    spend(team, "r1", 200)  # from the trial credit
    later(2 * DAY)
    spend(team, "r2", 100)
    events = team.collect_events()
    expired = [e for e in events if isinstance(e, TeamLedger.CreditsExpired)]
    assert [(e.lot, e.amount, e.balance_after) for e in expired] == [("lot-3", 300, 1_000)]
    assert expired[0].timestamp == expires.replace(microsecond=expires.microsecond)
    assert isinstance(events[events.index(expired[0]) + 1], TeamLedger.HoldPlaced)  # recorded first
    assert (team.balance, remaining(team)) == (900, {"lot-2": 900})


def test_a_hold_never_counts_on_credit_that_expires_before_it_could_settle():
    team = TeamLedger.open("acme")
    team.add_credits(100, "paid")
    team.add_credits(1_000, "trial", terms=LotTerms(PROMOTIONAL, clock.now() + timedelta(seconds=SETTLES_WITHIN / 2)))
    with pytest.raises(InsufficientCredits) as short:
        team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 500)
    assert short.value.available == 100
    team.add_credits(1_000, "later", terms=LotTerms(PROMOTIONAL, clock.now() + 2 * timedelta(seconds=SETTLES_WITHIN)))
    team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 500)


def test_the_window_a_hold_must_outlast_is_the_gateways_hold_timeout():
    team = TeamLedger.open("acme")
    team.add_credits(1_000, "trial", terms=LotTerms(PROMOTIONAL, clock.now() + timedelta(seconds=120)))
    with pytest.raises(InsufficientCredits):
        team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 500, settles_within=300)
    with pytest.raises(InsufficientCredits):
        team.lease_credits("lease-1", 500, 500, settles_within=300)
    team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 500, settles_within=60)  # settled before it expires
    assert team.lease_credits("lease-1", 400, 400, settles_within=60) == 400


def test_what_open_holds_count_on_is_written_off_once_they_close():
    team = TeamLedger.open("acme")
    team.add_credits(1_000, "trial", terms=LotTerms(PROMOTIONAL, clock.now() + 2 * timedelta(seconds=SETTLES_WITHIN)))
    team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 800)
    later(timedelta(seconds=3 * SETTLES_WITHIN))  # the lot expires with the request still held
    team.add_credits(50, "paid")
    assert (team.balance, team.held) == (850, 800)  # 200 written off; 800 still held against it
    team.charge(RequestOnLedger("r1", "k", "m", "chat"), TokenUsage(0, 300), ONE_EACH, PER_USD)
    # the 50 no hold counted on went first; then the charge took the expired lot's credit first
    assert remaining(team) == {"lot-2": 450, "lot-5": 50}
    team.add_credits(10, "paid")  # the hold is closed: the next event writes the rest off
    assert (team.balance, remaining(team)) == (60, {"lot-5": 50, "lot-9": 10})
    assert remaining(replay(team)) == remaining(team)


def test_a_lot_must_be_of_a_known_kind_with_a_usable_priority_and_a_future_expiry():
    team = TeamLedger.open("acme")
    for terms in (
        LotTerms("gift"),
        LotTerms(priority=101),
        LotTerms(expires=clock.now() - DAY),
        LotTerms(expires=datetime(2099, 1, 1)),  # noqa: DTZ001 - no time zone, refused
    ):
        with pytest.raises(InvalidAmount):
            team.add_credits(10, "x", terms=terms)


def test_an_adjustment_taking_credit_draws_the_lots_and_one_giving_it_is_a_lot_of_its_own():
    team = TeamLedger.open("acme")
    team.add_credits(1_000, "paid")
    team.adjust_credits(-400, "correction")
    team.adjust_credits(250, "goodwill")
    assert remaining(team) == {"lot-2": 600, "lot-4": 250}
    assert team.lots["lot-4"].kind == ADJUSTMENT
    assert remaining(replay(team)) == remaining(team)


command = st.one_of(
    st.tuples(
        st.just("add"),
        st.integers(1, 5_000),
        st.sampled_from([PAID, PROMOTIONAL, ADJUSTMENT]),
        st.none() | st.integers(1, 10 * 86_400),
        st.integers(0, 100),
    ),
    st.tuples(st.just("spend"), st.integers(1, 4_000)),
    st.tuples(st.just("adjust"), st.integers(-3_000, 3_000).filter(bool)),
    st.tuples(st.just("wait"), st.integers(1, 4 * 86_400)),
)


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(command, max_size=30))
def test_for_any_lots_charges_expiries_and_adjustments_the_lots_sum_to_the_balance_and_replay_agrees(commands):
    clock.shift(timedelta())
    team = TeamLedger.open("acme")
    for n, cmd in enumerate(commands):
        try:
            if cmd[0] == "add":
                expires = clock.now() + timedelta(seconds=cmd[3]) if cmd[3] else None
                team.add_credits(cmd[1], "x", terms=LotTerms(cmd[2], expires, cmd[4]))
            elif cmd[0] == "spend":
                spend(team, f"r{n}", cmd[1])
            elif cmd[0] == "adjust":
                team.adjust_credits(cmd[1], "x")
            else:
                later(timedelta(seconds=cmd[1]))
                team.expire_lots(team.now())
        except (InsufficientCredits, InvalidAmount):
            pass
        assert sum(remaining(team).values()) == team.balance >= 0
        assert all(lot.remaining > 0 for lot in team.lots.values())
        assert not any(lot.expired_at(team.now().timestamp()) for lot in team.lots.values())  # nothing was held
    events = team.collect_events()
    for event in events:
        if isinstance(event, TeamLedger.Charged) and event.charged:
            assert sum((event.drawn or {}).values()) == event.charged
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert isinstance(replayed, TeamLedger)
    assert (remaining(replayed), replayed.balance) == (remaining(team), team.balance)
