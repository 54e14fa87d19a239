"""A model's reasoning comes back to it through a client of another protocol: Anthropic's signed
thinking inside a Responses client's ``encrypted_content``, OpenAI's encrypted reasoning inside a
Messages client's thinking ``signature`` — and the provider gets its own back on the next turn (the
fake Responses API refuses reasoning it did not sign, as OpenAI does)."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_thinking_through_a_responses_client(
    client: openai.OpenAI, fake_upstream: FakeUpstream, stream: bool
):
    ask = {
        "model": "fake-claude",
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }
    if stream:
        with client.responses.stream(input="ponder this [[think]]", **ask) as s:  # type: ignore[arg-type]
            first = s.get_final_response()
    else:
        first = client.responses.create(input="ponder this [[think]]", **ask)  # type: ignore[arg-type]
    reasoning = next(item for item in first.output if item.type == "reasoning")
    assert reasoning.summary[0].text == "Thinking about: ponder this"
    assert reasoning.encrypted_content
    assert fake_upstream.requests[0].body["thinking"]["type"] == "enabled"

    fake_upstream.clear()
    history = [
        {"role": "user", "content": "ponder this"},
        reasoning.model_dump(exclude_none=True),
        {"role": "assistant", "content": [{"type": "output_text", "text": first.output_text}]},
        {"role": "user", "content": "and now?"},
    ]
    second = client.responses.create(input=history, **ask)  # type: ignore[arg-type]
    assert second.output_text == "Echo: and now?"
    sent = fake_upstream.requests[0].body["messages"][1]["content"]
    assert sent[0]["type"] == "thinking"
    assert sent[0]["thinking"] == "Thinking about: ponder this"
    carried = base64.urlsafe_b64decode(reasoning.encrypted_content.split(":")[-1]).decode()
    assert sent[0]["signature"].startswith("sig_")
    assert sent[0]["signature"] in carried


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_openai_reasoning_through_a_messages_client(gateway: Gateway, team, fake_upstream: FakeUpstream, stream: bool):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        ask = {"model": "fake-codex", "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2048}}
        if stream:
            with claude.messages.stream(messages=[{"role": "user", "content": "ponder this [[think]]"}], **ask) as s:
                first = s.get_final_message()
        else:
            first = claude.messages.create(messages=[{"role": "user", "content": "ponder this [[think]]"}], **ask)
        thinking = next(block for block in first.content if block.type == "thinking")
        assert thinking.thinking == "Thinking about: ponder this"
        assert thinking.signature
        assert fake_upstream.requests[0].body["reasoning"] == {"effort": "low", "summary": "auto"}

        fake_upstream.clear()
        history = [
            {"role": "user", "content": "ponder this"},
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": "and now?"},
        ]
        second = claude.messages.create(messages=history, **ask)  # type: ignore[arg-type]
        assert second.content[-1].text == "Echo: and now?"  # the fake Responses API verified its own reasoning
        items = fake_upstream.requests[0].body["input"]
        (reasoning,) = [item for item in items if item["type"] == "reasoning"]
        assert reasoning["encrypted_content"].startswith("gAAAA")

        forged = [
            *history[:1],
            {
                "role": "assistant",
                "content": [{**history[1]["content"][0], "signature": "forged"}, *history[1]["content"][1:]],
            },
            history[2],
        ]
        fake_upstream.clear()
        claude.messages.create(messages=forged, **ask)  # type: ignore[arg-type]
        sent = fake_upstream.requests[0].body["input"]
        assert not [i for i in sent if i["type"] == "reasoning"]  # not OpenAI's: left out
