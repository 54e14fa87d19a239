"""What real clients send, translated for every other wire: the fields coding agents use reach the
upstream in its own terms (or are dropped where it has none), and nothing they send is refused —
but audio for an upstream that cannot take it, cleanly, before anything is held."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")


def post(gateway: Gateway, key: str, path: str, body: dict) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "anthropic-version": "2023-06-01"}
    return plain_http.post(f"{gateway.base_url}{path}", json=body, headers=headers, timeout=30)


# -- Messages, as Claude Code sends it -------------------------------------------------------------

CLAUDE_CODE_BODY = {
    "max_tokens": 1000,
    "system": [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330"},
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>be careful</system-reminder>"},
                {"type": "text", "text": "read the doc", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "document",
                    "title": "Notes",
                    "source": {"type": "text", "media_type": "text/plain", "data": "the notes"},
                },
                {
                    "type": "search_result",
                    "title": "Result",
                    "source": "https://example.com",
                    "content": [{"type": "text", "text": "found text"}],
                },
            ],
        },
        {"role": "system", "content": "# Environment\nWorking directory: /tmp"},
    ],
    "tools": [
        {
            "name": "Bash",
            "description": "Run a command",
            "cache_control": {"type": "ephemeral"},
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
        {
            "name": "DeferredToolPlaceholder",
            "description": "later",
            "defer_loading": True,
            "input_schema": {"type": "object", "properties": {}},
        },
        {"type": "web_search_20250305", "name": "web_search"},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "session_id": "s-1"})},
    "thinking": {"type": "adaptive", "display": "omitted"},
    "output_config": {"effort": "high"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
}


def test_claude_code_s_body_to_a_chat_upstream(gateway: Gateway, team, fake_upstream: FakeUpstream):
    answer = post(gateway, team.key, "/messages", {**CLAUDE_CODE_BODY, "model": "fake-gpt"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-tollgate-dropped-tools"] == "web_search_20250305"
    sent = fake_upstream.requests[0].body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "system"]
    assert sent["messages"][0]["content"] == "x-anthropic-billing-header: cc_version=2.1.330\nYou are a coding agent."
    user = sent["messages"][1]["content"]
    assert "read the doc" in user
    assert "Notes\n\nthe notes" in user
    assert "Result\nhttps://example.com\nfound text" in user
    assert sent["messages"][2]["content"].startswith("# Environment")
    assert [t["function"]["name"] for t in sent["tools"]] == ["Bash", "DeferredToolPlaceholder"]
    assert sent["parallel_tool_calls"] is False
    assert sent["tool_choice"] == "auto"
    assert sent["reasoning_effort"] == "high"
    assert sent["user"] == CLAUDE_CODE_BODY["metadata"]["user_id"]
    assert "context_management" not in sent
    assert "thinking" not in sent
    assert "cache_control" not in json.dumps(sent)


def test_claude_code_s_body_to_a_responses_upstream(gateway: Gateway, team, fake_upstream: FakeUpstream):
    answer = post(gateway, team.key, "/messages", {**CLAUDE_CODE_BODY, "model": "fake-codex"})
    assert answer.status_code == 200, answer.text
    sent = fake_upstream.requests[0].body
    assert sent["instructions"].endswith("You are a coding agent.")
    assert [(i.get("type"), i.get("role")) for i in sent["input"]] == [("message", "user"), ("message", "developer")]
    assert sent["reasoning"] == {"effort": "high"}  # display omitted: no summary asked for
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert [t["name"] for t in sent["tools"]] == ["Bash", "DeferredToolPlaceholder"]


def test_thinking_types_map_to_effort(gateway: Gateway, team, fake_upstream: FakeUpstream):
    base = {"model": "fake-gpt", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]}
    for thinking, effort in (
        [{"type": "enabled", "budget_tokens": 2048}, "low"],
        [{"type": "enabled", "budget_tokens": 16000, "display": "summarized"}, "high"],
        [{"type": "disabled"}, None],
        [{"type": "adaptive"}, None],
    ):
        fake_upstream.clear()
        assert post(gateway, team.key, "/messages", {**base, "thinking": thinking}).status_code == 200
        assert fake_upstream.requests[0].body.get("reasoning_effort") == effort


def test_tool_choice_forms_and_a_string_tool_choice(gateway: Gateway, team, fake_upstream: FakeUpstream):
    tools = [{"name": "lookup", "input_schema": {"type": "object", "properties": {}}}]
    base = {"model": "fake-gpt", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    for choice, expected in (
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "lookup"}, {"type": "function", "function": {"name": "lookup"}}),
        ("auto", "auto"),
    ):
        fake_upstream.clear()
        assert post(gateway, team.key, "/messages", {**base, "tool_choice": choice}).status_code == 200
        assert fake_upstream.requests[0].body["tool_choice"] == expected


# -- Responses, as Codex sends it ------------------------------------------------------------------

CODEX_BODY = {
    "instructions": None,
    "input": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Be Codex."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "id": "rs_foreign", "summary": [], "encrypted_content": "gAAAA-from-another-model"},
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
        {"type": "message", "role": "system", "content": "A mid-conversation system note."},
    ],
    "tools": [
        {
            "type": "function",
            "name": "exec_command",
            "description": "Run",
            "strict": False,
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
        {"type": "web_search", "external_web_access": False},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "thread-1",
    "client_metadata": {"x-codex-turn-metadata": json.dumps({"installation_id": "i" * 36, "turn": 1})},
    "text": {"format": {"type": "json_schema", "name": "files", "schema": {"type": "object"}, "strict": True}},
}


def test_codex_s_body_to_a_chat_upstream(gateway: Gateway, team, fake_upstream: FakeUpstream):
    answer = post(gateway, team.key, "/responses", {**CODEX_BODY, "model": "fake-gpt"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-tollgate-dropped-tools"] == "web_search"
    sent = fake_upstream.requests[0].body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "system"]
    assert sent["messages"][2]["tool_calls"][0]["function"] == {"name": "exec_command", "arguments": '{"cmd": "ls"}'}
    assert sent["prompt_cache_key"] == "thread-1"
    assert sent["parallel_tool_calls"] is True
    assert sent["reasoning_effort"] == "medium"
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "files", "schema": {"type": "object"}, "strict": True},
    }
    assert "client_metadata" not in sent
    assert "gAAAA" not in json.dumps(sent)


def test_codex_s_body_to_an_anthropic_upstream(gateway: Gateway, team, fake_upstream: FakeUpstream):
    answer = post(gateway, team.key, "/responses", {**CODEX_BODY, "model": "fake-claude"})
    assert answer.status_code == 200, answer.text
    sent = fake_upstream.requests[0].body
    assert sent["system"] == "Be Codex.\nA mid-conversation system note."
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "exec_command", "input": {"cmd": "ls"}}
    ]
    assert sent["messages"][2]["content"][0]["type"] == "tool_result"
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    assert "thinking" not in sent  # the last assistant turn called a tool without Anthropic's thinking


# -- Chat, with what OpenAI's newer clients send ---------------------------------------------------

CHAT_BODY = {
    "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    "max_completion_tokens": 200,
    "reasoning_effort": "low",
    "parallel_tool_calls": False,
    "store": True,
    "metadata": {"project": "x"},
    "user": "user-1",
    "service_tier": "auto",
    "prediction": {"type": "content", "content": "hi"},
    "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
    "tools": [{"type": "function", "function": {"name": "lookup", "strict": True, "parameters": {"type": "object"}}}],
}


def test_chat_fields_to_a_responses_and_an_anthropic_upstream(gateway: Gateway, team, fake_upstream: FakeUpstream):
    assert post(gateway, team.key, "/chat/completions", {**CHAT_BODY, "model": "fake-codex"}).status_code == 200
    sent = fake_upstream.requests[0].body
    assert sent["instructions"] == "Be brief."
    assert sent["max_output_tokens"] == 200
    assert sent["store"] is True
    assert sent["metadata"] == {"project": "x"}
    assert sent["service_tier"] == "auto"
    assert sent["safety_identifier"] == "user-1"
    assert sent["tools"] == [{"type": "function", "name": "lookup", "parameters": {"type": "object"}, "strict": True}]
    assert sent["parallel_tool_calls"] is False
    assert sent["reasoning"] == {"effort": "low"}
    assert sent["text"]["format"]["name"] == "r"

    fake_upstream.clear()
    assert post(gateway, team.key, "/chat/completions", {**CHAT_BODY, "model": "fake-claude"}).status_code == 200
    sent = fake_upstream.requests[0].body
    assert sent["system"] == "Be brief."
    assert sent["metadata"] == {"user_id": "user-1"}
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    "audio",
    [
        {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}],
                }
            ]
        },
    ],
)
def test_audio_is_refused_cleanly_where_the_upstream_cannot_take_it(
    gateway: Gateway, team, fake_upstream: FakeUpstream, audio: dict
):
    before = gateway.cli("team", "show", team.name).stdout
    for model in ("fake-claude", "fake-codex"):
        answer = post(gateway, team.key, "/chat/completions", {**CHAT_BODY, "model": model, **audio})
        assert answer.status_code == 400
        assert "Audio" in answer.json()["error"]["message"]
    assert not fake_upstream.requests
    assert gateway.wait_until_nothing_held(team.name) == before
    fake_gpt = post(gateway, team.key, "/chat/completions", {**CHAT_BODY, "model": "fake-gpt", **audio})
    assert fake_gpt.status_code == 200  # an OpenAI chat upstream gets it as sent, and judges it itself
    assert (
        fake_upstream.requests[0].body["modalities" if "modalities" in audio else "messages"]
        == audio["modalities" if "modalities" in audio else "messages"]
    )
