"""Every client wire against `azure-openai` deployments on the fake upstream's Azure endpoints, through
real sockets with the official SDKs: Azure's URLs, `api-version` and `api-key` (or an Entra token)
reach the fake, and each answer's reported cost is its ledger charge to the micro-credit.

Prices (100 credits per USD): azure-gpt as fake-gpt, $2.5/M input and $10/M output, so a request of
6 prompt and 4 output tokens costs (6 × 2.5 + 4 × 10) × 100 = 5,500 micro-credits; azure-codex
$1.25/M input and $10/M output, so 6 and 4 cost (6 × 1.25 + 4 × 10) × 100 = 4,750; azure-embedding
$0.135/M input, so 7 tokens cost 7 × 13.5 = 94.5, rounded up once to 95."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionToolParam

from tests.support.charges import HELLO, charged, reported
from tests.support.fake_azure import ENTRA_TOKEN
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

VERSION = "2024-10-21"
LOOKUP: ChatCompletionToolParam = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}
SEVEN = "one two three four five six seven"


def _azure_model(model_id: str, root: str, deployment: str, pricing: str, **extra: str) -> str:
    endpoints = '["embeddings"]' if "embedding" in model_id else '["chat.completions", "responses", "messages"]'
    fields = {"kind": "azure-openai", "base_url": root, "api_version": VERSION, "api_key_env": "UPSTREAM_KEY"}
    upstream = ", ".join(f'{k} = "{v}"' for k, v in {**fields, "model": deployment, **extra}.items())
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "azure"
context_window = 8192
max_output_tokens = 1024
endpoints = {endpoints}
pricing = {pricing}
upstream = {{{upstream}}}
"""


