"""What the ledger does with the holds of a gateway process that died, and with idempotency keys."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from domain.bounds import AMOUNT
from domain.ledger import (
    ABANDONED,
    MAX_BALANCE,
    Delivery,
    InvalidAmount,
    InvalidTeamName,
    RequestInProgress,
    TeamLedger,
)
from domain.ledger_holds import RequestOnLedger
from domain.prices import PriceEntry
from domain.pricing import Price, cost_in_micros
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, PRICE, funded, replay

TEN = 10_000_000


def test_a_dead_process_s_holds_and_leases_are_released_and_nobody_else_s():
    team = funded(TEN)
    team.place_hold(RequestOnLedger("r-dead", "k", "m", "chat"), 1_000_000, owner="dead")
    team.lease_credits("lease-dead", 2_000_000, 2_000_000, owner="dead")
    team.place_hold(RequestOnLedger("r-live", "k", "m", "chat"), 500_000, owner="live")
    team.place_hold(RequestOnLedger("r-old", "k", "m", "chat"), 100_000)  # recorded before owners: left to hold_timeout
    assert sorted(team.release_abandoned(["dead"])) == ["lease-dead", "r-dead"]
    assert set(team.holds) == {"r-live", "r-old"}
    assert team.held == 600_000
    assert team.release_abandoned(["dead"]) == []  # a second look finds nothing more
    assert {held: h.amount for held, h in replay(team).holds.items()} == {"r-live": 500_000, "r-old": 100_000}


def test_a_dead_process_s_streams_are_charged_for_what_they_had_delivered_then_released():
    team = funded(TEN)
    team.lease_credits("lease-dead", 3_000_000, 3_000_000, owner="dead")
    team.place_hold(RequestOnLedger("r-idem", "k", "m", "chat"), 1_000_000, owner="dead", idem_key="K")
    delivered = [
        Delivery("s1", "k", "m", "chat", TokenUsage(100, 40), lease="lease-dead"),
        Delivery("r-idem", "k", "m", "chat", TokenUsage(50, 10)),
        Delivery("unknown-model", "k", "other", "chat", TokenUsage(50, 10), lease="lease-dead"),
    ]
    released = team.release_abandoned(["dead"], delivered, {"m": PRICE}, CPU)
    charged = [e for e in team.pending_events if isinstance(e, TeamLedger.Charged)]
    assert [(c.request_id, c.usage["output_tokens"]) for c in charged] == [("s1", 40), ("r-idem", 10)]
    assert released == ["lease-dead"]  # the idempotent stream's own hold was closed by its charge
    expected = cost_in_micros(TokenUsage(100, 40), PRICE, CPU) + cost_in_micros(TokenUsage(50, 10), PRICE, CPU)
    assert (team.balance, team.held) == (TEN - expected, 0)
    assert team.idem_holds == {}  # the key is free for a retry
    assert [e.reason for e in team.pending_events if isinstance(e, TeamLedger.HoldReleased)] == [ABANDONED]


def test_a_dead_process_s_stream_is_charged_with_its_attribution():
    team = funded(TEN)
    team.place_hold(RequestOnLedger("s1", "k", "m", "chat"), 1_000_000, owner="dead")
    delivered = [Delivery("s1", "k", "m", "chat", TokenUsage(100, 40), tags={"project": "alpha"}, end_user="alice")]
    team.release_abandoned(["dead"], delivered, {"m": PRICE}, CPU)
    (charged,) = [e for e in team.pending_events if isinstance(e, TeamLedger.Charged)]
    assert (charged.tags, charged.end_user) == ({"project": "alpha"}, "alice")


def test_a_request_it_served_after_all_is_charged_late_once():
    team = funded(TEN)
    team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 1_000_000, owner="stuck")
    team.release_abandoned(["stuck"])
    event = team.charge(RequestOnLedger("r1", "k", "m", "chat"), TokenUsage(10, 10), PRICE, CPU)
    assert event.hold == 0
    assert event.charged == cost_in_micros(TokenUsage(10, 10), PRICE, CPU)


def test_one_request_at_a_time_per_idempotency_key():
    team = funded(TEN)
    team.place_hold(RequestOnLedger("first", "k", "m", "chat"), 1_000, idem_key="K")
    with pytest.raises(RequestInProgress):
        team.place_hold(RequestOnLedger("retry", "k", "m", "chat"), 1_000, idem_key="K")
    assert (
        team.place_hold(RequestOnLedger("first", "k", "m", "chat"), 1_000, idem_key="K") == team.available
    )  # replayed: no-op
    team.release_hold("first", "upstream failed")
    team.place_hold(RequestOnLedger("retry", "k", "m", "chat"), 1_000, idem_key="K")  # the key is free again
    assert replay(team).idem_holds == {"K": "retry"}


def test_a_balance_never_grows_past_what_the_ledger_can_hold():
    team = funded(1)
    most = AMOUNT.high  # the largest one top-up (domain/bounds.py): it takes about 900 to fill a balance
    while team.balance <= MAX_BALANCE - most:
        team.add_credits(most)
    with pytest.raises(InvalidAmount):
        team.add_credits(MAX_BALANCE - team.balance + 1)
    team.add_credits(MAX_BALANCE - team.balance)
    assert team.balance == MAX_BALANCE
    with pytest.raises(InvalidAmount):
        team.add_credits(1)


@pytest.mark.parametrize("name", ["acme\n", "acme\nx", " acme", "acme/x", ""])
def test_a_team_name_is_matched_whole(name):
    with pytest.raises(InvalidTeamName):
        TeamLedger.open(name)


DEARER = Price(input=Decimal("2.75"), output=Decimal(11), cache_create=Decimal("3.4375"), cache_hit=Decimal("1.375"))


class PricesByKey:
    """A price list of the model and one deployment of its own (``m/eu``), as the gateway's."""

    def __init__(self) -> None:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        self.entries = {key: PriceEntry(key, price, at, 1, at, "") for key, price in (("m", PRICE), ("m/eu", DEARER))}

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        return self.entries.get(model)


def test_a_dead_process_s_stream_is_charged_at_the_price_of_the_deployment_that_served_it():
    team = funded(TEN)
    for request_id in ("eu", "gone", "plain"):
        team.place_hold(RequestOnLedger(request_id, "k", "m", "chat"), 1_000_000, owner="dead")
    delivered = [
        Delivery("eu", "k", "m", "chat", TokenUsage(100, 40), price_key="m/eu"),
        Delivery("gone", "k", "m", "chat", TokenUsage(100, 40), price_key="m/removed"),  # no price now: the model's
        Delivery("plain", "k", "m", "chat", TokenUsage(100, 40)),
    ]
    team.release_abandoned(["dead"], delivered, PricesByKey(), CPU)
    charged = {e.request_id: e for e in team.pending_events if isinstance(e, TeamLedger.Charged)}
    usage = TokenUsage(100, 40)
    assert {r: (c.charged, c.price_ref) for r, c in charged.items()} == {
        "eu": (cost_in_micros(usage, DEARER, CPU), "m/eu@1"),
        "gone": (cost_in_micros(usage, PRICE, CPU), "m@1"),
        "plain": (cost_in_micros(usage, PRICE, CPU), "m@1"),
    }
    assert {c.model for c in charged.values()} == {"m"}
