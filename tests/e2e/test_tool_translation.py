"""Tools a coding agent sends, through every translation: namespaced and custom tools reach upstreams
that have neither under flat names and come back as the client's own (whole answers and streams),
and built-in tools are dropped (named in a header and the log line), refused or passed, per model."""

from __future__ import annotations

import json
from typing import cast

import anthropic
import openai
import pytest
from anthropic.types import ToolUnionParam
from openai.types.responses import ToolParam

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents",
    "tools": [
        {
            "type": "function",
            "name": "close_agent",
            "description": "Close an agent",
            "strict": False,
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        }
    ],
}
PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}
SHELL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}
#: What Codex CLI declares, some of it newer than the SDK's types: typed once, as the SDK would send it.
TOOLS = cast("list[ToolParam]", [SHELL, NAMESPACE, PATCH, {"type": "web_search", "external_web_access": False}])
TRANSLATED = ["fake-gpt", "fake-claude"]


def upstream_tool_names(sent: dict) -> list[str]:
    tools = sent.get("tools") or []
    return [t["function"]["name"] if "function" in t else t.get("name", t.get("type")) for t in tools]


@pytest.mark.parametrize("model", TRANSLATED)
def test_a_namespaced_tool_is_called_under_a_flat_name_and_comes_back_in_its_namespace(
    client: openai.OpenAI, fake_upstream: FakeUpstream, model: str
):
    response = client.responses.create(
        model=model, tools=TOOLS, input='close it [[tool:multi_agent_v1__close_agent {"id": "a1"}]]'
    )
    sent = fake_upstream.requests[0].body
    assert upstream_tool_names(sent) == ["exec_command", "multi_agent_v1__close_agent", "apply_patch"]
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert (call.name, call.namespace, json.loads(call.arguments)) == ("close_agent", "multi_agent_v1", {"id": "a1"})

    with client.responses.stream(
        model=model, tools=TOOLS, input='close it [[tool:multi_agent_v1__close_agent {"id": "a2"}]]'
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert [(item.name, item.namespace) for item in added] == [("close_agent", "multi_agent_v1")]
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert json.loads(call.arguments) == {"id": "a2"}
    assert call.namespace == "multi_agent_v1"

    # The next turn sends the call back, in its namespace; the upstream sees the flat name again.
    fake_upstream.clear()
    follow_up = client.responses.create(
        model=model,
        tools=TOOLS,
        input=[
            {"role": "user", "content": "close it"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": "close_agent",
                "namespace": "multi_agent_v1",
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "closed"},
        ],
    )
    assert follow_up.output_text == "Echo: tool result: closed"
    assert "multi_agent_v1__close_agent" in json.dumps(fake_upstream.requests[0].body)


@pytest.mark.parametrize("model", TRANSLATED)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_custom_tool_takes_its_free_text_both_ways(
    client: openai.OpenAI, fake_upstream: FakeUpstream, model: str, stream: bool
):
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch"
    prompt = "patch it [[tool:apply_patch " + json.dumps({"input": patch}) + "]]"
    if stream:
        with client.responses.stream(model=model, tools=TOOLS, input=prompt) as s:
            deltas = "".join(e.delta for e in s if e.type == "response.custom_tool_call_input.delta")
            response = s.get_final_response()
        assert deltas == patch
    else:
        response = client.responses.create(model=model, tools=TOOLS, input=prompt)
    (call,) = [item for item in response.output if item.type == "custom_tool_call"]
    assert (call.name, call.input) == ("apply_patch", patch)
    assert response.status == "completed"

    fake_upstream.clear()
    follow_up = client.responses.create(
        model=model,
        tools=TOOLS,
        input=[
            {"role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": call.call_id, "name": "apply_patch", "input": patch},
            {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"},
        ],
    )
    assert follow_up.output_text == "Echo: tool result: Done!"
    assert called_with(fake_upstream.requests[0].body) == {"input": patch}


def called_with(sent: dict) -> dict:
    """The arguments of the tool call in a chat or Messages request's history."""
    for message in sent["messages"]:
        for call in message.get("tool_calls") or ():
            return json.loads(call["function"]["arguments"])
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block["type"] == "tool_use":
                return block["input"]
    raise AssertionError("no tool call in the history")


@pytest.mark.parametrize("model", TRANSLATED)
def test_a_built_in_tool_is_dropped_and_named_where_the_request_is_translated(
    gateway: Gateway, team, fake_upstream: FakeUpstream, model: str
):
    answer = plain_http.post(
        f"{gateway.base_url}/responses",
        headers={"Authorization": f"Bearer {team.key}"},
        json={"model": model, "input": "search for it", "tools": TOOLS, "tool_choice": "auto"},
    )
    assert answer.status_code == 200
    assert answer.json()["output"][0]["content"][0]["text"] == "Echo: search for it"
    assert answer.headers["x-tollgate-dropped-tools"] == "web_search"
    assert "web_search" not in upstream_tool_names(fake_upstream.requests[0].body)
    assert gateway.access_line(answer.headers["x-request-id"])["dropped_tools"] == ["web_search"]


def test_a_model_may_pass_built_in_tools_to_its_upstream_even_translated(
    client: openai.OpenAI, fake_upstream: FakeUpstream
):
    response = client.responses.with_raw_response.create(model="passing-gpt", input="search", tools=TOOLS)
    assert "x-tollgate-dropped-tools" not in response.headers
    assert {"type": "web_search", "external_web_access": False} in fake_upstream.requests[0].body["tools"]


SERVER_TOOLS = cast(
    "list[ToolUnionParam]",
    [
        {"name": "lookup", "description": "Look it up", "input_schema": {"type": "object", "properties": {}}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ],
)


def test_passed_through_built_in_tools_go_as_they_are_unless_the_model_says_otherwise(
    gateway: Gateway, team, fake_upstream: FakeUpstream, teams
):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        claude.messages.create(
            model="fake-claude", max_tokens=50, tools=SERVER_TOOLS, messages=[{"role": "user", "content": "hi"}]
        )
        assert fake_upstream.requests[0].body["tools"] == SERVER_TOOLS

        fake_upstream.clear()
        dropped = claude.messages.with_raw_response.create(
            model="dropping-claude", max_tokens=50, tools=SERVER_TOOLS, messages=[{"role": "user", "content": "hi"}]
        )
        assert dropped.headers["x-tollgate-dropped-tools"] == "web_search_20250305"
        assert fake_upstream.requests[0].body["tools"] == SERVER_TOOLS[:1]

        before = gateway.cli("team", "show", team.name).stdout
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.messages.create(
                model="refusing-claude", max_tokens=50, tools=SERVER_TOOLS, messages=[{"role": "user", "content": "hi"}]
            )
        assert "web_search_20250305" in refused.value.message
        assert refused.value.body["error"]["type"] == "invalid_request_error"
        assert len(fake_upstream.requests) == 1  # the refused request never went upstream
        gateway.wait_until_nothing_held(team.name)
        assert gateway.cli("team", "show", team.name).stdout.split(",")[0] == before.split(",")[0]
