"""Every inbound protocol × every upstream kind, plain and streaming, with the official SDKs."""

from __future__ import annotations

from decimal import Decimal

import anthropic
import openai
import pytest

from tests.support.gateway import Gateway

MODELS = {"fake-gpt": "openai", "fake-codex": "openai-responses", "fake-claude": "anthropic", "demo-gpt": "demo"}
PROMPT = "matrix check"


def expected_text(model: str) -> str:
    return ("Hello from the Tollgate demo model. You said: " if model == "demo-gpt" else "Echo: ") + PROMPT


def chat(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, dict]:
    messages = [{"role": "user", "content": PROMPT}]
    if not stream:
        c = client.chat.completions.create(model=model, messages=messages)
        return c.choices[0].message.content, c.usage.model_extra
    with client.chat.completions.stream(model=model, messages=messages, stream_options={"include_usage": True}) as s:
        c = s.get_final_completion()
    return c.choices[0].message.content, c.usage.model_extra


def responses(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, dict]:
    if not stream:
        r = client.responses.create(model=model, input=PROMPT)
    else:
        with client.responses.stream(model=model, input=PROMPT) as s:
            r = s.get_final_response()
    return r.output_text, r.usage.model_extra


def messages(claude: anthropic.Anthropic, model: str, stream: bool) -> tuple[str, dict]:
    args = {"model": model, "max_tokens": 200, "messages": [{"role": "user", "content": PROMPT}]}
    if not stream:
        m = claude.messages.create(**args)
        return m.content[0].text, m.usage.model_extra
    with claude.messages.stream(**args) as s:
        delta = [e for e in s if e.type == "message_delta"][-1]
        m = s.get_final_message()
    return m.content[0].text, delta.usage.model_extra


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("model", list(MODELS), ids=list(MODELS.values()))
@pytest.mark.parametrize("endpoint", [chat, responses, messages], ids=["chat", "responses", "messages"])
def test_every_endpoint_on_every_upstream(gateway: Gateway, teams, endpoint, model, stream):
    team = teams.open("10")
    with (
        anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0)
        if endpoint is messages
        else openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
    ) as client:
        text, extra = endpoint(client, model, stream)
    assert text == expected_text(model)
    cost, remaining = Decimal(str(extra["cost"]["credits"])), Decimal(str(extra["remaining"]["credits"]))
    assert cost > 0
    assert remaining == 10 - cost


def test_an_upstream_rate_limit_is_a_429_in_the_messages_shape(gateway: Gateway, team):
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        for model in ("fake-gpt", "fake-claude"):
            with pytest.raises(anthropic.RateLimitError) as error:
                claude.messages.create(
                    model=model, max_tokens=10, messages=[{"role": "user", "content": "x [[fail:429]]"}]
                )
            assert error.value.body["error"]["type"] == "rate_limit_error"
            assert error.value.response.headers["retry-after"] == "1"
