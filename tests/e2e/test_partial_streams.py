"""Streams that end early are charged exactly for what the client was sent, counted by the gateway.

An upstream that breaks mid-stream ([[drop-after:N]]) or sends an in-stream error ([[stream-error]]),
without usage ([[no-usage]]), and a client that hangs up: each is charged the gateway's count of the
prompt (or the upstream's, when it reported one first) plus the tokens of exactly the text the client
received, and the ledger still verifies.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import anthropic
import openai
import pytest

from app.tokens import prompt_tokens
from app.tokens.counting import RULES
from domain.pricing import Price, cost_in_micros
from domain.usage import TokenUsage
from tests.support import plain_http
from tests.support.charges import balance_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway
from tests.support.teams import Team

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

PRICES = {
    "fake-gpt": Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25")),
    "fake-claude": Price(Decimal(3), Decimal(15), Decimal("3.75"), Decimal("0.3")),
}
RULES_OF = {"fake-gpt": RULES["o200k"], "fake-claude": RULES["anthropic"]}
PROTOCOL = {"chat": "chat", "responses": "responses", "messages": "messages"}


def body_for(endpoint: str, model: str, text: str) -> dict[str, Any]:
    if endpoint == "chat":
        return {"model": model, "messages": [{"role": "user", "content": text}]}
    if endpoint == "responses":
        return {"model": model, "input": text}
    return {"model": model, "max_tokens": 200, "messages": [{"role": "user", "content": text}]}


def stream_and_collect(gateway: Gateway, key: str, endpoint: str, body: dict[str, Any]) -> tuple[str, bool, int | None]:
    """Stream through the endpoint's official SDK: (text received, whether it ended in an error, the
    prompt tokens the upstream reported at the start, if any)."""
    text, failed, reported = [], False, None
    if endpoint == "messages":
        with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
            try:
                for event in claude.messages.create(stream=True, **body):
                    if event.type == "message_start":
                        reported = event.message.usage.input_tokens if event.message.usage else None
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        text.append(event.delta.text)
            except anthropic.APIStatusError:
                failed = True
            return "".join(text), failed, reported
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        if endpoint == "chat":
            try:
                for chunk in client.chat.completions.create(stream=True, **body):
                    text.extend(choice.delta.content or "" for choice in chunk.choices)
            except openai.APIError:
                failed = True
            return "".join(text), failed, None
        for event in client.responses.create(stream=True, **body):
            if event.type == "response.output_text.delta":
                text.append(event.delta)
            failed = failed or event.type == "response.failed"
        return "".join(text), failed, None


def charges(gateway: Gateway, team: Team) -> list[dict[str, Any]]:
    rows = [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    ]
    return [row for row in rows if row["kind"] == "charge"]


def held(gateway: Gateway, team: Team) -> str:
    return gateway.cli("team", "show", team.name).stdout.split("held ")[1].split(",")[0]


def assert_charged_exactly(gateway: Gateway, team: Team, model: str, prompt: int, received: str) -> None:
    """One charge: ``prompt`` input tokens and the model's count of ``received`` as output, at its price."""
    (charge,) = charges(gateway, team)
    output = RULES_OF[model].text(received)
    assert (charge["input_tokens"], charge["output_tokens"]) == (prompt, output)
    expected = cost_in_micros(TokenUsage(input_tokens=prompt, output_tokens=output), PRICES[model], Decimal(100))
    assert -charge["amount"] == expected
    assert balance_of(gateway, team.name) == 100 - Decimal(expected) / 1_000_000


PAIRS = [
    ("chat", "fake-gpt"),  # passed through (app/http/routes/chat.py's relay)
    ("messages", "fake-claude"),  # passed through (app/http/routes/messages.py's relay)
    ("responses", "fake-gpt"),  # translated (app/http/relay.py)
    ("chat", "fake-claude"),
    ("messages", "fake-gpt"),
    ("responses", "fake-claude"),
]


