"""Every inbound protocol against an Anthropic upstream (fake-claude), plain and streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal

import anthropic
import openai
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY, Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

HI = [{"role": "user", "content": "hello there gateway"}]
LOOKUP_CHAT = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
LOOKUP_MESSAGES = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}


def claude_micros(input_tokens: int, output_tokens: int, cache_write: int = 0, cache_hit: int = 0) -> int:
    """fake-claude's price: $3/M input, $15/M output, $3.75/M cache writes, $0.30/M cache hits."""
    exact = (input_tokens * 3 + output_tokens * 15 + cache_write * Decimal("3.75") + cache_hit * Decimal("0.3")) * 100
    return int(exact.to_integral_value(rounding=ROUND_CEILING))


def credits_in(extra: dict, field: str) -> Decimal:
    return Decimal(str(extra[field]["credits"]))


@pytest.fixture
def claude(gateway: Gateway, team) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        yield claude


# -- messages → anthropic: a pass-through ---------------------------------------------------------


def test_messages_pass_through_with_the_version_beta_and_upstream_key(
    claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    message = claude.messages.create(
        model="fake-claude",
        max_tokens=100,
        messages=HI,
        system="be brief",
        extra_headers={"anthropic-beta": "tools-2024"},
    )
    assert message.content[0].text == "Echo: hello there gateway"
    assert message.model == "fake-claude"
    (sent,) = fake_upstream.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == UPSTREAM_KEY
    assert sent.headers["anthropic-version"] == "2026-10-21"
    assert sent.headers["anthropic-beta"] == "tools-2024"
    assert sent.body["model"] == "claude-x"
    assert sent.body["system"] == "be brief"
    usage = message.usage
    cost = claude_micros(usage.input_tokens, usage.output_tokens)
    assert credits_in(usage.model_extra, "cost") == Decimal(cost) / 1_000_000
    assert credits_in(usage.model_extra, "remaining") == 100 - Decimal(cost) / 1_000_000


def test_cache_writes_and_hits_are_priced_with_their_own_rates(claude: anthropic.Anthropic):
    message = claude.messages.create(
        model="fake-claude",
        max_tokens=100,
        messages=[{"role": "user", "content": "a b c d e f g h i j [[cached:6]] [[cache-write:4]]"}],
    )
    usage = message.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (6, 4)
    cost = claude_micros(usage.input_tokens, usage.output_tokens, cache_write=4, cache_hit=6)
    assert credits_in(usage.model_extra, "cost") == Decimal(cost) / 1_000_000


def test_a_passed_through_stream_keeps_thinking_and_tools_and_bills_before_the_last_delta(claude: anthropic.Anthropic):
    with claude.messages.stream(
        model="fake-claude",
        max_tokens=4000,
        tools=[LOOKUP_MESSAGES],
        thinking={"type": "enabled", "budget_tokens": 2000},
        messages=[{"role": "user", "content": "find it [[think]] [[tool:lookup]]"}],
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds == ["thinking", "text", "tool_use"]
    assert final.content[0].signature.startswith("sig_")
    assert final.content[2].input == {"echo": "find it"}
    assert final.stop_reason == "tool_use"
    (delta,) = [e for e in events if e.type == "message_delta"]
    assert credits_in(delta.usage.model_extra, "remaining") == 100 - credits_in(delta.usage.model_extra, "cost")


def test_upstream_errors_reach_a_passed_through_request_as_the_upstream_wrote_them(
    claude: anthropic.Anthropic, client: openai.OpenAI
):
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude.messages.create(
            model="fake-claude",
            max_tokens=100,
            messages=[
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
                {"role": "user", "content": "no result"},
            ],
        )
    assert bad.value.body == {
        "type": "error",
        "request_id": "req_fake",
        "error": {
            "type": "invalid_request_error",
            "message": "tool_use ids were found without tool_result blocks immediately after: toolu_1",
        },
    }
    assert bad.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(anthropic.APIStatusError) as busy:  # Anthropic's 529, which its clients back off from
        claude.messages.create(
            model="fake-claude", max_tokens=100, messages=[{"role": "user", "content": "x [[fail:529]]"}]
        )
    assert busy.value.status_code == 529
    assert busy.value.body["error"]["type"] == "overloaded_error"
    assert busy.value.response.headers["x-should-retry"] == "true"
    with pytest.raises(openai.APIStatusError) as translated:  # a chat client gets an overload in its own terms
        client.chat.completions.create(model="fake-claude", messages=[{"role": "user", "content": "x [[fail:529]]"}])
    assert translated.value.status_code == 503
    assert translated.value.body["type"] == "server_error"


def test_a_mid_stream_upstream_error_reaches_the_client_as_an_error_event(claude: anthropic.Anthropic, gateway, team):
    with (
        pytest.raises(anthropic.APIStatusError) as error,
        claude.messages.stream(
            model="fake-claude",
            max_tokens=100,
            messages=[{"role": "user", "content": "one two three [[stream-error]]"}],
        ) as stream,
    ):
        list(stream)
    assert "overloaded" in str(error.value).lower()


def test_count_tokens_is_the_gateway_s_estimate_never_below_the_upstream_s(
    claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    counted = claude.messages.count_tokens(model="fake-claude", messages=HI, system="be brief")
    assert counted.input_tokens >= 2 + 3 + 3  # the fake upstream's own count for this prompt
    assert fake_upstream.requests == []  # the gateway's count (the one it enforces), not the upstream's


# -- chat → anthropic ------------------------------------------------------------------------------


def test_chat_is_translated_to_messages(client: openai.OpenAI, fake_upstream: FakeUpstream):
    completion = client.chat.completions.create(
        model="fake-claude",
        temperature=1.7,
        stop="STOP",
        max_tokens=50,
        user="u-1",
        messages=[{"role": "system", "content": "be brief"}, {"role": "developer", "content": "be kind"}, *HI],
    )
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "fake-claude"
    sent = fake_upstream.requests[0].body
    assert sent["system"] == "be brief\nbe kind"
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello there gateway"}]}]
    assert (sent["temperature"], sent["stop_sequences"], sent["max_tokens"]) == (1.0, ["STOP"], 50)
    assert sent["metadata"] == {"user_id": "u-1"}
    usage = completion.usage
    cost = claude_micros(usage.prompt_tokens, usage.completion_tokens)
    assert credits_in(usage.model_extra, "cost") == Decimal(cost) / 1_000_000


def test_chat_tool_calls_round_trip_through_anthropic(client: openai.OpenAI, fake_upstream: FakeUpstream):
    with client.chat.completions.stream(
        model="fake-claude", tools=[LOOKUP_CHAT], messages=[{"role": "user", "content": "find it [[tool:lookup]]"}]
    ) as stream:
        first = stream.get_final_completion()
    message = first.choices[0].message
    (call,) = message.tool_calls
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"echo": "find it"}
    assert message.content == "Calling lookup."
    assert first.choices[0].finish_reason == "tool_calls"

    reply = client.chat.completions.create(
        model="fake-claude",
        tools=[LOOKUP_CHAT],
        messages=[
            {"role": "user", "content": "find it"},
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "42"},
        ],
    )
    assert reply.choices[0].message.content == "Echo: tool result: 42"
    sent = fake_upstream.requests[-1].body["messages"]
    assert sent[1]["content"] == [{"type": "tool_use", "id": call.id, "name": "lookup", "input": {"echo": "find it"}}]
    assert sent[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": [{"type": "text", "text": "42"}],
    }


def test_chat_streams_from_anthropic_with_a_billed_usage_chunk(client: openai.OpenAI):
    chunks = list(
        client.chat.completions.create(
            model="fake-claude", messages=HI, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: hello there gateway"
    assert chunks[-1].choices == []
    assert "remaining" in chunks[-1].usage.model_extra


def test_images_reach_a_vision_model_as_base64_blocks(client: openai.OpenAI, fake_upstream: FakeUpstream):
    client.chat.completions.create(
        model="fake-claude",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ],
            }
        ],
    )
    blocks = fake_upstream.requests[0].body["messages"][0]["content"]
    assert blocks[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }


