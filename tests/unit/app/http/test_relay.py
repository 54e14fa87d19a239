"""The relay's hang-up and failure paths, in process: whatever ends a request, its hold is settled
exactly once — charged for what the client was sent, or released — and the ledger replays clean.

A client hang-up is what a server tells the application: ``http.disconnect`` from ``receive``
(``InProcessGateway.hang_up``). Upstream failures come from the fake upstream's directives
(``[[fail:N]]`` before the first byte, ``[[drop-after:N]]`` mid-stream; ``[[no-usage]]``: the
upstream reports no usage, so the gateway counts what it delivered).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.tokens import prompt_tokens, rules_for
from app.upstream.demo_words import demo_tokens
from domain.pricing import cost_in_micros
from domain.usage import TokenUsage
from tests.support.in_process import InProcessGateway, charge_of, ledger_of, ledger_refusing_writes, team_state

FULL = 100_000_000


def chat(model: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def delivered_cost(gateway: InProcessGateway, body: dict[str, Any], received: str) -> int:
    """The model's count of the prompt and of exactly the text received, at the model's price."""
    model = gateway.settings.model(body["model"])
    rules = rules_for(model.tokenizer, "chat")
    usage = TokenUsage(input_tokens=prompt_tokens(body, "chat", rules), output_tokens=rules.text(received))
    return cost_in_micros(usage, model.price, gateway.settings.credits_per_usd)


def test_a_client_that_hangs_up_mid_stream_is_charged_for_exactly_what_it_was_sent(gateway: InProcessGateway):
    team = gateway.open_team("acme")
    body = chat("demo-gpt", "one two three four five six seven eight", stream=True)
    sent = gateway.hang_up(team, "/v1/chat/completions", body, after_frames=3)  # the role, then two words
    assert sent.status == 200
    assert sent.chat_text() == "Hello from "
    with ledger_of(gateway) as ledger:
        charged = charge_of(ledger, "acme", sent.headers["x-request-id"]).charged
        assert charged == delivered_cost(gateway, body, "Hello from ")
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL - charged, 0)


def test_a_client_that_hangs_up_before_any_text_is_charged_nothing(gateway: InProcessGateway):
    team = gateway.open_team("acme")
    sent = gateway.hang_up(team, "/v1/chat/completions", chat("demo-gpt", "one two", stream=True), after_frames=1)
    assert sent.status == 200
    assert sent.chat_text() == ""
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", sent.headers["x-request-id"]) is None
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL, 0)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_upstream_that_fails_before_the_first_byte_releases_the_hold(gateway: InProcessGateway, stream: bool):
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", chat("fake-gpt", "hi [[fail:503]]", stream=stream))
    assert answer.status_code == 503
    assert "fake upstream failure 503" in answer.text
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", answer.headers["x-request-id"]) is None
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL, 0)


def test_an_upstream_that_fails_mid_stream_is_charged_for_what_was_delivered(gateway: InProcessGateway):
    team = gateway.open_team("acme")
    body = chat("fake-gpt", "alpha beta gamma delta epsilon [[drop-after:3]] [[no-usage]]", stream=True)
    answer = gateway.post(team, "/v1/chat/completions", body)
    assert answer.status_code == 200
    received = "".join(
        choice["delta"].get("content") or ""
        for line in answer.text.splitlines()
        if line.startswith("data: {") and '"choices"' in line
        for choice in json.loads(line[6:])["choices"]
    )
    assert len(received.split()) == 3
    assert '"error"' in answer.text
    with ledger_of(gateway) as ledger:
        charged = charge_of(ledger, "acme", answer.headers["x-request-id"]).charged
        assert charged == delivered_cost(gateway, body, received)
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL - charged, 0)


def test_a_plain_answer_the_ledger_cannot_charge_is_refused_and_costs_nothing(gateway: InProcessGateway):
    team = gateway.open_team("acme")
    # The lease, taken by a first request: no write is left before the charge.
    warm = gateway.post(team, "/v1/chat/completions", chat("demo-gpt", "hi"))
    with ledger_refusing_writes(gateway):
        answer = gateway.post(team, "/v1/chat/completions", chat("demo-gpt", "hi again"))
    assert answer.status_code == 503
    assert "ledger" in answer.json()["error"]["message"]
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", answer.headers["x-request-id"]) is None
        charged = charge_of(ledger, "acme", warm.headers["x-request-id"]).charged
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL - charged, 0)


def test_a_stream_the_ledger_cannot_charge_is_charged_once_the_ledger_can_be_written(gateway: InProcessGateway):
    """The client already has the answer: its charge is owed, and made when the ledger is back (at
    the latest when the gateway stops), once."""
    team = gateway.open_team("acme")
    warm = gateway.post(team, "/v1/chat/completions", chat("demo-gpt", "hi"))
    body = chat("demo-gpt", "one two three", stream=True)
    with ledger_refusing_writes(gateway):
        answer = gateway.post(team, "/v1/chat/completions", body)
    assert answer.status_code == 200
    assert "will be charged once it can be written again" in answer.text
    with ledger_of(gateway) as ledger:
        owed = charge_of(ledger, "acme", answer.headers["x-request-id"]).charged
        reported = TokenUsage(
            input_tokens=3 + 3,
            output_tokens=len(demo_tokens("Hello from the Tollgate demo model. You said: one two three")),
        )
        price = gateway.settings.model("demo-gpt").price
        assert owed == cost_in_micros(reported, price, gateway.settings.credits_per_usd)
        charged = charge_of(ledger, "acme", warm.headers["x-request-id"]).charged
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (FULL - charged - owed, 0)
