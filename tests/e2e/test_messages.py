"""POST /v1/messages with the official anthropic SDK, translated to a chat-completions upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import httpx
import pytest

from tests.support import plain_http
from tests.support.charges import micros
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

LOOKUP = {"name": "lookup", "description": "Look it up", "input_schema": {"type": "object", "properties": {}}}
HI = [{"role": "user", "content": "hello there gateway"}]


@pytest.fixture
def claude(gateway: Gateway, team) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        yield claude


def test_a_message_reports_usage_cost_and_remaining(claude: anthropic.Anthropic, fake_upstream: FakeUpstream):
    # anthropic 2.x has no temperature argument any more; clients send it as an extra field.
    message = claude.messages.create(
        model="fake-gpt",
        max_tokens=100,
        system="be brief",
        messages=HI,
        stop_sequences=["STOP"],
        extra_body={"temperature": 0.5},
    )
    assert message.content[0].text == "Echo: hello there gateway"
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.model == "fake-gpt"
    assert message.stop_reason == "end_turn"
    prompt, output = 11, 4
    assert (message.usage.input_tokens, message.usage.output_tokens) == (prompt, output)
    extra = message.usage.model_extra
    assert Decimal(str(extra["cost"]["credits"])) == Decimal(micros(prompt, output)) / 1_000_000
    assert Decimal(str(extra["remaining"]["credits"])) == 100 - Decimal(micros(prompt, output)) / 1_000_000
    sent = fake_upstream.requests[0].body
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}
    assert (sent["max_completion_tokens"], sent["stop"], sent["temperature"]) == (100, ["STOP"], 0.5)


def test_the_stream_helper_and_the_final_delta_carry_the_cost(claude: anthropic.Anthropic):
    with claude.messages.stream(model="fake-gpt", max_tokens=100, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == "Echo: hello there gateway"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4
    assert final.usage.input_tokens == 6
    (delta,) = [e for e in events if e.type == "message_delta"]
    assert "cost" in delta.usage.model_extra
    assert "remaining" in delta.usage.model_extra


def test_every_raw_frame_has_its_event_line(gateway: Gateway, team):
    with plain_http.stream(
        "POST",
        gateway.base_url + "/messages",
        headers={"x-api-key": team.key, "anthropic-version": "2023-06-01"},
        json={"model": "fake-gpt", "max_tokens": 50, "messages": HI, "stream": True},
    ) as response:
        text = response.read().decode()
    kinds = []
    for frame in filter(None, text.split("\n\n")):
        event_line, data_line = frame.split("\n")
        assert json.loads(data_line.removeprefix("data: "))["type"] == event_line.removeprefix("event: ")
        kinds.append(event_line.removeprefix("event: "))
    assert kinds[:3] == ["message_start", "content_block_start", "ping"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_tool_use_and_tool_results_round_trip(claude: anthropic.Anthropic, fake_upstream: FakeUpstream):
    with claude.messages.stream(
        model="fake-gpt",
        max_tokens=100,
        tools=[LOOKUP],
        messages=[{"role": "user", "content": "find it [[tool:lookup]]"}],
    ) as stream:
        first = stream.get_final_message()
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "lookup"
    assert use.input == {"echo": "find it"}
    assert first.stop_reason == "tool_use"

    reply = claude.messages.create(
        model="fake-gpt",
        max_tokens=100,
        tools=[LOOKUP],
        messages=[
            {"role": "user", "content": "find it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use.id, "name": "lookup", "input": use.input}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "42"}]},
        ],
    )
    assert reply.content[0].text == "Echo: tool result: 42"
    sent = fake_upstream.requests[-1].body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == use.id
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == use.input
    assert sent[2] == {"role": "tool", "tool_call_id": use.id, "content": "42"}


def test_max_tokens_stops_with_the_anthropic_reason(claude: anthropic.Anthropic):
    message = claude.messages.create(model="fake-gpt", max_tokens=2, messages=HI)
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 2


def test_either_credential_header_and_any_version_are_accepted(gateway: Gateway, team):
    url = gateway.base_url + "/messages?beta=true"
    body = {"model": "fake-gpt", "max_tokens": 20, "messages": HI}
    for headers in (
        {"x-api-key": team.key, "anthropic-version": "2023-06-01"},
        {"X-Api-Key": team.key, "compat-version": "2026-10-21"},
        {"Authorization": f"Bearer {team.key}"},
    ):
        response = plain_http.post(url, headers=headers, json=body)
        assert response.status_code == 200, response.text


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    return body["error"]


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({"max_tokens": 5, "messages": HI}, "model"),
        ({"model": "fake-gpt", "messages": HI}, "max_tokens"),
        ({"model": "fake-gpt", "max_tokens": 5}, "messages"),
    ],
)
def test_a_missing_field_is_a_400_in_the_messages_shape(gateway: Gateway, team, body, missing):
    response = plain_http.post(gateway.base_url + "/messages", headers={"x-api-key": team.key}, json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert missing in error["message"]


def test_invalid_json_and_missing_keys_use_the_messages_shape(gateway: Gateway, team):
    bad = plain_http.post(gateway.base_url + "/messages", headers={"x-api-key": team.key}, content=b"{nope")
    assert bad.status_code == 400
    assert error_of(bad)["type"] == "invalid_request_error"
    anonymous = plain_http.post(
        gateway.base_url + "/messages", json={"model": "fake-gpt", "max_tokens": 5, "messages": HI}
    )
    assert anonymous.status_code == 401
    assert error_of(anonymous)["type"] == "authentication_error"


def test_sdk_exceptions_for_each_error(gateway: Gateway, claude: anthropic.Anthropic, teams):
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.create(model="nope", max_tokens=5, messages=HI)
    assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.InternalServerError) as failed:
        claude.messages.create(model="fake-gpt", max_tokens=5, messages=[{"role": "user", "content": "x [[fail:500]]"}])
    assert failed.value.status_code == 502
    assert failed.value.body["error"]["type"] == "api_error"
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key="tg-wrong", max_retries=0) as stranger:
        with pytest.raises(anthropic.AuthenticationError):
            stranger.messages.create(model="fake-gpt", max_tokens=5, messages=HI)
        with anthropic.Anthropic(base_url=root, api_key=teams.open("0.001").key, max_retries=0) as poor:
            with pytest.raises(anthropic.APIStatusError) as broke:
                poor.messages.create(model="fake-gpt", max_tokens=100, messages=HI)
            assert broke.value.status_code == 402
            assert broke.value.body["error"]["type"] == "billing_error"


def test_images_are_refused_for_a_model_without_vision(claude: anthropic.Anthropic):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    with pytest.raises(anthropic.BadRequestError) as error:
        claude.messages.create(model="fake-gpt", max_tokens=5, messages=[{"role": "user", "content": [image]}])
    assert "does not support images" in error.value.body["error"]["message"]


def test_count_tokens_is_the_gateway_s_own_count(claude: anthropic.Anthropic):
    counted = claude.messages.count_tokens(model="demo-gpt", messages=[{"role": "user", "content": "count me please"}])
    assert counted.input_tokens == 3 + 1 + 3 + 3  # o200k: message framing, "user", the text, reply priming
    assert counted.input_tokens >= 3 + 3  # never below what the demo model bills for it
    bound = claude.messages.count_tokens(model="fake-gpt", messages=HI)
    assert bound.input_tokens == 3 + 1 + 3 + 3


def test_effort_and_output_format_from_output_config_reach_the_upstream(
    claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    claude.messages.create(
        model="fake-gpt",
        max_tokens=50,
        messages=HI,
        output_config={"effort": "max", "format": {"type": "json_schema", "schema": schema}},
    )
    body = fake_upstream.requests[0].body
    assert body["reasoning_effort"] == "high"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
