"""Every client wire against `vertex` deployments on the fake Vertex AI, through real sockets with the
official SDKs, configured by the recipe in docs/vertex.md: Claude through ``rawPredict`` (Messages
clients passed through, the others translated) and Gemini through ``generateContent`` (Gemini
clients passed through), every request carrying a service account's token from the fake's token
endpoint, refreshed before it expires, and each answer's reported cost equal to its ledger charge."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from tests.support.agents import docs_block
from tests.support.charges import charged, reported
from tests.support.fake_upstream import FakeUpstream
from tests.support.fake_vertex import PROJECT, REGION, TOKENS, service_account_file
from tests.support.gateway import GATEWAY_ENV, Gateway, tollgate_command, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

HI = [{"role": "user", "content": "hello there gateway"}]
CLAUDE_PATH = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/claude-sonnet-4@20250514"
GEMINI_PATH = f"/v1/projects/{PROJECT}/locations/global/publishers/google/models/gemini-2.5-pro"


def config_with_vertex(directory: Path, fake: FakeUpstream) -> Path:
    """The recipe, as written, pointed at the fake: its endpoint, project and key file."""
    config = write_config(directory, fake.base_url)
    key = service_account_file(directory / "vertex-sa.json", fake.anthropic_base_url + "/token")
    recipe = docs_block("vertex.md", "vertex-config").replace("/etc/tollgate/vertex-sa.json", str(key))
    recipe = recipe.replace('project = "my-project"', f'project = "{PROJECT}", base_url = "{fake.anthropic_base_url}"')
    config.write_text(config.read_text() + "\n" + recipe)
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(config_with_vertex(tmp_path_factory.mktemp("vertex"), fake_upstream))


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def vertex_calls(fake: FakeUpstream) -> list[Any]:
    calls = [r for r in fake.requests if r.path.startswith("/v1/projects/")]
    assert all(r.headers["authorization"].startswith("Bearer ya29.fake-") for r in calls)
    return calls


def test_a_messages_client_is_passed_through_to_raw_predict(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        message = claude.messages.create(
            model="claude-sonnet-vertex", max_tokens=100, messages=HI, extra_headers={"anthropic-beta": "tools-2024"}
        )
    assert message.content[0].text == "Echo: hello there gateway"  # type: ignore[union-attr]
    assert message.model == "claude-sonnet-vertex"
    (sent,) = vertex_calls(fake_upstream)
    assert sent.path == CLAUDE_PATH + ":rawPredict"
    assert sent.body["anthropic_version"] == "vertex-2023-10-16"
    assert "model" not in sent.body
    assert sent.headers["anthropic-beta"] == "tools-2024"
    assert [reported(message.usage)] == charged(gateway, team)


def test_a_chat_client_streams_translated_and_calls_a_tool(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    tools: Any = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    ask: Any = [{"role": "user", "content": 'find it [[tool:lookup {"word": "toll"}]]'}]
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        first = client.chat.completions.create(model="claude-sonnet-vertex", messages=ask, tools=tools)
        (call,) = first.choices[0].message.tool_calls or []
        history: Any = [
            *ask,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "a fee for passing"},
        ]
        stream = client.chat.completions.create(
            model="claude-sonnet-vertex",
            messages=history,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: tool result: a fee for passing"
    assert [r.path for r in vertex_calls(fake_upstream)] == [
        CLAUDE_PATH + ":rawPredict",
        CLAUDE_PATH + ":streamRawPredict",
    ]
    assert [reported(first.usage), reported(chunks[-1].usage)] == charged(gateway, team)


def test_a_gemini_client_is_passed_through_to_generate_content(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=gateway.root_url))
    chunks = list(client.models.generate_content_stream(model="gemini-pro-vertex", contents="hello there gateway"))
    assert "".join(c.text or "" for c in chunks) == "Echo: hello there gateway"
    (sent,) = vertex_calls(fake_upstream)
    assert sent.path == GEMINI_PATH + ":streamGenerateContent"
    assert sent.body == {"contents": [{"parts": [{"text": "hello there gateway"}], "role": "user"}]}
    assert len(charged(gateway, team)) == 1


def test_a_responses_client_is_translated_to_gemini(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        answer = client.responses.create(model="gemini-pro-vertex", input="hello there gateway")
    assert answer.output_text == "Echo: hello there gateway"
    assert [reported(answer.usage)] == charged(gateway, team)


def test_a_token_about_to_expire_is_refreshed_before_a_request_leaves(tmp_path: Path, fake_upstream: FakeUpstream):
    """google-auth counts a token as expired 225 s early: one that lives 227 s is fresh for 2 s, so a
    gateway whose tokens live that long must fetch a new one for a request more than 2 s later."""
    TOKENS.lifetime = 227
    try:
        gw = Gateway(config_with_vertex(tmp_path, fake_upstream)).start()
        try:
            own = Teams(gw.config)
            team = own.open("100")
            with anthropic.Anthropic(base_url=gw.root_url, api_key=team.key, max_retries=0) as claude:
                for _ in range(3):
                    claude.messages.create(model="claude-sonnet-vertex", max_tokens=50, messages=HI)
                    time.sleep(2.2)
            assert len(charged(gw, team)) == 3  # no request failed for a stale token
            own.close()
        finally:
            gw.stop()
    finally:
        TOKENS.lifetime = 3600
    assert len([r for r in fake_upstream.requests if r.path == "/token"]) == 3  # one token per request
    assert len({r.headers["authorization"] for r in vertex_calls(fake_upstream)}) == 3


def test_serve_refuses_to_start_without_usable_credentials(tmp_path: Path, fake_upstream: FakeUpstream):
    config = config_with_vertex(tmp_path, fake_upstream)
    (tmp_path / "vertex-sa.json").unlink()
    result = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **GATEWAY_ENV},
    )
    assert result.returncode == 2
    assert ".upstream.credentials_file: no usable Google credentials" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("directive", "status", "told"),
    [("[[fail:429]]", 429, "Quota exceeded for aiplatform"), ("[[fail:503]]", 503, "fake upstream failure 503")],
)
def test_a_vertex_refusal_reaches_each_client_in_its_own_shape_and_charges_nothing(
    gateway: Gateway, team: Team, directive: str, status: int, told: str
):
    """rawPredict's 429 (Vertex's quota, in Google's shape) and 5xx (Anthropic's) are handled as every kind's
    are: the status kept, the message told, nothing charged."""
    ask: Any = [{"role": "user", "content": f"hello {directive}"}]
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    with claude, pytest.raises(anthropic.APIStatusError) as refused:
        claude.messages.create(model="claude-sonnet-vertex", max_tokens=50, messages=ask)
    assert refused.value.status_code == status
    assert told in refused.value.message
    client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
    with client, pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="claude-sonnet-vertex", messages=ask, stream=True)
    assert failed.value.status_code == status
    assert told in failed.value.message
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_a_responses_client_streams_from_claude_on_vertex(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        events = list(client.responses.create(model="claude-sonnet-vertex", input="hello there gateway", stream=True))
    (done,) = [e for e in events if e.type == "response.completed"]
    assert done.response.output_text == "Echo: hello there gateway"
    assert [r.path for r in vertex_calls(fake_upstream)] == [CLAUDE_PATH + ":streamRawPredict"]
    assert [reported(done.response.usage)] == charged(gateway, team)
