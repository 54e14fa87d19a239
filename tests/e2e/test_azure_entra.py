"""Azure OpenAI with a Microsoft Entra ID service principal: the gateway gets its token itself (the
OAuth 2.0 client-credentials grant at the deployment's ``authority_host``, here the fake's Entra ID),
sends it as a bearer, and refreshes it before it expires, once for all the requests that find it
stale; a refused secret is the client's 502 in its own shape, charging nothing."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.e2e.test_azure_upstream import _azure_model
from tests.support.charges import HELLO, charged, reported
from tests.support.fake_entra import CLIENT_ID, CLIENT_SECRET, ISSUED, TENANT
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

GPT = "{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}"


def config_with_principals(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    principal = {"auth": "entra", "tenant_id": TENANT, "client_id": CLIENT_ID, "authority_host": f"{root}/entra"}
    models = [
        _azure_model("azure-principal", root, "gpt-4o-prod", GPT, **principal, client_secret_env="ENTRA_SECRET"),
        _azure_model("azure-short-lived", root, "gpt-4o-prod", GPT, **principal, client_secret_env="ENTRA_SECRET"),
        _azure_model("azure-bad-secret", root, "gpt-4o-prod", GPT, **principal, client_secret_env="ENTRA_WRONG"),
    ]
    config.write_text(config.read_text() + "".join(models))
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = config_with_principals(tmp_path_factory.mktemp("entra"), fake_upstream.base_url)
    yield from verified_gateway(config, {"ENTRA_SECRET": CLIENT_SECRET, "ENTRA_WRONG": "not-the-secret"})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def grants(fake: FakeUpstream) -> list[str]:
    return [r.path for r in fake.requests if r.path.startswith("/entra/")]


def test_the_gateway_gets_a_token_for_its_service_principal_and_sends_it_as_a_bearer(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    completion = client.chat.completions.create(model="azure-principal", messages=HELLO)
    assert grants(fake_upstream) == [f"/entra/{TENANT}/oauth2/v2.0/token"]
    (_, sent) = fake_upstream.requests
    assert sent.path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert ISSUED.valid(sent.headers["authorization"].removeprefix("Bearer "))
    assert "api-key" not in sent.headers
    fake_upstream.clear()
    again = client.chat.completions.create(model="azure-principal", messages=HELLO)
    assert grants(fake_upstream) == []  # the token is reused while it lives
    assert charged(gateway, team) == [reported(completion.usage), reported(again.usage)]


def test_a_token_is_refreshed_before_it_expires_once_for_every_request_waiting(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    ISSUED.lifetime = 2  # refreshed a second before it expires
    try:
        client.chat.completions.create(model="azure-short-lived", messages=HELLO)
        assert len(grants(fake_upstream)) == 1
        time.sleep(1.2)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda _: client.chat.completions.create(model="azure-short-lived", messages=HELLO), range(8))
            )
        assert len(grants(fake_upstream)) == 2  # one refresh, however many requests found the token stale
        time.sleep(1.2)
        client.chat.completions.create(model="azure-short-lived", messages=HELLO)
        assert len(grants(fake_upstream)) == 3
    finally:
        ISSUED.lifetime = 3600
    assert len(charged(gateway, team)) == 10  # every request served: none left with a token that lapsed
    assert all(a.choices[0].message.content for a in answers)


def test_a_secret_entra_refuses_is_a_502_in_the_clients_shape_and_charges_nothing(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="azure-bad-secret", messages=HELLO)
    assert failed.value.status_code == 502
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["type"] == "server_error"
    assert [r.path for r in fake_upstream.requests] == [f"/entra/{TENANT}/oauth2/v2.0/token"]  # never sent on
    assert charged(gateway, team) == []
