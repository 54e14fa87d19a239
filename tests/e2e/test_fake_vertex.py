"""The fake Vertex AI (tests/support/fake_vertex.py) answers as Google's does: Anthropic's own
``AnthropicVertex`` client and Google's ``genai.Client(vertexai=True)``, given a service account whose
tokens come from the fake's token endpoint, generate and stream through it; a request with an
expired or unknown token is Google's 401. What the gateway is tested against is only as faithful as this."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from google import genai
from google.genai import types
from google.oauth2 import service_account

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.fake_vertex import PROJECT, REGION, TOKENS, service_account_file

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@pytest.fixture
def credentials(tmp_path: Path, fake_upstream: FakeUpstream) -> Any:
    path = service_account_file(tmp_path / "sa.json", fake_upstream.anthropic_base_url + "/token")
    return service_account.Credentials.from_service_account_file(str(path), scopes=SCOPES)


@pytest.fixture
def claude(fake_upstream: FakeUpstream, credentials: Any) -> Iterator[anthropic.AnthropicVertex]:
    base = fake_upstream.anthropic_base_url + "/v1"
    with anthropic.AnthropicVertex(
        region=REGION, project_id=PROJECT, base_url=base, credentials=credentials, max_retries=0
    ) as client:
        yield client


def test_anthropic_vertex_creates_a_message(claude: anthropic.AnthropicVertex, fake_upstream: FakeUpstream):
    message = claude.messages.create(
        model="claude-sonnet-4@20250514", max_tokens=50, messages=[{"role": "user", "content": "hello there"}]
    )
    assert message.content[0].text == "Echo: hello there"  # type: ignore[union-attr]
    (sent,) = [r for r in fake_upstream.requests if r.path.startswith("/v1/projects/")]
    assert (
        sent.path
        == f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"
    )
    assert sent.headers["authorization"].startswith("Bearer ya29.fake-")


def test_anthropic_vertex_streams(claude: anthropic.AnthropicVertex):
    with claude.messages.stream(
        model="claude-sonnet-4@20250514", max_tokens=50, messages=[{"role": "user", "content": "hello there"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Echo: hello there"
    assert final.usage.output_tokens > 0


def test_anthropic_vertex_reads_vertexs_quota_refusal_as_a_rate_limit(claude: anthropic.AnthropicVertex):
    with pytest.raises(anthropic.RateLimitError) as refused:
        claude.messages.create(
            model="claude-sonnet-4@20250514", max_tokens=50, messages=[{"role": "user", "content": "hi [[fail:429]]"}]
        )
    error: Any = refused.value.body
    assert error["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "Quota exceeded" in error["error"]["message"]


def test_genai_in_vertex_mode_generates_and_streams(fake_upstream: FakeUpstream, credentials: Any):
    client = genai.Client(
        vertexai=True,
        project=PROJECT,
        location=REGION,
        credentials=credentials,
        http_options=types.HttpOptions(base_url=fake_upstream.anthropic_base_url, api_version="v1"),
    )
    answer = client.models.generate_content(model="gemini-2.5-pro", contents="hello there")
    assert answer.text == "Echo: hello there"
    chunks = list(client.models.generate_content_stream(model="gemini-2.5-pro", contents="hello there"))
    assert "".join(c.text or "" for c in chunks) == "Echo: hello there"
    paths = [r.path for r in fake_upstream.requests if r.path.startswith("/v1/projects/")]
    assert (
        paths[0] == f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/google/models/gemini-2.5-pro:generateContent"
    )


def test_an_expired_or_unknown_token_is_refused(fake_upstream: FakeUpstream, credentials: Any):
    TOKENS.lifetime = 0  # the next token issued is already expired
    try:
        from google.auth.transport.requests import Request

        credentials.refresh(Request())
    finally:
        TOKENS.lifetime = 3600
    where = f"projects/{PROJECT}/locations/{REGION}"
    url = f"{fake_upstream.anthropic_base_url}/v1/{where}/publishers/google/models/g:generateContent"
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    for token in (credentials.token, "ya29.made-up"):
        answer = plain_http.post(url, json=body, headers={"authorization": f"Bearer {token}"})
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
