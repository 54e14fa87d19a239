"""Every client wire against a `gemini` deployment on the fake Gemini API, through real sockets with
the official SDKs: a Gemini client passed through (its body as it wrote it, the model in the URL, the
key as ``x-goog-api-key``), Chat Completions, Messages and Responses clients translated, plain and
streamed, a function call round trip, and each answer's reported cost equal to its ledger charge;
a deployment answering Google's 429 failed over to the next, a 400 reaching each client in its own
wire's error shape with nothing charged.

Prices (100 credits per USD): gemini-pro at $1.25/M input and $10/M output (Gemini 2.5 Pro's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from tests.support import plain_http
from tests.support.agents import docs_block
from tests.support.charges import charged, reported
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import FIRST, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

HI = [{"role": "user", "content": "hello there gateway"}]
LOOKUP_FN = {"name": "lookup", "description": "Look a word up", "parameters": {"type": "object", "properties": {}}}


def config_with_gemini(directory: Path, upstream_base_url: str) -> Path:
    """The gateway's test configuration and the recipe in docs/gemini.md, as written, pointed at the
    fake (its ``base_url``) with the fake's key in the variable the recipe names."""
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    recipe = docs_block("gemini.md", "gemini-config")
    recipe = recipe.replace('kind = "gemini",', f'kind = "gemini", base_url = "{root}",')
    config.write_text(config.read_text() + "\n" + recipe + _twin(root))
    return config


