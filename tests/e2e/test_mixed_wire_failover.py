"""Failover across providers whose wires differ, through real sockets with the official SDKs.

A model may be served by deployments that speak different wires: Claude on Anthropic's API (the
Messages wire) and on Bedrock through Converse (its own wire). The request is planned for each wire
before the hold, so each attempt gets its deployment's own body, and the answer comes back in the
client's protocol from whichever wire answered, charged at the price of the deployment that answered.

``claude-anywhere``: the ``anthropic`` deployment answers 529 and is tried first in all but one
request in a million; Converse, 10 % dearer (its own price, ``converse-us``), answers. "hello there
gateway" is 6 prompt tokens on the fake Converse and its echo 4: (6 × 3.63 + 4 × 18.15) × 100 =
9,438 micro-credits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from tests.e2e.test_bedrock_upstream import AWS_ENV
from tests.support import plain_http
from tests.support.charges import charged, reported
from tests.support.fake_bedrock import REGION
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import FIRST, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

PROFILE = "us.anthropic.claude-sonnet-4-v1:0"
HI = [{"role": "user", "content": "hello there gateway"}]
CONVERSE_MICROS = 9438
PRICE = "{input = 3.3, output = 16.5, cache_create = 4.125, cache_hit = 0.33}"
CONVERSE_PRICE = "{input = 3.63, output = 18.15, cache_create = 4.5375, cache_hit = 0.363}"
LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
FUNCTION = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


def _model(model_id: str, deployments: list[str]) -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "anthropic"
context_window = 200000
max_output_tokens = 4096
pricing = {PRICE}
upstreams = [{", ".join(deployments)}]
"""


