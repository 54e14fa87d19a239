"""Chat Completions, Messages and Responses clients against a `bedrock` deployment with
``api = "converse"`` (a Llama model through a cross-region inference profile) on the fake Bedrock,
through real sockets with the official SDKs: every request is translated to Converse, sent signed to
``/model/{id}/converse`` (or ``/converse-stream``, read from AWS's event-stream framing), and each
answer's reported cost is its ledger charge.

Prices (100 credits per USD): bedrock-llama at $0.72/M input and output (it has no prompt cache: the
cache prices Tollgate requires are the input price). "hello there gateway" is 6 prompt tokens on the
fake and its echo 4 output tokens: (6 + 4) × 0.72 × 100 = 720 micro-credits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.e2e.test_bedrock_upstream import AWS_ENV
from tests.support.charges import charged, reported
from tests.support.fake_bedrock import ACCESS_KEY, REGION
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import FIRST, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

PROFILE = "us.meta.llama3-3-70b-instruct-v1:0"
HI = [{"role": "user", "content": "hello there gateway"}]
HELLO_MICROS = 720
LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
FUNCTION = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


def config_with_converse(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    model = f"""
[[models]]
id = "bedrock-llama"
display_name = "Llama 3.3 70B on Bedrock"
owned_by = "meta"
context_window = 128000
max_output_tokens = 4096
pricing = {{input = 0.72, output = 0.72, cache_create = 0.72, cache_hit = 0.72}}
upstream = {{kind = "bedrock", api = "converse", region = "{REGION}", base_url = "{root}", model = "{PROFILE}"}}
"""
    converse = f'kind = "bedrock", api = "converse", region = "{REGION}", model = "{PROFILE}"'
    busy = f'{{{converse}, base_url = "{root}/status/429", weight = {FIRST}}}'
    free = f'{{{converse}, base_url = "{root}"}}'
    twin = model.replace('id = "bedrock-llama"', 'id = "bedrock-twin"').split("upstream =")[0]
    config.write_text(config.read_text() + model + twin + f"upstreams = [{busy}, {free}]\n")
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(
        config_with_converse(tmp_path_factory.mktemp("converse"), fake_upstream.base_url), AWS_ENV
    )


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def converse_call(fake: FakeUpstream, action: str = "converse") -> Any:
    (sent,) = fake.requests
    assert sent.path == f"/model/{PROFILE}/{action}"
    assert sent.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert f"/{REGION}/bedrock/aws4_request" in sent.headers["authorization"]
    assert "model" not in sent.body
    assert "stream" not in sent.body
    return sent


def test_a_chat_completion_is_sent_as_a_converse_request(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    completion = client.chat.completions.create(
        model="bedrock-llama",
        messages=[{"role": "system", "content": "be brief"}, *HI],
        max_tokens=100,
        temperature=0.5,
    )
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert completion.choices[0].finish_reason == "stop"
    sent = converse_call(fake_upstream)
    assert sent.body["messages"] == [{"role": "user", "content": [{"text": "hello there gateway"}]}]
    assert sent.body["system"] == [{"text": "be brief"}]
    assert sent.body["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.5}
    assert reported(completion.usage) == charged(gateway, team)[0]
    assert charged(gateway, team) == [reported(completion.usage)]


def test_a_streamed_chat_completion_is_read_from_converse_stream(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    stream = client.chat.completions.create(
        model="bedrock-llama", messages=HI, max_tokens=100, stream=True, stream_options={"include_usage": True}
    )
    with stream:
        chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: hello there gateway"
    converse_call(fake_upstream, "converse-stream")
    usage = chunks[-1].usage
    assert usage.completion_tokens == 4
    assert charged(gateway, team) == [reported(usage)]


def test_a_message_and_its_stream_through_converse(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    message = claude.messages.create(model="bedrock-llama", max_tokens=100, messages=HI)
    assert message.content[0].text == "Echo: hello there gateway"
    assert message.stop_reason == "end_turn"
    converse_call(fake_upstream)
    fake_upstream.clear()
    with claude.messages.stream(model="bedrock-llama", max_tokens=100, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == "Echo: hello there gateway"
    converse_call(fake_upstream, "converse-stream")
    (delta,) = [event for event in events if event.type == "message_delta"]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 4)
    assert reported(message.usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS, reported(delta.usage)]


def test_a_tool_round_trip_through_converse(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    ask = [{"role": "user", "content": "find it [[tool:lookup]]"}]
    with claude.messages.stream(model="bedrock-llama", max_tokens=100, messages=ask, tools=[LOOKUP]) as stream:
        events = list(stream)
        first = stream.get_final_message()
    (call,) = [block for block in first.content if block.type == "tool_use"]
    assert (call.name, first.stop_reason) == ("lookup", "tool_use")
    sent = converse_call(fake_upstream, "converse-stream")
    spec = sent.body["toolConfig"]["tools"][0]["toolSpec"]
    assert (spec["name"], spec["inputSchema"]["json"]) == ("lookup", LOOKUP["input_schema"])
    fake_upstream.clear()
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "it is here"}
    turn = [*ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
    second = claude.messages.create(model="bedrock-llama", max_tokens=100, messages=turn, tools=[LOOKUP])
    sent = converse_call(fake_upstream)
    assert sent.body["messages"][1]["content"][-1]["toolUse"]["toolUseId"] == call.id
    back = sent.body["messages"][2]["content"][0]["toolResult"]
    assert back == {"toolUseId": call.id, "content": [{"text": "it is here"}], "status": "success"}
    (delta,) = [event for event in events if event.type == "message_delta"]
    costs = [reported(delta.usage), reported(second.usage)]
    assert charged(gateway, team) == costs


def test_a_responses_client_calls_a_tool_through_converse(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    response = client.responses.create(
        model="bedrock-llama",
        input="find it [[tool:lookup]]",
        tools=[tool],
        tool_choice="required",  # type: ignore[list-item]
    )
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert call.name == "lookup"
    assert isinstance(json.loads(call.arguments), dict)
    sent = converse_call(fake_upstream)
    assert sent.body["toolConfig"]["toolChoice"] == {"any": {}}
    plain = client.responses.create(model="bedrock-llama", input="hello there gateway")
    assert plain.output_text == "Echo: hello there gateway"
    assert charged(gateway, team) == [reported(response.usage), reported(plain.usage)]


def test_a_chat_tool_call_streams_through_converse(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    stream = client.chat.completions.create(
        model="bedrock-llama",
        messages=[{"role": "user", "content": "find it [[tool:lookup]]"}],
        tools=[FUNCTION],  # type: ignore[list-item]
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        chunks = list(stream)
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert calls[0].function is not None
    assert calls[0].function.name == "lookup"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    assert charged(gateway, team) == [reported(chunks[-1].usage)]


def test_converse_throttling_is_a_429_that_charges_nothing_and_a_stream_exception_an_error_event(
    gateway: Gateway, team: Team, client: openai.OpenAI, claude: anthropic.Anthropic
):
    with pytest.raises(openai.RateLimitError) as throttled:
        client.chat.completions.create(model="bedrock-llama", messages=[{"role": "user", "content": "x [[fail:429]]"}])
    assert "rate limiting" in throttled.value.body["message"]
    assert charged(gateway, team) == []
    ask = [{"role": "user", "content": "one two three [[stream-error]]"}]
    with (
        pytest.raises(anthropic.APIStatusError) as error,
        claude.messages.stream(model="bedrock-llama", max_tokens=100, messages=ask) as stream,
    ):
        list(stream)
    assert "modelStreamErrorException" in str(error.value)


def test_a_throttled_converse_deployment_fails_over_to_the_next(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    """bedrock-twin: a deployment answering Bedrock's 429 ThrottlingException tried first, then one that works."""
    completion = client.chat.completions.create(model="bedrock-twin", messages=HI, max_tokens=100)
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert [r.path for r in fake_upstream.requests] == [
        f"/status/429/model/{PROFILE}/converse",
        f"/model/{PROFILE}/converse",
    ]
    assert charged(gateway, team) == [reported(completion.usage)]  # charged once, by the deployment that answered
