"""Prove the fake upstream's Azure OpenAI endpoints faithful: the official ``openai.AzureOpenAI``
client, pointed straight at the fake (``azure_endpoint``, ``api_version``, ``api_key`` or an Entra
token), gets its chat completions (plain, streamed, a tool call), responses and embeddings, sends
them to Azure's URLs with Azure's headers, and reads Azure's 401 and 404 as the errors they are."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletionToolParam

from tests.support import plain_http
from tests.support.fake_azure import BAD_KEY, ENTRA_TOKEN
from tests.support.fake_upstream import FakeUpstream

KEY = "azure-resource-key"
VERSION = "2024-10-21"
DEPLOYMENT = "gpt-4o-prod"
LOOKUP: ChatCompletionToolParam = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key=KEY) as f:
        yield f


def azure(fake: FakeUpstream, **auth: str) -> openai.AzureOpenAI:
    endpoint = f"http://{fake.host}:{fake.port}"
    return openai.AzureOpenAI(azure_endpoint=endpoint, api_version=VERSION, max_retries=0, timeout=10, **auth)


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.AzureOpenAI]:
    fake.clear()
    with azure(fake, api_key=KEY) as c:
        yield c


def test_chat_goes_to_the_deployment_with_the_version_and_the_key(client: openai.AzureOpenAI, fake: FakeUpstream):
    answer = client.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "hello azure"}])
    assert answer.choices[0].message.content == "Echo: hello azure"
    assert answer.model == DEPLOYMENT
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 3
    (sent,) = fake.requests
    assert sent.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert sent.query == f"api-version={VERSION}"
    assert sent.headers["api-key"] == KEY
    assert "authorization" not in sent.headers


def test_a_stream_with_usage_and_a_tool_call(client: openai.AzureOpenAI):
    chunks = list(
        client.chat.completions.create(
            model=DEPLOYMENT,
            messages=[{"role": "user", "content": "find it [[tool:lookup]]"}],
            tools=[LOOKUP],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    calls = [call for c in chunks for choice in c.choices for call in choice.delta.tool_calls or []]
    assert calls[0].function is not None
    assert calls[0].function.name == "lookup"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens > 0


def test_responses_go_to_the_resource_with_the_deployment_in_the_body(client: openai.AzureOpenAI, fake: FakeUpstream):
    response = client.responses.create(model=DEPLOYMENT, input="hello big world")
    assert response.output_text == "Echo: hello big world"
    assert response.usage is not None
    assert response.usage.output_tokens == 4
    (sent,) = fake.requests
    assert (sent.path, sent.query, sent.body["model"]) == ("/openai/responses", f"api-version={VERSION}", DEPLOYMENT)


def test_embeddings_go_to_the_deployment(client: openai.AzureOpenAI, fake: FakeUpstream):
    vectors = client.embeddings.create(model="text-embedding-prod", input=["one two three"])
    assert len(vectors.data[0].embedding) == 1536
    assert vectors.usage.prompt_tokens == 3
    (sent,) = fake.requests
    assert sent.path == "/openai/deployments/text-embedding-prod/embeddings"


def test_an_entra_token_is_sent_as_a_bearer_and_accepted(fake: FakeUpstream):
    fake.clear()
    with azure(fake, azure_ad_token=ENTRA_TOKEN) as c:
        answer = c.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Echo: hi"
    (sent,) = fake.requests
    assert sent.headers["authorization"] == f"Bearer {ENTRA_TOKEN}"
    assert "api-key" not in sent.headers


@pytest.mark.parametrize("auth", [{"api_key": "not-the-key"}, {"azure_ad_token": "expired-token"}])
def test_a_wrong_key_or_token_is_azures_401(fake: FakeUpstream, auth: dict[str, str]):
    with azure(fake, **auth) as c, pytest.raises(openai.AuthenticationError) as refused:
        c.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "hi"}])
    assert refused.value.status_code == 401
    error = refused.value.body
    assert isinstance(error, dict)
    assert error["code"] == "401"
    assert "type" not in error
    if "api_key" in auth:
        assert error["message"] == BAD_KEY


@pytest.mark.parametrize(
    "url",
    [
        f"/openai/deployments/{DEPLOYMENT}/chat/completions",  # no api-version
        f"/openai/chat/completions?api-version={VERSION}",  # OpenAI's path, not a deployment's
        f"/v1/deployments/{DEPLOYMENT}/chat/completions?api-version={VERSION}",
    ],
)
def test_a_missing_version_or_an_unknown_path_is_azures_404(fake: FakeUpstream, url: str):
    body = {"model": DEPLOYMENT, "messages": [{"role": "user", "content": "hi"}]}
    answer = plain_http.post(f"http://{fake.host}:{fake.port}{url}", json=body, headers={"api-key": KEY})
    assert answer.status_code == 404
    if url.startswith("/openai/"):
        assert answer.json() == {"error": {"code": "404", "message": "Resource not found"}}


def test_an_unsupported_version_is_a_400(fake: FakeUpstream):
    with (
        openai.AzureOpenAI(
            azure_endpoint=f"http://{fake.host}:{fake.port}", api_version="latest", api_key=KEY, max_retries=0
        ) as c,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        c.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "hi"}])
    assert refused.value.body == {"code": "BadRequest", "message": "API version not supported"}