def test_reasoning_effort_becomes_a_thinking_budget(client: openai.OpenAI, fake_upstream: FakeUpstream):
    client.chat.completions.create(
        model="fake-claude", messages=HI, reasoning_effort="medium", max_tokens=3000, temperature=0.2
    )
    sent = fake_upstream.requests[0].body
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2999}
    assert "temperature" not in sent  # Anthropic refuses it alongside thinking


# -- responses → anthropic -------------------------------------------------------------------------


def test_responses_reach_anthropic_and_stream_back(client: openai.OpenAI):
    response = client.responses.create(model="fake-claude", input="hello there gateway", instructions="be brief")
    assert response.output_text == "Echo: hello there gateway"
    with client.responses.stream(
        model="fake-claude",
        input="find it [[tool:lookup]]",
        tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
    ) as s:
        final = s.get_final_response()
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert json.loads(final.output[1].arguments) == {"echo": "find it"}
    assert "remaining" in final.usage.model_extra


# -- one price, whichever protocol -----------------------------------------------------------------


def test_the_same_request_costs_the_same_through_every_protocol(gateway: Gateway, teams):
    for model in ("fake-gpt", "fake-claude"):
        team = teams.open("10")
        with (
            openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as chat,
            anthropic.Anthropic(
                base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0
            ) as claude,
        ):
            a = chat.chat.completions.create(model=model, messages=HI, max_tokens=100).usage
            b = chat.responses.create(model=model, input="hello there gateway", max_output_tokens=100).usage
            c = claude.messages.create(model=model, max_tokens=100, messages=HI).usage
            c_input = c.input_tokens + (c.cache_read_input_tokens or 0) + (c.cache_creation_input_tokens or 0)
            tokens = {
                (a.prompt_tokens, a.completion_tokens),
                (b.input_tokens, b.output_tokens),
                (c_input, c.output_tokens),
            }
            assert len(tokens) == 1, (model, tokens)
            costs = {credits_in(u.model_extra, "cost") for u in (a, b, c)}
            assert len(costs) == 1, (model, costs)
            cost = costs.pop()
            assert [credits_in(u.model_extra, "remaining") for u in (a, b, c)] == [
                10 - cost,
                10 - 2 * cost,
                10 - 3 * cost,
            ]
