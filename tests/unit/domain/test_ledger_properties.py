"""Properties of the team ledger under any sequence of commands (hypothesis)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.ledger import HoldNotFound, InsufficientCredits, InvalidAmount, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
REQUESTS = [f"r{i}" for i in range(6)]

usage = st.builds(TokenUsage, st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 2000), st.integers(0, 2000))
command = st.one_of(
    st.tuples(st.just("top_up"), st.integers(-5, 2_000_000)),
    st.tuples(st.just("hold"), st.sampled_from(REQUESTS), st.integers(-5, 3_000_000)),
    st.tuples(st.just("charge"), st.sampled_from(REQUESTS), usage),
    st.tuples(st.just("release"), st.sampled_from(REQUESTS)),
)


def run(team: TeamLedger, cmd: tuple) -> None:
    kind = cmd[0]
    try:
        if kind == "top_up":
            team.add_credits(cmd[1], "test")
        elif kind == "hold":
            team.place_hold(RequestOnLedger(cmd[1], "k", "m", "chat"), cmd[2])
        elif kind == "charge":
            team.charge(RequestOnLedger(cmd[1], "k", "m", "chat"), cmd[2], PRICE, Decimal(100))
        else:
            team.release_hold(cmd[1], "test")
    except (InsufficientCredits, HoldNotFound, InvalidAmount):
        pass  # a refused command records nothing


@settings(max_examples=300, deadline=None)
@given(opening=st.integers(0, 5_000_000), commands=st.lists(command, max_size=40))
def test_available_never_goes_negative_and_replay_reproduces_the_state(opening, commands):
    team = TeamLedger.open("acme")
    if opening:
        team.add_credits(opening, "opening")
    debited = 0
    for cmd in commands:
        before = team.balance
        run(team, cmd)
        assert 0 <= team.held <= team.balance, "available = balance - held must stay >= 0"
        assert team.held == sum(h.amount for h in team.holds.values())
        if cmd[0] == "charge":
            debited += before - team.balance

    events = team.collect_events()
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert replayed is not None
    assert (replayed.balance, replayed.held, replayed.holds, replayed.version) == (
        team.balance,
        team.held,
        team.holds,
        team.version,
    )

    # Money is conserved: what came in, less what was charged, is what is left.
    added = sum(e.amount for e in events if isinstance(e, TeamLedger.CreditsAdded))
    charges = [e for e in events if isinstance(e, TeamLedger.Charged)]
    assert added - sum(e.charged for e in charges) == team.balance
    assert sum(e.charged for e in charges) == debited
    # A charge never takes more than the team could pay.
    assert all(e.balance_after >= 0 and e.charged + e.uncollected == e.cost for e in charges)


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(command, max_size=40))
def test_each_hold_is_closed_at_most_once(commands):
    team = TeamLedger.open("acme")
    team.add_credits(10_000_000, "opening")
    for cmd in commands:
        run(team, cmd)
    closes: dict[tuple[str, int], int] = {}
    opened: dict[str, int] = {}
    for event in team.collect_events():
        if isinstance(event, TeamLedger.HoldPlaced):
            opened[event.request_id] = opened.get(event.request_id, 0) + 1
        elif isinstance(event, TeamLedger.Charged | TeamLedger.HoldReleased):
            key = (event.request_id, opened.get(event.request_id, 0))
            closes[key] = closes.get(key, 0) + 1
    assert all(count == 1 for count in closes.values())
