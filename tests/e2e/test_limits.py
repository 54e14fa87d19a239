"""Output limits above what a model can produce are refused before anything is held or sent."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_chat_refuses_more_output_than_the_model_has(client: openai.OpenAI, fake_upstream: FakeUpstream, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="fake-gpt", messages=HI, **{param: 1025})  # fake-gpt: 1024
    body = error.value.response.json()["error"]
    assert body["param"] == param
    assert "at most 1024" in body["message"]
    client.chat.completions.create(model="fake-gpt", messages=HI, **{param: 1024})
    assert len(fake_upstream.requests) == 1


def test_responses_and_messages_refuse_it_in_their_own_shapes(gateway: Gateway, team, client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model="demo-gpt", input="hi", max_output_tokens=257)  # demo-gpt: 256
    assert error.value.response.json()["error"]["param"] == "max_output_tokens"
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.messages.create(model="fake-claude", max_tokens=4097, messages=HI)  # fake-claude: 4096
        assert refused.value.body["error"]["type"] == "invalid_request_error"
        assert "4096" in refused.value.body["error"]["message"]


def test_an_upstream_that_does_not_answer_in_time_is_a_504_that_charges_nothing(gateway: Gateway, team):
    from tests.support.charges import balance_of

    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:  # slow-gpt's read timeout is 1 s
            client.chat.completions.create(
                model="slow-gpt", messages=[{"role": "user", "content": "x [[latency:2500]]"}]
            )
        assert error.value.status_code == 504
        assert error.value.response.headers["x-should-retry"] == "true"
        assert balance_of(gateway, team.name) == 100


def test_should_retry_is_said_deliberately(gateway: Gateway, team, client: openai.OpenAI):

    def retry_header(body: dict) -> tuple[int, str]:
        r = plain_http.post(
            gateway.base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {team.key}"}
        )
        return r.status_code, r.headers["x-should-retry"]

    def failing_with(status: int) -> dict:
        return {"model": "fake-gpt", "messages": [{"role": "user", "content": f"x [[fail:{status}]]"}]}

    assert retry_header({"model": "fake-gpt"}) == (400, "false")
    assert retry_header({"model": "nope", "messages": HI}) == (404, "false")
    assert retry_header(failing_with(429)) == (429, "true")
    assert retry_header(failing_with(500)) == (500, "true")
    assert retry_header({"model": "dead-gpt", "messages": HI}) == (502, "true")
    assert retry_header({"model": "fake-gpt", "messages": HI, "max_tokens": 5000}) == (400, "false")
