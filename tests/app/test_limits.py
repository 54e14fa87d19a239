"""Output limits above what a model can produce are refused before anything is held or sent."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.gateway import Gateway

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_chat_refuses_more_output_than_the_model_has(client: openai.OpenAI, fake_upstream: FakeUpstream, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="fake-gpt", messages=HI, **{param: 1025})  # fake-gpt: 1024
    body = error.value.response.json()["error"]
    assert body["param"] == param and "at most 1024" in body["message"]
    client.chat.completions.create(model="fake-gpt", messages=HI, **{param: 1024})
    assert len(fake_upstream.requests) == 1


def test_responses_and_messages_refuse_it_in_their_own_shapes(gateway: Gateway, team, client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model="demo-gpt", input="hi", max_output_tokens=257)  # demo-gpt: 256
    assert error.value.response.json()["error"]["param"] == "max_output_tokens"
    claude = anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="fake-claude", max_tokens=4097, messages=HI)  # fake-claude: 4096
    assert refused.value.body["error"]["type"] == "invalid_request_error" and "4096" in refused.value.body["error"]["message"]