def _twin(root: str) -> str:
    """gemini-twin: a deployment answering 429 (Google's RESOURCE_EXHAUSTED) tried first, then one that works."""
    key = 'api_key_env = "GEMINI_API_KEY"'
    busy = f'{{kind = "gemini", base_url = "{root}/status/429", {key}, model = "gemini-busy", weight = {FIRST}}}'
    free = f'{{kind = "gemini", base_url = "{root}", {key}, model = "gemini-free"}}'
    return f"""
[[models]]
id = "gemini-twin"
display_name = "Gemini twin"
owned_by = "google"
context_window = 1000000
max_output_tokens = 8192
pricing = {{input = 1.25, output = 10, cache_create = 1.25, cache_hit = 0.31}}
upstreams = [{busy}, {free}]
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = config_with_gemini(tmp_path_factory.mktemp("gemini"), fake_upstream.base_url)
    yield from verified_gateway(config, {"GEMINI_API_KEY": "upstream-secret"})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def cost_of(usage: dict[str, Any]) -> int:
    return round(float(usage["cost"]["credits"]) * 1_000_000)


def gemini_call(fake: FakeUpstream, method: str = "generateContent") -> Any:
    (sent,) = [r for r in fake.requests if r.path.startswith("/v1beta/")]
    assert sent.path == f"/v1beta/models/gemini-2.5-pro:{method}"
    assert sent.headers["x-goog-api-key"] == "upstream-secret"
    assert not {"model", "stream", "alt"} & set(sent.body)
    return sent


def test_a_gemini_client_is_passed_through_and_charged_what_it_reports(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    body = {"contents": [{"role": "user", "parts": [{"text": "hello there gateway"}]}], "labels": {"team": "x"}}
    answer = plain_http.post(
        f"{gateway.root_url}/v1beta/models/gemini-pro:generateContent",
        json=body,
        headers={"x-goog-api-key": team.key},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    raw = answer.json()
    assert raw["candidates"][0]["content"]["parts"] == [{"text": "Echo: hello there gateway"}]
    assert raw["modelVersion"] == "gemini-2.5-pro"  # Google's answer, as Google wrote it
    assert gemini_call(fake_upstream).body == body  # as the client wrote it
    usage = raw["usageMetadata"]
    assert (usage["promptTokenCount"], usage["candidatesTokenCount"]) == (3, 4)
    assert cost_of(usage) == charged(gateway, team)[0] == round((3 * 1.25 + 4 * 10) * 100)


def test_the_genai_sdk_streams_through_and_the_last_chunk_carries_the_cost(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=gateway.root_url))
    chunks = list(client.models.generate_content_stream(model="gemini-pro", contents="hello there gateway"))
    assert "".join(c.text or "" for c in chunks) == "Echo: hello there gateway"
    gemini_call(fake_upstream, "streamGenerateContent")
    raw = plain_http.post(
        f"{gateway.root_url}/v1beta/models/gemini-pro:streamGenerateContent?alt=sse",
        json={"contents": [{"parts": [{"text": "hello there gateway"}]}]},
        headers={"x-goog-api-key": team.key},
        timeout=30,
    )
    frames = [json.loads(line[6:]) for line in raw.text.splitlines() if line.startswith("data: ")]
    assert frames[-1]["candidates"][0]["finishReason"] == "STOP"
    first, second = charged(gateway, team)
    assert cost_of(frames[-1]["usageMetadata"]) == second == first


def test_a_chat_client_is_translated_with_a_function_call_round_trip(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        tools: Any = [{"type": "function", "function": LOOKUP_FN}]
        ask = [{"role": "user", "content": 'find it [[tool:lookup {"word": "toll"}]]'}]
        first = client.chat.completions.create(model="gemini-pro", messages=ask, tools=tools)  # type: ignore[arg-type]
        (call,) = first.choices[0].message.tool_calls or []
        assert call.function.name == "lookup"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {"word": "toll"}  # type: ignore[union-attr]
        assert first.choices[0].finish_reason == "tool_calls"
        history: Any = [
            *ask,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "a fee for passing"},
        ]
        second = client.chat.completions.create(model="gemini-pro", messages=history, tools=tools)
        assert second.choices[0].message.content == "Echo: tool result: a fee for passing"
        costs = [reported(first.usage), reported(second.usage)]
    assert costs == charged(gateway, team)


def test_a_messages_client_streams_translated(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    with claude, claude.messages.stream(model="gemini-pro", max_tokens=100, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == "Echo: hello there gateway"  # type: ignore[union-attr]
    sent = gemini_call(fake_upstream, "streamGenerateContent")
    assert sent.body["generationConfig"]["maxOutputTokens"] == 100
    (delta,) = [e for e in events if e.type == "message_delta"]
    assert [reported(delta.usage)] == charged(gateway, team)


def test_a_responses_client_is_translated(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        answer = client.responses.create(model="gemini-pro", input="hello there gateway", instructions="Be brief.")
    assert answer.output_text == "Echo: hello there gateway"
    assert [reported(answer.usage)] == charged(gateway, team)


@pytest.mark.parametrize(("directive", "status"), [("[[fail:400]]", 400), ("[[fail:429]]", 429)])
def test_a_refusal_reaches_each_client_in_its_own_shape_and_charges_nothing(
    gateway: Gateway, team: Team, directive: str, status: int
):
    gemini = plain_http.post(
        f"{gateway.root_url}/v1beta/models/gemini-pro:generateContent",
        json={"contents": [{"parts": [{"text": f"hello {directive}"}]}]},
        headers={"x-goog-api-key": team.key},
        timeout=30,
    )
    assert gemini.status_code == status
    assert gemini.json()["error"]["code"] == status  # Google's word for word: passed through
    assert set(gemini.json()["error"]) == {"code", "message", "status"}  # no OpenAI type added to it
    assert "The fake was told to fail" in gemini.json()["error"]["message"]
    client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
    with client, pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="gemini-pro", messages=[{"role": "user", "content": directive}])
    assert raised.value.status_code == status
    assert "The fake was told to fail" in raised.value.message
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_a_busy_gemini_deployment_fails_over_to_the_next(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    with claude:
        message = claude.messages.create(model="gemini-twin", max_tokens=50, messages=HI)
    assert message.content[0].text == "Echo: hello there gateway"  # type: ignore[union-attr]
    assert [r.path for r in fake_upstream.requests] == [
        "/status/429/v1beta/models/gemini-busy:generateContent",
        "/v1beta/models/gemini-free:generateContent",
    ]
    assert [reported(message.usage)] == charged(gateway, team)  # charged once, by the deployment that answered


def test_a_messages_client_is_refused_in_anthropics_shape_and_charged_nothing(gateway: Gateway, team: Team):
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    with claude, pytest.raises(anthropic.BadRequestError) as raised:
        claude.messages.create(
            model="gemini-pro", max_tokens=50, messages=[{"role": "user", "content": "x [[fail:400]]"}]
        )
    assert raised.value.body["type"] == "error"  # type: ignore[index]
    assert raised.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "The fake was told to fail" in raised.value.message
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []
