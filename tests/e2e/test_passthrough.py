"""A request to an upstream of its own protocol passes through untouched: every field, role, block
and tool type — known to Tollgate or from next month — and the protocol's version and beta headers
reach the upstream as the client wrote them; only ``model`` becomes the deployment's name. What
Tollgate does not understand it counts, erring high, and never refuses."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

FUTURE = {"future_param": {"mode": "turbo", "levels": [1, 2, 3]}, "another_new_field": "value"}

CASES = {
    "chat": (
        "/chat/completions",
        "fake-gpt",
        "gpt-x",
        {"openai-beta": "assistants=v2"},
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hi"},
                        {"type": "future_part", "future_part": {"data": "x" * 10}},
                    ],
                },
            ],
            "tools": [
                {"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object"}}},
                {"type": "future_tool_2027", "future_tool_2027": {"name": "g"}},
            ],
            "prediction": {"type": "content", "content": "hi"},
            "service_tier": "flex",
            "store": False,
            "metadata": {"k": "v"},
            "verbosity": "low",
            **FUTURE,
        },
    ),
    "messages": (
        "/messages",
        "fake-claude",
        "claude-x",
        {"anthropic-version": "2026-10-21", "anthropic-beta": "future-beta-2027-01-01,context-management-2025-06-27"},
        {
            "max_tokens": 100,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}, {"type": "future_block", "payload": {"a": 1}}],
                },
                {"role": "assistant", "content": "hello"},
                {"role": "system", "content": "A system turn in the middle."},
                {"role": "user", "content": "again"},
            ],
            "tools": [
                {"name": "f", "input_schema": {"type": "object"}, "defer_loading": True},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                {"type": "future_tool_2027", "name": "g"},
            ],
            "thinking": {"type": "adaptive", "display": "omitted"},
            "output_config": {"effort": "high"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "metadata": {"user_id": '{"device_id": "abc"}'},
            "container": "ctr_1",
            **FUTURE,
        },
    ),
    "responses": (
        "/responses",
        "fake-codex",
        "gpt-codex-x",
        {"openai-beta": "responses=v1"},
        {
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            ],
            "tools": [
                {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False},
                {
                    "type": "namespace",
                    "name": "ns",
                    "description": "grouped",
                    "tools": [{"type": "function", "name": "g", "parameters": {"type": "object"}}],
                },
                {"type": "web_search", "external_web_access": False},
            ],
            "reasoning": {"summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "store": False,
            "prompt_cache_key": "thread-1",
            "client_metadata": {"session_id": "s"},
            "parallel_tool_calls": True,
            **FUTURE,
        },
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("protocol", list(CASES))
def test_the_body_and_the_version_headers_reach_the_upstream_as_the_client_wrote_them(
    gateway: Gateway, team, fake_upstream: FakeUpstream, protocol: str, stream: bool
):
    path, model, upstream_model, version_headers, fields = CASES[protocol]
    body = {"model": model, **fields, **({"stream": True} if stream else {})}
    answer = plain_http.post(
        f"{gateway.base_url}{path}",
        json=body,
        timeout=30,
        headers={"Authorization": f"Bearer {team.key}", **version_headers},
    )
    assert answer.status_code == 200, answer.text
    assert "x-tollgate-dropped-tools" not in answer.headers
    (sent,) = fake_upstream.requests
    expected = {**body, "model": upstream_model}
    if protocol == "chat" and stream:  # the one thing added: the upstream's usage, which the charge is made from
        expected["stream_options"] = {"include_usage": True}
    assert sent.body == expected
    assert json.dumps(sent.body, sort_keys=True) == json.dumps(expected, sort_keys=True)
    for name, value in version_headers.items():
        assert sent.headers[name] == value


def test_what_tollgate_does_not_understand_is_counted_erring_high(gateway: Gateway, team):
    claude = {"Authorization": f"Bearer {team.key}", "anthropic-version": "2023-06-01"}
    plain = {"model": "fake-claude", "messages": [{"role": "user", "content": "hi"}]}
    words = " ".join(f"word{i}" for i in range(200))
    unknown = {
        **plain,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "future_block", "text_of_some_kind": words}],
            }
        ],
    }
    field = {**plain, "future_instructions": words}

    def count(body: dict) -> int:
        answer = plain_http.post(f"{gateway.base_url}/messages/count_tokens", json=body, headers=claude)
        assert answer.status_code == 200, answer.text
        return answer.json()["input_tokens"]

    as_text = count({**plain, "messages": [{"role": "user", "content": "hi " + words}]})
    assert count(unknown) > as_text > count(plain) + 200
    assert count(field) > as_text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_upstream_s_rate_limit_keeps_its_message_and_code_with_the_specification_s_type(
    gateway: Gateway, team, stream: bool
):
    """OpenAI answers a rate limit with ``"type": "requests"``; passed through, the client gets OpenAI's
    message, code and ``retry-after`` with the type the specification gives a 429, on every wire."""
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude,
    ):
        prompt = "x [[fail:429]]"
        asked = {
            "chat": lambda: client.chat.completions.create(
                model="fake-gpt", messages=[{"role": "user", "content": prompt}], stream=stream
            ),
            "responses": lambda: client.responses.create(model="fake-codex", input=prompt, stream=stream),
        }
        for wire, ask in asked.items():
            with pytest.raises(openai.RateLimitError) as limited:
                ask()
            assert limited.value.body == {
                "message": "fake upstream failure 429",
                "type": "rate_limit_error",
                "param": None,
                "code": "rate_limit_exceeded",
            }, wire
            assert limited.value.response.headers["retry-after"] == "1"
            assert limited.value.response.headers["x-should-retry"] == "true"
        with pytest.raises(anthropic.RateLimitError) as limited_claude:
            claude.messages.create(
                model="fake-claude", max_tokens=10, stream=stream, messages=[{"role": "user", "content": prompt}]
            )
        assert limited_claude.value.body == {
            "type": "error",
            "request_id": "req_fake",
            "error": {"type": "rate_limit_error", "message": "fake upstream failure 429"},
        }
        assert gateway.charges(team.name) == []
