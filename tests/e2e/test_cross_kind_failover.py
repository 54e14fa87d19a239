"""Failover between deployments of different kinds, through real sockets with the official SDKs.

Claude on ``anthropic`` and on ``bedrock``: both speak the Messages wire, so a request passed through to
Anthropic's API fails over to Bedrock before the first byte (the model goes into Bedrock's URL, the body
gets Bedrock's ``anthropic_version``, the request is signed). The ``anthropic`` deployment answers 529
(``/status/529``) and is weighted to be tried first in all but one request in a million; the answer comes
from Bedrock, and the team pays once, what its client was told, at the model's price: "hello there
gateway" is 6 prompt tokens on the fake and its echo 4, (6 × 3.3 + 4 × 16.5) × 100 = 8,580 micro-credits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from tests.e2e.test_bedrock_upstream import AWS_ENV, HELLO_MICROS, HI, MODEL_ID
from tests.support.charges import charged, reported
from tests.support.fake_bedrock import ACCESS_KEY, REGION
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import FIRST, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of


def config_with_claude_twice(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    model = f"""
[[models]]
id = "claude-anywhere"
display_name = "claude-anywhere"
owned_by = "anthropic"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 3.3, output = 16.5, cache_create = 4.125, cache_hit = 0.33}}
upstreams = [
  {{kind = "anthropic", base_url = "{root}/status/529", model = "claude-a", weight = {FIRST}}},
  {{kind = "bedrock", region = "{REGION}", base_url = "{root}", model = "{MODEL_ID}"}},
]
"""
    config.write_text(config.read_text() + model)
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(
        config_with_claude_twice(tmp_path_factory.mktemp("cross"), fake_upstream.base_url), AWS_ENV
    )


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def attempts(fake: FakeUpstream) -> list[str]:
    return [r.path for r in fake.requests]


def test_a_message_refused_by_anthropic_is_answered_by_bedrock_and_charged_once(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    message = claude.messages.create(model="claude-anywhere", max_tokens=100, messages=HI)
    assert message.content[0].text == "Echo: hello there gateway"
    assert message.model == "claude-anywhere"
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/model/{MODEL_ID}/invoke"]
    bedrock = fake_upstream.requests[1]
    assert bedrock.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert bedrock.body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in bedrock.body
    assert reported(message.usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]


def test_a_streamed_message_fails_over_before_its_first_byte(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    with claude.messages.stream(model="claude-anywhere", max_tokens=100, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == "Echo: hello there gateway"
    assert attempts(fake_upstream) == [
        "/status/529/v1/messages",
        f"/model/{MODEL_ID}/invoke-with-response-stream",
    ]
    (delta,) = [event for event in events if event.type == "message_delta"]
    assert reported(delta.usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]
