"""The ledger service in-process, on a real store: what each named method answers (its refusals'
HTTP answers: tests/unit/app/http/test_refusals.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.keys import hash_key
from app.ledger.results import AnswerToStore, KeyTerms, Limits
from app.ledger.service import LedgerService, TeamRequest
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain.ledger import (
    InvalidTeamName,
    KeyNotFound,
    RequestInProgress,
    TeamAlreadyExists,
    TeamNotFound,
    TeamSuspended,
    team_id,
)
from domain.pricing import Price, cost_in_micros
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from tests.support.backend import new_database_url

PRICE = Price(Decimal(1), Decimal(2), Decimal(1), Decimal(1))
PER_USD = Decimal(100)
USAGE = TokenUsage(1_000, 500)


@pytest.fixture
def database_url():
    return new_database_url()


@pytest.fixture
def store(database_url, tmp_path):
    opened = open_ledger_store(database_url, tmp_path, pool_size=2)
    yield opened
    opened.close()


@pytest.fixture
def ledger(store):
    with LedgerWriter(store) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 10**9)
        yield service


def request(request_id: str) -> TeamRequest:
    return TeamRequest(team_id("acme"), "acme", request_id, "key_1", "m", "chat")


def test_a_hold_then_its_charge_answer_what_the_team_has_after_each(ledger, store):
    held = ledger.hold(request("r1"), 5_000_000, owner="me").result()
    assert (held.available, held.stored_answer) == (10**9 - 5_000_000, None)
    charged = ledger.charge(request("r1"), USAGE, PRICE, PER_USD).result()
    cost = cost_in_micros(USAGE, PRICE, PER_USD)
    assert (charged.event.charged, charged.event.balance_after) == (cost, 10**9 - cost)
    assert (charged.lease_left, charged.answer) == (None, None)
    assert store.find_charge(team_id("acme"), "r1").charged == cost
    assert verify_ledger(store).ok


def test_a_charge_that_stores_its_answer_returns_the_body_it_stored(ledger, store):
    ledger.hold(request("r1"), 5_000_000, owner="me", idem_key="K").result()
    answer = AnswerToStore(
        "K",
        "hash",
        "application/json",
        b"prefix:",
        60.0,
        lambda event, cost: f'{{"charged": {event.charged}, "parts": {len(cost.parts)}}}'.encode(),
    )
    charged = ledger.charge(request("r1"), USAGE, PRICE, PER_USD, answer=answer).result()
    assert charged.cost is not None  # what the cost is made of, from the command that charged it
    assert charged.answer == f'{{"charged": {charged.event.charged}, "parts": {len(charged.cost.parts)}}}'.encode()
    stored = ledger.stored_answer(team_id("acme"), "K")
    assert stored is not None
    assert (stored.response, stored.request_id) == (b"prefix:" + charged.answer, "r1")


def test_a_hold_under_a_key_served_before_is_its_stored_answer_and_holds_nothing(ledger, store):
    ledger.hold(request("r1"), 1_000, owner="me", idem_key="K").result()
    answer = AnswerToStore("K", "hash", "application/json", b"", 60.0, lambda event, cost: b"{}")
    ledger.charge(request("r1"), USAGE, PRICE, PER_USD, answer=answer).result()
    balance = ledger.team_summary("acme").balance

    again = ledger.hold(request("r2"), 1_000, owner="me", idem_key="K").result()
    assert again.stored_answer is not None
    assert again.stored_answer.request_id == "r1"
    assert again.available == balance
    assert ledger.team_summary("acme").held == 0


def test_a_retry_while_the_first_attempt_holds_is_refused_as_in_progress(ledger):
    ledger.hold(request("r1"), 1_000, owner="me", idem_key="K").result()
    with pytest.raises(RequestInProgress):
        ledger.hold(request("r2"), 1_000, owner="me", idem_key="K").result()


def test_a_charge_against_a_lease_says_what_the_lease_holds_after_it(ledger):
    leased = ledger.lease(team_id("acme"), "acme", "L", 10_000_000, 10_000_000, "me").result()
    assert leased.remaining == 10_000_000
    charged = ledger.charge(request("r1"), USAGE, PRICE, PER_USD, lease="L").result()
    assert charged.lease_left == 10_000_000 - charged.event.charged
    assert ledger.return_lease(team_id("acme"), "acme", "L").result() is None
    assert ledger.team_summary("acme").held == 0


def test_release_and_a_recorded_failure_end_a_hold_uncharged(ledger):
    ledger.hold(request("r1"), 1_000, owner="me").result()
    assert ledger.release(request("r1"), "client disconnected").result().available == 10**9
    failed = ledger.record_failure(request("r2"), "no-lease", "upstream failed").result()
    assert failed.available == 10**9
    assert ledger.team_summary("acme").balance == 10**9


def test_sweeps_name_the_holds_they_release(ledger):
    ledger.hold(request("old"), 1_000, owner="dead-process").result()
    assert ledger.release_expired(team_id("acme"), "acme", 0.0, 60.0).result().held_by == ()
    released = ledger.release_abandoned(team_id("acme"), "acme", ["dead-process"], [], {}, PER_USD).result()
    assert released.held_by == ("old",)


def test_administration_answers_summaries(ledger, store):
    key = ledger.issue_key("acme", "ci", KeyTerms(["m"], ["chat"], Limits(rpm=5)))
    assert store.find_key(hash_key(key.secret)).key_id == key.key_id
    limited = ledger.limit_key("acme", key.key_id, Limits(tpm=900))
    assert (limited.rpm, limited.tpm, limited.models, limited.endpoints) == (5, 900, ("m",), ("chat",))
    assert ledger.top_up("acme", 7, "invoice 1").balance == 10**9 + 7
    assert ledger.limit_team("acme", Limits(rpm=10)).rpm == 10
    assert ledger.suspend("acme", "unpaid").suspended
    with pytest.raises(TeamSuspended):
        ledger.hold(request("r1"), 1, owner="me").result()
    assert not ledger.reinstate("acme").suspended
    ledger.revoke_key("acme", key.key_id)
    assert [(k.key_id, k.revoked) for k in ledger.list_keys("acme")] == [(key.key_id, True)]


def test_a_summary_sees_what_another_process_wrote(ledger, database_url, tmp_path):
    other_store = open_ledger_store(database_url, tmp_path, pool_size=1)
    try:
        with LedgerWriter(other_store) as other:
            LedgerService(other).top_up("acme", 5)
    finally:
        other_store.close()
    assert ledger.team_summary("acme").balance == 10**9 + 5


def test_administration_refuses_with_the_domain_s_errors(ledger):
    with pytest.raises(TeamAlreadyExists):
        ledger.create_team("acme", 0)
    with pytest.raises(InvalidTeamName):
        ledger.create_team("no spaces", 0)
    with pytest.raises(TeamNotFound):
        ledger.team_summary("ghost")
    with pytest.raises(KeyNotFound):
        ledger.revoke_key("acme", "key_missing")
