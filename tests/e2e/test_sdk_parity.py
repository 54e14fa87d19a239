"""What the gateway sends each cloud provider, next to what the provider's own SDK sends for the same
conversation: the same path byte for byte (percent-encoding included), the same query, the same
authentication header, and a body of the same members (the gateway's may add what its client
asked for, such as ``stream``, and nothing the SDK would not send). The SDKs run straight against the
fakes (``AnthropicVertex``, ``google.genai.Client`` on the Gemini API and on Vertex,
``openai.AzureOpenAI``; boto3 and ``AnthropicBedrock`` in ``test_bedrock_upstream.py``); the gateway
is configured from the docs' recipes (``test_provider_matrix.py``) and an Azure deployment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types
from google.oauth2 import service_account

from tests.e2e.test_azure_upstream import VERSION, _azure_model
from tests.e2e.test_bedrock_upstream import AWS_ENV
from tests.e2e.test_provider_matrix import config_with_every_provider
from tests.support.fake_upstream import FakeUpstream, RecordedRequest
from tests.support.fake_vertex import PROJECT, service_account_file
from tests.support.gateway import UPSTREAM_KEY, Gateway, verified_gateway
from tests.support.teams import Team, Teams, teams_of

HI = "hello there gateway"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
#: The authentication header each provider reads.
AUTH = {"vertex": "authorization", "gemini": "x-goog-api-key", "azure": "api-key"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("parity")
    config = config_with_every_provider(directory, fake_upstream)
    gpt = "{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}"
    config.write_text(
        config.read_text() + _azure_model("parity-azure", fake_upstream.anthropic_base_url, "gpt-4o-prod", gpt)
    )
    yield from verified_gateway(config, {**AWS_ENV, "GEMINI_API_KEY": "upstream-secret"})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


@pytest.fixture
def google_credentials(tmp_path: Path, fake_upstream: FakeUpstream) -> Any:
    path = service_account_file(tmp_path / "sa.json", fake_upstream.anthropic_base_url + "/token")
    return service_account.Credentials.from_service_account_file(str(path), scopes=SCOPES)


def only(fake: FakeUpstream, prefix: str) -> RecordedRequest:
    (request,) = [r for r in fake.requests if r.path.startswith(prefix)]
    return request


def compare(
    fake: FakeUpstream, prefix: str, by_sdk: Callable[[], object], by_gateway: Callable[[], object]
) -> tuple[RecordedRequest, RecordedRequest]:
    fake.clear()
    by_sdk()
    sdk = only(fake, prefix)
    fake.clear()
    by_gateway()
    ours = only(fake, prefix)
    assert (ours.raw_path, ours.query) == (sdk.raw_path, sdk.query)
    assert set(ours.body) <= set(sdk.body) | {"stream"}, sorted(set(ours.body) - set(sdk.body))
    return sdk, ours


def test_claude_on_vertex_is_asked_as_anthropic_vertex_asks(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream, google_credentials: Any
):
    base = fake_upstream.anthropic_base_url + "/v1"
    with anthropic.AnthropicVertex(
        region="us-east5", project_id=PROJECT, base_url=base, credentials=google_credentials, max_retries=0
    ) as sdk_client:
        sdk, ours = compare(
            fake_upstream,
            "/v1/projects/",
            lambda: sdk_client.messages.create(
                model="claude-sonnet-4@20250514", max_tokens=50, messages=[{"role": "user", "content": HI}]
            ),
            lambda: claude.messages.create(
                model="claude-sonnet-vertex", max_tokens=50, messages=[{"role": "user", "content": HI}]
            ),
        )
    # Vertex's documented version; the SDK sends its own API version in the same member
    assert ours.body["anthropic_version"] == "vertex-2023-10-16"
    assert "anthropic_version" in sdk.body
    assert "model" not in ours.body
    assert "model" not in sdk.body
    assert ours.headers[AUTH["vertex"]].startswith("Bearer ")
    assert sdk.headers[AUTH["vertex"]].startswith("Bearer ")


def test_gemini_on_vertex_is_asked_as_googles_sdk_asks(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream, google_credentials: Any
):
    sdk_client = genai.Client(
        vertexai=True,
        project=PROJECT,
        location="global",
        credentials=google_credentials,
        http_options=types.HttpOptions(base_url=fake_upstream.anthropic_base_url, api_version="v1"),
    )
    ours_client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=gateway.root_url))
    sdk, ours = compare(
        fake_upstream,
        "/v1/projects/",
        lambda: sdk_client.models.generate_content(model="gemini-2.5-pro", contents=HI),
        lambda: ours_client.models.generate_content(model="gemini-pro-vertex", contents=HI),
    )
    assert ours.body["contents"] == sdk.body["contents"]
    assert ours.headers[AUTH["vertex"]].startswith("Bearer ")


def test_the_gemini_api_is_asked_as_googles_sdk_asks(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    sdk_client = genai.Client(  # v1beta, as the gateway asks (this SDK's default is v1; Google serves both)
        api_key="upstream-secret",
        http_options=types.HttpOptions(base_url=fake_upstream.anthropic_base_url, api_version="v1beta"),
    )
    ours_client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=gateway.root_url))
    sdk, ours = compare(
        fake_upstream,
        "/v1beta/",
        lambda: sdk_client.models.generate_content(model="gemini-2.5-pro", contents=HI),
        lambda: ours_client.models.generate_content(model="gemini-pro", contents=HI),
    )
    assert ours.body["contents"] == sdk.body["contents"]
    assert ours.headers[AUTH["gemini"]] == sdk.headers[AUTH["gemini"]] == "upstream-secret"


def test_azure_openai_is_asked_as_azure_openai_asks(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    sdk_client = openai.AzureOpenAI(
        azure_endpoint=fake_upstream.anthropic_base_url, api_version=VERSION, api_key=UPSTREAM_KEY, max_retries=0
    )
    sdk, ours = compare(
        fake_upstream,
        "/openai/",
        lambda: sdk_client.chat.completions.create(model="gpt-4o-prod", messages=[{"role": "user", "content": HI}]),
        lambda: client.chat.completions.create(model="parity-azure", messages=[{"role": "user", "content": HI}]),
    )
    assert ours.headers[AUTH["azure"]] == sdk.headers[AUTH["azure"]] == UPSTREAM_KEY
    assert ours.body["messages"] == sdk.body["messages"]
