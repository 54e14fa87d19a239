"""POST /v1/chat/completions through a real gateway process, with the official openai SDK."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.charges import HELLO, micros
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY, Gateway


def exact_json(response: httpx.Response) -> dict:
    return json.loads(response.content, parse_float=Decimal)


def test_a_plain_completion_reports_its_cost_and_the_remaining_balance(client: openai.OpenAI):
    raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=HELLO)
    completion = raw.parse()

    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "fake-gpt"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (6, 4)
    assert raw.headers["x-request-id"].startswith("req_")

    usage = exact_json(raw.http_response)["usage"]
    cost = micros(6, 4)  # (6 * 2.5 + 4 * 10) * 100 = 5,500 micro-credits
    price_ref = usage["cost"].pop("price_ref")
    assert price_ref.startswith("fake-gpt@")  # the price list entry it was priced by
    breakdown = {
        "input": {"tokens": 6, "credits": Decimal("0.0015"), "usd": Decimal("0.000015")},
        "output": {"tokens": 4, "credits": Decimal("0.004"), "usd": Decimal("0.00004")},
    }
    assert usage["cost"] == {
        "usd": Decimal(cost) / 100_000_000,
        "credits": Decimal(cost) / 1_000_000,
        "basis": "base",
        "breakdown": breakdown,
    }
    assert usage["remaining"] == {"credits": 100 - Decimal(cost) / 1_000_000}


def test_the_request_reaches_the_upstream_with_its_model_name_key_and_standard_parameters(
    client: openai.OpenAI, fake_upstream: FakeUpstream
):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    client.chat.completions.create(
        model="fake-gpt",
        messages=[{"role": "system", "content": "be brief"}, *HELLO],
        temperature=0.5,
        top_p=0.9,
        stop=["\n\n"],
        seed=7,
        max_tokens=50,
        presence_penalty=0.1,
        user="u-1",
        tools=tools,
        tool_choice="auto",
        metadata={"ticket": "T-1"},
    )
    (sent,) = fake_upstream.requests
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.body["model"] == "gpt-x"
    for name, value in {
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": ["\n\n"],
        "seed": 7,
        "max_tokens": 50,
        "presence_penalty": 0.1,
        "user": "u-1",
        "tools": tools,
        "tool_choice": "auto",
        "metadata": {"ticket": "T-1"},
    }.items():
        assert sent.body[name] == value, name
    assert sent.body["messages"][0] == {"role": "system", "content": "be brief"}


def test_streaming_relays_the_chunks_and_ends_with_a_billed_usage_chunk(client: openai.OpenAI):
    stream = client.chat.completions.create(
        model="fake-gpt", messages=HELLO, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: hello there gateway"
    assert all(c.model == "fake-gpt" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    final = chunks[-1]
    assert final.choices == []
    assert final.usage.total_tokens == 10
    assert [c for c in chunks[:-1] if c.usage] == []
    extra = final.usage.model_extra
    assert Decimal(str(extra["cost"]["credits"])) == Decimal(micros(6, 4)) / 1_000_000
    assert Decimal(str(extra["remaining"]["credits"])) == 100 - Decimal(micros(6, 4)) / 1_000_000


def test_the_raw_stream_is_sse_data_frames_ending_with_done(gateway: Gateway, team):
    with plain_http.stream(
        "POST",
        gateway.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {team.key}"},
        json={"model": "fake-gpt", "messages": HELLO, "stream": True},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.read().decode()
    frames = body.split("\n\n")
    assert frames[-1] == ""
    assert frames[-2] == "data: [DONE]"
    assert all(f.startswith("data: {") for f in frames[:-2])
    # Without include_usage the client gets no usage chunk (the gateway still bills from upstream usage).
    assert all(json.loads(f[6:])["choices"] for f in frames[:-2])
    assert "usage" not in json.loads(frames[0][6:])


def test_the_sdk_stream_helper_accumulates_a_well_formed_message(client: openai.OpenAI):
    with client.chat.completions.stream(
        model="fake-gpt", messages=HELLO, stream_options={"include_usage": True}
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        completion = stream.get_final_completion()
    assert "".join(deltas) == "Echo: hello there gateway"
    message = completion.choices[0].message
    assert message.role == "assistant"
    assert message.content == "Echo: hello there gateway"
    assert completion.usage.completion_tokens == 4
    assert "remaining" in completion.usage.model_extra


def test_the_sdk_stream_helper_accumulates_tool_calls(client: openai.OpenAI):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    with client.chat.completions.stream(
        model="fake-gpt", messages=[{"role": "user", "content": "find it [[tool:lookup]]"}], tools=tools
    ) as stream:
        completion = stream.get_final_completion()
    (call,) = completion.choices[0].message.tool_calls
    assert call.function.name == "lookup"
    assert call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"echo": "find it"}
    assert completion.choices[0].finish_reason == "tool_calls"


# -- errors, each in the OpenAI shape, each mapped to the SDK's exception ------------------------


def error_of(exc: openai.APIStatusError) -> dict:
    body = exc.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_invalid_json_is_a_400(gateway: Gateway, team):
    response = plain_http.post(
        gateway.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {team.key}", "Content-Type": "application/json"},
        content=b'{"model": "fake-gpt", "messages": [',
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "JSON" in response.json()["error"]["message"]


@pytest.mark.parametrize("missing", ["model", "messages"])
def test_a_missing_required_field_is_a_400(client: openai.OpenAI, missing: str):
    body = {"model": "fake-gpt", "messages": HELLO}
    del body[missing]
    with pytest.raises(openai.BadRequestError) as error:
        client.post("/chat/completions", body=body, cast_to=object)
    assert error_of(error.value)["type"] == "invalid_request_error"
    assert error_of(error.value)["param"] == missing
    assert missing in error_of(error.value)["message"]


@pytest.mark.parametrize("temperature", [-0.1, 2.5])
def test_a_temperature_outside_0_to_2_is_a_400(client: openai.OpenAI, temperature: float):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="fake-gpt", messages=HELLO, temperature=temperature)
    assert error_of(error.value)["param"] == "temperature"


def test_a_wrongly_typed_field_is_a_400_naming_it(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as error:
        client.post("/chat/completions", body={"model": "fake-gpt", "messages": "hi"}, cast_to=object)
    assert error_of(error.value)["param"] == "messages"


def test_a_missing_key_is_a_401(gateway: Gateway):
    response = plain_http.post(gateway.base_url + "/chat/completions", json={"model": "fake-gpt", "messages": HELLO})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_an_unknown_key_is_a_401(gateway: Gateway, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key="tg-not-a-real-key", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as error:
            client.chat.completions.create(model="fake-gpt", messages=HELLO)
        assert error_of(error.value)["type"] == "authentication_error"
        assert fake_upstream.requests == []


def test_an_unknown_model_is_a_404(client: openai.OpenAI):
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="no-such-model", messages=HELLO)
    assert error_of(error.value)["type"] == "invalid_request_error"
    assert "no-such-model" in error_of(error.value)["message"]


def test_an_unknown_route_is_a_404_in_the_same_shape(gateway: Gateway):
    response = plain_http.get(gateway.base_url + "/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "invalid_request_error"