def config_with_azure(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    gpt = "{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}"
    codex = "{input = 1.25, output = 10, cache_create = 1.25, cache_hit = 0.125}"
    models = [
        _azure_model("azure-gpt", root, "gpt-4o-prod", gpt),
        _azure_model("azure-codex", root, "codex-prod", codex, api="responses"),
        _azure_model("azure-embedding", root, "embedding-prod", "{input = 0.135}"),
        _azure_model("azure-entra", root, "gpt-4o-prod", gpt, auth="entra", api_key_env="AZURE_ENTRA_TOKEN"),
        _azure_model("azure-wrong-key", root, "gpt-4o-prod", gpt, api_key_env="AZURE_WRONG_KEY"),
    ]
    config.write_text(config.read_text() + "".join(models))
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = config_with_azure(tmp_path_factory.mktemp("azure"), fake_upstream.base_url)
    yield from verified_gateway(config, {"AZURE_ENTRA_TOKEN": ENTRA_TOKEN, "AZURE_WRONG_KEY": "not-the-resource-key"})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def azure_call(fake: FakeUpstream) -> Any:
    (sent,) = fake.requests
    assert sent.query == f"api-version={VERSION}"
    return sent


def test_chat_reaches_the_deployment_with_the_key_and_is_charged_what_it_reports(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    completion = client.chat.completions.create(model="azure-gpt", messages=HELLO)
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert completion.model == "azure-gpt"
    sent = azure_call(fake_upstream)
    assert sent.path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert sent.headers["api-key"] == UPSTREAM_KEY
    assert "authorization" not in sent.headers
    assert reported(completion.usage) == 5500
    assert charged(gateway, team) == [5500]


def test_a_stream_with_a_tool_call_asks_azure_for_usage(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    stream = client.chat.completions.create(
        model="azure-gpt",
        messages=[{"role": "user", "content": "find it [[tool:lookup]]"}],
        tools=[LOOKUP],
        stream=True,
    )
    chunks = list(stream)
    calls = [call for c in chunks for choice in c.choices for call in choice.delta.tool_calls or []]
    assert calls[0].function is not None
    assert calls[0].function.name == "lookup"
    sent = azure_call(fake_upstream)
    assert sent.body["stream_options"] == {"include_usage": True}
    # the fake counts "find it [[tool:lookup]]" as 3 words + 3 = 6 prompt tokens, and the call's arguments
    # {"echo":"find it"} as 2 + 3 = 5 output tokens: (6 × 2.5 + 5 × 10) × 100
    assert charged(gateway, team) == [6500]


def test_a_stream_reports_its_cost_in_the_usage_chunk(gateway: Gateway, team: Team, client: openai.OpenAI):
    stream = client.chat.completions.create(
        model="azure-gpt", messages=HELLO, stream=True, stream_options={"include_usage": True}
    )
    final = list(stream)[-1]
    assert reported(final.usage) == 5500
    assert charged(gateway, team) == [5500]


def test_responses_pass_through_to_the_resource(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    response = client.responses.create(model="azure-codex", input="hello there gateway")
    assert response.output_text == "Echo: hello there gateway"
    sent = azure_call(fake_upstream)
    assert (sent.path, sent.body["model"]) == ("/openai/responses", "codex-prod")
    assert reported(response.usage) == 4750
    assert charged(gateway, team) == [4750]


def test_responses_on_a_chat_deployment_are_translated(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    response = client.responses.create(model="azure-gpt", input="hello there gateway")
    assert response.output_text == "Echo: hello there gateway"
    assert azure_call(fake_upstream).path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert reported(response.usage) == 5500
    assert charged(gateway, team) == [5500]


def test_embeddings_reach_the_deployment(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    vectors = client.embeddings.create(model="azure-embedding", input=SEVEN)
    assert vectors.usage.prompt_tokens == 7
    assert azure_call(fake_upstream).path == "/openai/deployments/embedding-prod/embeddings"
    assert reported(vectors.usage) == 95
    assert charged(gateway, team) == [95]


def test_messages_are_translated_to_the_deployments_chat(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    message = claude.messages.create(model="azure-gpt", max_tokens=100, messages=HELLO)  # type: ignore[arg-type]
    assert message.content[0].type == "text"
    assert message.content[0].text == "Echo: hello there gateway"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 4)
    sent = azure_call(fake_upstream)
    assert sent.path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert sent.body["messages"] == [{"role": "user", "content": "hello there gateway"}]
    assert reported(message.usage) == 5500
    assert charged(gateway, team) == [5500]


def test_an_entra_token_goes_as_a_bearer(gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream):
    completion = client.chat.completions.create(model="azure-entra", messages=HELLO)
    sent = azure_call(fake_upstream)
    assert sent.headers["authorization"] == f"Bearer {ENTRA_TOKEN}"
    assert "api-key" not in sent.headers
    assert reported(completion.usage) == 5500
    assert charged(gateway, team) == [5500]


def test_a_wrong_key_is_an_openai_error_and_charges_nothing(gateway: Gateway, team: Team, client: openai.OpenAI):
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="azure-wrong-key", messages=HELLO)
    assert failed.value.status_code == 502
    error = failed.value.body
    assert isinstance(error, dict)
    assert error["type"] == "server_error"
    assert error["message"] == "The upstream provider rejected the gateway's credentials."
    assert charged(gateway, team) == []
    assert "balance 100 " in gateway.wait_until_nothing_held(team.name)


def test_a_wrong_key_is_an_anthropic_error_to_a_messages_client(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic
):
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude.messages.create(model="azure-wrong-key", max_tokens=100, messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["type"] == "error"
    assert failed.value.body["error"]["message"] == "The upstream provider rejected the gateway's credentials."
    assert charged(gateway, team) == []


def test_a_streamed_message_with_a_tool_use_is_translated_and_charged_what_it_reports(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    tool = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
    with claude.messages.stream(
        model="azure-gpt",
        max_tokens=100,
        messages=[{"role": "user", "content": "find it [[tool:lookup]]"}],
        tools=[tool],  # type: ignore[list-item]
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "tool_use"
    assert final.content[0].input == {"echo": "find it"}
    assert azure_call(fake_upstream).body["stream_options"] == {"include_usage": True}
    (delta,) = [e for e in events if e.type == "message_delta"]
    # as the chat stream's tool call: 6 prompt and 5 output tokens, (6 × 2.5 + 5 × 10) × 100
    assert reported(delta.usage) == 6500
    assert charged(gateway, team) == [6500]


def test_chat_and_messages_are_translated_for_a_responses_deployment(
    gateway: Gateway, team: Team, client: openai.OpenAI, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    completion = client.chat.completions.create(model="azure-codex", messages=HELLO)
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert (azure_call(fake_upstream).path, fake_upstream.requests[0].body["model"]) == (
        "/openai/responses",
        "codex-prod",
    )
    fake_upstream.clear()
    message = claude.messages.create(model="azure-codex", max_tokens=100, messages=HELLO)  # type: ignore[arg-type]
    assert message.content[0].type == "text"
    assert message.content[0].text == "Echo: hello there gateway"
    assert azure_call(fake_upstream).path == "/openai/responses"
    # each: the input message 3 + 3 = 6 tokens in, 4 out, at azure-codex's price
    assert [reported(completion.usage), reported(message.usage)] == [4750, 4750]
    assert charged(gateway, team) == [4750, 4750]
