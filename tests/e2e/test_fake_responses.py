"""Prove the fake upstream's Responses API is wire-faithful by driving it with the official openai SDK:
objects, streams (order, sequence numbers, the SDK's stream helper), tool calls of every kind,
reasoning with signed encrypted content, stored responses, and OpenAI's 400s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import cast

import openai
import pytest
from openai.types.responses import ToolParam

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream

MODEL = "gpt-codex-x"
SHELL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "agents",
    "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object", "properties": {}}}],
}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch"}
TOOLS = cast("list[ToolParam]", [SHELL, NAMESPACE, PATCH, {"type": "web_search"}])  # newer than the SDK's types


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    fake.clear()
    with openai.OpenAI(base_url=fake.base_url, api_key="upstream-secret", max_retries=0, timeout=10) as c:
        yield c


def test_a_plain_response_with_official_usage(client: openai.OpenAI) -> None:
    r = client.responses.create(model=MODEL, instructions="be brief", input="hello big world [[cached:4]]")
    assert r.object == "response"
    assert r.status == "completed"
    assert r.model == MODEL
    assert r.id.startswith("resp_")
    assert r.output_text == "Echo: hello big world"
    assert r.usage is not None
    assert r.usage.input_tokens == 2 + 4 + 3
    assert r.usage.output_tokens == 4
    assert r.usage.input_tokens_details.cached_tokens == 4
    assert r.usage.total_tokens == 13


def test_a_stream_in_the_official_order(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model=MODEL, input="one two three", stream=True))
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 4,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.usage.output_tokens == 4
    with client.responses.stream(model=MODEL, input="four five") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Echo: four five"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_function_namespace_and_custom_tool_calls(client: openai.OpenAI, stream: bool) -> None:
    def respond(text: str) -> openai.types.responses.Response:
        if not stream:
            return client.responses.create(model=MODEL, input=text, tools=TOOLS)
        with client.responses.stream(model=MODEL, input=text, tools=TOOLS) as s:
            return s.get_final_response()

    (call,) = respond('run it [[tool:exec_command {"cmd": "ls"}]]').output
    assert call.type == "function_call"
    assert json.loads(call.arguments) == {"cmd": "ls"}
    assert call.namespace is None
    (call,) = respond("close it [[tool:close_agent]]").output
    assert call.type == "function_call"
    assert call.namespace == "multi_agent_v1"
    (call,) = respond('patch it [[tool:apply_patch {"input": "*** Begin Patch"}]]').output
    assert call.type == "custom_tool_call"
    assert call.input == "*** Begin Patch"


def test_a_tool_output_is_echoed_and_needs_its_call(client: openai.OpenAI) -> None:
    r = client.responses.create(
        model=MODEL,
        tools=[SHELL],
        input=[
            {"role": "user", "content": "run it"},
            {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
    )
    assert r.output_text == "Echo: tool result: a.txt"
    orphan = [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model=MODEL, input=orphan)
    assert "No tool call found" in error.value.message


def test_reasoning_comes_with_a_summary_and_encrypted_content_only_this_fake_accepts(client: openai.OpenAI) -> None:
    r = client.responses.create(
        model=MODEL,
        input="ponder [[think]]",
        reasoning={"effort": "high", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    reasoning, message = r.output
    assert reasoning.type == "reasoning"
    assert reasoning.summary[0].text == "Thinking about: ponder"
    assert reasoning.encrypted_content
    assert r.usage.output_tokens_details.reasoning_tokens == 3
    events = list(
        client.responses.create(
            model=MODEL,
            input="ponder [[think]]",
            stream=True,
            store=False,
            reasoning={"summary": "auto"},
            include=["reasoning.encrypted_content"],
        )
    )
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == "Thinking about: ponder"
    done = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "reasoning"]
    assert done[0].encrypted_content

    history = [
        {"role": "user", "content": "ponder"},
        reasoning.model_dump(exclude_none=True),
        {"role": "assistant", "content": [{"type": "output_text", "text": message.content[0].text}]},
        {"role": "user", "content": "again"},
    ]
    assert client.responses.create(model=MODEL, input=history).output_text == "Echo: again"
    history[1]["encrypted_content"] = "gAAAA" + "x" * 40 + ".forged"
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model=MODEL, input=history)
    assert "could not be verified" in error.value.message


def test_max_output_tokens_makes_it_incomplete(client: openai.OpenAI) -> None:
    r = client.responses.create(model=MODEL, input=" ".join(["word"] * 30), max_output_tokens=16)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 16


def test_a_stored_response_can_be_continued(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="remember me")
    second = client.responses.create(model=MODEL, input="and now", previous_response_id=first.id)
    assert second.output_text == "Echo: and now"
    assert second.usage.input_tokens > first.usage.input_tokens
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_unknown")
    assert error.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"model": None}, "model"),
        ({"input": None}, "input"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "mystery_item"}]}, "input[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "chat_style"}}]}, "tools[0].name"),
        ({"tools": [{"type": "mystery_tool"}]}, "tools[0].type"),
        ({"max_output_tokens": 15}, "max_output_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"text": {"format": {"type": "json_schema"}}}, "text.format"),
        ({"reasoning": {"effort": "extreme"}}, "reasoning"),
    ],
)
def test_openai_s_400s(fake: FakeUpstream, patch: dict[str, object], param: str) -> None:
    body = {k: v for k, v in {"model": MODEL, "input": "hi", **patch}.items() if v is not None}
    r = plain_http.post(f"{fake.base_url}/responses", json=body, headers={"Authorization": "Bearer upstream-secret"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_failures(client: openai.OpenAI, fake: FakeUpstream) -> None:
    with pytest.raises(openai.RateLimitError) as limited:
        client.responses.create(model=MODEL, input="x [[fail:429]]")
    assert limited.value.response.headers["retry-after"] == "1"
    events = list(client.responses.create(model=MODEL, input="a b c [[stream-error]]", stream=True))
    assert [e.type for e in events][-2:] == ["response.output_text.delta", "response.failed"]
    assert events[-1].response.error.code == "server_error"
    with pytest.raises(openai.APIConnectionError):
        list(client.responses.create(model=MODEL, input="a b c [[drop-after:1]]", stream=True))
    assert fake.requests[-1].dropped
    with (
        pytest.raises(openai.AuthenticationError),
        openai.OpenAI(base_url=fake.base_url, api_key="wrong", max_retries=0) as sdk,
    ):
        sdk.responses.create(model=MODEL, input="x")
