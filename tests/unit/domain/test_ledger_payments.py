"""Payments on the team ledger: a payment's credit counted once however often it is told, refunds and
disputes as events of their own taking it back (what was spent is then owed, and refuses requests
until paid), a dispute won giving it back, and replay agreeing with every split."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.credit_lots import PROMOTIONAL, LotTerms
from domain.ledger import InsufficientCredits, InvalidAmount, TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.ledger_payments import PaymentFacts, PaymentNotFound, Reversal
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.ledgers import replay

ONE_EACH = Price(input=Decimal(0), output=Decimal("0.01"), cache_create=Decimal(0), cache_hit=Decimal(0))
PI = "pi_3Q0abc"


def spend(team: TeamLedger, request_id: str, micros: int) -> None:
    request = RequestOnLedger(request_id, "k", "m", "chat")
    team.place_hold(request, micros)
    team.charge(request, TokenUsage(0, micros), ONE_EACH, Decimal(100))


def paid(amount: int = 1_000, payment_intent: str = PI) -> PaymentFacts:
    return PaymentFacts(payment_intent, amount, "cs_test_1", "cus_1", "usd", 1000)


def state(team: TeamLedger) -> tuple[int, int, int, dict[str, int]]:
    return team.balance, team.held, team.owed, {i: lot.remaining for i, lot in team.lots.items()}


def test_a_payment_is_credited_once_as_a_paid_lot_naming_it():
    team = TeamLedger.open("acme")
    assert team.credit_payment(paid()) is True
    assert team.credit_payment(paid()) is False  # the webhook again: nothing more
    (added,) = [e for e in team.collect_events() if isinstance(e, TeamLedger.CreditsAdded)]
    assert (added.amount, added.kind, added.payment_intent, added.reference) == (1_000, "paid", PI, PI)
    assert added.payment == {
        "checkout_session": "cs_test_1",
        "customer": "cus_1",
        "currency": "usd",
        "amount_minor": "1000",
    }
    assert team.balance == 1_000


def test_a_refund_takes_the_payments_own_credit_back_first_once():
    team = TeamLedger.open("acme")
    team.add_credits(500, "promo", terms=LotTerms(PROMOTIONAL))
    team.credit_payment(paid())
    assert team.refund_payment(Reversal("re_1", PI, 400)) == 400
    assert team.refund_payment(Reversal("re_1", PI, 400)) == 0  # redelivered
    assert state(team) == (1_100, 0, 0, {"lot-2": 500, "lot-3": 600})
    assert team.payments[PI].refunded == 400


def test_a_refund_of_spent_credit_is_owed_refuses_requests_and_the_next_credit_pays_it_first():
    team = TeamLedger.open("acme")
    team.credit_payment(paid())
    spend(team, "r1", 800)
    assert team.refund_payment(Reversal("re_1", PI, 1_000)) == 200
    assert state(team) == (0, 0, 800, {})
    with pytest.raises(InsufficientCredits):
        team.place_hold(RequestOnLedger("r2", "k", "m", "chat"), 1)
    team.add_credits(1_000, "top-up")
    assert state(team) == (200, 0, 0, {"lot-6": 200})
    spend(team, "r3", 150)
    assert state(replay(team)) == state(team)


def test_a_refund_never_takes_credit_requests_in_flight_hold():
    team = TeamLedger.open("acme")
    team.credit_payment(paid())
    team.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 700)
    assert team.refund_payment(Reversal("re_1", PI, 1_000)) == 300
    assert state(team) == (700, 700, 700, {"lot-2": 700})
    team.charge(RequestOnLedger("r1", "k", "m", "chat"), TokenUsage(0, 700), ONE_EACH, Decimal(100))
    assert state(team) == (0, 0, 700, {})


def test_a_dispute_holds_the_credit_and_gives_it_back_when_won_or_keeps_it_when_lost():
    team = TeamLedger.open("acme")
    team.credit_payment(paid())
    team.credit_payment(paid(500, "pi_2"))
    assert team.open_dispute(Reversal("dp_1", PI, 1_000)) == 1_000
    assert team.balance == 500
    assert team.close_dispute("dp_1", PI, won=True) == 1_000
    assert team.close_dispute("dp_1", PI, won=True) == 0  # told twice
    assert team.balance == 1_500
    team.open_dispute(Reversal("dp_2", "pi_2", 500))
    assert team.close_dispute("dp_2", "pi_2", won=False) == 0
    assert team.balance == 1_000
    closed = [e for e in team.collect_events() if isinstance(e, TeamLedger.DisputeClosed)]
    assert [(e.dispute_id, e.won, e.amount) for e in closed] == [("dp_1", True, 1_000), ("dp_2", False, 0)]


def test_a_reversal_of_a_payment_never_credited_is_refused():
    team = TeamLedger.open("acme")
    with pytest.raises(PaymentNotFound):
        team.refund_payment(Reversal("re_1", "pi_unknown", 100))
    team.credit_payment(paid())
    with pytest.raises(PaymentNotFound):
        team.close_dispute("dp_never", PI, won=True)
    with pytest.raises(InvalidAmount):
        team.refund_payment(Reversal("re_2", PI, 0))


command = st.one_of(
    st.tuples(st.just("pay"), st.sampled_from(["pi_a", "pi_b", "pi_c"]), st.integers(1, 5_000)),
    st.tuples(st.just("spend"), st.integers(1, 4_000)),
    st.tuples(st.just("hold"), st.integers(1, 4_000)),
    st.tuples(
        st.just("refund"), st.sampled_from(["pi_a", "pi_b"]), st.sampled_from(["re_1", "re_2"]), st.integers(1, 6_000)
    ),
    st.tuples(st.just("dispute"), st.sampled_from(["pi_a", "pi_c"]), st.integers(1, 6_000)),
    st.tuples(st.just("close"), st.sampled_from(["pi_a", "pi_c"]), st.booleans()),
    st.tuples(st.just("top_up"), st.integers(1, 3_000)),
)


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(command, max_size=30))
def test_for_any_payments_refunds_disputes_and_charges_the_books_balance_and_replay_agrees(commands):
    team = TeamLedger.open("acme")
    for n, cmd in enumerate(commands):
        try:
            if cmd[0] == "pay":
                team.credit_payment(paid(cmd[2], cmd[1]))
            elif cmd[0] == "spend":
                spend(team, f"r{n}", cmd[1])
            elif cmd[0] == "hold":
                team.place_hold(RequestOnLedger(f"h{n}", "k", "m", "chat"), cmd[1])
            elif cmd[0] == "refund":
                team.refund_payment(Reversal(f"{cmd[2]}-{cmd[1]}", cmd[1], cmd[3]))
            elif cmd[0] == "dispute":
                team.open_dispute(Reversal(f"dp-{cmd[1]}", cmd[1], cmd[2]))
            elif cmd[0] == "close":
                team.close_dispute(f"dp-{cmd[1]}", cmd[1], won=cmd[2])
            else:
                team.add_credits(cmd[1], "x")
        except (InsufficientCredits, PaymentNotFound, InvalidAmount):
            pass
        assert sum(lot.remaining for lot in team.lots.values()) == team.balance
        assert 0 <= team.held <= team.balance
        assert team.owed >= 0
        assert all(p.disputed >= 0 for p in team.payments.values())
    assert state(replay(team)) == state(team)