@pytest.mark.parametrize("fault", ["[[stream-error]]", "[[drop-after:3]]"])
@pytest.mark.parametrize(("endpoint", "model"), PAIRS)
def test_a_stream_the_upstream_breaks_is_charged_for_the_prompt_and_the_text_received(
    endpoint, model, fault, gateway: Gateway, teams
):
    team = teams.open("100")
    body = body_for(endpoint, model, f"alpha beta gamma delta epsilon zeta 東京 🎉 {fault} [[no-usage]]")
    received, failed, reported = stream_and_collect(gateway, team.key, endpoint, body)
    assert failed
    assert received.startswith("Echo")
    assert len(received.split()) == (1 if fault == "[[stream-error]]" else 3)
    prompt = prompt_tokens(body, PROTOCOL[endpoint], RULES_OF[model])
    assert reported in (None, prompt)  # no usage from the upstream (the gateway's own message_start shows its count)
    assert_charged_exactly(gateway, team, model, prompt, received)
    gateway.wait_until_nothing_held(team.name)


@pytest.mark.parametrize("endpoint", ["messages", "chat", "responses"])
def test_the_upstream_s_prompt_count_is_preferred_when_it_reported_one_before_failing(
    endpoint, gateway: Gateway, teams, fake_upstream
):
    team = teams.open("100")
    body = body_for(endpoint, "fake-claude", "alpha beta gamma [[stream-error]]")
    received, failed, _ = stream_and_collect(gateway, team.key, endpoint, body)
    assert failed
    assert received.startswith("Echo")
    from tests.support.fake_anthropic import prompt_tokens as fake_prompt_tokens

    upstream_prompt = fake_prompt_tokens(fake_upstream.requests[-1].body)  # what message_start reported
    assert upstream_prompt < prompt_tokens(body, PROTOCOL[endpoint], RULES["anthropic"])
    assert_charged_exactly(gateway, team, "fake-claude", upstream_prompt, received)


def read_then_hang_up(gateway: Gateway, key: str, endpoint: str, body: dict[str, Any], deltas: int) -> str:
    """Read ``deltas`` text deltas through the SDK, then close the stream (the connection with it)."""
    text: list[str] = []
    if endpoint == "messages":
        with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
            stream = claude.messages.create(stream=True, **body)
            for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    text.append(event.delta.text)
                    if len(text) == deltas:
                        break
    else:
        with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
            if endpoint == "chat":
                stream = client.chat.completions.create(stream=True, **body)
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
                        if len(text) == deltas:
                            break
            else:
                stream = client.responses.create(stream=True, **body)
                for event in stream:
                    if event.type == "response.output_text.delta":
                        text.append(event.delta)
                        if len(text) == deltas:
                            break
    stream.close()
    return "".join(text)


def wait_for(condition, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(
    ("endpoint", "model"), [("chat", "fake-gpt"), ("messages", "fake-claude"), ("responses", "fake-gpt")]
)
def test_a_client_that_hangs_up_cancels_the_upstream_request_and_pays_for_what_it_was_sent(
    endpoint, model, gateway: Gateway, teams, fake_upstream: FakeUpstream
):
    team = teams.open("100")
    words = " ".join(f"word{i}" for i in range(40))
    # One delta every 400 ms: the client hangs up long before the upstream would finish (16 s).
    body = body_for(endpoint, model, f"{words} [[chunk-delay:400]] [[no-usage]]")
    received = read_then_hang_up(gateway, team.key, endpoint, body, deltas=3)
    assert received.startswith("Echo")
    assert len(received.split()) == 3

    (upstream_request,) = fake_upstream.requests
    assert wait_for(lambda: upstream_request.aborted), "the upstream request was not cancelled"
    assert not upstream_request.completed
    assert wait_for(lambda: held(gateway, team) == "0"), "the hold was not settled"
    prompt = prompt_tokens(body, PROTOCOL[endpoint], RULES_OF[model])
    assert_charged_exactly(gateway, team, model, prompt, received)


def test_a_client_that_hangs_up_on_raw_http_is_charged_for_the_frames_sent(
    gateway: Gateway, teams, fake_upstream: FakeUpstream
):
    team = teams.open("100")
    text = ""
    with plain_http.stream(
        "POST",
        gateway.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {team.key}"},
        json={
            "model": "fake-gpt",
            "stream": True,
            "messages": [{"role": "user", "content": "one two three four five six [[chunk-delay:400]]"}],
        },
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                text += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if len(text.split()) == 2:
                    break
    assert wait_for(lambda: fake_upstream.requests[0].aborted)
    assert wait_for(lambda: held(gateway, team) == "0")
    (charge,) = charges(gateway, team)
    assert charge["output_tokens"] == RULES["o200k"].text(text)
