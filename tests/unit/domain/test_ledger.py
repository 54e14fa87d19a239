from decimal import Decimal

import pytest

from domain.ledger import (
    HoldNotFound,
    InsufficientCredits,
    InvalidAmount,
    InvalidTeamName,
    KeyNotFound,
    LedgerError,
    TeamLedger,
    team_id,
)
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import CPU, PRICE, funded, replay


def charge(team: TeamLedger, request_id: str, usage: TokenUsage) -> TeamLedger.Charged:
    return team.charge(RequestOnLedger(request_id, "k1", "m", "chat.completions"), usage, PRICE, CPU)


def test_a_team_id_is_derived_from_its_name():
    assert TeamLedger.open("acme").id == team_id("acme") != team_id("other")


@pytest.mark.parametrize("name", ["", "-lead", "has space", "x" * 65, "semi;colon"])
def test_team_names_are_checked(name):
    with pytest.raises(InvalidTeamName):
        TeamLedger.open(name)


def test_a_charge_debits_the_cost_and_closes_the_hold():
    team = funded(1_000_000)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat.completions"), 500_000)
    assert (team.balance, team.held, team.available) == (1_000_000, 500_000, 500_000)

    event = charge(team, "r1", TokenUsage(input_tokens=100, output_tokens=50))

    # (100 * 2.5 + 50 * 10) * 100 credits/USD = 75,000 micro-credits
    assert (event.cost, event.charged, event.uncollected) == (75_000, 75_000, 0)
    assert event.balance_after == team.balance == 925_000
    assert team.held == 0
    assert team.holds == {}


def test_a_hold_the_team_cannot_afford_is_refused_and_nothing_is_recorded():
    team = funded(1_000)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 600)
    version = team.version
    with pytest.raises(InsufficientCredits) as refused:
        team.place_hold(RequestOnLedger("r2", "k1", "m", "chat"), 401)
    assert (refused.value.needed, refused.value.available) == (401, 400)
    assert team.version == version
    assert team.held == 600


def test_placing_the_same_hold_twice_reserves_once():
    team = funded(1_000)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 600)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 600)
    assert team.held == 600


def test_a_request_is_charged_at_most_once():
    team = funded()
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 500_000)
    charge(team, "r1", TokenUsage(input_tokens=1))
    with pytest.raises(HoldNotFound):
        charge(team, "r1", TokenUsage(input_tokens=1))


def test_a_released_hold_charges_nothing():
    team = funded(1_000)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 600)
    assert team.release_hold("r1", "upstream failed") == 1_000
    assert (team.balance, team.held) == (1_000, 0)
    with pytest.raises(HoldNotFound):
        team.release_hold("r1", "again")


def test_a_cost_beyond_the_hold_never_overdraws_the_team():
    team = funded(100_000)
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 50_000)
    event = charge(team, "r1", TokenUsage(output_tokens=1_000))  # costs 1,000,000
    assert event.charged == 100_000
    assert event.uncollected == 900_000
    assert team.balance == 0
    assert event.balance_after == 0


@pytest.mark.parametrize("amount", [0, -5])
def test_top_ups_must_be_positive(amount):
    with pytest.raises(InvalidAmount):
        funded().add_credits(amount)


def test_replaying_the_events_reproduces_the_state():
    team = funded(2_000_000)
    team.issue_key("key_1", "hash", "ci")
    team.place_hold(RequestOnLedger("r1", "key_1", "m", "chat"), 500_000)
    team.place_hold(RequestOnLedger("r2", "key_1", "m", "chat"), 500_000)
    charge(team, "r1", TokenUsage(input_tokens=10, output_tokens=10, cache_hit_tokens=5))
    team.release_hold("r2", "failed")
    team.add_credits(1, "top-up")

    copy = replay(team)

    assert (copy.balance, copy.held, copy.holds, copy.keys, copy.version) == (
        team.balance,
        team.held,
        team.holds,
        team.keys,
        team.version,
    )


def test_holds_older_than_the_timeout_are_released_and_can_still_be_charged_once():
    team = funded(1_000_000)
    team.place_hold(RequestOnLedger("old", "k1", "m", "chat"), 600_000)
    placed = team.holds["old"].placed
    assert team.release_expired(now=placed + 10, timeout=60) == []
    assert team.release_expired(now=placed + 61, timeout=60) == ["old"]
    assert (team.held, team.available) == (0, 1_000_000)

    # The request was served after all (its process was slow, not dead): charge it, without a hold.
    event = charge(team, "old", TokenUsage(input_tokens=100, output_tokens=50))
    assert (event.hold, event.charged, event.balance_after) == (0, 75_000, 925_000)
    with pytest.raises(HoldNotFound):
        charge(team, "old", TokenUsage(input_tokens=1))
    assert replay(team).balance == 925_000


