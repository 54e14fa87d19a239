"""Streams are relayed as the upstream produces them, on every endpoint and upstream kind, and a
translated stream that breaks ends with the protocol's own in-stream error."""

from __future__ import annotations

import time
from decimal import Decimal

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

SLOW = "one two three four five six seven eight [[chunk-delay:150]]"  # ≥ 1.2 s upstream, one token per 150 ms


def first_text_and_total(lines) -> tuple[float, float]:
    start = time.monotonic()
    first = None
    for line in lines:
        if first is None and ("one" in line):
            first = time.monotonic() - start
    return first, time.monotonic() - start


@pytest.mark.parametrize("model", ["fake-gpt", "fake-claude"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": [{"role": "user", "content": SLOW}]}),
        ("/responses", {"input": SLOW}),
        ("/messages", {"max_tokens": 100, "messages": [{"role": "user", "content": SLOW}]}),
    ],
)
def test_the_first_text_reaches_the_client_long_before_the_stream_ends(gateway: Gateway, team, model, path, body):
    with plain_http.stream(
        "POST",
        gateway.base_url + path,
        headers={"Authorization": f"Bearer {team.key}"},
        json={"model": model, "stream": True, **body},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        first, total = first_text_and_total(response.iter_lines())
    assert total >= 1.0
    assert first is not None, (first, total)
    assert first < total - 0.6, (first, total)


def test_translated_usage_keeps_cache_reads_and_writes(gateway: Gateway, team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        usage = client.chat.completions.create(
            model="fake-claude",
            messages=[{"role": "user", "content": "a b c d e f g h [[cached:5]] [[cache-write:2]]"}],
        ).usage
        assert usage.prompt_tokens_details.cached_tokens == 5
        assert (
            usage.prompt_tokens_details.model_extra.get(
                "cache_write_tokens", getattr(usage.prompt_tokens_details, "cache_write_tokens", None)
            )
            == 2
        )
        # input at $3/M, cache writes at $3.75/M, hits at $0.30/M, output at $15/M; 100 credits per USD
        plain = usage.prompt_tokens - 5 - 2
        expected = (
            (plain * 3 + 2 * Decimal("3.75") + 5 * Decimal("0.3") + usage.completion_tokens * 15) * 100 / 1_000_000
        )
        assert Decimal(str(usage.model_extra["cost"]["credits"])) == expected

        with anthropic.Anthropic(
            base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0
        ) as claude:
            message = claude.messages.create(
                model="fake-gpt", max_tokens=50, messages=[{"role": "user", "content": "a b c d e f g h [[cached:5]]"}]
            )
            assert message.usage.cache_read_input_tokens == 5
            assert message.usage.input_tokens == 9 + 3 - 5  # Anthropic's input_tokens exclude cache traffic


def test_compat_version_is_forwarded_as_the_anthropic_version(gateway: Gateway, team, fake_upstream):
    response = plain_http.post(
        gateway.base_url + "/messages",
        headers={"x-api-key": team.key, "compat-version": "2025-01-01"},
        json={"model": "fake-claude", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 200
    assert fake_upstream.requests[0].headers["anthropic-version"] == "2025-01-01"


def test_foreign_tool_ids_are_made_safe_for_anthropic_on_both_sides(gateway: Gateway, team, fake_upstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        tools = [{"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}]
        reply = client.chat.completions.create(
            model="fake-claude",
            tools=tools,
            messages=[
                {"role": "user", "content": "run it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "functions.Bash:0", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "functions.Bash:0", "content": "ok"},
            ],
        )
        assert reply.choices[0].message.content == "Echo: tool result: ok"
        sent = fake_upstream.requests[0].body["messages"]
        assert sent[1]["content"][0]["id"] == sent[2]["content"][0]["tool_use_id"] == "functions_Bash_0"


def test_a_broken_translated_stream_ends_with_each_protocol_s_error(gateway: Gateway, team):
    text = "one two three four [[drop-after:2]]"
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with client.responses.stream(model="fake-claude", input=text) as stream:
            kinds = [event.type for event in stream]
        assert kinds[-1] == "response.failed"
        assert "response.output_text.delta" in kinds

        with pytest.raises(openai.APIError):
            list(
                client.chat.completions.create(
                    model="fake-claude", stream=True, messages=[{"role": "user", "content": text}]
                )
            )

        with (
            anthropic.Anthropic(
                base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0
            ) as claude,
            pytest.raises(anthropic.APIStatusError),
            claude.messages.stream(model="fake-gpt", max_tokens=50, messages=[{"role": "user", "content": text}]) as s,
        ):
            list(s)
