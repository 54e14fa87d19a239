"""Billing through the real application: hold the worst case, charge what the upstream reports, or
release; an Idempotency-Key's retry replayed and charged once; refusals (no credits, a suspended
team) before the upstream is called. Every test ends on the ledger itself, replayed whole."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

import httpx
import pytest

from domain.ledger import team_id
from domain.pricing import cost_in_micros
from domain.usage import TokenUsage
from tests.support.fake_upstream import FakeUpstream
from tests.support.in_process import InProcessGateway, charge_of, in_credits, ledger_of, team_state

HELLO = [{"role": "user", "content": "hello there gateway"}]


def cost(gateway: InProcessGateway, model: str, usage: dict) -> int:
    """What ``usage`` (a Chat Completions usage object) costs on ``model``, in micro-credits."""
    spent = TokenUsage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"])
    return cost_in_micros(spent, gateway.settings.model(model).price, gateway.settings.credits_per_usd)


def test_a_request_is_charged_what_the_upstream_reported_and_its_answer_says_so(gateway: InProcessGateway):
    team = gateway.open_team("acme", "100")
    answer = gateway.post(team, "/v1/chat/completions", {"model": "demo-gpt", "messages": HELLO})
    assert answer.status_code == 200, answer.text
    usage = json.loads(answer.content, parse_float=Decimal)["usage"]
    expected = cost(gateway, "demo-gpt", usage)
    assert expected > 0
    assert usage["cost"]["credits"] == in_credits(expected)
    assert usage["remaining"]["credits"] == 100 - in_credits(expected)
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", answer.headers["x-request-id"]).charged == expected
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (100_000_000 - expected, 0)


def test_an_idempotent_retry_gets_the_first_answer_and_is_charged_once(gateway: InProcessGateway):
    team = gateway.open_team("acme", "100")
    body = {"model": "demo-gpt", "messages": HELLO}
    first = gateway.post(team, "/v1/chat/completions", body, **{"idempotency-key": "order-1"})
    retry = gateway.post(team, "/v1/chat/completions", body, **{"idempotency-key": "order-1"})
    assert first.status_code == retry.status_code == 200
    assert retry.content == first.content
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.headers["x-request-id"] == first.headers["x-request-id"]
    other_body = gateway.post(team, "/v1/chat/completions", {**body, "max_tokens": 3}, **{"idempotency-key": "order-1"})
    assert other_body.status_code == 409
    with ledger_of(gateway) as ledger:
        charged = charge_of(ledger, "acme", first.headers["x-request-id"]).charged
        assert charged == cost(gateway, "demo-gpt", first.json()["usage"])
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (100_000_000 - charged, 0)  # one charge, and nothing left held


def test_a_team_that_cannot_afford_the_worst_case_is_refused_before_the_upstream(
    gateway: InProcessGateway, fake_upstream: FakeUpstream
):
    team = gateway.open_team("thrifty", "0.5")  # fake-gpt's worst case (1,024 output tokens) is about 1 credit
    answer = gateway.post(team, "/v1/chat/completions", {"model": "fake-gpt", "messages": HELLO})
    assert answer.status_code == 402
    assert "Insufficient credits" in answer.json()["error"]["message"]
    assert fake_upstream.requests == []
    with ledger_of(gateway) as ledger:
        after = team_state(ledger, "thrifty")
        assert (after.balance, after.held) == (500_000, 0)


def test_a_suspended_team_is_refused_until_it_is_reinstated(gateway: InProcessGateway, fake_upstream: FakeUpstream):
    team = gateway.open_team("paused", "100")
    gateway.admin("POST", "/teams/paused/suspend")
    refused = gateway.post(team, "/v1/chat/completions", {"model": "fake-gpt", "messages": HELLO})
    assert refused.status_code == 403
    assert "suspended" in refused.json()["error"]["message"]
    assert fake_upstream.requests == []
    gateway.admin("POST", "/teams/paused/reinstate")
    served = gateway.post(team, "/v1/chat/completions", {"model": "fake-gpt", "messages": HELLO})
    assert served.status_code == 200, served.text
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "paused", refused.headers["x-request-id"]) is None
        charged = charge_of(ledger, "paused", served.headers["x-request-id"]).charged
        assert team_state(ledger, "paused").balance == 100_000_000 - charged


@pytest.mark.parametrize("idempotency", [{}, {"idempotency-key": "k-1"}], ids=["leased hold", "durable hold"])
def test_an_upstream_that_fails_releases_the_hold_and_charges_nothing(gateway: InProcessGateway, idempotency):
    team = gateway.open_team("acme", "100")
    answer = gateway.post(
        team,
        "/v1/chat/completions",
        {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi [[fail:500]]"}]},
        **idempotency,
    )
    assert answer.status_code >= 500
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", answer.headers["x-request-id"]) is None
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (100_000_000, 0)


def test_a_failed_upstream_whose_hold_was_released_meanwhile_gets_its_error_not_a_500(
    gateway: InProcessGateway, fake_upstream: FakeUpstream
):
    """Its process was taken for dead while the upstream worked (cut off from the database, or frozen),
    and its hold released by another: when the upstream then fails, there is nothing left to release,
    and the client gets the upstream's failure (the multi-host chaos suite found a 500 here)."""
    team = gateway.open_team("acme", "100")
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi [[gate:taken]] [[fail:503]]"}]}
    answers: list[httpx.Response] = []
    key = {"idempotency-key": "k-1"}  # a hold of its own on the ledger, not the lease's in memory
    asking = threading.Thread(target=lambda: answers.append(gateway.post(team, "/v1/chat/completions", body, **key)))
    asking.start()
    deadline = time.monotonic() + 10
    while team_state(gateway.runtime.store, "acme").held == 0:
        assert time.monotonic() < deadline, "the request was never held"
        time.sleep(0.02)
    owner = gateway.runtime.instances.instance_id
    gateway.runtime.ledger.release_abandoned(team_id("acme"), "acme", [owner], [], None, Decimal(0)).result(10)
    fake_upstream.open_gate("taken")
    asking.join(30)
    assert answers[0].status_code == 503, answers[0].text
    with ledger_of(gateway) as ledger:
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (100_000_000, 0)