def test_a_late_charge_after_expiry_never_overdraws():
    team = funded(100_000)
    team.place_hold(RequestOnLedger("old", "k1", "m", "chat"), 100_000)
    team.release_expired(now=team.holds["old"].placed + 1_000, timeout=60)
    team.place_hold(RequestOnLedger("new", "k1", "m", "chat"), 90_000)
    event = charge(team, "old", TokenUsage(output_tokens=1_000))  # costs 1,000,000
    assert event.charged == 10_000
    assert team.balance == 90_000 == team.held


def test_a_free_model_s_zero_hold_is_closed_by_its_charge():
    team = funded(1_000)
    team.place_hold(RequestOnLedger("free", "k1", "m", "chat"), 0)
    event = team.charge(
        RequestOnLedger("free", "k1", "m", "chat"), TokenUsage(input_tokens=10), Price(*(Decimal(0),) * 4), CPU
    )
    assert event.charged == 0
    assert team.holds == {}
    assert replay(team).holds == {}


def test_a_suspended_team_cannot_place_holds_until_reinstated():
    from domain.ledger import TeamSuspended

    team = TeamLedger.open("acme")
    team.add_credits(1_000_000)
    team.issue_key("key_1", "hash", "ci")
    team.place_hold(RequestOnLedger("r1", "key_1", "m", "chat.completions"), 10)
    team.suspend("unpaid invoice")
    with pytest.raises(TeamSuspended):
        team.place_hold(RequestOnLedger("r2", "key_1", "m", "chat.completions"), 10)
    team.charge(
        RequestOnLedger("r1", "key_1", "m", "chat.completions"),
        TokenUsage(input_tokens=1),
        Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1)),
        Decimal(100),
    )  # a request already running still settles
    with pytest.raises(LedgerError):
        team.suspend("again")
    team.reinstate()
    team.place_hold(RequestOnLedger("r3", "key_1", "m", "chat.completions"), 10)


def test_key_and_team_policies_are_recorded_as_events():
    team = TeamLedger.open("acme")
    team.issue_key("key_1", "hash", "ci")
    team.restrict_key_endpoints("key_1", ["messages", "chat.completions", "messages"])
    team.limit_key("key_1", 60, 0)
    team.limit(600, 100_000)
    key = team.keys["key_1"]
    assert key.endpoints == ("chat.completions", "messages")
    assert (key.rpm, key.tpm) == (60, None)  # 0 means no limit
    assert (team.rpm, team.tpm) == (600, 100_000)
    assert team.policy_version == team.version
    with pytest.raises(LedgerError):
        team.limit_key("key_1", -1, None)
    with pytest.raises(KeyNotFound):
        team.limit_key("key_9", 1, 1)


def test_a_lease_is_a_hold_that_requests_are_charged_against_in_memory():
    team = TeamLedger.open("acme")
    team.add_credits(1_000)
    assert team.lease_credits("lease-1", needed=100, wanted=400) == 100 + 225  # a quarter of the other 900
    assert (team.held, team.available) == (325, 675)
    assert team.lease_credits("lease-1", needed=675, wanted=5_000) == 1_000  # all that is left, when needed
    with pytest.raises(InsufficientCredits):
        team.lease_credits("lease-2", needed=1, wanted=10)

    price = Price(Decimal(1), Decimal(1), Decimal(0), Decimal(0))  # at 1 credit per USD: 1 micro-credit a token
    charged = team.charge(
        RequestOnLedger("r1", "k", "m", "chat.completions"),
        TokenUsage(input_tokens=3),
        price,
        Decimal(1),
        lease="lease-1",
    )
    assert (charged.cost, charged.charged, charged.hold, charged.lease) == (3, 3, 3, "lease-1")
    assert (team.balance, team.held, team.holds["lease-1"].amount) == (997, 997, 997)
    with pytest.raises(LedgerError):  # a request is charged once
        team.charge(
            RequestOnLedger("r1", "k", "m", "chat.completions"),
            TokenUsage(input_tokens=1),
            price,
            Decimal(1),
            lease="lease-1",
        )
    team.record_failure("r2", "lease-1", "k", "m", "chat.completions", "upstream failed")
    team.return_lease("lease-1")
    assert team.held == 0
    assert "lease-1" not in team.holds
    assert team.available == team.balance
