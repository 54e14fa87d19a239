"""POST /v1/responses with the official openai SDK, translated to a chat-completions upstream."""

from __future__ import annotations

import json
from decimal import Decimal

import openai
import pytest

from tests.support import plain_http
from tests.support.charges import micros
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look it up",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
}


def test_a_plain_response_has_official_and_spec_usage_with_cost(client: openai.OpenAI, fake_upstream: FakeUpstream):
    response = client.responses.create(
        model="fake-gpt", input="hello there gateway", instructions="be brief", max_output_tokens=50, temperature=0.3
    )
    assert response.output_text == "Echo: hello there gateway"
    assert response.status == "completed"
    assert response.object == "response"
    assert response.model == "fake-gpt"
    (item,) = response.output
    assert item.type == "message"
    assert item.role == "assistant"
    assert item.content[0].type == "output_text"

    (sent,) = fake_upstream.requests
    assert sent.body["model"] == "gpt-x"
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there gateway"},
    ]
    assert sent.body["max_completion_tokens"] == 50
    assert sent.body["temperature"] == 0.3

    usage = response.usage
    prompt, output = 2 + 3 + 3 + 3, 4  # "be brief" and the input, each with 3 tokens of overhead
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (prompt, output, prompt + output)
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    extra = usage.model_extra
    assert (extra["prompt_tokens"], extra["completion_tokens"]) == (prompt, output)
    assert Decimal(str(extra["cost"]["credits"])) == Decimal(micros(prompt, output)) / 1_000_000
    assert Decimal(str(extra["remaining"]["credits"])) == 100 - Decimal(micros(prompt, output)) / 1_000_000


def test_the_stream_helper_gets_the_full_event_sequence(client: openai.OpenAI):
    with client.responses.stream(model="fake-gpt", input="stream me please") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds.count("response.output_text.delta") == 4
    assert final.output_text == "Echo: stream me please"
    assert final.status == "completed"
    assert "remaining" in final.usage.model_extra
    assert final.usage.output_tokens == 4


def test_the_raw_stream_frames_have_event_lines_and_increasing_sequence_numbers(gateway: Gateway, team):
    with plain_http.stream(
        "POST",
        gateway.base_url + "/responses",
        headers={"Authorization": f"Bearer {team.key}"},
        json={"model": "fake-gpt", "input": "one two", "stream": True},
    ) as response:
        text = response.read().decode()
    frames = [f for f in text.split("\n\n") if f]
    events = []
    for frame in frames:
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        data = json.loads(data_line[6:])
        assert data["type"] == event_line[7:]
        events.append(data)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert "[DONE]" not in text


def test_function_calls_and_their_outputs_round_trip(client: openai.OpenAI, fake_upstream: FakeUpstream):
    first = client.responses.create(model="fake-gpt", input="find it [[tool:lookup]]", tools=[LOOKUP])
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "lookup"
    assert json.loads(call.arguments) == {"echo": "find it"}
    assert fake_upstream.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Look it up", "parameters": LOOKUP["parameters"]},
        }
    ]

    with client.responses.stream(
        model="fake-gpt",
        tools=[LOOKUP],
        input=[
            {"role": "user", "content": "find it"},
            {"type": "function_call", "call_id": call.call_id, "name": "lookup", "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "42"},
        ],
    ) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Echo: tool result: 42"
    sent = fake_upstream.requests[-1].body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "42"}


def test_a_streamed_function_call_arrives_whole(client: openai.OpenAI):
    with client.responses.stream(model="fake-gpt", input="find it [[tool:lookup]]", tools=[LOOKUP]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert json.loads(call.arguments) == {"echo": "find it"}


def test_running_out_of_output_tokens_is_an_incomplete_response(client: openai.OpenAI):
    response = client.responses.create(model="fake-gpt", input="a b c d e f g h", max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_reasoning_effort_and_text_format_reach_the_upstream(client: openai.OpenAI, fake_upstream: FakeUpstream):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    client.responses.create(
        model="fake-gpt",
        input="hi",
        reasoning={"effort": "xhigh"},
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema}},
    )
    body = fake_upstream.requests[0].body
    assert body["reasoning_effort"] == "high"  # fake-gpt's highest level
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "fake-gpt"}, "input"),
        ({"input": "hi"}, "model"),
        ({"model": "fake-gpt", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        (
            {
                "model": "fake-gpt",
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}],
                    }
                ],
            },
            "input",
        ),
        ({"model": "fake-gpt", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        ({"model": "fake-gpt", "input": "hi", "text": {"format": "json"}}, "text.format"),
        ({"model": "fake-gpt", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
    ],
)
def test_invalid_requests_are_400s(client: openai.OpenAI, body, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.post("/responses", body=body, cast_to=object)
    assert error.value.response.json()["error"]["type"] == "invalid_request_error"
    assert error.value.response.json()["error"]["param"] == param


def test_errors_keep_the_openai_shape(gateway: Gateway, client: openai.OpenAI, teams):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="hi")
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="fake-gpt", input="hi [[fail:500]]")
    with openai.OpenAI(base_url=gateway.base_url, api_key=teams.open("0.001").key, max_retries=0) as poor:
        with pytest.raises(openai.APIStatusError) as error:
            poor.responses.create(model="fake-gpt", input="hi")
        assert error.value.status_code == 402
        assert error.value.response.json()["error"]["type"] == "billing_error"