def config_with_mixed_wires(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    converse = f'kind = "bedrock", api = "converse", region = "{REGION}", model = "{PROFILE}"'
    down = upstream_base_url.replace("/v1", "/status/503/v1")
    keyed = 'api_key_env = "UPSTREAM_KEY"'
    models = [
        _model(
            "claude-anywhere",
            [
                f'{{kind = "anthropic", base_url = "{root}/status/529", model = "claude-a", weight = {FIRST}}}',
                f'{{{converse}, base_url = "{root}", name = "converse-us", pricing = {CONVERSE_PRICE}}}',
            ],
        ),
        # both fail; the last one tried is Anthropic's, to which a Messages client's body went as written
        _model(
            "claude-verbatim",
            [
                f'{{{converse}, base_url = "{root}/status/503", weight = {FIRST}}}',
                f'{{kind = "anthropic", base_url = "{root}/status/529", model = "claude-a"}}',
            ],
        ),
        # both fail; the last one tried is Converse, sent a translation
        _model(
            "claude-translated",
            [
                f'{{kind = "anthropic", base_url = "{root}/status/529", model = "claude-a", weight = {FIRST}}}',
                f'{{{converse}, base_url = "{root}/status/503"}}',
            ],
        ),
        # the Responses API first (down), Anthropic's after it
        _model(
            "gpt-anywhere",
            [
                f'{{kind = "openai-responses", base_url = "{down}", {keyed}, model = "gpt-x", weight = {FIRST}}}',
                f'{{kind = "anthropic", base_url = "{root}", {keyed}, model = "claude-a"}}',
            ],
        ),
    ]
    config.write_text(config.read_text() + "".join(models))
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(
        config_with_mixed_wires(tmp_path_factory.mktemp("mixed"), fake_upstream.base_url), AWS_ENV
    )


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def attempts(fake: FakeUpstream) -> list[str]:
    return [r.path for r in fake.requests]


def price_ref(usage: object) -> str:
    return str(usage.model_extra["cost"]["price_ref"])  # type: ignore[attr-defined]


def test_a_message_refused_by_anthropic_is_answered_through_converse_at_its_own_price(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    message = claude.messages.create(model="claude-anywhere", max_tokens=100, messages=HI)  # type: ignore[arg-type]
    assert message.content[0].type == "text"
    assert message.content[0].text == "Echo: hello there gateway"
    assert (message.model, message.stop_reason) == ("claude-anywhere", "end_turn")
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/model/{PROFILE}/converse"]
    anthropic_body, converse_body = (r.body for r in fake_upstream.requests)
    assert anthropic_body["messages"] == HI  # as the client wrote it
    assert converse_body["messages"] == [{"role": "user", "content": [{"text": "hello there gateway"}]}]
    assert converse_body["inferenceConfig"]["maxTokens"] == 100
    assert reported(message.usage) == CONVERSE_MICROS
    assert price_ref(message.usage).startswith("claude-anywhere/converse-us@")
    assert charged(gateway, team) == [CONVERSE_MICROS]


def test_a_streamed_message_fails_over_to_converse_before_its_first_byte(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    with claude.messages.stream(model="claude-anywhere", max_tokens=100, messages=HI) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].type == "text"
    assert final.content[0].text == "Echo: hello there gateway"
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/model/{PROFILE}/converse-stream"]
    (delta,) = [event for event in events if event.type == "message_delta"]
    assert reported(delta.usage) == CONVERSE_MICROS
    assert charged(gateway, team) == [CONVERSE_MICROS]


def test_a_tool_round_trip_of_a_chat_client_is_served_through_converse(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    ask = [{"role": "user", "content": "find it [[tool:lookup]]"}]
    stream = client.chat.completions.create(
        model="claude-anywhere",
        messages=ask,  # type: ignore[arg-type]
        tools=[FUNCTION],  # type: ignore[list-item]
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        chunks = list(stream)
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert deltas[0].function is not None
    assert deltas[0].function.name == "lookup"
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function is not None)
    call = {"id": deltas[0].id, "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    anthropic_body, converse_body = (r.body for r in fake_upstream.requests)
    assert anthropic_body["tools"][0]["name"] == "lookup"  # each wire's own tool shape
    assert converse_body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "lookup"
    fake_upstream.clear()
    turn = [
        *ask,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "it is here"},
    ]
    second = client.chat.completions.create(model="claude-anywhere", messages=turn, tools=[FUNCTION])  # type: ignore[arg-type,list-item]
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/model/{PROFILE}/converse"]
    back = fake_upstream.requests[1].body["messages"][2]["content"][0]["toolResult"]
    assert back["toolUseId"] == call["id"]
    assert charged(gateway, team) == [reported(chunks[-1].usage), reported(second.usage)]
    assert {price_ref(chunks[-1].usage), price_ref(second.usage)} == {price_ref(second.usage)}


def test_a_gemini_client_is_answered_through_converse_after_anthropic_refused(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
) -> None:
    answer = plain_http.post(
        f"{gateway.root_url}/v1beta/models/claude-anywhere:generateContent",
        headers={"x-goog-api-key": team.key},
        json={"contents": [{"role": "user", "parts": [{"text": "hello there gateway"}]}]},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["candidates"][0]["content"]["parts"][0]["text"] == "Echo: hello there gateway"
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/model/{PROFILE}/converse"]
    assert round(reply["usageMetadata"]["cost"]["credits"] * 1_000_000) == CONVERSE_MICROS
    assert charged(gateway, team) == [CONVERSE_MICROS]


def test_the_last_error_is_word_for_word_when_its_deployment_was_sent_the_body_as_written(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude.messages.create(model="claude-verbatim", max_tokens=100, messages=HI)  # type: ignore[arg-type]
    assert attempts(fake_upstream) == [f"/status/503/model/{PROFILE}/converse", "/status/529/v1/messages"]
    assert failed.value.status_code == 529
    assert failed.value.body["error"] == {  # type: ignore[index]
        "type": "overloaded_error",
        "message": "fake deployment failure 529",
    }
    assert charged(gateway, team) == []


def test_the_last_error_is_the_gateways_when_its_deployment_was_sent_a_translation(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude.messages.create(model="claude-translated", max_tokens=100, messages=HI)  # type: ignore[arg-type]
    assert attempts(fake_upstream) == ["/status/529/v1/messages", f"/status/503/model/{PROFILE}/converse"]
    assert failed.value.status_code == 503  # Bedrock's ServiceUnavailableException, in Anthropic's words
    assert failed.value.body["error"] == {  # type: ignore[index]
        "type": "overloaded_error",
        "message": "The upstream provider is overloaded: fake deployment failure 503",
    }
    assert charged(gateway, team) == []


def test_a_responses_request_fails_over_to_anthropic_translated(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    response = client.responses.create(model="gpt-anywhere", input="hello there gateway")
    assert response.output_text == "Echo: hello there gateway"
    assert attempts(fake_upstream) == ["/status/503/v1/responses", "/v1/messages"]
    assert fake_upstream.requests[1].body["model"] == "claude-a"
    assert charged(gateway, team) == [reported(response.usage)]


def test_a_deployment_whose_wire_cannot_take_the_request_is_not_tried(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    """A conversation the Responses API keeps (``previous_response_id``) cannot be translated for
    Anthropic's wire: only the Responses deployment may serve it, and its failure is the answer."""
    with pytest.raises(openai.InternalServerError) as failed:
        client.responses.create(model="gpt-anywhere", input="and then?", previous_response_id="resp_earlier")
    assert attempts(fake_upstream) == ["/status/503/v1/responses"]
    assert failed.value.status_code == 503
    assert charged(gateway, team) == []
