"""Re-rating's money rules (``domain/rerates.py``) and the ledger's ``apply_rerate``: refunds come from
what was collected, a re-rate is named by its content, and a model's charges are re-rated once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from domain import clock
from domain.ledger import TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import LongContext, Price
from domain.rerates import RerateRaced, RerateRefused, canonical_price, rerated_collection, scope_of
from tests.support.ledgers import replay

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)
PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
HALF = {"m": Price(Decimal("1.25"), Decimal(5), Decimal("1.5625"), Decimal("0.625"))}


@pytest.fixture(autouse=True)
def december() -> Iterator[None]:
    clock.shift(datetime(2026, 12, 5, tzinfo=UTC) - datetime.now(UTC))
    yield
    clock.shift(timedelta())


@pytest.mark.parametrize(
    ("charged", "uncollected", "rerated", "owed"),
    [
        (1_000_000, 0, 400_000, 400_000),  # collected in full: owes its new cost (600,000 back)
        (1_000_000, 0, 1_500_000, 1_500_000),  # a dearer list: owes more (a debit of 500,000)
        (1_000_000, 2_000_000, 1_500_000, 1_000_000),  # cut short at 1 credit: half price is still more
        (1_000_000, 2_000_000, 300_000, 300_000),  # cut short, and the new cost is under what it paid
        (1_000_000, 2_000_000, 9_000_000, 1_000_000),  # cut short: a dearer list takes nothing more
        (0, 500, 100, 0),  # nothing collected: nothing owed back
    ],
)
def test_a_re_rated_charge_owes_its_new_cost_but_never_more_than_a_cut_short_charge_collected(
    charged, uncollected, rerated, owed
):
    assert rerated_collection(charged, uncollected, rerated) == owed
    assert charged - owed <= charged  # a refund never exceeds what was collected


def test_a_re_rate_is_named_by_its_content_not_its_spelling():
    plus_one = timezone(timedelta(hours=1))
    respelled = {
        "m": Price(
            Decimal("1.250"),
            Decimal("5.0"),
            Decimal("1.56250"),
            Decimal("0.6250"),
            cache_write_1h=Decimal("1.5625"),
            tool_fees={"web_search": Decimal(0)},
        ),
        "unrelated": PRICE,
    }
    one = scope_of(NOV, DEC, HALF, ["m"])
    assert scope_of(NOV.astimezone(plus_one), DEC.astimezone(plus_one), respelled, ["m"]) == one
    assert one.start.isoformat() == "2026-11-01T00:00:00+00:00"
    assert scope_of(NOV, DEC, {"m": PRICE}, ["m"]).reference != one.reference
    assert scope_of(NOV, DEC - timedelta(microseconds=1), HALF, ["m"]).reference != one.reference
    assert (
        canonical_price(Price(Decimal(1), Decimal(2), Decimal(3), Decimal(4), long_context=LongContext(1000, PRICE)))[
            "long_context"
        ]["threshold"]
        == 1000
    )


def team_with_charges() -> TeamLedger:
    team = TeamLedger.open("acme")
    team.add_credits(10_000_000)
    team.issue_key("k1", "h")
    return team


def test_applied_once_then_every_overlap_of_the_same_model_is_refused_naming_it():
    team = team_with_charges()
    scope = scope_of(NOV, DEC, HALF, ["m"])
    assert team.apply_rerate(scope, [("m", "k1", 600_000)], through_version=None, actor="cli:op@host") == [600_000]
    assert team.balance == 10_600_000
    for start, end, models in [
        (NOV, DEC, ["m"]),
        (NOV - timedelta(days=3), NOV + timedelta(seconds=1), ["m"]),
        (DEC - timedelta(seconds=1), DEC + timedelta(days=1), ["m", "n"]),
    ]:
        prices = {**HALF, "n": PRICE}
        with pytest.raises(RerateRefused, match=scope.reference) as refused:
            team.apply_rerate(scope_of(start, end, prices, models), [("m", "k1", 1)], through_version=None)
        assert "cli:op@host" in str(refused.value)
    assert team.balance == 10_600_000
    # Touching is not overlapping ([from, to) periods), and another model is another model.
    team.apply_rerate(scope_of(DEC, DEC + timedelta(days=1), HALF, ["m"]), [("m", "k1", 1)], through_version=None)
    team.apply_rerate(scope_of(NOV, DEC, {"n": PRICE}, ["n"]), [("n", "k1", 1)], through_version=None)
    assert team.balance == 10_600_002
    assert replay(team).rerates == team.rerates


def test_refunds_come_first_and_a_debit_takes_no_more_than_is_available():
    team = team_with_charges()
    team.place_hold(RequestOnLedger("r", "k1", "m", "chat"), 9_000_000)  # 1,000,000 available
    moved = team.apply_rerate(
        scope_of(NOV, DEC, {**HALF, "n": PRICE}, ["m", "n"]),
        [("m", "k1", -3_000_000), ("n", "k1", 500_000)],
        through_version=None,
    )
    assert moved == [-1_500_000, 500_000]  # the refund first, then all that is available
    assert team.available == 0


def test_a_period_not_ended_or_a_ledger_that_moved_meanwhile_is_refused_and_nothing_is_recorded():
    team = team_with_charges()
    version = team.version
    with pytest.raises(RerateRefused, match="has not come"):
        team.apply_rerate(
            scope_of(NOV, clock.now() + timedelta(hours=1), HALF, ["m"]), [("m", "k1", 1)], through_version=None
        )
    with pytest.raises(RerateRaced):
        team.apply_rerate(scope_of(NOV, DEC, HALF, ["m"]), [("m", "k1", 1)], through_version=version - 1)
    assert team.version == version
    assert team.apply_rerate(scope_of(NOV, DEC, HALF, ["m"]), [("m", "k1", 0)], through_version=version) == [0]
    assert team.version == version  # nothing to move: nothing recorded, and the period stays open to a re-rate
    assert team.rerates == {}


def test_re_rates_applied_before_they_were_events_still_count():
    """A re-rate applied by an older version left only its adjustments, under references naming the
    file's digest and the period as typed: they are known as that re-rate, from the events and from
    an old snapshot alike."""
    team = team_with_charges()
    legacy = "rerate:0123456789ab:2026-11-01T01:00:00+01:00:2026-12-01T00:00:00+00:00:ft:gpt-x:acme::1:key_ab12"
    team.adjust_credits(5, "re-rated", legacy)
    with pytest.raises(RerateRefused, match="rerate:0123456789ab"):
        team.apply_rerate(
            scope_of(NOV, DEC, {"ft:gpt-x:acme::1": PRICE}, ["ft:gpt-x:acme::1"]),
            [("ft:gpt-x:acme::1", "k1", 1)],
            through_version=None,
        )
    state = {"adjustment_references": {legacy: None}}
    TeamLedger.upcast_v3_v4(state)
    known = "rerate:0123456789ab:2026-11-01T01:00:00+01:00:2026-12-01T00:00:00+00:00"
    assert (
        state["rerates"]
        == team.rerates
        == {
            known: {
                "from": "2026-11-01T00:00:00+00:00",
                "to": "2026-12-01T00:00:00+00:00",
                "models": ["ft:gpt-x:acme::1"],
            }
        }
    )
